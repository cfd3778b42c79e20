package engine

import (
	"net/netip"

	"sluice/internal/rules/ippool"
	"sluice/internal/ruleset"
)

// NAT is the hook through which the NAT engine (sluice/internal/nat) plugs
// into the filter pipeline (ipf-reference §2.2 steps 2 and 8). Both
// methods may rewrite p.Data in place and must then re-parse p.Info (or
// patch it) so that later stages see the translated packet. They must not
// allocate for packets of an existing session.
type NAT interface {
	// In translates an inbound packet (rdr, bimap and existing sessions)
	// before filtering, and sets p.NATTag to the tag of the NAT rule
	// used (for match-tag rules). It returns false when translation
	// failed; the engine then blocks the packet with FI_BADNAT.
	In(p *Packet) bool
	// Out translates an outbound packet that passed the filter. tag is
	// the nat tag of the matched rule's set-tag(nat=...) (of the state
	// entry's rule for a packet of a known flow), NATTagNone for a rule
	// without one, "" when no rule matched. It returns false when
	// translation failed (the packet is blocked).
	Out(p *Packet, tag string) bool
}

// NATTagNone is the tag NAT.Out gets for a packet a rule without a nat
// tag matched: IPFilter then applies only NAT rules without a tag
// (ipf_matchtag against fin_fr), while a packet no rule matched meets
// every NAT rule.
const NATTagNone = "\x00"

// Pools answers `pool/N` and `hash/N` address tests (ipf-reference §1.3.4).
// sluice/internal/pool implements it.
type Pools interface {
	// ContainsRole reports whether addr is in the ippool table named
	// table (a number as text or a name), a hash table if hash is set,
	// else a tree, as a rule of the given role finds it (ipf rules use
	// ippool.RoleIPF, accounting rules ippool.RoleCount). An unknown
	// table never matches.
	ContainsRole(role ippool.Role, hash bool, table string, addr netip.Addr) bool
}

// LogRecord is what the engine hands to a Logger for one packet log
// record (IPFilter's ipf_log_pkt).
type LogRecord struct {
	Pkt *Packet
	// Pass holds the FR_* flags that caused the record.
	Pass uint32
	// Rule is the 0-based index of the rule within its list or group, or
	// -1 when no rule had matched yet; Group is its group ("" = main).
	Rule  int
	Group string
	// Reason is the block reason (ReasonRule unless something failed).
	Reason Reason
	// LogTag is the rule's set-tag(log=N).
	LogTag uint32
	// Body asks for the packet body (log body).
	Body bool
	// RuleRef is the rule being logged (nil when none matched yet).
	RuleRef *ruleset.Rule
}

// Logger receives packet log records. An error makes `log or-block`
// rules block the packet.
type Logger interface {
	LogPacket(r *LogRecord) error
}

// Router forwards packets for `to`/`route-to`, `dup-to` and `fastroute`
// rules (ipf-reference §1.3.14, §2.2 step 10). ipftest implements it by
// printing the packet as sent; a datapath would transmit it.
type Router interface {
	// Route sends p out of iface towards nextHop (invalid = the packet's
	// destination). dup is set for a dup-to copy.
	Route(p *Packet, iface string, nextHop netip.Addr, dup bool)
}

// DstLists resolves `dstlist/NAME` targets (ippool dstlist tables).
type DstLists interface {
	// SelectDst picks a member of the ipf dstlist name for the flow; ok
	// is false when the list is unknown or empty.
	SelectDst(name string, src, dst netip.Addr) (iface string, addr netip.Addr, ok bool)
}

// GroupMaps answers `call srcgrpmap/N` and `call dstgrpmap/N`: the rule
// group that group-map N assigns to addr. sluice/internal/pool's Set
// implements it; an engine whose Pools also implement GroupMaps uses
// them for call rules.
type GroupMaps interface {
	GroupFor(table string, addr netip.Addr) (group string, ok bool)
}

// Replier sends the replies of return-rst and return-icmp rules for
// inbound packets (ipf-reference §1.3.15). ipftest has none: userland
// IPFilter sends nothing visible.
type Replier interface {
	// SendRST answers p with a TCP reset.
	SendRST(p *Packet)
	// SendICMP answers p with an ICMP unreachable of the given code, from
	// the original destination when asDest is set (return-icmp-as-dest).
	SendICMP(p *Packet, code uint8, asDest bool)
}

// IfAddrs gives interface addresses for rules that take them from an
// interface: `(IF)`, `(IF)/BITS` and `IF/broadcast|network|netmasked|peer`
// (ipf-reference §1.3.3). With IfAddrs alone the engine behaves like
// ipftest, whose interfaces have an all-ones netmask: every IF/... form
// then stands for the interface address itself.
type IfAddrs interface {
	IfAddr(name string, v6 bool) (netip.Addr, bool)
}

// IfNetwork describes an interface's network for the IF/... forms: the
// interface address with its netmask length (Prefix), and its broadcast
// and point-to-point peer addresses (the zero Addr when it has none).
type IfNetwork = ruleset.IfaceNet

// IfNetworks is implemented by an IfAddrs that knows real netmasks (a
// datapath reading the host's interfaces); the engine then uses it for
// IF/broadcast, IF/network, IF/netmasked and IF/peer.
type IfNetworks interface {
	IfNetwork(name string, v6 bool) (IfNetwork, bool)
}

package nat

import (
	"net/netip"

	"sluice/internal/rules/ipnat"
)

// This file is the engine's face towards datapaths that run NAT
// elsewhere (the eBPF program of internal/bpf/nat): the rules as the
// engine compiled them, field by field, and its printers for sessions
// and host map entries held outside the engine. Nothing here is on the
// engine's own packet path.

// Operand is a compiled rule address: Kind says how A and M are read
// (address and mask, range start and end, the two halves of a split),
// as 128-bit numbers (IPv4 in the low 32 bits of Lo).
type Operand struct {
	Kind    ipnat.AddrKind
	A, M    [2]uint64 // {hi, lo}
	MaskLen int       // prefix length of M (AddrNormal)
	// Table and Name name a pool/hash/dstlist lookup (AddrLookup).
	Table, Name string
}

func exportOperand(o addrOperand) Operand {
	return Operand{Kind: o.kind, A: [2]uint64{o.a.hi, o.a.lo}, M: [2]uint64{o.m.hi, o.m.lo},
		MaskLen: o.maskLen, Table: o.table, Name: o.name}
}

// CompiledRule is one loaded rule as the engine compiled it: the parsed
// rule, its operands resolved for matching, and the initial state of its
// address and port allocation (ipf_nat_ruleaddrinit).
type CompiledRule struct {
	*ipnat.Rule
	V6 bool
	// InIf and OutIf are the interfaces of inbound and outbound
	// translation ("" or "*": any).
	InIf, OutIf string

	Src, Dst  Operand // from/to operands
	NotDst    bool    // Dst is negated (the rule's, unless the engine dropped it)
	Orig, New Operand // simple-form LHS and RHS
	NewSrc    Operand // rewrite targets
	NewDst    Operand
	MapMask   int // the mask the rule adds to the outbound rule table
	RdrMask   int // and to the inbound one
	// MapBucket and RdrBucket are the rule's buckets in those tables
	// (rulehash.go: a packet tries the rules of one bucket per mask).
	MapBucket, RdrBucket int
	SNip, DNip           [2]uint64
	SPNext               int
	DPNext               int
	PPIP, IPPIP          int // ports per address, addresses per new address
	RuleSequence         int // position in the file order
}

// Compiled returns the loaded rules in file order and the outbound (maps)
// and inbound (rdrs) rule tables' order, as indexes into rules: a packet
// tries the rules of one bucket at a time in this order (rulehash.go).
// The allocation state is the rules' current one.
func (n *NAT) Compiled() (rules []CompiledRule, maps, rdrs []int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	idx := make(map[*rule]int, len(n.rules))
	for i, r := range n.rules {
		idx[r] = i
		rules = append(rules, CompiledRule{
			Rule: r.Rule, V6: r.v6, InIf: r.inIf, OutIf: r.outIf,
			Src: exportOperand(r.src), Dst: exportOperand(r.dst), NotDst: r.notDst,
			Orig: exportOperand(r.orig), New: exportOperand(r.newA),
			NewSrc: exportOperand(r.nsrc), NewDst: exportOperand(r.ndst),
			MapMask: r.maskFor(false), RdrMask: r.maskFor(true),
			MapBucket: r.bucket[0], RdrBucket: r.bucket[1],
			SNip: [2]uint64{r.snip.hi, r.snip.lo}, DNip: [2]uint64{r.dnip.hi, r.dnip.lo},
			SPNext: r.spnext, DPNext: r.dpnext, PPIP: r.ppip, IPPIP: r.ippip,
			RuleSequence: r.seq,
		})
	}
	for _, r := range n.maps {
		maps = append(maps, idx[r])
	}
	for _, r := range n.rdrs {
		rdrs = append(rdrs, idx[r])
	}
	return rules, maps, rdrs
}

// SessionInfo is a session kept outside the engine, described well enough
// to be printed as the engine prints its own (ipnat -l).
type SessionInfo struct {
	Type ipnat.Type
	// Out is set for sessions made by an outbound packet (map, bimap,
	// map-block, rewrite out), clear for inbound ones (rdr, rewrite in).
	Out   bool
	Proto uint8
	// Ports is set when the session translates TCP/UDP ports (they are
	// printed then).
	Ports                          bool
	OSrc, ODst, NSrc, NDst         netip.Addr
	OSPort, ODPort, NSPort, NDPort uint16
	Proxy                          bool // an application proxy follows it
	Clone                          bool
}

// String formats the session as the engine's listing does (printactivenat).
func (si SessionInfo) String() string {
	s := &session{rule: &rule{Rule: &ipnat.Rule{Type: si.Type}}, dir: In, proto: si.Proto, clone: si.Clone,
		osrc: si.OSrc, odst: si.ODst, nsrc: si.NSrc, ndst: si.NDst,
		osport: si.OSPort, odport: si.ODPort, nsport: si.NSPort, ndport: si.NDPort}
	if si.Out {
		s.dir = Out
	}
	if si.Ports {
		s.flags = flagTCPUDP
	}
	if si.Proxy {
		s.proxy = &proxy{}
	}
	return s.String()
}

// HostmapInfo is a host map entry kept outside the engine.
type HostmapInfo struct {
	OSrc, ODst, NSrc, NDst netip.Addr
	Use                    int
}

// String formats the entry as the engine's dump does (printhostmap).
func (h HostmapInfo) String() string {
	return (&hostmap{osrc: h.OSrc, odst: h.ODst, nsrc: h.NSrc, ndst: h.NDst, ref: h.Use}).String()
}

// Lifetime returns how long, in IPFilter ticks (0.5 s), a session of a
// rule with the given age (seconds, forward and reply; 0 = default) lives
// after a packet in direction w (0 forward, 1 reply), given the TCP flags
// seen so far in each direction. It is the engine's ageing, for
// datapaths that reclaim sessions themselves.
func Lifetime(age [2]int, proto uint8, icmpQuery bool, w int, tcpSeen [2]uint8) uint32 {
	s := &session{rule: &rule{Rule: &ipnat.Rule{Age: age}}, proto: proto, tcpSeen: tcpSeen}
	if icmpQuery {
		s.flags = flagICMPQuery
	}
	return s.lifetime(w)
}

// Package ipf parses and prints IPFilter's ipf.conf rule language (4.1
// syntax plus the 5.x forms and HP-UX's extensions).
//
// The AST in this file is the contract with the rule-set compiler and the
// eBPF compiler: it is plain data, every field documents its meaning, and
// fields are only ever added, never renamed or removed.
//
// One Rule is one rule after LIST expansion: `pass in on {le0,le1} all`
// yields two Rules. Values are already normalised the way IPFilter's parser
// normalises them (addresses ANDed with their mask, `tcp-udp` folded into
// TCPUDP, a single `age N` stored as N/N, group members inheriting family
// and protocol from their head, ...), so a consumer never re-interprets
// text.
package ipf

import "net/netip"

// Pos is a source position: file name, 1-based line and 1-based column
// (in bytes). A rule's Pos is where its first token starts; rules produced
// by LIST expansion share the position of the rule they came from, and
// text produced by a $variable takes the position of the `$`.
type Pos struct {
	File string
	Line int
	Col  int
}

// Action is what a matching rule does (§1.3.1 of the reference).
type Action uint8

// The actions of the grammar's `action` production.
const (
	ActionPass        Action = iota // pass
	ActionBlock                     // block [return-*]
	ActionLog                       // log [logopts]: writes a log record, verdict unchanged
	ActionCount                     // count: accounting lists
	ActionAuth                      // auth [return-*]
	ActionPreauth                   // preauth
	ActionNomatch                   // nomatch: as if no rule matched (FR_NOMATCH)
	ActionCall                      // call [now] FUNC/N: see Rule.Call
	ActionSkip                      // skip N [4.1]: see Rule.Skip
	ActionDecapsulate               // decapsulate [l5-as(NAME)] [5.x]
)

var actionNames = [...]string{"pass", "block", "log", "count", "auth", "preauth", "nomatch", "call", "skip", "decapsulate"}

// String returns the keyword of the action.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action?"
}

// Direction is the list a rule is in: inbound or outbound packets.
type Direction uint8

// The two directions.
const (
	DirIn  Direction = iota // in
	DirOut                  // out
)

// String returns "in" or "out".
func (d Direction) String() string {
	if d == DirOut {
		return "out"
	}
	return "in"
}

// ReturnKind is the reply a block (or auth) rule generates.
type ReturnKind uint8

// The generated replies.
const (
	ReturnNone       ReturnKind = iota
	ReturnRST                   // return-rst: TCP RST (FR_RETRST)
	ReturnICMP                  // return-icmp[(code)]: source = receiving interface (FR_RETICMP)
	ReturnICMPAsDest            // return-icmp-as-dest[(code)]: source = original destination (FR_FAKEICMP)
)

// Family is the address family of a rule (5.x `family`/`inet`/`inet6`, or
// implied by an address, icmp-type, opt, a `:ip` next hop, or ipf -4/-6).
type Family uint8

// The families. FamilyAny means the rule has no family and, in 5.x,
// matches both IPv4 and IPv6 (unless it has addresses, which set one).
const (
	FamilyAny   Family = 0
	FamilyInet  Family = 4 // printed "inet"
	FamilyInet6 Family = 6 // printed "inet6"
)

// String returns "inet", "inet6" or "" (no family).
func (f Family) String() string {
	switch f {
	case FamilyInet:
		return "inet"
	case FamilyInet6:
		return "inet6"
	}
	return ""
}

// Syslog facilities for `log level FAC.PRI`, numbered as BSD's
// <syslog.h> (LOG_x >> 3), the platform the kit's expected files come from.
const (
	FacKern     = 0
	FacUser     = 1
	FacMail     = 2
	FacDaemon   = 3
	FacAuth     = 4
	FacSyslog   = 5
	FacLpr      = 6
	FacNews     = 7
	FacUucp     = 8
	FacCron     = 9
	FacAuthpriv = 10
	FacFtp      = 11
	FacSecurity = 13
	FacLogalert = 14
	FacLocal0   = 16 // local1..local7 are 17..23
)

// Syslog priorities for `log level [FAC.]PRI` (LOG_EMERG..LOG_DEBUG).
const (
	PriEmerg  = 0
	PriAlert  = 1
	PriCrit   = 2
	PriErr    = 3
	PriWarn   = 4
	PriNotice = 5
	PriInfo   = 6
	PriDebug  = 7
)

// LogOptions are the options of a `log` keyword, either as the action
// (`log body in all`) or as a rule option of pass/block (`pass in log ...`).
type LogOptions struct {
	Body    bool // body: log the packet body too (FR_LOGBODY)
	First   bool // first: only the first packet of a state entry (FR_LOGFIRST)
	OrBlock bool // or-block: a failed log write turns pass into block (FR_LOGORBLOCK)
	// HasLevel says `level` was given; Facility and Priority then hold it.
	// A bare priority gets Facility = FacLocal0, as IPFilter does.
	HasLevel bool
	Facility uint8 // syslog facility (FacKern..FacLocal0+7)
	Priority uint8 // syslog priority (PriEmerg..PriDebug)
	// Limit and LimitFreq are HP-UX's `log limit [freq N]` (DCA): rate
	// limit the log records; LimitFreq 0 means no freq was given.
	Limit     bool
	LimitFreq uint32
}

// Call is the target of `call [now] FUNC/N`.
type Call struct {
	Now  bool   // now: run during the scan (FR_CALLNOW); otherwise after it
	Func string // function name as written, lower case (srcgrpmap, dstgrpmap, ...)
	Arg  uint32 // N: for the grpmap functions the group-map (ippool) number
}

// RouteTarget is the destination of `to`/`route-to`, `dup-to` and
// `reply-to`: an interface with an optional next hop, or a dstlist.
type RouteTarget struct {
	Iface   string     // interface name ("" when DstList is set)
	NextHop netip.Addr // the `:ip` part; invalid (zero) when absent
	DstList string     // `dstlist/NAME` [5.x]: the ippool dstlist to use
}

// AddrKind says how an address in from/to is given.
type AddrKind uint8

// The address forms of the grammar's `addr` production.
const (
	// AddrAny is `any`, or no address at all: matches everything.
	AddrAny AddrKind = iota
	// AddrHost is HOST[/mask]: Addr.IP and Addr.Mask are valid and of the
	// same family (IPv4 always in the 4-byte form, Is4()).
	AddrHost
	// AddrIface is an address taken from an interface at load time and
	// kept up to date: `(IF)`, `(IF:N)`, `(IF)/BITS`, `IF/broadcast`, ...
	// See Addr.Iface, Addr.IfaceMode, Addr.IfaceBits.
	AddrIface
	// AddrPool is an ippool tree table: `pool/N`, `pool/NAME`, or the inline
	// `pool=(...)` (then Addr.Inline holds the entries).
	AddrPool
	// AddrHash is an ippool hash table: `hash/N`, `hash/NAME`, or `hash=(...)`.
	AddrHash
)

// IfaceAddrMode selects which address of an interface an AddrIface uses.
type IfaceAddrMode uint8

// The interface address modes (IPFilter's FRI_* types).
const (
	IfaceDynamic   IfaceAddrMode = iota // (IF)[/BITS]: the interface address under IfaceBits (FRI_DYNAMIC)
	IfaceBroadcast                      // IF/broadcast (FRI_BROADCAST)
	IfaceNetwork                        // IF/network: the network address, exact match (FRI_NETWORK)
	IfaceNetmasked                      // IF/netmasked: network with its mask (FRI_NETMASKED)
	IfacePeer                           // IF/peer: the point-to-point peer (FRI_PEERADDR)
)

// PoolEntry is one entry of an inline `pool=(...)`/`hash=(...)` table.
type PoolEntry struct {
	Negate bool       // `!addr`: a match on this entry means "not in the table" (tree only)
	IP     netip.Addr // network address, already ANDed with Mask
	Mask   netip.Addr // mask, same family as IP
}

// Addr is the address part of a from/to object.
type Addr struct {
	Kind AddrKind
	// IP and Mask are set for AddrHost. IP is already ANDed with Mask (as
	// IPFilter does at parse time). IPv4 uses the 4-byte form. Matching is
	// (pkt & Mask) == IP. A non-contiguous IPv4 mask loads as AddrAny, as in IPFilter.
	IP   netip.Addr
	Mask netip.Addr
	// Iface, IfaceMode, IfaceBits and IfaceIndex are set for AddrIface.
	// IfaceBits is the prefix length for IfaceDynamic (32 or 128 when no
	// /BITS was written); IfaceIndex is N of `(IF:N)` (0 otherwise).
	Iface      string
	IfaceMode  IfaceAddrMode
	IfaceBits  uint8
	IfaceIndex uint16
	// Table is the ippool table for AddrPool/AddrHash, as written (a
	// number such as "100" or a name). For inline tables the parser leaves
	// it empty; the printer shows "pool/0" like `ipf -n`, and a loader may
	// fill in the name it gives the anonymous table.
	Table string
	// Inline holds the entries of `pool=(...)`/`hash=(...)`, in source
	// order. nil for references to existing tables.
	Inline []PoolEntry
	// Family is the family the address gives a family-less rule where
	// IP does not say it: IPFilter's parser sets the rule's family to
	// inet for an interface address with a mode or a prefix length
	// (`ppp0/peer`, `(nic0)/16`) and for a non-contiguous mask, which
	// it loads as `any`.
	Family Family
}

// PortOp is the comparison of a port test.
type PortOp uint8

// The port comparisons. Equality and ordering compare the packet port
// with Port.Lo; the range forms use Lo and Hi.
const (
	PortNone     PortOp = iota // no port test
	PortEq                     // = / eq
	PortNe                     // != / ne
	PortLt                     // < / lt
	PortGt                     // > / gt
	PortLe                     // <= / le
	PortGe                     // >= / ge
	PortOutRange               // Lo <> Hi: port < Lo || port > Hi
	PortInRange                // Lo >< Hi: Lo < port < Hi (exclusive)
	PortRange                  // Lo:Hi: Lo <= port <= Hi (inclusive) [5.x]
)

// Port is a port test on a from/to object. Op == PortNone means none.
type Port struct {
	Op PortOp
	Lo uint16 // the port for single comparisons, the low end for ranges
	Hi uint16 // the high end for ranges; 0 otherwise
}

// Endpoint is a from or to object: address, negation, port.
type Endpoint struct {
	Not  bool // `!addr`: inverts the address test only (FR_NOTSRCIP/FR_NOTDSTIP)
	Addr Addr
	Port Port
}

// TCP flag bits for Rule.Flags/FlagsMask, as in the TCP header (and
// IPFilter's TH_*). Letters: F S R P A U E C.
const (
	TCPFin = 0x01
	TCPSyn = 0x02
	TCPRst = 0x04
	TCPPsh = 0x08
	TCPAck = 0x10
	TCPUrg = 0x20
	TCPEce = 0x40
	TCPCwr = 0x80
	// TCPFlagsDefaultMask is the mask of `flags X` without /Y: FSRPAU.
	TCPFlagsDefaultMask = 0x3f
)

// Packet attribute flags (IPFilter's FI_* values from ip_fil.h). The
// `with`/`not` attributes test (pkt_flags & Rule.WithMask) == Rule.With.
const (
	FI_TCPUDP    = 0x01 // internal: proto tcp/udp (never in With)
	FI_OPTIONS   = 0x02 // ipopts: IPv4 header longer than 20 bytes
	FI_FRAG      = 0x04 // frag: a fragment (MF or offset, or v6 frag header)
	FI_SHORT     = 0x08 // short: too short for its L4 header
	FI_NATED     = 0x10 // nat: translated by NAT
	FI_MULTICAST = 0x20 // mcast/multicast
	FI_BROADCAST = 0x40 // bcast
	FI_MBCAST    = 0x80 // mbcast
	FI_STATE     = 0x100
	FI_BADNAT    = 0x200
	FI_BAD       = 0x400
	FI_OOW       = 0x800 // oow: out of state window
	FI_ICMPERR   = 0x1000
	FI_FRAGBODY  = 0x2000 // frag-body: non-zero fragment offset
	FI_BADSRC    = 0x4000
	FI_LOWTTL    = 0x8000
	FI_V6EXTHDR  = 0x10000 // v6hdrs: any IPv6 extension header
	FI_COALESCE  = 0x20000
	FI_NEWNAT    = 0x40000
	FI_ICMPQUERY = 0x80000
	FI_ENCAP     = 0x100000
	FI_AH        = 0x200000 // ah [5.x]: AH header present
	FI_CMP       = 0x5cfe3  // flags compared for state matching
	FI_WITH      = 0x5effe  // flags a `with` clause may name
)

// IPv4 option bits for Rule.OptBits/OptMask (`with opt x,y`), IPFilter's
// ionames values. The test is (pkt_optbits & OptMask) == OptBits.
const (
	OptNOP     = 0x1
	OptRR      = 0x2
	OptZSU     = 0x4
	OptMTUP    = 0x8
	OptMTUR    = 0x10
	OptENCODE  = 0x20
	OptTS      = 0x40
	OptTR      = 0x80
	OptSEC     = 0x100
	OptLSRR    = 0x200
	OptESEC    = 0x400
	OptCIPSO   = 0x800
	OptSATID   = 0x1000
	OptSSRR    = 0x2000
	OptADDEXT  = 0x4000
	OptVISA    = 0x8000
	OptIMITD   = 0x10000
	OptEIP     = 0x20000
	OptFINN    = 0x40000
	OptDPS     = 0x80000  // [5.x]
	OptSDB     = 0x100000 // [5.x]
	OptNSAPA   = 0x200000 // [5.x]
	OptRTRALRT = 0x400000 // [5.x]
	OptUMP     = 0x800000 // [5.x]
)

// Security classes for Rule.SecBits/SecMask (`opt sec-class x`), from the
// RIPSO classification byte.
const (
	SecReserv4   = 0x01
	SecTopSecret = 0x02
	SecSecret    = 0x04
	SecReserv3   = 0x08
	SecConfid    = 0x10
	SecUnclass   = 0x20
	SecReserv2   = 0x40
	SecReserv1   = 0x80
)

// IPv6 extension header bits for Rule.V6Hdrs/V6HdrsMask (`with v6hdr x`).
const (
	V6HdrHopOpts  = 0x1
	V6HdrIPv6     = 0x2
	V6HdrRouting  = 0x4
	V6HdrFrag     = 0x8
	V6HdrESP      = 0x10
	V6HdrAH       = 0x20
	V6HdrNone     = 0x40
	V6HdrDstOpts  = 0x80
	V6HdrMobility = 0x100
)

// KeepState holds `keep state [( ... )]` and its options.
type KeepState struct {
	Limit     uint32 // limit N: max entries this rule may create (0 = none)
	Strict    bool   // strict: TCP sequence order (FR_STSTRICT)
	Loose     bool   // loose [5.x]: skip window checks (FR_STLOOSE)
	NewISN    bool   // newisn: rewrite outbound ISNs
	NoICMPErr bool   // no-icmp-err
	Sync      bool   // sync: send to state sync
	NoLog     bool   // nolog [5.x]
	ICMPHead  string // icmp-head G [5.x]: group that filters ICMP errors for the entry
	MaxSrcs   uint32 // max-srcs N [5.x]
	// MaxPerSrc and MaxPerSrcBits are `max-per-src N[/BITS]` [5.x]; the
	// bits default to 32 (128 for inet6 rules).
	MaxPerSrc     uint32
	MaxPerSrcBits uint8
}

// Tag is the rule's tag (set-tag and match-tag write the same field, so
// both are held here; which one was written is in Rule.TagFromMatch).
type Tag struct {
	HasLog bool   // log=N was given
	Log    uint32 // log=N: put in log and state records
	NAT    string // nat=NAME (or number, as text); "" when not given
}

// ExprClause is one `field op values;` clause of `exp { "..." }` [5.x].
// Values within a clause are ORed, clauses are ANDed.
type ExprClause struct {
	Field  string      // ip.p, ip.addr, ip.src, ip.dst, ip6.addr, ip6.src, ip6.dst, tcp.port, tcp.sport, tcp.dport, udp.*, tcp.flags, tcp.state, idle-gt
	Not    bool        // `!=` instead of `=`
	Values []ExprValue // at least one
}

// ExprValue is one value of an ExprClause: an address with mask for the
// address fields, otherwise a number (and for tcp.flags a mask).
type ExprValue struct {
	IP      netip.Addr // address fields: network address (ANDed with Mask)
	Mask    netip.Addr // address fields: mask
	Num     uint32     // protocol, port, tcp flags, tcp state, idle seconds
	NumMask uint32     // tcp.flags: the /mask (0xff when not given)
}

// Rule is one parsed ipf.conf rule.
type Rule struct {
	Pos Pos // where the rule starts

	// HasInsertAt/InsertAt are `@N`: insert at position N of the list.
	HasInsertAt bool
	InsertAt    uint32
	// Collection is the leading NUMBER: the rule-set collection (0 = the
	// default; IPFilter does not print 0).
	Collection uint32

	Action   Action
	Return   ReturnKind // block and auth (HP-UX also accepts it on pass)
	ICMPCode uint8      // return-icmp code (0 = net-unr, the default)
	Call     Call       // ActionCall only
	Skip     uint32     // ActionSkip only: skip the next N rules
	// DecapL5As is NAME of `decapsulate l5-as(NAME)`.
	DecapL5As string

	Dir   Direction
	Quick bool

	// HasLog says the rule logs: Action is ActionLog, or a `log` option
	// was given on another action. Log holds the options either way.
	HasLog bool
	Log    LogOptions

	// On holds `on IF[,IF2]` (0, 1 or 2 names; "-" and "*" mean any).
	On []string
	// Via holds `in-via`/`out-via A[,B]`: the interface(s) of the other
	// direction, used for the state entry's slots (0, 1 or 2 names).
	Via []string

	RouteTo   *RouteTarget // to / route-to: send the packet out there; nil if absent
	DupTo     *RouteTarget // dup-to: send a copy
	ReplyTo   *RouteTarget // reply-to: route replies of the state entry
	FastRoute bool         // fastroute

	Family Family

	HasTos bool
	Tos    uint8 // tos: exact match of the TOS byte
	HasTTL bool
	TTL    uint8 // ttl: exact match of TTL / hop limit

	// HasProto says `proto` was given (or inherited from the group head).
	// Proto is the IP protocol number. TCPUDP is `proto tcp/udp` (or
	// tcp-udp): then Proto is 0 and the rule matches TCP or UDP.
	HasProto bool
	Proto    uint8
	TCPUDP   bool

	// All is set when the rule said `all`. HasFromTo is set when it had a
	// from/to clause (even `from any to any`). From and To are the from/to
	// objects (AddrAny with no port when not given).
	All       bool
	HasFromTo bool
	From      Endpoint
	To        Endpoint

	// HasFlags/Flags/FlagsMask are `flags X/Y`: (pkt_flags & FlagsMask) == Flags.
	// FlagsMask defaults to TCPFlagsDefaultMask when /Y is absent.
	HasFlags  bool
	Flags     uint8
	FlagsMask uint8

	// HasICMPType/ICMPType and HasICMPCode/ICMPCodeMatch are
	// `icmp-type T [code C]` (value/mask 0xff00 or 0xffff in IPFilter).
	HasICMPType   bool
	ICMPType      uint8
	HasICMPCode   bool
	ICMPCodeMatch uint8

	// With/WithMask are the `with`/`not` attributes (FI_* bits):
	// (pkt_flags & WithMask) == With.
	With     uint32
	WithMask uint32
	// OptBits/OptMask are `with opt a,b` / `not opt c` (Opt* bits):
	// (pkt_opts & OptMask) == OptBits.
	OptBits uint32
	OptMask uint32
	// SecBits/SecMask are `opt sec-class x` (Sec* bits).
	SecBits uint8
	SecMask uint8
	// V6Hdrs/V6HdrsMask are `with v6hdr x` / `not v6hdrs x` (V6Hdr* bits).
	V6Hdrs     uint32
	V6HdrsMask uint32

	// KeepState is non-nil for `keep state`.
	KeepState *KeepState
	// Age is `age A[/B]` in seconds, from the keep state options or the
	// rule tail (both set the same field); B equals A when only A is given.
	Age [2]uint32
	// KeepFrags/KeepFragsStrict are `keep frags [(strict)]`.
	KeepFrags       bool
	KeepFragsStrict bool
	// KeepLimit/KeepLimitCumulative are HP-UX's `keep limit N [cumulative]`.
	KeepLimit           uint32
	KeepLimitCumulative bool

	Head  string // head G: matching rules recurse into group G ("" = none)
	Group string // group G: the rule lives in group G ("" = main list)

	Tag          Tag
	TagFromMatch bool // the tag came from match-tag (printed as set-tag anyway)

	PPS     uint32 // pps N: packets-per-second limit (0 = none)
	RuleTTL uint32 // rule-ttl N [5.x]: seconds until the rule expires (0 = never)
	Comment string // comment "text" [5.x]

	// Expr is `exp { "..." }` [5.x]; when non-nil the rule has no
	// from/to/proto/flags/icmp/with tests.
	Expr []ExprClause
	// BPF is the program text of `bpf-v4 { "..." }`/`bpf-v6 { ... }`;
	// BPFFamily says which.
	BPF       string
	BPFFamily Family
}

// Package ipnat parses and prints the ipnat.conf language (IPFilter 4.1
// and 5.x): map, bimap, map-block, rdr, rewrite and divert rules.
//
// The AST keeps addresses in IPFilter's i6addr_t layout (an IPv4 address
// in the first four bytes of a 16-byte value) because the normalised
// output of ipnat depends on that layout for rules that mix families.
package ipnat

import (
	"encoding/binary"

	"sluice/internal/rules/netfmt"
)

// Type is the kind of NAT rule.
type Type int

// Rule types.
const (
	Map Type = iota
	Bimap
	MapBlock
	Rdr
	RewriteIn  // rewrite in on …: applied like rdr, on inbound packets
	RewriteOut // rewrite out on …: applied like map, on outbound packets
	DivertIn
	DivertOut
)

// IsRedirect reports whether the rule translates inbound packets.
func (t Type) IsRedirect() bool { return t == Rdr || t == RewriteIn || t == DivertIn }

// IsRewrite reports whether the rule is a rewrite or divert rule (4-tuple).
func (t Type) IsRewrite() bool { return t >= RewriteIn }

// AddrKind says how an Addr is to be read.
type AddrKind int

// Address kinds (IPFilter FRI_*).
const (
	AddrNormal AddrKind = iota // A masked by M
	AddrRange                  // A through M (inclusive)
	AddrSplit                  // A or M (rdr a,b)
	AddrLookup                 // pool/hash/dstlist reference
)

// Addr is an address operand of a rule.
type Addr struct {
	Kind AddrKind
	A, M [16]byte
	// Lookup references: Table is "pool", "hash" or "dstlist".
	Table, Name string
}

// V4 returns the first word of A as a host-order IPv4 value.
func (a Addr) V4() uint32 { return binary.BigEndian.Uint32(a.A[:4]) }

// M4 returns the first word of M as a host-order IPv4 value.
func (a Addr) M4() uint32 { return binary.BigEndian.Uint32(a.M[:4]) }

// PortCmp is a port test of a from/to object.
type PortCmp struct {
	Op     string // "", "=", "!=", "<", ">", "<=", ">=", "<>", "><", ":"
	P1, P2 int
}

// Match reports whether port p passes the test.
func (c PortCmp) Match(p int) bool {
	switch c.Op {
	case "":
		return true
	case "=":
		return p == c.P1
	case "!=":
		return p != c.P1
	case "<":
		return p < c.P1
	case ">":
		return p > c.P1
	case "<=":
		return p <= c.P1
	case ">=":
		return p >= c.P1
	case "<>":
		return p < c.P1 || p > c.P2
	case "><":
		return p > c.P1 && p < c.P2
	case ":":
		return p >= c.P1 && p <= c.P2
	}
	return false
}

// Rule is one ipnat.conf rule.
type Rule struct {
	Pos    netfmt.Pos
	No     bool
	Type   Type
	Ifs    [2]string // inbound, outbound; Ifs[1] == "" when only one is given
	Family int       // 4 or 6

	// Protocol: Proto is the number; TCP/UDP are set for tcp, udp and
	// tcp/udp; ICMPQuery for icmpidmap rules.
	Proto     int
	TCP, UDP  bool
	ICMPQuery bool

	// From/to form (IPN_FILTER).
	Filter         bool
	NotSrc, NotDst bool
	Src, Dst       Addr
	SrcPort        PortCmp
	DstPort        PortCmp

	// Orig is the simple-form LHS: the source of a map, the destination
	// of a rdr. OPortMin/OPortMax are the rdr LHS ports.
	Orig               Addr
	OPortMin, OPortMax int

	// New is the RHS of map rules (new source) and rdr rules (new
	// destination). Rewrite and divert rules use NewSrc and NewDst.
	New            Addr
	NewSrc, NewDst Addr
	Range          bool // "range a-b" on a map RHS

	Portmap    bool
	PortAuto   bool
	Sequential bool
	ICMPIDMap  bool
	// SPMin/SPMax: map portmap or icmpidmap range, map-block "ports N",
	// rewrite/divert new source ports.
	SPMin, SPMax int
	FixedSPort   bool
	// DPMin/DPMax: rdr and rewrite/divert new destination ports.
	DPMin, DPMax int
	FixedDPort   bool

	ProxyName  string
	ProxyPort  int
	ProxyProto int
	ProxyConf  string

	RoundRobin bool
	Frag       bool
	Sticky     bool
	Purge      bool
	Age        [2]int // seconds
	MSSClamp   int
	Tag        string

	protoSet bool // a protocol was given explicitly
	hasPort  bool // a rdr port was given
	portTest bool // from/to had a port test, dropped as the rule is not tcp/udp
}

// IsTCPUDP reports whether the rule translates TCP or UDP ports.
func (r *Rule) IsTCPUDP() bool { return r.TCP || r.UDP }

// PortTest reports a from/to rule whose port test was dropped because
// the rule is not tcp/udp: IPFilter's parser still makes such a rule
// tcp/udp in its flags (an icmpidmap rule then takes ICMP queries only).
func (r *Rule) PortTest() bool { return r.portTest }

// File is a parsed ipnat.conf.
type File struct {
	Rules []*Rule
}

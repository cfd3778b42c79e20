// Package ipnames is the one home of the names IPFilter's tools read and
// print: protocol names (/etc/protocols), service names (/etc/services),
// ICMP type and code names. The rule parsers and printers (ipf, ipnat,
// ippool), the packet text format and the log formatters all take them
// from here, so a name means the same everywhere.
//
// The protocol and service tables are Debian netbase's files, the ones on
// the host IPFilter's reference tools were built on (tables.go is
// generated from them), so output does not depend on the machine.
package ipnames

import "sort"

type protocol struct {
	name    string
	num     uint8
	aliases []string
}

type service struct {
	name    string
	port    uint16
	proto   string // "tcp", "udp", "sctp", "ddp"
	aliases []string
}

// ProtoByName is getprotobyname: the number of a protocol name or alias,
// matched exactly (so "ipv6-icmp" and "IPv6-ICMP" are known, "icmpv6"
// and "IPV6-ICMP" are not).
func ProtoByName(name string) (uint8, bool) {
	for _, p := range protocols {
		if p.name == name {
			return p.num, true
		}
		for _, a := range p.aliases {
			if a == name {
				return p.num, true
			}
		}
	}
	return 0, false
}

// ProtoName is getprotobynumber: the first name of protocol p, or "".
func ProtoName(p uint8) string {
	for _, e := range protocols {
		if e.num == p {
			return e.name
		}
	}
	return ""
}

// ServiceByName is getservbyname: the port of a service name or alias
// for proto ("tcp" or "udp"; "" takes the first entry of either, in
// file order, which is the tcp one for services that have both).
func ServiceByName(name, proto string) (uint16, bool) {
	for _, s := range services {
		if proto != "" && s.proto != proto || proto == "" && s.proto != "tcp" && s.proto != "udp" {
			continue
		}
		if s.name == name {
			return s.port, true
		}
		for _, a := range s.aliases {
			if a == name {
				return s.port, true
			}
		}
	}
	return 0, false
}

// ServiceName is getservbyport: the name of port for proto ("tcp" or
// "udp"), or "".
func ServiceName(port uint16, proto string) string {
	for _, s := range services {
		if s.port == port && s.proto == proto {
			return s.name
		}
	}
	return ""
}

// ICMPType is one ICMP type name with its ICMPv4 and ICMPv6 values (-1
// when it has none in that family).
type ICMPType struct {
	Name   string
	V4, V6 int
}

// RuleICMPTypes is the table ipf.conf's icmp-type takes names from and
// printfr prints them with (ipf_y.y), sorted by name: the first entry of
// a value is the name printed.
var RuleICMPTypes = sortedICMP([]ICMPType{
	{"echo", 8, 128}, {"echorep", 0, 129}, {"fqdnquery", -1, 139}, {"fqdnreply", -1, 140},
	{"infoqry", -1, 139}, {"inforeq", 15, 139}, {"inforep", 16, 140}, {"listendone", -1, 132},
	{"listenqry", -1, 130}, {"listenrep", -1, 131}, {"maskrep", 18, -1}, {"maskreq", 17, -1},
	{"memberqry", -1, 130}, {"memberred", -1, 132}, {"memberreply", -1, 131},
	{"neighadvert", -1, 136}, {"neighborsol", -1, 135}, {"neighborsolicit", -1, 135},
	{"paramprob", 12, 4}, {"redir", 5, 137}, {"renumber", -1, 138}, {"routerad", 9, 134},
	{"routeradvert", 9, 134}, {"routersol", 10, 133}, {"routersolcit", 10, 133},
	{"squench", 4, -1}, {"timest", 13, -1}, {"timestrep", 14, -1}, {"timex", 11, 3},
	{"toobig", -1, 2}, {"unreach", 3, 1}, {"whorep", -1, 140}, {"whoreq", -1, 139},
})

// TextICMPTypes is IPFilter's icmptypelist (lib/icmptypes.c), which the
// packet text format of ipftest reads type names with.
var TextICMPTypes = []ICMPType{
	{"echo", 8, 128}, {"echorep", 0, 129}, {"unreach", 3, 1}, {"squench", 4, -1},
	{"redir", 5, 137}, {"timex", 11, 3}, {"paramprob", 12, 4}, {"timest", 13, -1},
	{"timestrep", 14, -1}, {"inforeq", 15, -1}, {"inforep", 16, -1}, {"maskreq", 17, -1},
	{"maskrep", 18, -1}, {"routerad", 9, 134}, {"routersol", 10, 133},
	{"toobig", -1, 2}, {"mldquery", -1, 130}, {"mldreport", -1, 131}, {"mlddone", -1, 132},
	{"neighsol", -1, 135}, {"neighad", -1, 136}, {"routerrenum", -1, 138},
	{"icmpniq", -1, 139}, {"icmpnir", -1, 140}, {"mldv2report", -1, 143},
}

func sortedICMP(t []ICMPType) []ICMPType {
	sort.Slice(t, func(i, j int) bool { return t[i].Name < t[j].Name })
	return t
}

// LookupICMPType returns the type of name in table for IPv4 or ICMPv6.
func LookupICMPType(table []ICMPType, name string, v6 bool) (uint8, bool) {
	for _, e := range table {
		if e.Name != name {
			continue
		}
		v := e.V4
		if v6 {
			v = e.V6
		}
		if v < 0 {
			return 0, false
		}
		return uint8(v), true
	}
	return 0, false
}

// ICMPTypeName returns the first name of type t of the family in table,
// or "".
func ICMPTypeName(table []ICMPType, t uint8, v6 bool) string {
	for _, e := range table {
		if !v6 && e.V4 == int(t) || v6 && e.V6 == int(t) {
			return e.Name
		}
	}
	return ""
}

// ICMPCodes are the ICMP unreachable code names of return-icmp and code,
// by value.
var ICMPCodes = [...]string{
	"net-unr", "host-unr", "proto-unr", "port-unr", "needfrag", "srcfail",
	"net-unk", "host-unk", "isolate", "net-prohib", "host-prohib",
	"net-tos", "host-tos", "filter-prohib", "host-preced", "preced-cutoff",
}

// LookupICMPCode returns the code of an unreachable code name
// (cutoff-preced is accepted for preced-cutoff).
func LookupICMPCode(name string) (uint8, bool) {
	if name == "cutoff-preced" {
		return 15, true
	}
	for i, c := range ICMPCodes {
		if c == name {
			return uint8(i), true
		}
	}
	return 0, false
}

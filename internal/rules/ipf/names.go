package ipf

import (
	"net/netip"
	"strings"

	"sluice/internal/ipnames"
)

// Protocol, service and ICMP names come from sluice/internal/ipnames, the
// one table every parser and printer uses; host names are embedded here.

// lookupService resolves a service name for the rule's protocol
// (getservbyname): proto 6 or 17 picks that table; tcp/udp or no
// protocol takes the first entry of either (tcp first).
func lookupService(name string, proto uint8, hasProto, tcpudp bool) (uint16, bool) {
	switch {
	case hasProto && !tcpudp && proto == 6:
		return ipnames.ServiceByName(name, "tcp")
	case hasProto && !tcpudp && proto == 17:
		return ipnames.ServiceByName(name, "udp")
	}
	return ipnames.ServiceByName(name, "")
}

// serviceName returns the name IPFilter's portname() prints: proto tcp
// or udp uses that table; tcp/udp needs the same name in both.
func serviceName(port uint16, proto uint8, tcpudp bool) (string, bool) {
	tn, un := ipnames.ServiceName(port, "tcp"), ipnames.ServiceName(port, "udp")
	switch {
	case tcpudp:
		if tn != "" && tn == un {
			return tn, true
		}
	case proto == 6:
		return tn, tn != ""
	case proto == 17:
		return un, un != ""
	}
	return "", false
}

// ProtoName returns the /etc/protocols name of an IP protocol number,
// or "" if it has none.
func ProtoName(p uint8) string { return ipnames.ProtoName(p) }

// LookupProto returns the protocol number of a name or alias as
// getprotobyname does (case-sensitive: "OSPFIGP" is ospf, "ospfigp" and
// the non-Debian "icmpv6" are unknown).
func LookupProto(name string) (uint8, bool) { return ipnames.ProtoByName(name) }

// hosts is the embedded host table (kit README §8): IPFilter hard-wires
// test.host.dots; localhost is what every stock host has.
var hosts4 = map[string]netip.Addr{
	"localhost":      netip.AddrFrom4([4]byte{127, 0, 0, 1}),
	"test.host.dots": netip.AddrFrom4([4]byte{254, 220, 186, 152}),
}

var hosts6 = map[string]netip.Addr{
	"localhost":      netip.IPv6Loopback(),
	"test.host.dots": netip.MustParseAddr("fe80:aa55:1234:5678:5a5a:a5a5:fedc:ba98"),
}

func lookupICMPType(name string, v6 bool) (uint8, bool) {
	return ipnames.LookupICMPType(ipnames.RuleICMPTypes, strings.ToLower(name), v6)
}

// ICMPTypeName returns the name IPFilter prints for an ICMP type of the
// given family, or "" if it has none.
func ICMPTypeName(f Family, t uint8) string {
	if f != FamilyInet && f != FamilyInet6 {
		return ""
	}
	return ipnames.ICMPTypeName(ipnames.RuleICMPTypes, t, f == FamilyInet6)
}

func lookupICMPCode(name string) (uint8, bool) {
	return ipnames.LookupICMPCode(strings.ToLower(name))
}

var facilities = map[string]uint8{
	"kern": FacKern, "user": FacUser, "mail": FacMail, "daemon": FacDaemon, "auth": FacAuth,
	"syslog": FacSyslog, "lpr": FacLpr, "news": FacNews, "uucp": FacUucp, "cron": FacCron,
	"authpriv": FacAuthpriv, "ftp": FacFtp, "security": FacSecurity, "logalert": FacLogalert,
	"local0": FacLocal0, "local1": FacLocal0 + 1, "local2": FacLocal0 + 2, "local3": FacLocal0 + 3,
	"local4": FacLocal0 + 4, "local5": FacLocal0 + 5, "local6": FacLocal0 + 6, "local7": FacLocal0 + 7,
	"audit": 13, "ntp": 12,
}

// FacilityName returns the syslog facility name IPFilter prints.
func FacilityName(f uint8) string {
	switch f {
	case FacSecurity:
		return "security"
	case 12:
		return "ntp"
	}
	for n, v := range facilities {
		if v == f && n != "audit" && n != "security" && n != "ntp" {
			return n
		}
	}
	return "!!!"
}

var priorities = []string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

var priorityAliases = map[string]uint8{"warning": PriWarn, "error": PriErr, "panic": PriEmerg}

// PriorityName returns the syslog priority name IPFilter prints.
func PriorityName(p uint8) string {
	if int(p) < len(priorities) {
		return priorities[p]
	}
	return "!!!"
}

func lookupPriority(s string) (uint8, bool) {
	n := strings.ToLower(s)
	for i, p := range priorities {
		if p == n {
			return uint8(i), true
		}
	}
	v, ok := priorityAliases[n]
	return v, ok
}

// nameBit pairs a keyword with a bit.
type nameBit struct {
	name string
	bit  uint32
}

// ipOptions is IPFilter's ionames table in bit order (the print order).
var ipOptions = []nameBit{
	{"nop", OptNOP}, {"rr", OptRR}, {"zsu", OptZSU}, {"mtup", OptMTUP}, {"mtur", OptMTUR},
	{"encode", OptENCODE}, {"ts", OptTS}, {"tr", OptTR}, {"sec", OptSEC}, {"lsrr", OptLSRR},
	{"e-sec", OptESEC}, {"cipso", OptCIPSO}, {"satid", OptSATID}, {"ssrr", OptSSRR},
	{"addext", OptADDEXT}, {"visa", OptVISA}, {"imitd", OptIMITD}, {"eip", OptEIP},
	{"finn", OptFINN}, {"dps", OptDPS}, {"sdb", OptSDB}, {"nsapa", OptNSAPA},
	{"rtralrt", OptRTRALRT}, {"ump", OptUMP},
}

// secClasses is IPFilter's secclass table. printfr walks it in this
// order, by bit value (the order of the RIPSO class bytes), whatever
// order the rule named them in.
var secClasses = []nameBit{
	{"reserv-4", SecReserv4}, {"topsecret", SecTopSecret}, {"secret", SecSecret},
	{"reserv-3", SecReserv3}, {"confid", SecConfid}, {"unclass", SecUnclass},
	{"reserv-2", SecReserv2}, {"reserv-1", SecReserv1},
}

// v6Hdrs is IPFilter's v6ionames table.
var v6Hdrs = []nameBit{
	{"hopopts", V6HdrHopOpts}, {"ipv6", V6HdrIPv6}, {"routing", V6HdrRouting},
	{"frag", V6HdrFrag}, {"esp", V6HdrESP}, {"ah", V6HdrAH}, {"none", V6HdrNone},
	{"dstopts", V6HdrDstOpts}, {"mobility", V6HdrMobility},
}

// withAttrs maps `with` attribute keywords to FI_* bits.
var withAttrs = map[string]uint32{
	"ipopts": FI_OPTIONS, "ipopt": FI_OPTIONS, "short": FI_SHORT, "nat": FI_NATED,
	"bad": FI_BAD, "bad-nat": FI_BADNAT, "bad-src": FI_BADSRC, "lowttl": FI_LOWTTL,
	"frag": FI_FRAG, "frags": FI_FRAG, "frag-body": FI_FRAGBODY, "mbcast": FI_MBCAST,
	"mcast": FI_MULTICAST, "multicast": FI_MULTICAST, "bcast": FI_BROADCAST,
	"broadcast": FI_BROADCAST, "state": FI_STATE, "oow": FI_OOW, "v6hdrs": FI_V6EXTHDR,
	"ah": FI_AH,
}

// withPrintOrder is printfr's order of `with` attributes.
var withPrintOrder = []nameBit{
	{"short", FI_SHORT}, {"frag", FI_FRAG}, {"frag-body", FI_FRAGBODY}, {"nat", FI_NATED},
	{"lowttl", FI_LOWTTL}, {"bad", FI_BAD}, {"bad-src", FI_BADSRC}, {"bad-nat", FI_BADNAT},
	{"oow", FI_OOW}, {"mbcast", FI_MBCAST}, {"bcast", FI_BROADCAST}, {"mcast", FI_MULTICAST},
	{"state", FI_STATE}, {"v6hdrs", FI_V6EXTHDR},
}

func findBit(t []nameBit, name string) (uint32, bool) {
	n := strings.ToLower(name)
	for _, e := range t {
		if e.name == n {
			return e.bit, true
		}
	}
	return 0, false
}

package ipf

import (
	"net/netip"
	"sort"
	"strings"
)

// Name tables are embedded so that parsing and printing never depend on
// the host's /etc files (the conformance kit assumes a stock host, §8).

// service is one /etc/services entry: the port and whether it exists for
// tcp and for udp.
type service struct {
	name     string
	port     uint16
	tcp, udp bool
}

var services = []service{
	{"tcpmux", 1, true, false}, {"echo", 7, true, true}, {"discard", 9, true, true},
	{"systat", 11, true, false}, {"daytime", 13, true, true}, {"netstat", 15, true, false},
	{"qotd", 17, true, false}, {"chargen", 19, true, true}, {"ftp-data", 20, true, false},
	{"ftp", 21, true, false}, {"ssh", 22, true, true}, {"telnet", 23, true, false},
	{"smtp", 25, true, false}, {"time", 37, true, true}, {"whois", 43, true, false},
	{"tacacs", 49, true, true}, {"domain", 53, true, true}, {"bootps", 67, false, true},
	{"bootpc", 68, false, true}, {"tftp", 69, false, true}, {"gopher", 70, true, false},
	{"finger", 79, true, false}, {"http", 80, true, true}, {"kerberos", 88, true, true},
	{"pop3", 110, true, false}, {"sunrpc", 111, true, true}, {"auth", 113, true, false},
	{"nntp", 119, true, false}, {"ntp", 123, true, true}, {"netbios-ns", 137, true, true},
	{"netbios-dgm", 138, false, true}, {"netbios-ssn", 139, true, false}, {"imap2", 143, true, false},
	{"snmp", 161, true, true}, {"snmp-trap", 162, true, true}, {"bgp", 179, true, false},
	{"ldap", 389, true, true}, {"https", 443, true, true}, {"microsoft-ds", 445, true, false},
	{"isakmp", 500, false, true}, {"exec", 512, true, false}, {"biff", 512, false, true},
	{"login", 513, true, false}, {"who", 513, false, true}, {"shell", 514, true, false},
	{"syslog", 514, false, true}, {"printer", 515, true, false}, {"talk", 517, false, true},
	{"ntalk", 518, false, true}, {"route", 520, false, true}, {"uucp", 540, true, false},
	{"submission", 587, true, false}, {"ldaps", 636, true, true}, {"imaps", 993, true, false},
	{"pop3s", 995, true, false}, {"socks", 1080, true, false}, {"openvpn", 1194, true, true},
	{"ms-sql-s", 1433, true, false}, {"pptp", 1723, true, false}, {"radius", 1812, true, true},
	{"nfs", 2049, true, true}, {"mysql", 3306, true, false}, {"ms-wbt-server", 3389, true, false},
	{"sip", 5060, true, true}, {"postgresql", 5432, true, false}, {"x11", 6000, true, false},
	{"http-alt", 8080, true, false},
}

// serviceAliases are extra names for entries above.
var serviceAliases = map[string]string{
	"www": "http", "nameserver": "domain", "imap": "imap2", "cmd": "shell",
	"mail": "smtp", "nfsd": "nfs", "ldaps": "ldaps", "syslog-udp": "syslog",
}

// lookupService resolves a service name for the rule's protocol: proto
// 6 or 17 picks that table; tcpudp or no protocol accepts a name found in
// either (tcp first).
func lookupService(name string, proto uint8, hasProto, tcpudp bool) (uint16, bool) {
	n := strings.ToLower(name)
	if a, ok := serviceAliases[n]; ok {
		n = a
	}
	for _, s := range services {
		if s.name != n {
			continue
		}
		switch {
		case hasProto && !tcpudp && proto == 6 && !s.tcp:
			continue
		case hasProto && !tcpudp && proto == 17 && !s.udp:
			continue
		}
		return s.port, true
	}
	return 0, false
}

// serviceName returns the name IPFilter's portname() prints: proto tcp
// or udp uses that table; tcp/udp needs the same name in both.
func serviceName(port uint16, proto uint8, tcpudp bool) (string, bool) {
	var tn, un string
	for _, s := range services {
		if s.port != port {
			continue
		}
		if s.tcp && tn == "" {
			tn = s.name
		}
		if s.udp && un == "" {
			un = s.name
		}
	}
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

// protocols is /etc/protocols of a stock Debian host (netbase).
var protocols = map[string]uint8{
	"ip": 0, "icmp": 1, "igmp": 2, "ggp": 3, "ipencap": 4, "st": 5, "tcp": 6, "egp": 8,
	"igp": 9, "pup": 12, "udp": 17, "hmp": 20, "xns-idp": 22, "rdp": 27, "iso-tp4": 29,
	"dccp": 33, "xtp": 36, "ddp": 37, "idpr-cmtp": 38, "ipv6": 41, "ipv6-route": 43,
	"ipv6-frag": 44, "idrp": 45, "rsvp": 46, "gre": 47, "esp": 50, "ah": 51, "skip": 57,
	"ipv6-icmp": 58, "ipv6-nonxt": 59, "ipv6-opts": 60, "rspf": 73, "vmtp": 81,
	"eigrp": 88, "ospf": 89, "ax.25": 93, "ipip": 94, "etherip": 97, "encap": 98,
	"pim": 103, "ipcomp": 108, "vrrp": 112, "l2tp": 115, "isis": 124, "sctp": 132,
	"fc": 133, "mobility-header": 135, "udplite": 136, "mpls-in-ip": 137, "manet": 138,
	"hip": 139, "shim6": 140, "wesp": 141, "rohc": 142, "ethernet": 143,
	// aliases
	"icmpv6": 58, "icmp6": 58, "ipv6-icmpv6": 58, "ospfigp": 89,
}

var protoNames = func() [256]string {
	var t [256]string
	for n, v := range protocols {
		switch n {
		case "icmpv6", "icmp6", "ipv6-icmpv6", "ospfigp":
			continue
		}
		t[v] = n
	}
	return t
}()

// ProtoName returns the /etc/protocols name of an IP protocol number,
// or "" if it has none.
func ProtoName(p uint8) string { return protoNames[p] }

// protoAliases are the aliases /etc/protocols gives beside the upper
// case of each name (getprotobyname is case-sensitive: "OSPFIGP" is
// ospf, "ospfigp" is unknown, as are the non-Debian icmpv6 and icmp6).
var protoAliases = map[string]uint8{
	"IP-ENCAP": 4, "IPv6": 41, "IPv6-Route": 43, "IPv6-Frag": 44, "IPSEC-ESP": 50,
	"IPSEC-AH": 51, "IPv6-ICMP": 58, "IPv6-NoNxt": 59, "IPv6-Opts": 60, "OSPFIGP": 89,
	"Mobility-Header": 135, "UDPLite": 136, "MPLS-in-IP": 137, "Shim6": 140, "Ethernet": 143,
}

// LookupProto returns the protocol number of a name from the embedded
// /etc/protocols table: a name, its upper case, or an alias.
func LookupProto(name string) (uint8, bool) {
	if v, ok := protocols[name]; ok && !isNonDebianAlias(name) {
		return v, true
	}
	if v, ok := protoAliases[name]; ok {
		return v, true
	}
	if l := strings.ToLower(name); strings.ToUpper(l) == name && !isNonDebianAlias(l) {
		v, ok := protocols[l]
		return v, ok
	}
	return 0, false
}

func isNonDebianAlias(n string) bool {
	switch n {
	case "icmpv6", "icmp6", "ipv6-icmpv6", "ospfigp":
		return true
	}
	return false
}

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

// icmpType is one entry of IPFilter's icmptypelist: a name and its ICMPv4
// and ICMPv6 values (-1 when it has none in that family).
type icmpType struct {
	name   string
	v4, v6 int
}

// icmpTypes is sorted by name, so the first match of a value is the name
// IPFilter prints.
var icmpTypes = sortedICMP([]icmpType{
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

func sortedICMP(t []icmpType) []icmpType {
	sort.Slice(t, func(i, j int) bool { return t[i].name < t[j].name })
	return t
}

func lookupICMPType(name string, v6 bool) (uint8, bool) {
	n := strings.ToLower(name)
	for _, e := range icmpTypes {
		if e.name != n {
			continue
		}
		v := e.v4
		if v6 {
			v = e.v6
		}
		if v < 0 {
			return 0, false
		}
		return uint8(v), true
	}
	return 0, false
}

// ICMPTypeName returns the name IPFilter prints for an ICMP type of the
// given family, or "" if it has none.
func ICMPTypeName(f Family, t uint8) string {
	for _, e := range icmpTypes {
		if (f == FamilyInet && e.v4 == int(t)) || (f == FamilyInet6 && e.v6 == int(t)) {
			return e.name
		}
	}
	return ""
}

// icmpCodes are the return-icmp / code names by value.
var icmpCodes = [...]string{
	"net-unr", "host-unr", "proto-unr", "port-unr", "needfrag", "srcfail",
	"net-unk", "host-unk", "isolate", "net-prohib", "host-prohib",
	"net-tos", "host-tos", "filter-prohib", "host-preced", "preced-cutoff",
}

func lookupICMPCode(name string) (uint8, bool) {
	n := strings.ToLower(name)
	if n == "cutoff-preced" {
		return 15, true
	}
	for i, c := range icmpCodes {
		if c == n {
			return uint8(i), true
		}
	}
	return 0, false
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
	{"state", FI_STATE}, {"v6hdrs", FI_V6EXTHDR}, {"ah", FI_AH},
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

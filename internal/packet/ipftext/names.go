// Package ipftext reads and writes the packet formats of IPFilter's
// ipftest: the "text" and "hex" input formats (lib/ipft_tx.c,
// lib/ipft_hx.c) and the one-line and hex packet printers
// (lib/printpacket.c). Name lookups use tables built into the package, not
// the host's /etc files, so results do not depend on the machine.
package ipftext

import (
	"net/netip"
	"strings"
)

// service is one entry of the built-in services table.
type service struct {
	name  string
	port  uint16
	proto string // "tcp", "udp" or "" for both
}

// services is the subset of a stock /etc/services that IPFilter's tests
// and common rule files use.
var services = []service{
	{"tcpmux", 1, ""}, {"echo", 7, ""}, {"discard", 9, ""}, {"systat", 11, "tcp"},
	{"daytime", 13, ""}, {"netstat", 15, "tcp"}, {"qotd", 17, "tcp"}, {"chargen", 19, ""},
	{"ftp-data", 20, "tcp"}, {"ftp", 21, "tcp"}, {"ssh", 22, "tcp"}, {"telnet", 23, "tcp"},
	{"smtp", 25, "tcp"}, {"time", 37, ""}, {"whois", 43, "tcp"}, {"tacacs", 49, ""},
	{"domain", 53, ""}, {"bootps", 67, "udp"}, {"bootpc", 68, "udp"}, {"tftp", 69, "udp"},
	{"gopher", 70, "tcp"}, {"finger", 79, "tcp"}, {"http", 80, "tcp"}, {"www", 80, "tcp"},
	{"kerberos", 88, ""}, {"pop3", 110, "tcp"}, {"sunrpc", 111, ""}, {"auth", 113, "tcp"},
	{"ident", 113, "tcp"}, {"nntp", 119, "tcp"}, {"ntp", 123, ""}, {"epmap", 135, ""},
	{"netbios-ns", 137, ""}, {"netbios-dgm", 138, ""}, {"netbios-ssn", 139, ""},
	{"imap", 143, "tcp"}, {"imap2", 143, "tcp"}, {"snmp", 161, ""}, {"snmp-trap", 162, ""},
	{"bgp", 179, "tcp"}, {"irc", 194, "tcp"}, {"ldap", 389, ""}, {"https", 443, ""},
	{"microsoft-ds", 445, "tcp"}, {"isakmp", 500, "udp"}, {"exec", 512, "tcp"},
	{"biff", 512, "udp"}, {"login", 513, "tcp"}, {"who", 513, "udp"}, {"shell", 514, "tcp"},
	{"syslog", 514, "udp"}, {"printer", 515, "tcp"}, {"talk", 517, "udp"}, {"ntalk", 518, "udp"},
	{"route", 520, "udp"}, {"uucp", 540, "tcp"}, {"klogin", 543, "tcp"}, {"kshell", 544, "tcp"},
	{"submission", 587, "tcp"}, {"ldaps", 636, "tcp"}, {"rsync", 873, "tcp"},
	{"imaps", 993, "tcp"}, {"pop3s", 995, "tcp"}, {"socks", 1080, "tcp"},
	{"openvpn", 1194, ""}, {"ms-sql-s", 1433, "tcp"}, {"pptp", 1723, "tcp"},
	{"radius", 1812, ""}, {"nfs", 2049, ""}, {"cvspserver", 2401, "tcp"},
	{"mysql", 3306, "tcp"}, {"rdp", 3389, "tcp"}, {"postgresql", 5432, "tcp"},
	{"x11", 6000, "tcp"}, {"http-alt", 8080, "tcp"},
}

// ServicePort returns the port of a service name for proto ("tcp" or
// "udp"; "" accepts either).
func ServicePort(name, proto string) (uint16, bool) {
	for _, s := range services {
		if s.name == name && (s.proto == "" || proto == "" || s.proto == proto) {
			return s.port, true
		}
	}
	return 0, false
}

// protocols maps protocol names (as in a stock /etc/protocols) to numbers.
var protocols = []struct {
	name string
	num  uint8
}{
	{"ip", 0}, {"hopopt", 0}, {"icmp", 1}, {"igmp", 2}, {"ggp", 3}, {"ipencap", 4},
	{"st", 5}, {"tcp", 6}, {"egp", 8}, {"igp", 9}, {"pup", 12}, {"udp", 17}, {"hmp", 20},
	{"xns-idp", 22}, {"rdp", 27}, {"iso-tp4", 29}, {"dccp", 33}, {"xtp", 36},
	{"ddp", 37}, {"idpr-cmtp", 38}, {"ipv6", 41}, {"ipv6-route", 43}, {"ipv6-frag", 44},
	{"idrp", 45}, {"rsvp", 46}, {"gre", 47}, {"esp", 50}, {"ah", 51}, {"skip", 57},
	{"ipv6-icmp", 58}, {"ipv6-nonxt", 59}, {"ipv6-opts", 60}, {"rspf", 73}, {"vmtp", 81},
	{"eigrp", 88}, {"ospf", 89}, {"ax.25", 93}, {"ipip", 94}, {"etherip", 97},
	{"encap", 98}, {"pim", 103}, {"ipcomp", 108}, {"vrrp", 112}, {"l2tp", 115},
	{"isis", 124}, {"sctp", 132}, {"fc", 133}, {"mobility-header", 135},
	{"udplite", 136}, {"mpls-in-ip", 137}, {"manet", 138}, {"hip", 139}, {"shim6", 140},
	{"wesp", 141}, {"rohc", 142},
}

// ProtocolName returns the first name of protocol n, or "" if unknown.
func ProtocolName(n uint8) string {
	for _, p := range protocols {
		if p.num == n {
			return p.name
		}
	}
	return ""
}

// icmpTypes is IPFilter's icmptypelist (lib/icmptypes.c): name, IPv4
// type, IPv6 type (-1 when the name has no meaning for the family).
var icmpTypes = []struct {
	name   string
	v4, v6 int
}{
	{"echo", 8, 128}, {"echorep", 0, 129}, {"unreach", 3, 1}, {"squench", 4, -1},
	{"redir", 5, 137}, {"timex", 11, 3}, {"paramprob", 12, 4}, {"timest", 13, -1},
	{"timestrep", 14, -1}, {"inforeq", 15, -1}, {"inforep", 16, -1}, {"maskreq", 17, -1},
	{"maskrep", 18, -1}, {"routerad", 9, 134}, {"routersol", 10, 133},
	{"toobig", -1, 2}, {"mldquery", -1, 130}, {"mldreport", -1, 131}, {"mlddone", -1, 132},
	{"neighsol", -1, 135}, {"neighad", -1, 136}, {"routerrenum", -1, 138},
	{"icmpniq", -1, 139}, {"icmpnir", -1, 140}, {"mldv2report", -1, 143},
}

// ICMPType returns the type number of an ICMP type name for IPv4 (v6 =
// false) or ICMPv6, as geticmptype does; -1 when unknown.
func ICMPType(name string, v6 bool) int {
	for _, t := range icmpTypes {
		if t.name == name {
			if v6 {
				return t.v6
			}
			return t.v4
		}
	}
	return -1
}

// hosts are the host names resolvable without a resolver: IPFilter's
// hard-wired test.host.dots (lib/gethost.c) and the loopback name.
var hosts = map[string]netip.Addr{
	"localhost":      netip.AddrFrom4([4]byte{127, 0, 0, 1}),
	"test.host.dots": netip.AddrFrom4([4]byte{254, 220, 186, 152}),
}

// LookupHost resolves a host name from the built-in table.
func LookupHost(name string) (netip.Addr, bool) {
	a, ok := hosts[name]
	return a, ok
}

// InetAddr parses an IPv4 address the way inet_addr(3) does: one to four
// parts, each decimal, octal (leading 0) or hex (0x); the last part fills
// the remaining bytes. Trailing blanks are accepted (glibc inet_aton).
func InetAddr(s string) (netip.Addr, bool) {
	s = strings.TrimRight(s, " \t\r\n")
	if s == "" {
		return netip.Addr{}, false
	}
	var parts [4]uint64
	n := 0
	for {
		if n == 4 || s == "" {
			return netip.Addr{}, false
		}
		v, rest, ok := parseCNum(s)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if rest == "" {
			break
		}
		if rest[0] != '.' {
			return netip.Addr{}, false
		}
		s = rest[1:]
	}
	var a uint64
	switch n {
	case 1:
		if parts[0] > 0xffffffff {
			return netip.Addr{}, false
		}
		a = parts[0]
	case 2:
		if parts[0] > 0xff || parts[1] > 0xffffff {
			return netip.Addr{}, false
		}
		a = parts[0]<<24 | parts[1]
	case 3:
		if parts[0] > 0xff || parts[1] > 0xff || parts[2] > 0xffff {
			return netip.Addr{}, false
		}
		a = parts[0]<<24 | parts[1]<<16 | parts[2]
	case 4:
		for _, p := range parts {
			if p > 0xff {
				return netip.Addr{}, false
			}
		}
		a = parts[0]<<24 | parts[1]<<16 | parts[2]<<8 | parts[3]
	}
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), true
}

// parseCNum parses a C-style unsigned number prefix.
func parseCNum(s string) (uint64, string, bool) {
	base := uint64(10)
	if len(s) > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		base, s = 16, s[2:]
	} else if len(s) > 1 && s[0] == '0' {
		base = 8
	}
	var v uint64
	k := 0
	for ; k < len(s); k++ {
		c := s[k]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			d = 99
		}
		if d >= base {
			break
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, "", false
		}
	}
	if k == 0 && base != 8 {
		return 0, "", false
	}
	return v, s[k:], true
}

// atoi is C's atoi: optional blanks and sign, then digits; junk ends it.
func atoi(s string) int {
	s = strings.TrimLeft(s, " \t")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	v := 0
	for k := 0; k < len(s) && s[k] >= '0' && s[k] <= '9'; k++ {
		v = v*10 + int(s[k]-'0')
		if v > 1<<31 {
			v = 1 << 31
		}
	}
	if neg {
		return -v
	}
	return v
}

package netfmt

import (
	"strconv"
	"strings"
)

// protoNames mirrors the protocol names of a stock /etc/protocols (netbase),
// so printed rules do not depend on the host.
var protoNames = map[int]string{
	0: "ip", 1: "icmp", 2: "igmp", 3: "ggp", 4: "ipencap", 5: "st", 6: "tcp", 8: "egp",
	9: "igp", 12: "pup", 17: "udp", 20: "hmp", 22: "xns-idp", 27: "rdp", 29: "iso-tp4",
	33: "dccp", 36: "xtp", 37: "ddp", 38: "idpr-cmtp", 41: "ipv6", 43: "ipv6-route",
	44: "ipv6-frag", 45: "idrp", 46: "rsvp", 47: "gre", 50: "esp", 51: "ah", 57: "skip",
	58: "ipv6-icmp", 59: "ipv6-nonxt", 60: "ipv6-opts", 73: "rspf", 81: "vmtp", 88: "eigrp",
	89: "ospf", 93: "ax.25", 94: "ipip", 97: "etherip", 98: "encap", 103: "pim",
	108: "ipcomp", 112: "vrrp", 115: "l2tp", 124: "isis", 132: "sctp", 133: "fc",
	135: "mobility-header", 136: "udplite", 137: "mpls-in-ip", 138: "manet", 139: "hip",
	140: "shim6", 141: "wesp", 142: "rohc", 143: "ethernet",
}

var protoNumbers = func() map[string]int {
	m := make(map[string]int, len(protoNames)+4)
	for n, s := range protoNames {
		m[s] = n
	}
	m["icmpv6"] = 58
	m["ipv6-icmp"] = 58
	return m
}()

// ProtoName returns the /etc/protocols name of p, or "" if it has none.
func ProtoName(p int) string { return protoNames[p] }

// ProtoNumber looks a protocol up by name or number.
func ProtoNumber(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 255 {
			return 0, false
		}
		return n, true
	}
	n, ok := protoNumbers[strings.ToLower(s)]
	return n, ok
}

// services is the subset of /etc/services IPFilter configurations use.
// Entries are valid for both tcp and udp unless listed in udpOnly/tcpOnly.
var services = map[string]int{
	"echo": 7, "discard": 9, "daytime": 13, "ftp-data": 20, "ftp": 21, "ssh": 22,
	"telnet": 23, "smtp": 25, "time": 37, "domain": 53, "tftp": 69, "gopher": 70,
	"finger": 79, "http": 80, "www": 80, "kerberos": 88, "pop3": 110, "sunrpc": 111,
	"auth": 113, "ident": 113, "nntp": 119, "ntp": 123, "netbios-ns": 137,
	"netbios-dgm": 138, "netbios-ssn": 139, "imap": 143, "imap2": 143, "snmp": 161,
	"snmp-trap": 162, "bgp": 179, "irc": 194, "ldap": 389, "https": 443,
	"microsoft-ds": 445, "isakmp": 500, "exec": 512, "biff": 512, "login": 513,
	"who": 513, "shell": 514, "syslog": 514, "printer": 515, "talk": 517,
	"ntalk": 518, "route": 520, "uucp": 540, "submission": 587, "ldaps": 636,
	"rsync": 873, "imaps": 993, "pop3s": 995, "socks": 1080, "openvpn": 1194,
	"ms-sql-s": 1433, "l2tp": 1701, "pptp": 1723, "radius": 1812, "nfs": 2049,
	"mysql": 3306, "postgresql": 5432, "x11": 6000, "irc-serv": 6667,
}

// ServicePort resolves a port name or number.
func ServicePort(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 65535 {
			return 0, false
		}
		return n, true
	}
	p, ok := services[strings.ToLower(s)]
	return p, ok
}

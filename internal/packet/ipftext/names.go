// Package ipftext reads and writes the packet formats of IPFilter's
// ipftest: the "text" and "hex" input formats (lib/ipft_tx.c,
// lib/ipft_hx.c) and the one-line and hex packet printers
// (lib/printpacket.c). Name lookups use tables built into the package, not
// the host's /etc files, so results do not depend on the machine.
package ipftext

import (
	"net/netip"
	"sluice/internal/ipnames"
	"strings"
)

// Service, protocol and ICMP type names come from sluice/internal/ipnames.

// ServicePort returns the port of a service name for proto ("tcp" or
// "udp"; "" accepts either), as getservbyname does.
func ServicePort(name, proto string) (uint16, bool) { return ipnames.ServiceByName(name, proto) }

// ProtocolName returns the first name of protocol n, or "" if unknown.
func ProtocolName(n uint8) string { return ipnames.ProtoName(n) }

// ICMPType returns the type number of an ICMP type name for IPv4 (v6 =
// false) or ICMPv6, as geticmptype does; -1 when unknown.
func ICMPType(name string, v6 bool) int {
	if t, ok := ipnames.LookupICMPType(ipnames.TextICMPTypes, name, v6); ok {
		return int(t)
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

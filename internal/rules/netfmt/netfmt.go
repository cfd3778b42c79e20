// Package netfmt holds the address, protocol and service helpers shared by
// the ipnat and ippool parsers and printers. They reproduce the quirks of
// the C library calls IPFilter prints with (inet_ntop, getprotobynumber,
// getservbyname) without consulting the host, so output is reproducible.
package netfmt

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// NtopV4 formats a 4-byte address in dotted-quad form.
func NtopV4(a [4]byte) string {
	return strconv.Itoa(int(a[0])) + "." + strconv.Itoa(int(a[1])) + "." +
		strconv.Itoa(int(a[2])) + "." + strconv.Itoa(int(a[3]))
}

// NtopV6 formats a 16-byte address exactly as glibc's inet_ntop does:
// the longest run (of at least two) zero groups becomes "::", and an
// address whose first 96 bits are zero (or ::ffff:0:0/96) prints its last
// 32 bits in dotted form.
func NtopV6(a [16]byte) string {
	var w [8]uint16
	for i := range w {
		w[i] = binary.BigEndian.Uint16(a[2*i:])
	}
	bestBase, bestLen := -1, 0
	curBase, curLen := -1, 0
	for i := 0; i < 8; i++ {
		if w[i] == 0 {
			if curBase == -1 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
		} else if curBase != -1 {
			if bestBase == -1 || curLen > bestLen {
				bestBase, bestLen = curBase, curLen
			}
			curBase = -1
		}
	}
	if curBase != -1 && (bestBase == -1 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestBase != -1 && bestLen < 2 {
		bestBase = -1
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if bestBase != -1 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff)) {
			b.WriteString(NtopV4([4]byte{a[12], a[13], a[14], a[15]}))
			break
		}
		b.WriteString(strconv.FormatUint(uint64(w[i]), 16))
	}
	if bestBase != -1 && bestBase+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}

// PrintIP formats an IPv4 address the way IPFilter's printip does:
// values below 256 print as a bare decimal number.
func PrintIP(a [4]byte) string {
	v := binary.BigEndian.Uint32(a[:])
	if v < 256 {
		return strconv.FormatUint(uint64(v), 10)
	}
	return NtopV4(a)
}

// Count4Bits returns the prefix length of a contiguous IPv4 mask, or -1
// when the mask is not contiguous.
func Count4Bits(m uint32) int {
	n := 0
	for m&0x80000000 != 0 {
		n++
		m <<= 1
	}
	if m != 0 {
		return -1
	}
	return n
}

// Count6Bits counts the set bits of a 128-bit mask.
func Count6Bits(m [16]byte) int {
	n := 0
	for _, b := range m {
		for ; b != 0; b &= b - 1 {
			n++
		}
	}
	return n
}

// MaskV4 returns the IPv4 mask with the given prefix length.
func MaskV4(bits int) uint32 {
	if bits <= 0 {
		return 0
	}
	if bits >= 32 {
		return 0xffffffff
	}
	return ^uint32(0) << (32 - bits)
}

// MaskV6 returns the IPv6 mask with the given prefix length.
func MaskV6(bits int) [16]byte {
	var m [16]byte
	for i := 0; i < 16 && bits > 0; i++ {
		if bits >= 8 {
			m[i] = 0xff
			bits -= 8
		} else {
			m[i] = byte(0xff << (8 - bits))
			bits = 0
		}
	}
	return m
}

// Well-known names that IPFilter hard-wires or that the conformance kit
// assumes a stock host resolves.
var builtinHosts = map[string][2]string{
	"localhost":      {"127.0.0.1", "::1"},
	"test.host.dots": {"254.220.186.152", "fe80:aa55:1234:5678:5a5a:a5a5:fedc:ba98"},
}

// LookupHost resolves names other than the built-in ones. Tests and
// fuzz targets replace it to stay off the network.
var LookupHost = func(name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", name)
}

// ResolveHost resolves a host name to an address of the wanted family
// (4 or 6; 0 = IPv4 preferred). Names known to IPFilter's test harness
// are answered without touching the resolver.
func ResolveHost(name string, family int) (netip.Addr, error) {
	if h, ok := builtinHosts[strings.ToLower(name)]; ok {
		if family == 6 {
			return netip.MustParseAddr(h[1]), nil
		}
		return netip.MustParseAddr(h[0]), nil
	}
	addrs, err := LookupHost(name)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("unknown host %q", name)
	}
	for _, a := range addrs {
		a = a.Unmap()
		if (family == 6) == a.Is6() {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("host %q has no IPv%d address", name, map[bool]int{true: 6, false: 4}[family == 6])
}

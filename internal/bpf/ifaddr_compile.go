package bpf

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"sluice/internal/rules/ipf"
)

// hostIfAddr is CompileOptions.IfAddr for the host's interfaces: the
// first address of the family (IPFilter takes the first one too).
func hostIfAddr(name string, mode ipf.IfaceAddrMode, v6 bool) (netip.Addr, netip.Addr, bool) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return netip.Addr{}, netip.Addr{}, false
	}
	fam := unix.AF_INET
	if v6 {
		fam = unix.AF_INET6
	}
	addrs, err := netlink.AddrList(l, fam)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, netip.Addr{}, false
	}
	a := addrs[0]
	ip, ok := netipOf(a.IP)
	if !ok {
		return netip.Addr{}, netip.Addr{}, false
	}
	ones, _ := a.Mask.Size()
	host := prefixMask(ip.Is4(), ip.BitLen())
	switch mode {
	case ipf.IfaceDynamic:
		return ip, host, true
	case ipf.IfaceBroadcast:
		if b, ok := netipOf(a.Broadcast); ok {
			return b, host, true
		}
		if !ip.Is4() {
			return netip.Addr{}, netip.Addr{}, false
		}
		// no broadcast configured: the all-ones host part
		b := ip.As4()
		m := prefixMask(true, ones).As4()
		for i := range b {
			b[i] |= ^m[i]
		}
		return netip.AddrFrom4(b), host, true
	case ipf.IfaceNetwork:
		return netip.PrefixFrom(ip, ones).Masked().Addr(), host, true
	case ipf.IfaceNetmasked:
		return netip.PrefixFrom(ip, ones).Masked().Addr(), prefixMask(ip.Is4(), ones), true
	case ipf.IfacePeer:
		if a.Peer != nil {
			if p, ok := netipOf(a.Peer.IP); ok && p != ip {
				return p, host, true
			}
		}
	}
	return netip.Addr{}, netip.Addr{}, false
}

func netipOf(ip net.IP) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok || a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// prefixMask returns the mask of a prefix length as an address.
func prefixMask(v4 bool, bits int) netip.Addr {
	n := 16
	if v4 {
		n = 4
	}
	if bits > n*8 {
		bits = n * 8
	}
	b := make([]byte, n)
	for i := range b {
		switch {
		case bits >= 8:
			b[i] = 0xff
			bits -= 8
		case bits > 0:
			b[i] = ^byte(0xff >> bits)
			bits = 0
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

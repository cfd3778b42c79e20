package bpf

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"sluice/internal/ruleset"
)

// hostIfNet is CompileOptions.IfNet for the host's interfaces: the first
// address of the family (IPFilter takes the first one too), its netmask,
// its broadcast address (IPv4 without one configured: the all-ones host
// part) and its point-to-point peer.
func hostIfNet(name string, v6 bool) (ruleset.IfaceNet, bool) {
	var n ruleset.IfaceNet
	l, err := netlink.LinkByName(name)
	if err != nil {
		return n, false
	}
	fam := unix.AF_INET
	if v6 {
		fam = unix.AF_INET6
	}
	addrs, err := netlink.AddrList(l, fam)
	if err != nil || len(addrs) == 0 {
		return n, false
	}
	a := addrs[0]
	ip, ok := netipOf(a.IP)
	if !ok {
		return n, false
	}
	ones, _ := a.Mask.Size()
	n.Prefix = netip.PrefixFrom(ip, ones)
	if b, ok := netipOf(a.Broadcast); ok {
		n.Broadcast = b
	} else if ip.Is4() {
		b := ip.As4()
		m := prefixMask(true, ones).As4()
		for i := range b {
			b[i] |= ^m[i]
		}
		n.Broadcast = netip.AddrFrom4(b)
	}
	if a.Peer != nil {
		if p, ok := netipOf(a.Peer.IP); ok && p != ip {
			n.Peer = p
		}
	}
	return n, true
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

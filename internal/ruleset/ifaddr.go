package ruleset

import (
	"net/netip"

	"sluice/internal/rules/ipf"
)

// IfaceNet is what an interface offers the address tests that take their
// address from it (`(IF)`, `(IF)/BITS`, `IF/broadcast|network|netmasked|
// peer`, ipf-reference §1.3.3): its address with the netmask length, and
// its broadcast and point-to-point peer addresses (the zero Addr when it
// has none). Both datapaths describe an interface this way and leave the
// meaning of each form to AddrMatch.IfaceTarget.
type IfaceNet struct {
	Prefix          netip.Prefix
	Broadcast, Peer netip.Addr
}

// HostOnly describes an interface known only by its address, as ipftest's
// are: its netmask is all ones, so every IF/... form stands for the
// address itself and `(IF)/BITS` keeps its BITS (IPFilter's userland
// build behaves so).
func HostOnly(a netip.Addr) IfaceNet {
	return IfaceNet{Prefix: netip.PrefixFrom(a, a.BitLen()), Broadcast: a, Peer: a}
}

// IfaceTarget returns the prefix a packet address must lie in for the
// interface-address test m to hold on an interface described by n
// (ipf_ifpaddr, ipf_ifpfillv4addr), ignoring m.Not. ok is false when the
// interface has no address of that form: the test then holds for nothing.
func (m *AddrMatch) IfaceTarget(n IfaceNet) (netip.Prefix, bool) {
	a := n.Prefix.Addr()
	if !a.IsValid() || !n.Prefix.IsValid() {
		return netip.Prefix{}, false
	}
	host := func(x netip.Addr) (netip.Prefix, bool) {
		if !x.IsValid() || x.BitLen() != a.BitLen() {
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(x, x.BitLen()), true
	}
	switch m.IfaceMode {
	case ipf.IfaceDynamic:
		return netip.PrefixFrom(a, min(int(m.IfaceBits), a.BitLen())).Masked(), true
	case ipf.IfaceBroadcast:
		return host(n.Broadcast)
	case ipf.IfaceNetwork:
		return host(n.Prefix.Masked().Addr())
	case ipf.IfaceNetmasked:
		return n.Prefix.Masked(), true
	case ipf.IfacePeer:
		return host(n.Peer)
	}
	return netip.Prefix{}, false
}

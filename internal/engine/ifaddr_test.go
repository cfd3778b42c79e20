package engine

import (
	"net/netip"
	"testing"
)

type fakeIfAddrs map[string]netip.Addr

func (f fakeIfAddrs) IfAddr(name string, v6 bool) (netip.Addr, bool) {
	a, ok := f[name]
	return a, ok && a.Is6() == v6
}

type fakeIfNets struct {
	fakeIfAddrs
	nets map[string]IfNetwork
}

func (f fakeIfNets) IfNetwork(name string, v6 bool) (IfNetwork, bool) {
	n, ok := f.nets[name]
	return n, ok && n.Prefix.Addr().Is6() == v6
}

// TestIfaceAddresses covers addresses taken from interfaces (§1.3.3).
// Without netmasks (ipftest) every IF/... form is the interface address.
func TestIfaceAddresses(t *testing.T) {
	addrs := fakeIfAddrs{"nic0": netip.MustParseAddr("10.1.1.1")}
	nets := fakeIfNets{addrs, map[string]IfNetwork{"nic0": {
		Prefix:    netip.MustParsePrefix("10.1.1.1/24"),
		Broadcast: netip.MustParseAddr("10.1.1.255"),
		Peer:      netip.MustParseAddr("10.9.9.9"),
	}}}
	tests := []struct {
		name string
		rule string
		ifa  IfAddrs
		dst  string
		want Verdict
	}{
		{"dynamic hit", "block in on nic0 from any to (nic0)", addrs, "10.1.1.1", VerdictBlock},
		{"dynamic miss", "block in on nic0 from any to (nic0)", addrs, "10.1.1.2", VerdictNoMatch},
		{"dynamic with bits", "block in on nic0 from any to (nic0)/24", addrs, "10.1.1.77", VerdictBlock},
		{"dynamic with bits miss", "block in on nic0 from any to (nic0)/24", addrs, "10.1.2.77", VerdictNoMatch},
		{"dynamic negated", "block in on nic0 from any to !(nic0)", addrs, "10.1.1.2", VerdictBlock},
		{"unknown interface", "block in on nic0 from any to (nic9)", addrs, "10.1.1.1", VerdictNoMatch},
		{"no IfAddrs", "block in on nic0 from any to (nic0)", nil, "10.1.1.1", VerdictNoMatch},
		{"broadcast, no netmask: the address", "block in on nic0 from any to nic0/broadcast", addrs, "10.1.1.1", VerdictBlock},
		{"network, no netmask: the address", "block in on nic0 from any to nic0/network", addrs, "10.1.1.1", VerdictBlock},
		{"netmasked, no netmask: exact", "block in on nic0 from any to nic0/netmasked", addrs, "10.1.1.2", VerdictNoMatch},
		{"peer, no netmask: the address", "block in on nic0 from any to nic0/peer", addrs, "10.1.1.1", VerdictBlock},
		{"broadcast", "block in on nic0 from any to nic0/broadcast", nets, "10.1.1.255", VerdictBlock},
		{"broadcast not the address", "block in on nic0 from any to nic0/broadcast", nets, "10.1.1.1", VerdictNoMatch},
		{"network exact", "block in on nic0 from any to nic0/network", nets, "10.1.1.0", VerdictBlock},
		{"network is not the subnet", "block in on nic0 from any to nic0/network", nets, "10.1.1.5", VerdictNoMatch},
		{"netmasked is the subnet", "block in on nic0 from any to nic0/netmasked", nets, "10.1.1.5", VerdictBlock},
		{"netmasked miss", "block in on nic0 from any to nic0/netmasked", nets, "10.1.2.5", VerdictNoMatch},
		{"peer", "block in on nic0 from any to nic0/peer", nets, "10.9.9.9", VerdictBlock},
		{"peer miss", "block in on nic0 from any to nic0/peer", nets, "10.1.1.1", VerdictNoMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, tt.rule+"\n")
			if tt.ifa != nil {
				e.SetIfAddrs(tt.ifa)
			}
			var p Packet
			if got := check(e, &p, mkUDP("1.2.3.4", tt.dst, 1, 2), false, "nic0").Verdict; got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

package bpf

import (
	"net/netip"
	"slices"
	"testing"
)

// TestWildFillInPlace: IPFilter hashes an outbound packet to an IPv4
// multicast group (and any ICMPv6 packet to an IPv6 one) without its
// destination, in the bucket the group's wildcard entries are made in;
// the packet that fills such an entry in going its way leaves it there,
// and later such packets find it again: an outbound stream to a group
// keeps one entry. An inbound IPv4 packet to the group finds only
// wildcard entries (TCP and UDP; an ICMP one none). The kernel keeps the
// filled entry under its group key (wild_place). Each case is IPFilter's
// ipftest output (`-R -b -D`, the same packets as hex): the verdicts, one
// live entry a group throughout, and the entries' packet counts. On the
// old object the kernel made an entry every second outbound packet and
// let the inbound packets through on the fresh wildcard entries.
func TestWildFillInPlace(t *testing.T) {
	h := newHarness(t)
	a := netip.MustParseAddr
	udp := func(g string, out bool) flowPkt {
		return flowPkt{proto: 17, src: a("10.0.0.2"), sp: 5353, dst: a(g), dp: 5353, out: out}
	}
	echo := func(out bool) flowPkt {
		return flowPkt{proto: 1, src: a("10.0.0.2"), dst: a("224.0.0.251"), icmp: 8, id: 0x1234, out: out}
	}
	echo6 := func(out bool) flowPkt {
		return flowPkt{v6: true, proto: 58, src: a("2001:db8::1"), dst: a("ff02::fb"), icmp: 128, id: 0x1234, out: out}
	}
	const O, I = true, false
	pass, block := VerdictPass, VerdictBlock
	for _, c := range []struct {
		rules string
		pkts  []flowPkt
		want  []Verdict
		live  []int
		pkts0 []uint64 // the entries' packet counts (both ways), sorted
	}{{
		"pass out quick proto udp all keep state\nblock in all\n",
		[]flowPkt{udp("224.0.0.251", O), udp("224.0.0.251", O), udp("224.0.0.251", O), udp("224.0.0.251", O),
			udp("224.0.0.251", O), udp("224.0.0.251", I)},
		[]Verdict{pass, pass, pass, pass, pass, block},
		[]int{1, 1, 1, 1, 1, 1},
		[]uint64{5},
	}, {
		"pass out quick proto icmp all keep state\nblock in all\n",
		[]flowPkt{echo(O), echo(I), echo(O), echo(O), echo(I)},
		[]Verdict{pass, block, pass, pass, block},
		[]int{1, 1, 1, 1, 1},
		[]uint64{3},
	}, {
		"pass out quick proto ipv6-icmp all keep state\nblock in all\n",
		[]flowPkt{echo6(O), echo6(I), echo6(I), echo6(O)},
		[]Verdict{pass, pass, pass, pass},
		[]int{1, 1, 1, 1},
		[]uint64{4},
	}, {
		// another group's entry of the same source does not take the
		// first's place
		"pass out quick proto udp all keep state\nblock in all\n",
		[]flowPkt{udp("224.0.0.1", O), udp("224.0.0.1", O), udp("224.0.0.2", O), udp("224.0.0.2", O),
			udp("224.0.0.1", O)},
		[]Verdict{pass, pass, pass, pass, pass},
		[]int{1, 1, 2, 2, 2},
		[]uint64{2, 3},
	}, {
		// an inbound packet makes a second (wildcard) entry of the
		// group, which the filled one, of another rule, is no
		// duplicate of; the next outbound packet fills the new one
		// in, and the old one goes: IPFilter keeps it listed (live 2
		// at the end, OUT pkts 2), though no lookup meets it again
		// (Sluice's one entry a flow, docs/ipfilter-differences.md)
		"pass out quick proto udp all keep state\npass in quick proto udp all keep state\n",
		[]flowPkt{udp("224.0.0.251", O), udp("224.0.0.251", O), udp("224.0.0.251", I), udp("224.0.0.251", O)},
		[]Verdict{pass, pass, pass, pass},
		[]int{1, 1, 2, 1},
		[]uint64{2},
	}} {
		eng := h.loadBoth(t, c.rules)
		for i, fp := range c.pkts {
			res, got, live := h.stepBoth(t, eng, fp)
			if res.Verdict.Passed() != (c.want[i] == pass) || got != c.want[i] {
				t.Errorf("%q packet %d (%s): engine %s, kernel %s, want %s", c.rules, i+1, fp, res.Verdict, got, c.want[i])
			}
			if eng.States.Active() != c.live[i] || live != int64(c.live[i]) {
				t.Errorf("%q packet %d (%s): live states engine %d, kernel %d, want %d",
					c.rules, i+1, fp, eng.States.Active(), live, c.live[i])
			}
		}
		eng.Close()
		sts, err := h.d.States()
		if err != nil {
			t.Fatal(err)
		}
		var n []uint64
		for _, s := range sts {
			if s.Wild {
				t.Errorf("%q: the kernel lists %s > %s as a wildcard entry", c.rules, s.Src, s.Dst)
			}
			n = append(n, s.Pkts[0]+s.Pkts[1]+s.Pkts[2]+s.Pkts[3])
		}
		slices.Sort(n)
		if !slices.Equal(n, c.pkts0) {
			t.Errorf("%q: the kernel lists entries of %v packets, want %v", c.rules, n, c.pkts0)
		}
		h.flushCounted(t, c.rules, len(c.pkts0))
	}
}

package engine

import (
	"testing"
)

// fakeNAT fails or passes NAT-out and records the interface it was
// asked to translate for.
type fakeNAT struct {
	failOut bool
	outIfs  []string
}

func (f *fakeNAT) In(p *Packet) bool { return true }

func (f *fakeNAT) Out(p *Packet, tag string) bool {
	f.outIfs = append(f.outIfs, p.IfName)
	return !f.failOut
}

// A NAT-out failure blocks the packet with reason natv4, also when no
// rule matched it (the no-match bit must not make it pass).
func TestNATOutFailureBlocks(t *testing.T) {
	tests := []struct {
		name, rules string
		want        Verdict
		reason      Reason
	}{
		{"no rule matched", "pass in all\n", VerdictBlock, ReasonNATv4},
		{"pass rule", "pass out all\n", VerdictBlock, ReasonNATv4},
		{"block rule", "block out all\n", VerdictBlock, ReasonRule},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.rules)
			e.SetNAT(&fakeNAT{failOut: true})
			var p Packet
			res := check(e, &p, mkUDP("10.1.1.1", "10.2.2.2", 1, 2), true, "nic0")
			if res.Verdict != tc.want || res.Reason != tc.reason {
				t.Errorf("got %v reason %d, want %v reason %d", res.Verdict, res.Reason, tc.want, tc.reason)
			}
		})
	}
}

// NAT-out runs for the interface a `to IF` rule sends the packet out of
// (ipf_nat_checkout uses fr_tif), and the result says the packet was
// taken by route-to.
func TestRouteToNATInterface(t *testing.T) {
	tests := []struct {
		name, rules string
		wantIf      string
		forwarded   bool
	}{
		{"to nic1", "pass out on nic0 to nic1:1.1.1.1 all\n", "nic1", true},
		{"no route", "pass out on nic0 all\n", "nic0", false},
		{"dup-to keeps the interface", "pass out on nic0 dup-to nic2 to nic1 all\n", "nic0", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.rules)
			fn := &fakeNAT{}
			e.SetNAT(fn)
			e.SetRouter(&recorder{})
			var p Packet
			res := check(e, &p, mkUDP("10.1.1.1", "10.2.2.2", 1, 2), true, "nic0")
			if len(fn.outIfs) != 1 || fn.outIfs[0] != tc.wantIf {
				t.Errorf("NAT-out interfaces %q, want [%s]", fn.outIfs, tc.wantIf)
			}
			if p.IfName != "nic0" {
				t.Errorf("packet interface after NAT: got %s, want nic0", p.IfName)
			}
			if res.Forwarded != tc.forwarded {
				t.Errorf("Forwarded: got %v, want %v", res.Forwarded, tc.forwarded)
			}
		})
	}
}

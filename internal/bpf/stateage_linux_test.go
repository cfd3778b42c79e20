package bpf

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestAgedTCPState (rel10): a TCP entry of a keep state (age N/M) rule
// lives N seconds from a packet of its own way and M from a reply, in
// whatever TCP state, as IPFilter's does (ipftest -Dv, the rule "age
// 30/7": after S, SA, A "state:4/2 60", 60 ticks; after S, SA 14) and the
// engine's. The kernel gave it its TCP state's timeout (established: 5
// days). Both programs: the one made for the set (the established path
// decides the clean packets of a flow) and the same without that path.
func TestAgedTCPState(t *testing.T) {
	h := newHarness(t)
	h.load("pass in proto tcp from any to any flags S keep state (age 30/7)\npass out proto tcp from any to any keep state\n")
	s := currentSpec(t, h.d)
	for _, est := range []bool{true, false} {
		pp := progsWithEst(t, h.d, s, est)
		if _, err := h.d.FlushStates(nil); err != nil {
			t.Fatal(err)
		}
		in := func(fl uint8, seq, ack uint32, n int) testPkt {
			return testPkt{src: "10.7.0.1", dst: "10.7.0.2", proto: 6, sport: 1000, dport: 80, flags: fl, seq: seq, ack: ack, payload: n}
		}
		out := func(fl uint8, seq, ack uint32, n int) testPkt {
			return testPkt{src: "10.7.0.2", dst: "10.7.0.1", proto: 6, sport: 80, dport: 1000, flags: fl, seq: seq, ack: ack, payload: n}
		}
		for i, step := range []struct {
			out  bool
			p    testPkt
			want time.Duration
		}{
			{false, in(synF, 1000, 0, 0), 30 * time.Second},
			{true, out(synF|ackF, 5000, 1001, 0), 7 * time.Second},
			{false, in(ackF, 1001, 5001, 0), 30 * time.Second},
			{true, out(ackF|pshF, 5001, 1001, 10), 7 * time.Second},
			{false, in(ackF|pshF, 1001, 5011, 10), 30 * time.Second},
			{true, out(ackF, 5011, 1011, 0), 7 * time.Second},
		} {
			prog := pp.in
			if step.out {
				prog = pp.out
			}
			frame := step.p.build()
			ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)})
			if err != nil {
				t.Fatal(err)
			}
			if ret != tcNext {
				t.Fatalf("est %v, packet %d: %s, want pass", est, i+1, verdictName(ret))
			}
			sts, err := h.d.States()
			if err != nil {
				t.Fatal(err)
			}
			if len(sts) != 1 {
				t.Fatalf("est %v, packet %d: %d entries, want 1", est, i+1, len(sts))
			}
			if got := sts[0].TTL; (got - step.want).Abs() > 2*time.Second {
				t.Errorf("est %v, packet %d (TCP states %v): entry lives %v, want the rule's %v",
					est, i+1, sts[0].TCPState, got.Round(time.Second), step.want)
			}
		}
		// the last packet was a reply: past 7 s the entry is gone
		if err := h.d.AdvanceClock(8 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := h.d.Sweep(); err != nil {
			t.Fatal(err)
		}
		if c := checkCount(t, h.d, "aged out"); c != 0 {
			t.Errorf("est %v: %d entries 8 s after the last reply, want none", est, c)
		}
	}
}

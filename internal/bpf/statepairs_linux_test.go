package bpf

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// onOneCPU runs f with the calling goroutine on one OS thread bound to one
// CPU, so per-CPU datapath state (the state lookup's order hint) carries
// from one test_run to the next.
func onOneCPU(t *testing.T, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !old.IsSet(cpu) {
		cpu++
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &old)
	f()
}

// TestStateLookupOrder: after a reply hit the lookup tries the reverse key
// first (one hash lookup for replies), which must never change the entry
// a packet finds: once a flow has entries both ways (STATE_PAIRS), the
// forward one comes first again, as in IPFilter's table.
func TestStateLookupOrder(t *testing.T) {
	h := newHarness(t)
	h.load("pass out quick proto udp all keep state\npass in quick proto udp all keep state\n")
	pairs := func() int64 {
		var n int64
		if err := h.d.objs.StateCount.Lookup(uint32(statePairs), &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fwd := testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 1000, dport: 53}
	reply := testPkt{src: "10.0.0.2", dst: "10.0.0.1", proto: 17, sport: 53, dport: 1000}
	withOpts := reply
	withOpts.ipOpts = []byte{1, 1, 1, 0}
	var outState, inState *State
	onOneCPU(t, func() {
		h.expect(true, fwd, "pass")    // entry X, 10.0.0.1 -> 10.0.0.2
		h.expect(false, reply, "pass") // a reply hit: the hint is now "reverse first"
		h.expect(false, reply, "pass")
		if n := pairs(); n != 0 {
			t.Fatalf("one entry per flow: %d pairs counted", n)
		}
		// a reply with options is not X's (its first reply had none): the
		// inbound rule makes entry Y the other way round
		h.expect(false, withOpts, "pass")
		if n := pairs(); n != 1 {
			t.Fatalf("entries both ways: %d pairs counted, want 1", n)
		}
		// forward first: Y is found (and refuses the option-less packet),
		// not X the hint would have found
		h.expect(false, reply, "pass")
		states, err := h.d.States()
		if err != nil {
			t.Fatal(err)
		}
		for i := range states {
			switch states[i].Src.String() {
			case "10.0.0.1":
				outState = &states[i]
			case "10.0.0.2":
				inState = &states[i]
			}
		}
	})
	if outState == nil || inState == nil {
		t.Fatalf("want entries both ways, got out %v in %v", outState, inState)
	}
	// X's inbound replies ([rev*2+out] = 2): the two before Y was made
	if got := outState.Pkts[2]; got != 2 {
		t.Errorf("entry 10.0.0.1 -> 10.0.0.2: %d inbound replies, want 2 (the last packet must find the forward entry first)", got)
	}
	// a full flush forgets the pairs
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	if n := pairs(); n != 0 {
		t.Errorf("after a full flush: %d pairs counted", n)
	}
}

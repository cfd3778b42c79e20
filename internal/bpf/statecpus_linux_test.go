package bpf

import (
	"runtime"
	"testing"
)

// TestStateCountsAcrossCPUs: a flow's packets counted on two CPUs land in
// two counter stripes of its entry (filter.h: state_cnt), and what
// ipfstat -s shows is their sum; the table's hits and misses, counted by
// direction, add up too.
func TestStateCountsAcrossCPUs(t *testing.T) {
	h := newHarness(t)
	h.load("pass out quick proto udp all keep state\nblock in all\n")
	fwd := testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 1000, dport: 53}
	reply := testPkt{src: "10.0.0.2", dst: "10.0.0.1", proto: 17, sport: 53, dport: 1000}
	cpus := [2]int{0, runtime.NumCPU() - 1}
	on := func(cpu int, n int, out bool, p testPkt) {
		undo, err := onCPU(cpu)
		if err != nil {
			t.Fatal(err)
		}
		defer undo()
		for range n {
			h.expect(out, p, "pass")
		}
	}
	on(cpus[0], 1, true, fwd) // creates the entry: a miss
	on(cpus[0], 3, false, reply)
	on(cpus[1], 4, false, reply)
	on(cpus[1], 2, true, fwd)
	// most of them went through the flow's st_dm slot (est11), which
	// counts them until the sweeper gives them to the element, in the
	// stripe of the sweeper's CPU
	func() {
		undo, err := onCPU(cpus[1])
		if err != nil {
			t.Fatal(err)
		}
		defer undo()
		if err := h.d.Sweep(); err != nil {
			t.Fatal(err)
		}
	}()
	states, err := h.d.States()
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 {
		t.Fatalf("want one entry, got %+v", states)
	}
	plen := uint64(len(reply.build()) - 14)
	s := states[0]
	// [rev*2 + out]: the flow's own way out, its replies in
	if s.Pkts != [4]uint64{0, 3, 7, 0} || s.Bytes != [4]uint64{0, 3 * plen, 7 * plen, 0} {
		t.Errorf("counts pkts %v bytes %v, want pkts [0 3 7 0] bytes [0 %d %d 0]", s.Pkts, s.Bytes, 3*plen, 7*plen)
	}
	var (
		v       filterStateEntry
		stripes int
	)
	if err := h.d.objs.States.Lookup(statesKeyOf(t, h), &v); err != nil {
		t.Fatal(err)
	}
	for i := range v.Cnt {
		if v.Cnt[i] != (filterStateCnt{}) {
			stripes++
		}
	}
	if want := min(2, len(map[int]bool{cpus[0] % stateStripes: true, cpus[1] % stateStripes: true})); stripes != want {
		t.Errorf("%d stripes written, want %d (CPUs %v)", stripes, want, cpus)
	}
	st, err := h.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.StateHits != 9 || st.StateMiss != 1 {
		t.Errorf("hits %d misses %d, want 9 and 1", st.StateHits, st.StateMiss)
	}
	if st.In.StateKept != 7 || st.Out.StateKept != 2 {
		t.Errorf("kept in %d out %d, want 7 and 2", st.In.StateKept, st.Out.StateKept)
	}
}

// statesKeyOf returns the one key of the state table.
func statesKeyOf(t *testing.T, h *harness) filterStateKey {
	t.Helper()
	var (
		k, got filterStateKey
		v      filterStateEntry
		n      int
	)
	it := h.d.objs.States.Iterate()
	for it.Next(&k, &v) {
		got = k
		n++
	}
	if err := it.Err(); err != nil || n != 1 {
		t.Fatalf("want one key, got %d (%v)", n, err)
	}
	return got
}

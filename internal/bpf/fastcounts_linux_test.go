package bpf

import (
	"fmt"
	"testing"
)

// TestFastCounts: a constant list's rules count in the CPU's statistics
// block (statblock.fast, by slot), which user space adds to hot_counts.
// The counts must read as the rules' (ipfstat -hio), follow each set
// through ipf -s, survive ipf -Z (the statistics share the block), and be
// cleared by ipf -z (one rule, or a set) and by loading the slot again,
// with the packets after that counted from zero. Every packet here must
// be decided on the constant lists (the scratch area untouched).
func TestFastCounts(t *testing.T) {
	h := newHarness(t)
	d := h.d
	clearScratch, scratchUsed := scratchProbe(t, d)
	const a = "block in quick proto tcp from any to any port = 23\npass in proto tcp from any to any\n"
	const b = "pass in quick proto tcp from any to any port = 23\n"
	load := func(text string, s Set) {
		t.Helper()
		if err := d.LoadRules(compileText(t, text), s); err != nil {
			t.Fatal(err)
		}
	}
	telnet := tcp4("10.0.0.1", "10.0.0.2", 40000, 23, synF).build()
	web := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF).build()
	run := func(frame []byte, n int) {
		t.Helper()
		if s := currentSpec(t, d); s.fast&1 == 0 {
			t.Fatalf("the active set is not on constant lists: %#b", s.fast)
		}
		for i := 0; i < n; i++ {
			clearScratch()
			if _, _, err := d.Run(false, frame); err != nil {
				t.Fatal(err)
			}
			if scratchUsed() {
				t.Fatalf("a packet went the whole way")
			}
		}
	}
	hits := func(s Set, want ...uint64) {
		t.Helper()
		ri, err := d.Rules(s)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, r := range ri {
			got = append(got, r.Hits)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("hits of %v: %v, want %v", s, got, want)
		}
	}
	load(a, Active)
	load(b, Inactive)
	run(telnet, 3)
	run(web, 2)
	hits(Active, 3, 2)
	hits(Inactive, 0)
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.In.Pkts != 5 || st.In.Pass != 2 || st.In.Block != 3 || st.StateMiss != 5 || st.In.Nomatch != 0 {
		t.Errorf("statistics: %+v (misses %d), want 5 packets, 2 passed, 3 blocked, 5 misses", st.In, st.StateMiss)
	}
	// ipf -Z: the statistics, not the rules' counts in the same blocks
	if err := d.ZeroStats(); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Stats(); err != nil || st.In.Pkts != 0 || st.In.Pass != 0 || st.StateMiss != 0 {
		t.Errorf("statistics after ZeroStats: %+v, %v", st.In, err)
	}
	hits(Active, 3, 2)
	// ipf -z of one rule: its count, the other's stays
	if h, _, err := d.ZeroRule(Active, 0); err != nil || h != 3 {
		t.Errorf("ZeroRule: %d hits, %v; want 3", h, err)
	}
	hits(Active, 0, 2)
	run(telnet, 1)
	hits(Active, 1, 2)
	// ipf -s: each set keeps its own counts
	if _, err := d.Swap(); err != nil {
		t.Fatal(err)
	}
	run(telnet, 4)
	hits(Active, 4)
	hits(Inactive, 1, 2)
	if _, err := d.Swap(); err != nil {
		t.Fatal(err)
	}
	hits(Active, 1, 2)
	hits(Inactive, 4)
	// loading a slot again starts its counts from zero
	load(a, Inactive)
	hits(Inactive, 0, 0)
	hits(Active, 1, 2)
	if _, err := d.Swap(); err != nil {
		t.Fatal(err)
	}
	run(web, 2)
	hits(Active, 0, 2)
	// ipf -z of a set
	if err := d.ZeroRuleCounters(Active); err != nil {
		t.Fatal(err)
	}
	hits(Active, 0, 0)
	run(telnet, 1)
	hits(Active, 1, 0)
}

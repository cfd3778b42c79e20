//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"strconv"
	"testing"
	"time"
)

// TestPrivilegedSweeper: a session whose timer the kernel would not
// allocate (bpf_timer_init's kmalloc_nolock, which fails in bursts on
// Linux 6.18) is made all the same, its packets translated, and ends by
// the sweeper: given a timer on a later sweep when the allocation works
// again, or ended by the sweeper itself once its lifetime is over when it
// still does not. Before nat19 such a session was refused and its first
// packet dropped (nat18), which dropped every new flow for a second at a
// time (TestPrivilegedNATPortmapClash in CI). The failures are made by the
// sweeper's fault switch (swfPackets: the packets' allocations fail;
// swfAll: the sweeper's too).
func TestPrivilegedSweeper(t *testing.T) {
	const (
		n     = 40
		rules = "map nic3 10.0.1.0/24 -> 1.1.2.1/32 portmap udp 20000:60000 age 1/1\n"
		// a hang detector, not a timing assertion: the sessions'
		// lifetime is 1 tick
		bound = 20 * time.Second
	)
	h := newHarness(t)
	defer h.d.SetIPFTestMode(true)
	defer h.d.setTimerFault(0)
	sweeper := func() SweeperStats {
		t.Helper()
		s, err := h.d.Sweeper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// make sends the first packet of n UDP flows (from base on): each
	// must be translated, as any new session's
	make := func(base int) {
		t.Helper()
		if err := h.do(func() error {
			for i := range n {
				p := udp4("10.0.1."+strconv.Itoa(1+(base+i)%200), "2.2.2.2", uint16(1000+base+i), 53)
				ret, got, err := h.run(true, "nic3", p)
				if err != nil {
					return err
				}
				if ret != VerdictNext || len(got) < 20 || got[12] != 1 || got[15] != 1 {
					t.Errorf("flow %d: verdict %d, source %v: not translated", base+i, ret, got[12:16])
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitEmpty := func(when string) time.Duration {
		t.Helper()
		start := time.Now()
		for mapLen(t, h.d.objs.Sessions) != 0 && time.Since(start) < bound {
			time.Sleep(50 * time.Millisecond)
		}
		assertEmpty(t, h, when)
		return time.Since(start)
	}
	if err := h.do(func() error { return h.loadAging(rules) }); err != nil {
		t.Fatal(err)
	}

	// sweepOut sweeps until the sweeper has no session left without a
	// timer (its own timer sweeps too, every tick)
	sweepOut := func() SweeperStats {
		t.Helper()
		start := time.Now()
		for sweeper().Untimed != 0 && time.Since(start) < bound {
			if err := h.d.Sweep(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return sweeper()
	}
	stats := func() Stats {
		t.Helper()
		st, err := h.d.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// 1. the packets' allocations fail, the sweeper's work (but for the
	// kernel's own failures, which a later sweep gets past)
	if err := h.d.setTimerFault(swfPackets); err != nil {
		t.Fatal(err)
	}
	make(0)
	if st := stats(); st.NoTimer != n || st.Side[dirOut].Added != n || st.Side[dirOut].InsertFail != 0 {
		t.Fatalf("%d flows made without timers: NoTimer %d, Added %d, InsertFail %d", n, st.NoTimer, st.Side[dirOut].Added, st.Side[dirOut].InsertFail)
	}
	s1 := sweepOut()
	if s1.Untimed != 0 || s1.Armed+s1.Ended != n || s1.Walks == 0 {
		t.Fatalf("after sweeping: %+v, want the %d sessions armed or ended", s1, n)
	}
	took := waitEmpty("the sweeper's timers")
	t.Logf("sweeper %+v; the sessions ended %v later", s1, took)

	// 2. every allocation fails: the sweeper ends the sessions itself,
	// each once its lifetime is over
	if err := h.d.setTimerFault(swfAll); err != nil {
		t.Fatal(err)
	}
	made := time.Now()
	make(n)
	took = waitEmpty("ended by the sweeper")
	s2 := sweeper()
	t.Logf("sessions without timers ended by the sweeper %v after they were made: %+v", time.Since(made), s2)
	if s2.Ended-s1.Ended != n || s2.Armed != s1.Armed || s2.Untimed != 0 {
		t.Errorf("sweeper: %+v, want %d more ended, none armed", s2, n)
	}
	if st := stats(); st.Expired != 2*n || st.NoTimer != 2*n {
		t.Errorf("Expired %d, NoTimer %d: want %d each", st.Expired, st.NoTimer, 2*n)
	}

	// 3. timers allocated: the sweeper does not walk (unless the kernel
	// refused one of them)
	if err := h.d.setTimerFault(0); err != nil {
		t.Fatal(err)
	}
	walks := sweeper().Walks
	make(2 * n)
	if err := h.d.Sweep(); err != nil {
		t.Fatal(err)
	}
	if s, st := sweeper(), stats(); st.NoTimer == 2*n && s.Walks != walks {
		t.Errorf("with every timer allocated: %+v, want no walk (had %d)", s, walks)
	}
	waitEmpty("their own timers")
}

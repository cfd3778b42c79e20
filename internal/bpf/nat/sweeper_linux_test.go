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
		// lifetime (age 1/1) is about a second
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
	// open sends the first packet of n UDP flows (from base on): each
	// must be translated, as any new session's
	open := func(base int) {
		t.Helper()
		if err := h.do(func() error {
			for i := range n {
				p := udp4("10.0.1."+strconv.Itoa(1+(base+i)%200), "2.2.2.2", uint16(1000+base+i), 53)
				ret, got, err := h.run(true, "nic3", p)
				if err != nil {
					return err
				}
				if ret != VerdictNext || len(got) < 20 || got[12] != 1 || got[15] != 1 {
					t.Errorf("flow %d: verdict %d, %x: not translated", base+i, ret, got)
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

	// 1. sessions with their timers, then sessions whose allocations
	// fail in the packets' path: a sweep gives a timer to each of the
	// second (or ends it), and to none of the first (bpf_timer_init
	// answers -EBUSY for a timer that runs). The kernel's own failures
	// add to the second kind (NoTimer counts both).
	open(0)
	st := stats()
	real := st.NoTimer
	if err := h.d.setTimerFault(swfPackets); err != nil {
		t.Fatal(err)
	}
	open(n)
	if st = stats(); st.NoTimer != real+n || st.Side[dirOut].Added != 2*n || st.Side[dirOut].InsertFail != 0 {
		t.Fatalf("%d flows with timers (the kernel refused %d), %d without: NoTimer %d, Added %d, InsertFail %d",
			n, real, n, st.NoTimer, st.Side[dirOut].Added, st.Side[dirOut].InsertFail)
	}
	s1 := sweepOut()
	if s1.Untimed != 0 || s1.Armed+s1.Ended != st.NoTimer || s1.Walks == 0 {
		t.Fatalf("after sweeping: %+v, want the %d sessions without a timer armed or ended, and no other", s1, st.NoTimer)
	}
	took := waitEmpty("the sweeper's timers")
	t.Logf("sweeper %+v; the sessions ended %v later", s1, took)

	// 2. every allocation fails: the sweeper ends the sessions itself,
	// each once its lifetime is over
	if err := h.d.setTimerFault(swfAll); err != nil {
		t.Fatal(err)
	}
	made := time.Now()
	open(2 * n)
	waitEmpty("ended by the sweeper")
	s2 := sweeper()
	t.Logf("sessions without timers ended by the sweeper %v after they were made: %+v", time.Since(made), s2)
	if s2.Ended-s1.Ended != n || s2.Armed != s1.Armed || s2.Untimed != 0 {
		t.Errorf("sweeper: %+v, want %d more ended, none armed", s2, n)
	}
	if st2 := stats(); st2.Expired != 3*n || st2.NoTimer != st.NoTimer+n {
		t.Errorf("Expired %d, NoTimer %d: want %d and %d", st2.Expired, st2.NoTimer, 3*n, st.NoTimer+n)
	}

	// 3. timers allocated: the sweeper does not walk (unless the kernel
	// refused one of them)
	if err := h.d.setTimerFault(0); err != nil {
		t.Fatal(err)
	}
	walks := sweeper().Walks
	open(3 * n)
	if err := h.d.Sweep(); err != nil {
		t.Fatal(err)
	}
	if s, st3 := sweeper(), stats(); st3.NoTimer == st.NoTimer+n && s.Walks != walks {
		t.Errorf("with every timer allocated: %+v, want no walk (had %d)", s, walks)
	}
	waitEmpty("their own timers")
}

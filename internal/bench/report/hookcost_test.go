package report

import (
	"math"
	"strings"
	"testing"

	"sluice/internal/bench/result"
)

// TestHookCosts: the programs of one hook on one interface add their
// times for the same packets; the interfaces of a hook add packets too;
// statistics without interfaces (older results) are summed as before.
func TestHookCosts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ps      []result.ProgStat
		in, out float64
	}{
		{"one program a hook", []result.ProgStat{
			{Hook: "ingress", Link: "veth0", RunNs: 1000, RunCnt: 10},
			{Hook: "egress", Link: "veth0", RunNs: 3000, RunCnt: 20},
		}, 100, 150},
		{"filter and NAT on one interface", []result.ProgStat{
			{Hook: "ingress", Link: "veth0", Name: "filter", RunNs: 800, RunCnt: 10},
			{Hook: "ingress", Link: "veth0", Name: "nat", RunNs: 500, RunCnt: 10},
			{Hook: "egress", Link: "veth0", Name: "filter", RunNs: 900, RunCnt: 10},
			{Hook: "egress", Link: "veth0", Name: "nat", RunNs: 600, RunCnt: 9},
		}, 130, 150},
		{"the gateway's two interfaces", []result.ProgStat{
			{Hook: "ingress", Link: "veth0", RunNs: 1000, RunCnt: 10},
			{Hook: "ingress", Link: "veth1", RunNs: 3000, RunCnt: 10},
		}, 200, math.NaN()},
		{"older results, no interfaces", []result.ProgStat{
			{Hook: "ingress", RunNs: 1000, RunCnt: 10},
			{Hook: "ingress", RunNs: 3000, RunCnt: 10},
		}, 200, math.NaN()},
	} {
		per := hookCosts(tc.ps)
		for hook, want := range map[string]float64{"ingress": tc.in, "egress": tc.out} {
			p, ok := per[hook]
			if math.IsNaN(want) {
				if ok {
					t.Errorf("%s: %s has a cost %v, want none", tc.name, hook, p.NsPerRun())
				}
				continue
			}
			if !ok || p.NsPerRun() != want {
				t.Errorf("%s: %s %v (%v), want %v", tc.name, hook, p, ok, want)
			}
		}
	}
}

// TestOverFloor: a program's ratio to the floor is taken within each
// repetition, so a host that changes speed between repetitions does not
// widen it; repetitions without a floor figure do not count, and a run
// without a floor has no ratio.
func TestOverFloor(t *testing.T) {
	run := result.Run{Tests: []result.Test{{ID: "TCP_RR", Suite: "ipf"}},
		Configs: []result.Config{{Name: "none"}, {Name: "tcx-floor"}, {Name: "sluice-attach"}}}
	rep := func(cfg string, n int, ns uint64) result.Rep {
		return result.Rep{Config: cfg, Test: "TCP_RR", Rep: n, TransPerSec: 1000,
			BPF: []result.ProgStat{{Hook: "ingress", Link: "veth0", Name: cfg, RunNs: ns * 10, RunCnt: 10}}}
	}
	set := &result.Set{Run: run, Reps: []result.Rep{
		// the host's two speeds: the floor 100 or 180 ns, attach 1.5x it
		rep("tcx-floor", 1, 100), rep("sluice-attach", 1, 150),
		rep("tcx-floor", 2, 180), rep("sluice-attach", 2, 270),
		rep("tcx-floor", 3, 100), rep("sluice-attach", 3, 150),
		// a repetition whose floor failed is not paired
		{Config: "tcx-floor", Test: "TCP_RR", Rep: 4, Error: "boom"}, rep("sluice-attach", 4, 999),
	}}
	m := Build(set)
	costs := m.Suites[0].BPF["TCP_RR"]["sluice-attach"]
	if len(costs) != 1 {
		t.Fatalf("costs %+v", costs)
	}
	c := costs[0]
	if c.OverFloor.N != 3 || c.OverFloor.Min != 1.5 || c.OverFloor.Max != 1.5 {
		t.Errorf("attach over floor %+v, want 3 ratios of 1.5", c.OverFloor)
	}
	if c.NsPerPkt.Min != 150 || c.NsPerPkt.Max != 999 {
		t.Errorf("attach ns %+v", c.NsPerPkt)
	}
	if f := m.Suites[0].BPF["TCP_RR"]["tcx-floor"][0].OverFloor; f.N != 3 || f.Median != 1 {
		t.Errorf("floor over itself %+v", f)
	}
	set.Reps = []result.Rep{rep("sluice-attach", 1, 150)}
	if c := Build(set).Suites[0].BPF["TCP_RR"]["sluice-attach"][0]; c.OverFloor.N != 0 || ratioText(c.OverFloor) != "—" {
		t.Errorf("no floor: %+v", c.OverFloor)
	}
}

// TestProgsOfAHook: with NAT inside the filter's programs NAT's own stay
// attached and no packet reaches them; the report lists each program of
// a hook that has several, the unreached ones with 0 runs, and a hook
// whose programs ran nothing has no cost (not NaN).
func TestProgsOfAHook(t *testing.T) {
	run := result.Run{Tests: []result.Test{{ID: "TCP_RR", Suite: "ipf"}},
		Configs: []result.Config{{Name: "none"}, {Name: "inline"}, {Name: "alone"}}}
	rep := func(n int, ns uint64) []result.Rep {
		return []result.Rep{
			{Config: "inline", Test: "TCP_RR", Rep: n, TransPerSec: 1000, BPF: []result.ProgStat{
				{Hook: "ingress", Link: "veth0", Name: "sluice_ingress_", RunNs: ns * 10, RunCnt: 10},
				{Hook: "ingress", Link: "veth0", Name: "nat_in", RunCnt: 0},
				{Hook: "ingress", Link: "veth0", Name: "sluice_ingress", RunCnt: 0},
				{Hook: "egress", Link: "veth0", Name: "nat_out", RunCnt: 0},
			}},
			{Config: "alone", Test: "TCP_RR", Rep: n, TransPerSec: 1000, BPF: []result.ProgStat{
				{Hook: "ingress", Link: "veth0", Name: "sluice_ingress", RunNs: ns * 10, RunCnt: 10},
			}},
		}
	}
	set := &result.Set{Run: run, Reps: append(rep(1, 300), rep(2, 400)...)}
	m := Build(set)
	ps := m.Suites[0].Progs["TCP_RR"]["inline"]
	if len(ps) != 4 || ps[0].Runs != 10 || ps[0].NsPerRun.Median != 350 || ps[1].Runs != 0 || ps[1].NsPerRun.N != 0 {
		t.Fatalf("programs %+v", ps)
	}
	costs := m.Suites[0].BPF["TCP_RR"]["inline"]
	if len(costs) != 1 || costs[0].Hook != "ingress" || costs[0].NsPerPkt.Median != 350 {
		t.Errorf("hook costs %+v, want ingress only (egress ran nothing)", costs)
	}
	var out strings.Builder
	if err := WriteMarkdown(&out, m, Options{}); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{
		"| TCP_RR | inline | ingress | veth0 | sluice_ingress_ | 10 | 350.0 [300.0–400.0] |",
		"| TCP_RR | inline | ingress | veth0 | nat_in | 0 | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| TCP_RR | alone | ingress | veth0 |") {
		t.Errorf("a hook with one program is listed program by program:\n%s", md)
	}
}

package report

import (
	"math"
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

package run

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

func ids(ts []result.Test) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return strings.Join(out, ",")
}

// TestLinkProfiles: tests at a profile carry it in their ID and Link;
// the paper's message sizes follow the speed.
func TestLinkProfiles(t *testing.T) {
	for _, tc := range []struct {
		p    topo.Profile
		want string
	}{
		{topo.TenGigE, "TCP_STREAM 64K inbound @10GigE,TCP_MAERTS 64K outbound @10GigE,TCP_CRR 1/1 inbound @10GigE"},
		{topo.GigE, "TCP_STREAM 8K inbound @1GigE,TCP_STREAM 1K inbound @1GigE,TCP_MAERTS 8K outbound @1GigE,TCP_MAERTS 1K outbound @1GigE,TCP_CRR 1/1 inbound @1GigE"},
		{topo.Eth100, "TCP_STREAM 8K inbound @100BaseT,TCP_STREAM 1K inbound @100BaseT,TCP_MAERTS 8K outbound @100BaseT,TCP_MAERTS 1K outbound @100BaseT,TCP_CRR 1/1 inbound @100BaseT"},
		{topo.Veth, "TCP_STREAM 64K inbound,TCP_STREAM 8K inbound,TCP_STREAM 1K inbound,TCP_MAERTS 64K outbound,TCP_MAERTS 8K outbound,TCP_MAERTS 1K outbound,TCP_CRR 1/1 inbound"},
	} {
		got := IPFPaperTests(tc.p)
		if ids(got) != tc.want {
			t.Errorf("%s: got %s\nwant %s", tc.p.Name, ids(got), tc.want)
		}
		for _, x := range got {
			if want := map[bool]string{true: tc.p.Name, false: ""}[tc.p.Shaped()]; x.Link != want {
				t.Errorf("%s: Link %q, want %q", x.ID, x.Link, want)
			}
		}
	}
	// At is idempotent and reversible.
	x := At(At(IPFTests()[0], topo.GigE), topo.GigE)
	if x.ID != "TCP_STREAM 64K inbound @1GigE" {
		t.Errorf("At twice: %q", x.ID)
	}
	if y := At(x, topo.Veth); y.ID != "TCP_STREAM 64K inbound" || y.Link != "" {
		t.Errorf("back to veth: %+v", y)
	}
	// --tests picks a profile with "@PROFILE".
	got, err := SelectTests(AllTests(), "@100BaseT")
	if err != nil || len(got) == 0 {
		t.Fatalf("@100BaseT: %v", err)
	}
	for _, g := range got {
		if g.Link != "100BaseT" {
			t.Errorf("@100BaseT selected %s", g.ID)
		}
	}
	// Every test ID is unique across all profiles.
	seen := map[string]bool{}
	for _, a := range AllTests() {
		if seen[a.ID] {
			t.Errorf("duplicate test %s", a.ID)
		}
		seen[a.ID] = true
	}
}

// TestPaperPreset: HP's matrix, both papers' link speeds, the four
// configurations of each family and the floor.
func TestPaperPreset(t *testing.T) {
	p := Paper()
	links := map[string]map[string]int{}
	for _, x := range p.Tests {
		if links[x.Suite] == nil {
			links[x.Suite] = map[string]int{}
		}
		links[x.Suite][x.Link]++
	}
	want := map[string]map[string]int{"ipf": {"10GigE": 3, "1GigE": 5}, "qos": {"100BaseT": 7, "1GigE": 7}}
	if !cmp.Equal(links, want) {
		t.Errorf("tests per suite and link %v, want %v", links, want)
	}
	for _, c := range []string{"none", "tcx-floor", "sluice-attach", "sluice-stateless", "sluice-stateful", "nft-attach", "nft-stateless", "nft-stateful", "sluice-qos", "nft-dscp"} {
		if !strings.Contains(","+p.Configs+",", ","+c+",") {
			t.Errorf("--paper lacks %s", c)
		}
	}
	if p.Duration != 10*time.Second || p.Reps < 3 {
		t.Errorf("--paper: %d × %v", p.Reps, p.Duration)
	}
	q, err := PresetAt("quick", []topo.Profile{topo.GigE})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range q.Tests {
		if x.Link != "1GigE" {
			t.Errorf("quick at 1GigE has %s", x.ID)
		}
	}
	if _, err := PresetAt("slow", nil); err == nil {
		t.Error("unknown preset accepted")
	}
}

// TestQoSExtra: the IPQoS paper's further tests are outbound from the
// SUT, and the fragment test's datagrams exceed the MTU.
func TestQoSExtra(t *testing.T) {
	want := "UDP_STREAM m=1024 outbound,UDP_STREAM m=4000 outbound,TCP_RR 1/1 outbound,UDP_RR 1/1 outbound"
	if got := ids(QoSExtraTests()); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for _, x := range QoSExtraTests() {
		if x.Suite != config.SuiteQoS || x.ClientHost() != result.SUT {
			t.Errorf("%s: %+v", x.ID, x)
		}
	}
	if FragSize <= 1500 {
		t.Errorf("FragSize %d does not fragment", FragSize)
	}
}

func TestByLink(t *testing.T) {
	ts := append(IPFPaperTests(topo.TenGigE), IPFPaperTests(topo.GigE)...)
	ts = append(ts, At(QoSTests([]int{32})[0], topo.TenGigE))
	g := ByLink(ts)
	if len(g) != 2 || len(g[0]) != 4 || len(g[1]) != 5 || g[0][3].ID != "TCP_STREAM m=32 outbound @10GigE" {
		t.Errorf("groups %v", g)
	}
}

func TestProgDelta(t *testing.T) {
	before := []result.ProgStat{{Hook: "ingress", ID: 1, RunNs: 100, RunCnt: 10}, {Hook: "egress", ID: 2, RunNs: 50, RunCnt: 5}}
	after := []result.ProgStat{{Hook: "ingress", ID: 1, RunNs: 1100, RunCnt: 20}, {Hook: "egress", ID: 2, RunNs: 50, RunCnt: 5},
		{Hook: "egress", ID: 3, RunNs: 70, RunCnt: 7}}
	// the egress program that ran nothing stays, with zero counts
	want := []result.ProgStat{{Hook: "ingress", ID: 1, RunNs: 1000, RunCnt: 10}, {Hook: "egress", ID: 2},
		{Hook: "egress", ID: 3, RunNs: 70, RunCnt: 7}}
	if got := ProgDelta(before, after); !cmp.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := want[0].NsPerRun(); got != 100 {
		t.Errorf("ns/run %v", got)
	}
}

func TestParseKeyval(t *testing.T) {
	m, err := ParseKeyval([]byte("THROUGHPUT=12898.90\nTHROUGHPUT_UNITS=Trans/s\nLOCAL_CPU_UTIL=100.00\nREMOTE_CPU_UTIL=49.39\nLOCAL_SD=155.052\nREMOTE_SD=76.5\nELAPSED_TIME=1.00\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.TransPerSec != 12898.90 || m.ThroughputMbps != 0 || m.LocalCPU != 100 || m.RemoteSD != 76.5 || m.Elapsed != time.Second {
		t.Errorf("%+v", m)
	}
	m, err = ParseKeyval([]byte("THROUGHPUT=935.87\nTHROUGHPUT_UNITS=10^6bits/s\nLOCAL_CPU_UTIL=1\nREMOTE_CPU_UTIL=1\nLOCAL_SD=3\nREMOTE_SD=3\nELAPSED_TIME=2\n"))
	if err != nil || m.ThroughputMbps != 935.87 {
		t.Errorf("%+v %v", m, err)
	}
	for _, bad := range []string{"", "THROUGHPUT=x\n", "THROUGHPUT=1\nTHROUGHPUT_UNITS=KBytes/s\nLOCAL_CPU_UTIL=1\nREMOTE_CPU_UTIL=1\nLOCAL_SD=3\nREMOTE_SD=3\nELAPSED_TIME=2\n"} {
		if _, err := ParseKeyval([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

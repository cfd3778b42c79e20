package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedianAndSpread(t *testing.T) {
	for _, tc := range []struct {
		xs             []float64
		median, spread float64
	}{
		{nil, 0, 0},
		{[]float64{3}, 3, 0},
		{[]float64{5, 1, 3}, 3, 50 * 4 / 3.0},
		{[]float64{4, 1, 3, 2}, 2.5, 50 * 3 / 2.5},
	} {
		if got := median(tc.xs); got != tc.median {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.median)
		}
		if got := spread(tc.xs); math.Abs(got-tc.spread) > 1e-9 {
			t.Errorf("spread(%v) = %v, want %v", tc.xs, got, tc.spread)
		}
	}
}

func TestCPUPerUnit(t *testing.T) {
	r := Run{ClientCPU: 1.5, ServerCPU: 0.5, Amount: 1e6}
	if got := r.CPUPerUnit(); got != 2 {
		t.Errorf("got %v µs per unit, want 2", got)
	}
	if (Run{ClientCPU: 1}).CPUPerUnit() != 0 {
		t.Error("no units must give 0, not Inf")
	}
}

// TestReportFromRaw re-makes the table from raw results, as -report does:
// medians per pairing, per-repetition ratios to C→C with their interval,
// and the verdict on the 5 % target.
func TestReportFromRaw(t *testing.T) {
	var runs []Run
	for rep, cpu := range []float64{10, 12, 11} {
		runs = append(runs,
			Run{Test: "TCP_RR", Pair: "CC", Rep: rep, Throughput: 100, Units: "Trans/s", LocalSD: 30, Amount: 1e6, ClientCPU: cpu / 2, ServerCPU: cpu / 2},
			Run{Test: "TCP_RR", Pair: "GG", Rep: rep, Throughput: 95, Units: "Trans/s", LocalSD: 33, Amount: 1e6, ClientCPU: cpu * 0.55, ServerCPU: cpu * 0.55},
			// Go→C a little cheaper than C→C in every repetition.
			Run{Test: "TCP_RR", Pair: "GC", Rep: rep, Throughput: 100, Units: "Trans/s", LocalSD: 30, Amount: 1e6, ClientCPU: cpu * (0.49 - 0.01*float64(rep)), ServerCPU: cpu / 2})
	}
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.jsonl")
	var b strings.Builder
	b.WriteString(`{"Meta":{"Reps":3,"Length":5,"LoadStart":"1.00 1.00 1.00","LoadEnd":"2.00 1.50 1.20","Kernel":"6.x","Pin":"split"}}` + "\n")
	for _, r := range runs {
		b.WriteString(mustJSON(t, Record{Run: &r}) + "\n")
	}
	if err := os.WriteFile(raw, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := run([]string{"-report", raw}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := out.String()
	for _, want := range []string{
		"load average (1/5/15 min) 1.00 1.00 1.00 at the start, 2.00 1.50 1.20 at the end",
		"Every client pinned to CPU 0, every server to CPU 1",
		"| TCP_RR | C→C | 11.000 | 9% | 1.000× [1.000, 1.000] | – | 30.000 | 1.00× | 100.00 Trans/s | 1.000× [1.000, 1.000] |",
		"| TCP_RR | Go→Go | 12.100 | 9% | 1.100× [1.100, 1.100] | dearer | 33.000 | 1.10× | 95.00 Trans/s | 0.950× [0.950, 0.950] |",
		// Ratios 0.99, 0.98, 0.97: the interval spans them, all below 1.05.
		"| TCP_RR | Go→C | 10.670 | 9% | 0.980× [0.970, 0.990] | shown | 30.000 | 1.00× | 100.00 Trans/s | 1.000× [1.000, 1.000] |",
		"Go ≤ C×1.05 shown for 1 of 2 cells. Not shown: TCP_RR Go→Go (dearer).",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// TestPairedRatio checks the ratio and its interval against what the
// bootstrap distribution must give: with three distinct ratios a < b < c
// a resample's median is a with probability 7/27, c with 7/27 and b with
// 13/27, so the 2.5th and 97.5th percentiles are a and c.
func TestPairedRatio(t *testing.T) {
	base := map[int]float64{0: 10, 1: 20, 2: 40, 3: 50}
	x := map[int]float64{0: 9.5, 1: 22, 2: 40, 9: 1} // rep 3 has no x, rep 9 no base: both ignored
	med, lo, hi := pairedRatio(x, base)
	if med != 1 || lo != 0.95 || hi != 1.1 {
		t.Errorf("pairedRatio = %v [%v, %v], want 1 [0.95, 1.1]", med, lo, hi)
	}
	// Map order must not change the interval (the seed comes from the
	// sorted ratios).
	for range 20 {
		if m2, lo2, hi2 := pairedRatio(x, base); m2 != med || lo2 != lo || hi2 != hi {
			t.Fatalf("second call gave %v [%v, %v]", m2, lo2, hi2)
		}
	}
	// Many noisy repetitions: the interval holds the median and is
	// narrower than the spread of the ratios.
	x, base = map[int]float64{}, map[int]float64{}
	for i := range 25 {
		base[i] = 100
		x[i] = 100 * (1 + 0.02*float64(i%5-2)) // ratios 0.96 … 1.04
	}
	med, lo, hi = pairedRatio(x, base)
	if !(lo <= med && med <= hi) || lo < 0.96 || hi > 1.04 || hi-lo >= 0.08 {
		t.Errorf("pairedRatio = %v [%v, %v]: want the median inside an interval within [0.96, 1.04]", med, lo, hi)
	}
	if v := verdict(lo, hi); v != "shown" {
		t.Errorf("verdict(%v, %v) = %q, want shown", lo, hi, v)
	}
	if _, lo, hi := pairedRatio(map[int]float64{0: 1}, map[int]float64{0: 1}); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("one repetition gave an interval [%v, %v]", lo, hi)
	}
}

func TestVerdict(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{0.9, 1.0, "shown"},
		{0.9, 1.05, "shown"},
		{1.0, 1.06, "not shown"},
		{1.051, 1.2, "dearer"},
		{1.05, 1.2, "not shown"},
		{nan, nan, "–"},
	} {
		if got := verdict(tc.lo, tc.hi); got != tc.want {
			t.Errorf("verdict(%v, %v) = %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestFlags: bad modes and placements are refused before anything runs.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-mode", "fast"}, {"-pin", "left"}, {"-n", "-1"}, {"-pairs", "GX"}, {"-tests", "TCP_NOPE"}} {
		var out, errb strings.Builder
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

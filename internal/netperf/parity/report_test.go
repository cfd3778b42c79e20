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

// TestPlacement: under -pin auto request/response tests share CPU 0 and
// streams keep a CPU each; the fixed placements ignore the test.
func TestPlacement(t *testing.T) {
	rr, stream := allTests[4], allTests[0]
	if !rr.rr() || stream.rr() {
		t.Fatalf("%s rr=%v, %s rr=%v", rr.Name, rr.rr(), stream.Name, stream.rr())
	}
	for _, tc := range []struct {
		pin                 string
		t                   Test
		wantClient, wantSrv string
	}{
		{"auto", rr, "0", "0"},
		{"auto", stream, "0", "1"},
		{"split", rr, "0", "1"},
		{"same", stream, "0", "0"},
		{"", rr, "", ""},
	} {
		m := &measurer{pin: tc.pin}
		if c, s := m.placement(tc.t); c != tc.wantClient || s != tc.wantSrv {
			t.Errorf("-pin %q %s: client %q server %q, want %q %q", tc.pin, tc.t.Name, c, s, tc.wantClient, tc.wantSrv)
		}
	}
}

// TestWorkTable: counted runs give the system calls per unit and stay out
// of the CPU figures; timed runs give the context switches; UDP_STREAM's
// server is counted per KB it received.
func TestWorkTable(t *testing.T) {
	var runs []Run
	for rep := range 3 {
		runs = append(runs,
			Run{Test: "TCP_RR", Pair: "CC", Rep: rep, Throughput: 100, Units: "Trans/s", Amount: 1000, ClientCPU: 0.01, ServerCPU: 0.01,
				ClientVCSW: 500, ClientIVCSW: 10, ServerVCSW: 600, ServerIVCSW: 20},
			Run{Test: "TCP_RR", Pair: "GG", Rep: rep, Throughput: 100, Units: "Trans/s", Amount: 1000, ClientCPU: 0.01, ServerCPU: 0.01,
				ClientVCSW: 550 + int64(rep), ClientIVCSW: 30, ServerVCSW: 660, ServerIVCSW: 40})
	}
	runs = append(runs,
		// Counted runs: far dearer CPU, which must not reach the table.
		Run{Test: "TCP_RR", Pair: "CC", Rep: 3, Counted: true, Throughput: 1, Units: "Trans/s", Amount: 1000, ClientCPU: 9, ServerCPU: 9, ClientSyscalls: 2001, ServerSyscalls: 2000},
		Run{Test: "TCP_RR", Pair: "GG", Rep: 3, Counted: true, Throughput: 1, Units: "Trans/s", Amount: 1000, ClientCPU: 9, ServerCPU: 9, ClientSyscalls: 2101, ServerSyscalls: 2100},
		Run{Test: "UDP_STREAM 1K", Pair: "CC", Rep: 3, Counted: true, Units: "10^6bits/s", Amount: 1000, ServerAmount: 500, ClientSyscalls: 1000, ServerSyscalls: 500},
	)
	var out strings.Builder
	report(&out, Meta{Reps: 3, Counted: 1, Length: 2, Pin: "auto"}, runs)
	got := out.String()
	for _, want := range []string{
		"Request/response tests: client and server pinned to CPU 0",
		"| TCP_RR | C→C | 20.000 | 0% | 1.000× [1.000, 1.000] | – |",
		"| TCP_RR | Go→Go | 20.000 | 0% | 1.000× [1.000, 1.000] | shown |",
		"| TCP_RR | C→C | 2.001 | 2.000 | 1.00× | 0.5000 | 0.6000 | 1.00× | 0.0100 | 0.0200 |",
		// (2.101+2.1)/(2.001+2) = 1.05; (0.551+0.66)/1.1 = 1.10.
		"| TCP_RR | Go→Go | 2.101 | 2.100 | 1.05× | 0.5510 | 0.6600 | 1.10× | 0.0300 | 0.0400 |",
		"| UDP_STREAM 1K | C→C | 1.000 | 1.000 | 1.00× | – | – | – | – | – |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	// An older raw file (no counts at all) gets no work table.
	out.Reset()
	report(&out, Meta{Reps: 3}, []Run{{Test: "TCP_RR", Pair: "CC", Amount: 1000, ClientCPU: 0.01, ServerCPU: 0.01}})
	if strings.Contains(out.String(), "Work per unit") {
		t.Errorf("work table without counts:\n%s", out.String())
	}
}

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
// medians per pairing and ratios to C→C.
func TestReportFromRaw(t *testing.T) {
	var runs []Run
	for rep, cpu := range []float64{10, 12, 11} {
		runs = append(runs,
			Run{Test: "TCP_RR", Pair: "CC", Rep: rep, Throughput: 100, Units: "Trans/s", LocalSD: 30, Amount: 1e6, ClientCPU: cpu / 2, ServerCPU: cpu / 2},
			Run{Test: "TCP_RR", Pair: "GG", Rep: rep, Throughput: 95, Units: "Trans/s", LocalSD: 33, Amount: 1e6, ClientCPU: cpu * 0.55, ServerCPU: cpu * 0.55})
	}
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.jsonl")
	var b strings.Builder
	b.WriteString(`{"Meta":{"Reps":3,"Length":5,"LoadStart":"1.00 1.00 1.00","LoadEnd":"2.00 1.50 1.20","Kernel":"6.x"}}` + "\n")
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
		"| TCP_RR | C→C | 11.000 | 9% | 1.00× | 30.000 | 1.00× | 100.00 Trans/s | 1.00× |",
		"| TCP_RR | Go→Go | 12.100 | 9% | 1.10× | 33.000 | 1.10× | 95.00 Trans/s | 0.95× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
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

package stats

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want Summary
	}{
		{"odd", []float64{5, 1, 3}, Summary{N: 3, Median: 3, Min: 1, Max: 5, Mean: 3, StdDev: 2, CI95: 4.303 * 2 / math.Sqrt(3)}},
		{"even", []float64{4, 1, 3, 2}, Summary{N: 4, Median: 2.5, Min: 1, Max: 4, Mean: 2.5,
			StdDev: math.Sqrt(5.0 / 3), CI95: 3.182 * math.Sqrt(5.0/3) / 2}},
		{"nan ignored", []float64{math.NaN(), 7}, Summary{N: 1, Median: 7, Min: 7, Max: 7, Mean: 7, StdDev: math.NaN(), CI95: math.NaN()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.in)
			g := []float64{got.Median, got.Min, got.Max, got.Mean, got.StdDev, got.CI95}
			w := []float64{tc.want.Median, tc.want.Min, tc.want.Max, tc.want.Mean, tc.want.StdDev, tc.want.CI95}
			if got.N != tc.want.N {
				t.Errorf("N: got %d, want %d", got.N, tc.want.N)
			}
			for i := range g {
				if !(near(g[i], w[i]) || math.IsNaN(g[i]) && math.IsNaN(w[i])) {
					t.Errorf("field %d: got %v, want %v", i, g[i], w[i])
				}
			}
		})
	}
	if s := Summarize(nil); s.N != 0 || !math.IsNaN(s.Median) {
		t.Errorf("empty: got %+v", s)
	}
}

// TestMedianAgainstSort checks the median against a slow reference on
// random samples, and that the input is not reordered.
func TestMedianAgainstSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		n := 1 + r.IntN(20)
		xs := make([]float64, n)
		for j := range xs {
			xs[j] = r.NormFloat64()
		}
		orig := append([]float64(nil), xs...)
		got := Summarize(xs).Median
		sort.Float64s(orig)
		var want float64
		if n%2 == 1 {
			want = orig[n/2]
		} else {
			want = (orig[n/2-1] + orig[n/2]) / 2
		}
		if !near(got, want) {
			t.Fatalf("median of %v: got %v, want %v", xs, got, want)
		}
	}
	xs := []float64{3, 1, 2}
	Summarize(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("input reordered: %v", xs)
	}
}

func TestPctDiff(t *testing.T) {
	if got := PctDiff(90, 100); !near(got, -10) {
		t.Errorf("got %v, want -10", got)
	}
	if got := PctDiff(1, 0); !math.IsNaN(got) {
		t.Errorf("zero baseline: got %v, want NaN", got)
	}
	if got := PctDiff(math.NaN(), 1); !math.IsNaN(got) {
		t.Errorf("NaN value: got %v, want NaN", got)
	}
}

func TestT95(t *testing.T) {
	if !math.IsNaN(T95(0)) || T95(1) != 12.706 || T95(30) != 2.042 || T95(1000) != 1.96 {
		t.Errorf("T95 table edges wrong: %v %v %v %v", T95(0), T95(1), T95(30), T95(1000))
	}
	for df := 2; df < 200; df++ {
		if T95(df) > T95(df-1) {
			t.Errorf("T95 not decreasing at df=%d", df)
		}
	}
}

package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactDiffs is the slow reference: the whole bootstrap distribution of
// PctDiff(median(x*), median(b*)), every resample of each side
// enumerated (n^n of them, equally likely), sorted.
func exactDiffs(x, b []float64) []float64 {
	var xs, bs []float64
	for _, s := range []struct {
		in  []float64
		out *[]float64
	}{{x, &xs}, {b, &bs}} {
		n := len(s.in)
		idx := make([]int, n)
		for {
			v := make([]float64, n)
			for i, j := range idx {
				v[i] = s.in[j]
			}
			sortVals(v)
			if n%2 == 1 {
				*s.out = append(*s.out, v[n/2])
			} else {
				*s.out = append(*s.out, (v[n/2-1]+v[n/2])/2)
			}
			k := 0
			for k < n {
				idx[k]++
				if idx[k] < n {
					break
				}
				idx[k] = 0
				k++
			}
			if k == n {
				break
			}
		}
	}
	var d []float64
	for _, mx := range xs {
		for _, mb := range bs {
			d = append(d, 100*(mx-mb)/mb)
		}
	}
	slices.Sort(d)
	return d
}

// sortVals is an insertion sort: obviously correct, nothing shared with
// the code under test.
func sortVals(v []float64) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

// exactLo and exactHi bracket the q-quantile of the exact
// distribution: the order statistics just below and just above it.
func exactLo(d []float64, q float64) float64 {
	return d[int(math.Floor(q*float64(len(d)-1)))]
}

func exactHi(d []float64, q float64) float64 {
	return d[int(math.Ceil(q*float64(len(d)-1)))]
}

// TestDiffCIAgainstExact draws random small samples (2 to 4 values a
// side, where the whole bootstrap distribution can be enumerated) and
// checks that DiffCI's Monte Carlo interval lies where the exact one
// says: its ends between the exact 0.5th and 5th, and 95th and 99.5th
// percentiles. DiffCI is seeded from its data, so this is deterministic.
func TestDiffCIAgainstExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		nx, nb := 2+rng.IntN(3), 2+rng.IntN(3)
		x, b := make([]float64, nx), make([]float64, nb)
		scale := 1 + 0.3*rng.Float64()
		for i := range x {
			x[i] = scale * (100 + 20*rng.NormFloat64())
		}
		for i := range b {
			b[i] = 100 + 20*rng.NormFloat64()
		}
		got := DiffCI(x, b)
		d := exactDiffs(x, b)
		if !got.Valid() || got.Lo > got.Hi {
			t.Fatalf("trial %d: %v vs %v: interval %+v", trial, x, b, got)
		}
		if lo, hi := exactLo(d, 0.005), exactHi(d, 0.05); got.Lo < lo-1e-9 || got.Lo > hi+1e-9 {
			t.Errorf("trial %d: %v vs %v: Lo %g outside the exact [%g, %g]", trial, x, b, got.Lo, lo, hi)
		}
		if lo, hi := exactLo(d, 0.95), exactHi(d, 0.995); got.Hi < lo-1e-9 || got.Hi > hi+1e-9 {
			t.Errorf("trial %d: %v vs %v: Hi %g outside the exact [%g, %g]", trial, x, b, got.Hi, lo, hi)
		}
	}
}

// TestDiffCIProperties checks what must hold whatever the data: a
// sample against itself includes 0; scaling both samples changes
// nothing; the interval is NaN with fewer than two values a side.
func TestDiffCIProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 100 {
		n := 2 + rng.IntN(8)
		x := make([]float64, n)
		for i := range x {
			x[i] = 50 + 10*rng.NormFloat64()
		}
		if ci := DiffCI(x, x); !ci.Contains(0) {
			t.Errorf("trial %d: %v against itself: %+v excludes 0", trial, x, ci)
		}
		b := make([]float64, n)
		for i := range b {
			b[i] = 50 + 10*rng.NormFloat64()
		}
		ci := DiffCI(x, b)
		k := 1 + 9*rng.Float64()
		xs, bs := make([]float64, n), make([]float64, n)
		for i := range x {
			xs[i], bs[i] = k*x[i], k*b[i]
		}
		// The seed depends on the data, so compare with a tolerance
		// that a different resampling stream stays within: the
		// interval's own width.
		cs := DiffCI(xs, bs)
		if w := ci.Hi - ci.Lo; math.Abs(cs.Lo-ci.Lo) > w || math.Abs(cs.Hi-ci.Hi) > w {
			t.Errorf("trial %d: scaling by %g moved %+v to %+v", trial, k, ci, cs)
		}
	}
	for _, tc := range [][2][]float64{{{1}, {1, 2}}, {{1, 2}, {3}}, {{math.NaN(), 1}, {1, 2}}, {nil, nil}} {
		if ci := DiffCI(tc[0], tc[1]); ci.Valid() {
			t.Errorf("DiffCI(%v, %v) = %+v, want NaN", tc[0], tc[1], ci)
		}
	}
	// A large, consistent difference is not noise.
	if ci := DiffCI([]float64{80, 81, 79, 80}, []float64{100, 101, 99, 100}); ci.Contains(0) || ci.Hi > -15 || ci.Lo < -25 {
		t.Errorf("-20 %% shift: %+v", ci)
	}
}

// Package stats summarises repeated measurements: median with min–max
// (robust to the odd disturbed repetition, which is why the report leads
// with them), mean, standard deviation, a Student-t confidence interval
// of the mean, and a bootstrap confidence interval of the change of a
// median against a baseline (DiffCI), which is how the report tells a
// real difference from noise.
package stats

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// Summary describes a sample. For an empty sample N is 0 and every other
// field is NaN.
type Summary struct {
	N                int
	Median, Min, Max float64
	Mean, StdDev     float64
	// CI95 is the half-width of the 95 % confidence interval of the mean
	// (NaN for fewer than two values).
	CI95 float64
}

// Summarize computes the Summary of xs; NaN values are ignored.
func Summarize(xs []float64) Summary {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	nan := math.NaN()
	s := Summary{N: len(v), Median: nan, Min: nan, Max: nan, Mean: nan, StdDev: nan, CI95: nan}
	if len(v) == 0 {
		return s
	}
	slices.Sort(v)
	s.Min, s.Max = v[0], v[len(v)-1]
	if n := len(v); n%2 == 1 {
		s.Median = v[n/2]
	} else {
		s.Median = (v[n/2-1] + v[n/2]) / 2
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	s.Mean = sum / float64(len(v))
	if len(v) < 2 {
		return s
	}
	ss := 0.0
	for _, x := range v {
		ss += (x - s.Mean) * (x - s.Mean)
	}
	s.StdDev = math.Sqrt(ss / float64(len(v)-1))
	s.CI95 = T95(len(v)-1) * s.StdDev / math.Sqrt(float64(len(v)))
	return s
}

// t975 holds the 0.975 quantiles of Student's t for 1..30 degrees of
// freedom.
var t975 = [...]float64{
	12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
}

// T95 returns the two-sided 95 % Student-t critical value for df degrees
// of freedom (NaN for df < 1; the normal 1.96 beyond the table, where
// the two differ by less than 2 %).
func T95(df int) float64 {
	switch {
	case df < 1:
		return math.NaN()
	case df <= len(t975):
		return t975[df-1]
	case df <= 120:
		return 2.000 // within 1 % of the exact value from 31 to 120
	}
	return 1.960
}

// PctDiff returns 100·(x−base)/base: the change of x relative to the
// baseline, NaN when the baseline is zero or missing.
func PctDiff(x, base float64) float64 {
	if base == 0 || math.IsNaN(base) || math.IsNaN(x) {
		return math.NaN()
	}
	return 100 * (x - base) / base
}

// Interval is a confidence interval [Lo, Hi]; both are NaN when it
// cannot be computed (fewer than two values on a side).
type Interval struct{ Lo, Hi float64 }

// Valid reports whether the interval was computed.
func (i Interval) Valid() bool { return !math.IsNaN(i.Lo) && !math.IsNaN(i.Hi) }

// Contains reports whether v lies in the interval (inclusive).
func (i Interval) Contains(v float64) bool { return i.Valid() && i.Lo <= v && v <= i.Hi }

// BootstrapResamples is the number of resamples DiffCI draws.
const BootstrapResamples = 4000

// DiffCI returns the 95 % percentile-bootstrap confidence interval of
// PctDiff(median(xs), median(base)): both samples are resampled with
// replacement BootstrapResamples times, independently, and the interval
// is the 2.5th and 97.5th percentiles of the resampled differences. The
// random stream is seeded from the data, so the same results always give
// the same report. NaN values are ignored; with fewer than two values on
// a side the interval is NaN (one repetition says nothing about noise).
func DiffCI(xs, base []float64) Interval {
	x, b := finite(xs), finite(base)
	nan := Interval{math.NaN(), math.NaN()}
	if len(x) < 2 || len(b) < 2 {
		return nan
	}
	rng := newRand(x, b)
	d := make([]float64, 0, BootstrapResamples)
	bx, bb := make([]float64, len(x)), make([]float64, len(b))
	for range BootstrapResamples {
		for i := range bx {
			bx[i] = x[rng.IntN(len(x))]
		}
		for i := range bb {
			bb[i] = b[rng.IntN(len(b))]
		}
		v := PctDiff(medianInPlace(bx), medianInPlace(bb))
		if !math.IsNaN(v) {
			d = append(d, v)
		}
	}
	if len(d) == 0 {
		return nan
	}
	slices.Sort(d)
	return Interval{Lo: quantile(d, 0.025), Hi: quantile(d, 0.975)}
}

func finite(xs []float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out = append(out, x)
		}
	}
	return out
}

// newRand seeds a PCG from the bits of the data (order included).
func newRand(a, b []float64) *rand.Rand {
	h := fnv.New64a()
	var buf [8]byte
	for _, s := range [][]float64{a, {math.Inf(1)}, b} {
		for _, v := range s {
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v))
			h.Write(buf[:])
		}
	}
	seed := h.Sum64()
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// medianInPlace sorts v and returns its median.
func medianInPlace(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// quantile returns the q-quantile of sorted values, linearly
// interpolated between order statistics (type 7, R's default).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	h := q * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Package stats summarises repeated measurements: median with min–max
// (robust to the odd disturbed repetition, which is why the report leads
// with them), mean, standard deviation and a Student-t confidence
// interval of the mean.
package stats

import (
	"math"
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

package netperf

import (
	"math"
	"time"
)

// latencyHist records transaction latencies in 1 us buckets up to 100 ms
// (coarser beyond), so recording never allocates.
type latencyHist struct {
	fine     [100000]uint32
	over     uint64 // count beyond the fine range
	min, max time.Duration
	sum      time.Duration
	sumSq    float64 // of microseconds
	n        uint64
}

func newLatencyHist() *latencyHist { return &latencyHist{min: math.MaxInt64} }

func (h *latencyHist) add(d time.Duration) {
	us := d / time.Microsecond
	if us < time.Duration(len(h.fine)) {
		h.fine[us]++
	} else {
		h.over++
	}
	h.min = min(h.min, d)
	h.max = max(h.max, d)
	h.sum += d
	us64 := float64(d) / float64(time.Microsecond)
	h.sumSq += us64 * us64
	h.n++
}

func (h *latencyHist) percentile(p float64) float64 {
	if h.n == 0 {
		return 0
	}
	want := uint64(math.Ceil(p / 100 * float64(h.n)))
	var acc uint64
	for i, c := range h.fine {
		acc += uint64(c)
		if acc >= want {
			return float64(i)
		}
	}
	return float64(h.max / time.Microsecond)
}

func (h *latencyHist) fill(r *Result) {
	if h.n == 0 {
		return
	}
	r.MinLatency = float64(h.min / time.Microsecond)
	r.MaxLatency = float64(h.max / time.Microsecond)
	r.MeanLatency = float64(h.sum) / float64(h.n) / float64(time.Microsecond)
	r.P50Latency = h.percentile(50)
	r.P90Latency = h.percentile(90)
	r.P99Latency = h.percentile(99)
	if h.n > 1 {
		mean := r.MeanLatency
		v := (h.sumSq - float64(h.n)*mean*mean) / float64(h.n-1)
		r.StddevLatency = math.Sqrt(max(v, 0))
	}
}

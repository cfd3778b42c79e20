package netperf

import (
	"math"
	"time"
)

// Two-sided Student-t critical values by degrees of freedom (1..30).
var (
	t99 = [...]float64{63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
		3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845,
		2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750}
	t95 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
)

func tValue(level, df int) float64 {
	df = min(max(df, 1), 30)
	if level == 95 {
		return t95[df-1]
	}
	return t99[df-1]
}

// confSlack returns netperf's per-quantity result: width - 2·t·√(var/(n-1))/mean,
// where width is a fraction; >= 0 means the quantity is within the interval.
func confSlack(xs []float64, level int, width float64) float64 {
	n := len(xs)
	if n < 2 {
		return -1
	}
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	mean := sum / float64(n)
	if mean == 0 {
		return width
	}
	variance := math.Max(sq/float64(n)-mean*mean, 0)
	return width - 2*tValue(level, n-1)*math.Sqrt(variance/float64(n-1))/mean
}

func confParams(cfg *Config) (int, float64) {
	level := cfg.ConfLevel
	if level != 95 {
		level = 99
	}
	width := cfg.ConfWidth
	if width <= 0 {
		width = 5
	}
	return level, width / 100
}

// confidenceOf applies netperf's stopping rule to the iterations so far.
func confidenceOf(all []*Result, cfg *Config) Confidence {
	level, width := confParams(cfg)
	var tp, lc, rc []float64
	for _, r := range all {
		v := r.ThroughputMbps
		if r.TransPerSec > 0 || kinds[r.Test].rr {
			v = r.TransPerSec
		}
		tp = append(tp, v)
		lc = append(lc, r.LocalCPU)
		rc = append(rc, r.RemoteCPU)
	}
	c := Confidence{Iterations: len(all), Level: level, Width: width * 100}
	st := confSlack(tp, level, width)
	sl, sr := width, width
	if cfg.LocalCPU {
		sl = confSlack(lc, level, width)
	}
	if cfg.RemoteCPU {
		sr = confSlack(rc, level, width)
	}
	// Reported as the interval's width in percent of the mean.
	c.Throughput = 100 * (width - st)
	c.LocalCPU = 100 * (width - sl)
	c.RemoteCPU = 100 * (width - sr)
	c.Met = min(st, sl, sr) >= 0
	if cfg.ConfResultOnly {
		c.Met = st >= 0
	}
	return c
}

// averageResults reports the means of every iteration, as netperf does.
func averageResults(all []*Result, cfg *Config) *Result {
	last := *all[len(all)-1]
	n := float64(len(all))
	var out = last
	mean := func(f func(*Result) float64) float64 {
		var s float64
		for _, r := range all {
			s += f(r)
		}
		return s / n
	}
	out.ThroughputMbps = mean(func(r *Result) float64 { return r.ThroughputMbps })
	out.TransPerSec = mean(func(r *Result) float64 { return r.TransPerSec })
	out.SendThroughputMbps = mean(func(r *Result) float64 { return r.SendThroughputMbps })
	out.LocalCPU = mean(func(r *Result) float64 { return r.LocalCPU })
	out.RemoteCPU = mean(func(r *Result) float64 { return r.RemoteCPU })
	out.LocalSD = mean(func(r *Result) float64 { return r.LocalSD })
	out.RemoteSD = mean(func(r *Result) float64 { return r.RemoteSD })
	out.Elapsed = time.Duration(mean(func(r *Result) float64 { return float64(r.Elapsed) }))
	avgStats := func(get func(*Result) *CPUStats) CPUStats {
		s := *get(&last)
		s.Util = mean(func(r *Result) float64 { return get(r).Util })
		s.User = mean(func(r *Result) float64 { return get(r).User })
		s.System = mean(func(r *Result) float64 { return get(r).System })
		s.IOWait = mean(func(r *Result) float64 { return get(r).IOWait })
		s.IRQ = mean(func(r *Result) float64 { return get(r).IRQ })
		s.SoftIRQ = mean(func(r *Result) float64 { return get(r).SoftIRQ })
		return s
	}
	out.LocalCPUStats = avgStats(func(r *Result) *CPUStats { return &r.LocalCPUStats })
	out.RemoteCPUStats = avgStats(func(r *Result) *CPUStats { return &r.RemoteCPUStats })
	var bs, br, tr int64
	for _, r := range all {
		bs += r.BytesSent
		br += r.BytesRecv
		tr += r.Transactions
	}
	out.BytesSent, out.BytesRecv, out.Transactions = bs, br, tr
	c := confidenceOf(all, cfg)
	out.Confidence = &c
	return &out
}

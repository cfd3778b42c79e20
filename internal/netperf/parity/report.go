package main

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// pairOrder is the order of the table's rows within a test.
var pairOrder = []string{"CC", "GG", "GC", "CG"}

func pairLabel(p string) string {
	name := func(b byte) string {
		if b == 'G' {
			return "Go"
		}
		return "C"
	}
	return name(p[0]) + "→" + name(p[1])
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is the half-range of xs in percent of their median: how far the
// repetitions strayed.
func spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	m := median(xs)
	if m == 0 {
		return 0
	}
	return 50 * (hi - lo) / m
}

// target is the most a pairing's CPU per unit may cost against C→C.
const target = 1.05

// resamples is the number of bootstrap resamples of a ratio.
const resamples = 4000

// pairedRatio returns, for the repetitions present in both x and base
// (keyed by repetition), the median of the per-repetition ratios
// x/base and its 95 % percentile-bootstrap confidence interval. A ratio
// within one repetition compares runs taken seconds apart, so the
// machine's slower drifts cancel. The random stream is seeded from the
// data: the same runs always give the same interval. With fewer than two
// repetitions lo and hi are NaN.
func pairedRatio(x, base map[int]float64) (med, lo, hi float64) {
	var rs []float64
	for rep, b := range base {
		if v, ok := x[rep]; ok && b > 0 {
			rs = append(rs, v/b)
		}
	}
	sort.Float64s(rs)
	nan := math.NaN()
	if len(rs) == 0 {
		return nan, nan, nan
	}
	med = median(rs)
	if len(rs) < 2 {
		return med, nan, nan
	}
	h := fnv.New64a()
	for _, r := range rs {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(r))
		h.Write(b[:])
	}
	seed := h.Sum64()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	meds := make([]float64, resamples)
	s := make([]float64, len(rs))
	for i := range meds {
		for j := range s {
			s[j] = rs[rng.IntN(len(rs))]
		}
		meds[i] = median(s)
	}
	sort.Float64s(meds)
	return med, quantile(meds, 0.025), quantile(meds, 0.975)
}

// quantile is the q-quantile of sorted values, interpolated between order
// statistics (type 7).
func quantile(sorted []float64, q float64) float64 {
	h := q * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// verdict tells from a ratio's confidence interval whether the pairing
// is shown to cost at most target × C→C's.
func verdict(lo, hi float64) string {
	switch {
	case math.IsNaN(lo) || math.IsNaN(hi):
		return "–"
	case hi <= target:
		return "shown"
	case lo > target:
		return "dearer"
	}
	return "not shown"
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// report writes the side-by-side table: per test and pairing, the medians
// of combined process CPU per unit, of netperf's own (machine-wide) local
// service demand and of throughput; the CPU and throughput ratios to C→C
// (median of the per-repetition ratios, with their 95 % CI), and the
// verdict on the CPU target.
func report(w io.Writer, meta Meta, runs []Run) {
	type agg struct {
		cpu, sd, thr []float64
		cpuRep       map[int]float64
		thrRep       map[int]float64
		units        string
	}
	groups := map[key]*agg{}
	var tests []string
	seen := map[string]bool{}
	for _, r := range runs {
		if !seen[r.Test] {
			seen[r.Test] = true
			tests = append(tests, r.Test)
		}
		if r.Counted {
			continue // perf's tracepoint made its system calls dearer
		}
		k := key{r.Test, r.Pair}
		if groups[k] == nil {
			groups[k] = &agg{units: r.Units, cpuRep: map[int]float64{}, thrRep: map[int]float64{}}
		}
		g := groups[k]
		g.cpu = append(g.cpu, r.CPUPerUnit())
		g.sd = append(g.sd, r.LocalSD)
		g.thr = append(g.thr, r.Throughput)
		g.cpuRep[r.Rep] = r.CPUPerUnit()
		g.thrRep[r.Rep] = r.Throughput
	}
	fmt.Fprintf(w, "netperf Go vs C on loopback: %d repetitions of %d s, interleaved; medians.\n", meta.Reps, meta.Length)
	fmt.Fprintf(w, "Kernel %s; load average (1/5/15 min) %s at the start, %s at the end", meta.Kernel, meta.LoadStart, meta.LoadEnd)
	if !meta.Start.IsZero() && !meta.End.IsZero() {
		fmt.Fprintf(w, "; took %s", meta.End.Sub(meta.Start).Round(time.Second))
	}
	fmt.Fprintln(w, ".")
	switch meta.Pin {
	case "auto":
		fmt.Fprintf(w, "Request/response tests: client and server pinned to CPU 0 (a transaction is a direct switch between them; across CPUs each one wakes a halted CPU twice, which this VM charges tens of µs for). Streams: client on CPU 0, server on CPU 1. (taskset, whole process)\n")
	case "same":
		fmt.Fprintf(w, "Client and server pinned to CPU 0.\n")
	case "split":
		fmt.Fprintf(w, "Every client pinned to CPU 0, every server to CPU 1 (taskset, whole process).\n")
	default:
		fmt.Fprintf(w, "Not pinned: the scheduler placed the processes.\n")
	}
	if meta.RT {
		fmt.Fprintf(w, "Clients and servers ran SCHED_FIFO (chrt -f 10).\n")
	}
	fmt.Fprintf(w, "CPU/unit: client + server process CPU time (the kernel's accounting of the two processes) per KB (streams; UDP_STREAM: each side per KB it sent or received) or per transaction (RR), in µs;\n")
	fmt.Fprintf(w, "±: half-range of the repetitions in %% of the median. vs C→C: median of the per-repetition ratios, [95 %% bootstrap CI].\n")
	fmt.Fprintf(w, "Go ≤ C×%.2f: shown (CI at or below %.2f), not shown (CI straddles it), dearer (CI above it). netperf SD: -c service demand (machine-wide /proc/stat).\n\n", target, target)
	fmt.Fprintf(w, "| test | pair | CPU/unit µs | ± | vs C→C [95%% CI] | ≤ C×%.2f | netperf SD | vs C→C | throughput | vs C→C [95%% CI] |\n", target)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|---:|---:|---:|---:|")
	var notShown []string
	cells := 0
	eachCell(tests, groups, func(t, p string, g, base *agg) {
		cpu, sd, thr := median(g.cpu), median(g.sd), median(g.thr)
		rc, rs, rt, v := "–", "–", "–", "–"
		if base != nil {
			rs = ratio(sd, median(base.sd))
			m, lo, hi := pairedRatio(g.cpuRep, base.cpuRep)
			rc = ratioCI(m, lo, hi)
			m, lo, hi = pairedRatio(g.thrRep, base.thrRep)
			rt = ratioCI(m, lo, hi)
			if p != "CC" {
				_, lo, hi = pairedRatio(g.cpuRep, base.cpuRep)
				v = verdict(lo, hi)
				cells++
				switch v {
				case "shown":
				case "dearer":
					notShown = append(notShown, fmt.Sprintf("%s %s (dearer)", t, pairLabel(p)))
				default:
					notShown = append(notShown, t+" "+pairLabel(p))
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s | %.3f | %.0f%% | %s | %s | %.3f | %s | %.2f %s | %s |\n",
			t, pairLabel(p), cpu, spread(g.cpu), rc, v, sd, rs, thr, strings.TrimSuffix(g.units, "/s")+"/s", rt)
	})
	if cells > 0 {
		fmt.Fprintf(w, "\nGo ≤ C×%.2f shown for %d of %d cells.", target, cells-len(notShown), cells)
		if len(notShown) > 0 {
			fmt.Fprintf(w, " Not shown: %s.", strings.Join(notShown, "; "))
		}
		fmt.Fprintln(w)
	}
	workTable(w, tests, runs)
}

// workTable writes the work per unit that does not depend on how busy the
// machine is: system calls (from the counted runs, under perf stat) and
// context switches (rusage and /proc, from the timed runs), each side per
// unit it handled, medians over the repetitions. Nothing is written when
// the runs carry neither.
func workTable(w io.Writer, tests []string, runs []Run) {
	type agg struct {
		cs, ss       []float64 // syscalls per unit: client, server
		cv, ci       []float64 // client voluntary, involuntary switches per unit
		sv, si       []float64 // server
		callsTotal   []float64 // client + server syscalls per unit
		switchTotal  []float64 // client + server voluntary switches per unit
		counted, ctx bool
	}
	groups := map[key]*agg{}
	have := false
	for _, r := range runs {
		k := key{r.Test, r.Pair}
		if groups[k] == nil {
			groups[k] = &agg{}
		}
		g := groups[k]
		if r.Counted {
			c, s := r.perUnit(float64(r.ClientSyscalls), float64(r.ServerSyscalls))
			g.cs, g.ss, g.callsTotal = append(g.cs, c), append(g.ss, s), append(g.callsTotal, c+s)
			g.counted, have = true, true
			continue
		}
		if r.ClientVCSW == 0 && r.ServerVCSW == 0 {
			continue // an older raw file: not recorded
		}
		cv, sv := r.perUnit(float64(r.ClientVCSW), float64(r.ServerVCSW))
		ci, si := r.perUnit(float64(r.ClientIVCSW), float64(r.ServerIVCSW))
		g.cv, g.sv, g.ci, g.si = append(g.cv, cv), append(g.sv, sv), append(g.ci, ci), append(g.si, si)
		g.switchTotal = append(g.switchTotal, cv+sv)
		g.ctx, have = true, true
	}
	if !have {
		return
	}
	fmt.Fprintf(w, "\nWork per unit (per KB or transaction, each side per unit it handled; medians): system calls from the counted runs (perf stat, raw_syscalls:sys_enter; the client's from its exec, start-up and control connection included, the server's while the client ran);\n")
	fmt.Fprintf(w, "context switches from the timed runs (client: rusage; server: its threads' /proc status), voluntary (blocked) / involuntary (preempted). vs C→C: ratio of client + server medians.\n\n")
	fmt.Fprintln(w, "| test | pair | syscalls/unit client | server | vs C→C | vol. switches/unit client | server | vs C→C | invol. client | invol. server |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	eachCell(tests, groups, func(t, p string, g, base *agg) {
		cs, ss, rc := "–", "–", "–"
		if g.counted {
			cs, ss = num(median(g.cs)), num(median(g.ss))
			if base != nil && base.counted {
				rc = ratio(median(g.callsTotal), median(base.callsTotal))
			}
		}
		cv, sv, rv, ci, si := "–", "–", "–", "–", "–"
		if g.ctx {
			cv, sv, ci, si = num(median(g.cv)), num(median(g.sv)), num(median(g.ci)), num(median(g.si))
			if base != nil && base.ctx {
				rv = ratio(median(g.switchTotal), median(base.switchTotal))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, pairLabel(p), cs, ss, rc, cv, sv, rv, ci, si)
	})
}

// key names a table cell's runs: a test and a pair of implementations.
type key struct{ test, pair string }

// eachCell calls row for every test, and in each for every pair with runs
// (pairOrder), with the test's C→C group as base (nil when C→C did not
// run): the walk both tables make.
func eachCell[G any](tests []string, groups map[key]*G, row func(test, pair string, g, base *G)) {
	for _, t := range tests {
		base := groups[key{t, "CC"}]
		for _, p := range pairOrder {
			if g := groups[key{t, p}]; g != nil {
				row(t, p, g, base)
			}
		}
	}
}

// num formats a count per unit with four significant digits or so.
func num(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x >= 100:
		return fmt.Sprintf("%.1f", x)
	case x >= 1:
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.4f", x)
}

// ratioCI formats a ratio and its interval.
func ratioCI(m, lo, hi float64) string {
	switch {
	case math.IsNaN(m):
		return "–"
	case math.IsNaN(lo):
		return fmt.Sprintf("%.2f×", m)
	}
	return fmt.Sprintf("%.3f× [%.3f, %.3f]", m, lo, hi)
}

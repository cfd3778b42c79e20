package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
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

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// report writes the side-by-side table: per test and pairing, the medians
// of combined process CPU per unit, of netperf's own (machine-wide) local
// service demand and of throughput, each also as a ratio to C→C.
func report(w io.Writer, meta Meta, runs []Run) {
	type key struct{ test, pair string }
	type agg struct {
		cpu, sd, thr []float64
		units        string
	}
	groups := map[key]*agg{}
	var tests []string
	seen := map[string]bool{}
	for _, r := range runs {
		k := key{r.Test, r.Pair}
		if groups[k] == nil {
			groups[k] = &agg{units: r.Units}
		}
		g := groups[k]
		g.cpu = append(g.cpu, r.CPUPerUnit())
		g.sd = append(g.sd, r.LocalSD)
		g.thr = append(g.thr, r.Throughput)
		if !seen[r.Test] {
			seen[r.Test] = true
			tests = append(tests, r.Test)
		}
	}
	fmt.Fprintf(w, "netperf Go vs C on loopback: %d repetitions of %d s, interleaved; medians.\n", meta.Reps, meta.Length)
	fmt.Fprintf(w, "Kernel %s; load average (1/5/15 min) %s at the start, %s at the end.\n", meta.Kernel, meta.LoadStart, meta.LoadEnd)
	switch meta.Pin {
	case "same":
		fmt.Fprintf(w, "Client and server pinned to CPU 0.\n")
	case "split":
		fmt.Fprintf(w, "Client pinned to CPU 0, server to CPU 1.\n")
	}
	fmt.Fprintf(w, "CPU/unit: client + server process CPU time per KB (streams; UDP_STREAM: each side per KB it sent or received) or per transaction (RR), in µs;\n")
	fmt.Fprintf(w, "±: half-range of the repetitions in %% of the median. netperf SD: -c service demand (machine-wide /proc/stat).\n\n")
	fmt.Fprintln(w, "| test | pair | CPU/unit µs | ± | vs C→C | netperf SD | vs C→C | throughput | vs C→C |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, t := range tests {
		base := groups[key{t, "CC"}]
		for _, p := range pairOrder {
			g := groups[key{t, p}]
			if g == nil {
				continue
			}
			cpu, sd, thr := median(g.cpu), median(g.sd), median(g.thr)
			rc, rs, rt := "–", "–", "–"
			if base != nil {
				rc, rs, rt = ratio(cpu, median(base.cpu)), ratio(sd, median(base.sd)), ratio(thr, median(base.thr))
			}
			fmt.Fprintf(w, "| %s | %s | %.3f | %.0f%% | %s | %.3f | %s | %.2f %s | %s |\n",
				t, pairLabel(p), cpu, spread(g.cpu), rc, sd, rs, thr, strings.TrimSuffix(g.units, "/s")+"/s", rt)
		}
	}
}

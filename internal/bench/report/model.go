// Package report turns a results stream into the papers' tables
// (Markdown), charts (PNG and SVG) and a one-screen terminal summary. It
// is a pure function of the results: the same file gives the same
// report, so a report can be re-made at any time with `sluice report`.
package report

import (
	"fmt"
	"math"
	"sort"

	"sluice/internal/bench/result"
	"sluice/internal/bench/stats"
)

// Metric is one measured quantity. CPU and service demand are given per
// host of the test bed, not per netperf end: the SUT's figures are
// netperf's local ones when the client ran on the SUT and its remote ones
// when the client ran on the peer.
type Metric int

// Metrics, in the papers' order, the SUT's before the peer's.
const (
	Rate    Metric = iota // 10^6bits/s for streams, Trans/s for RR
	SUTCPU                // %
	SUTSD                 // us/KB or us/Tr
	PeerCPU               // %
	PeerSD
	numMetrics
)

func (m Metric) value(r result.Rep, t result.Test) float64 {
	onSUT := t.ClientHost() == result.SUT
	local := func(l, rem float64) float64 {
		if onSUT == (m == SUTCPU || m == SUTSD) {
			return measured(l)
		}
		return measured(rem)
	}
	switch m {
	case Rate:
		if r.ThroughputMbps != 0 {
			return r.ThroughputMbps
		}
		return r.TransPerSec
	case SUTCPU, PeerCPU:
		return local(r.LocalCPU, r.RemoteCPU)
	case SUTSD, PeerSD:
		return local(r.LocalSD, r.RemoteSD)
	}
	return math.NaN()
}

// measured maps netperf's "not measured" (negative) to NaN.
func measured(v float64) float64 {
	if v < 0 {
		return math.NaN()
	}
	return v
}

// Unit returns the unit of the metric for a test.
func (m Metric) Unit(t result.Test) string {
	switch m {
	case Rate:
		if t.Stream() {
			return "10^6bits/s"
		}
		return "Trans/s"
	case SUTCPU, PeerCPU:
		return "%"
	default:
		if t.Stream() {
			return "us/KB"
		}
		return "us/Tr"
	}
}

// Title names the metric.
func (m Metric) Title() string {
	return [...]string{"Throughput / transaction rate", "CPU utilisation, SUT", "Service demand, SUT",
		"CPU utilisation, peer", "Service demand, peer"}[m]
}

// Cell is the summary of one metric of one test under one configuration.
type Cell struct {
	stats.Summary
	// Diff is the change of the median against "none" in %, NaN when
	// there is no baseline.
	Diff float64
	// DiffCI is the 95 % bootstrap confidence interval of Diff (NaN
	// with fewer than two repetitions on either side).
	DiffCI stats.Interval
}

// Noise reports whether the change is within noise: its confidence
// interval includes 0.
func (c Cell) Noise() bool { return c.DiffCI.Contains(0) }

// BPFCost is the in-kernel cost of the programs attached to the SUT's
// link under one configuration during one test: ns per packet (per
// program run) per hook, median over the repetitions with its range.
type BPFCost struct {
	Hook     string // ingress or egress
	Name     string // program name
	NsPerPkt stats.Summary
	// Runs is the median number of program runs per repetition.
	Runs float64
	// OverFloor is the ratio of NsPerPkt to the floor program's (tcx-floor
	// or tcx-floor-gw) on the same hook in the same repetition, over the
	// repetitions that have both. The host's speed changes between
	// repetitions (this VM flips between two states), and a ratio within
	// one repetition is what compares a program with the floor; N is 0
	// when the run has no floor.
	OverFloor stats.Summary
}

// floorConfigs are the configurations whose program only returns
// TCX_NEXT: the cost of being attached at all.
var floorConfigs = []string{"tcx-floor", "tcx-floor-gw"}

// Suite is one paper's part of the report.
type Suite struct {
	Name    string // ipf or qos
	Title   string
	Tests   []result.Test
	Configs []string // with data, "none" first
	// Cells[test ID][config][metric]
	Cells map[string]map[string][numMetrics]Cell
	// BPF[test ID][config] is the in-kernel cost, where recorded.
	BPF map[string]map[string][]BPFCost
	// Progs[test ID][config] is each program's share of it, in the hook's
	// order, those no packet reached included.
	Progs map[string]map[string][]ProgCost
}

// ProgCost is one program of a hook on one interface under one
// configuration during one test: what BPFCost adds up. A hook's total
// does not tell which of its programs ran: with NAT inside the filter's
// programs NAT's own stay attached and run no packet of a translated
// flow, which only this shows.
type ProgCost struct {
	Hook, Link, Name string
	// Runs is the median number of runs per repetition (0: attached,
	// never reached).
	Runs float64
	// NsPerRun over the repetitions in which it ran (N 0: none).
	NsPerRun stats.Summary
}

// Model is everything the outputs show.
type Model struct {
	Run         result.Run
	Suites      []Suite
	Skips       []result.Skip
	Failures    []result.Rep // repetitions with an error
	Interrupted bool         // no end record, or the end says so
	Reps        int          // good repetitions in total
	// LoadDuring is the machine's load over the run (nil if the run
	// did not end or did not record it).
	LoadDuring *result.Load
}

// Busy thresholds: a machine whose 1-minute load average exceeds
// half its CPUs before the run, whose CPUs were more than a fifth busy
// before it, or whose hypervisor stole more than 2 % of CPU time, was
// not quiet; during the run the bench's own two ends load every CPU, so
// only a load beyond one more than the CPUs counts there.
const (
	busyLoadBefore = 0.5
	busyCPUBefore  = 20.0
	busySteal      = 2.0
)

// Warnings says when the machine was busy before or during the run, so
// the numbers are noisier than they should be.
func (m *Model) Warnings() []string {
	var w []string
	n := float64(max(m.Run.NumCPU, 1))
	if l := m.Run.LoadBefore; l != nil {
		if l.Load1 > busyLoadBefore*n || l.BusyPct > busyCPUBefore {
			w = append(w, fmt.Sprintf("the machine was busy before the run (1-minute load %.2f on %d CPUs, %.0f %% busy): other work shares the CPUs with the measurement", l.Load1, m.Run.NumCPU, l.BusyPct))
		}
		if l.StealPct > busySteal {
			w = append(w, fmt.Sprintf("the hypervisor stole %.1f %% of CPU time before the run", l.StealPct))
		}
	}
	if l := m.LoadDuring; l != nil {
		if l.MaxLoad1 > n+1 {
			w = append(w, fmt.Sprintf("the 1-minute load reached %.2f during the run on %d CPUs: other work competed with the measurement", l.MaxLoad1, m.Run.NumCPU))
		}
		if l.StealPct > busySteal {
			w = append(w, fmt.Sprintf("the hypervisor stole %.1f %% of CPU time during the run", l.StealPct))
		}
	}
	return w
}

var suiteTitles = map[string]string{
	"ipf": "IPFilter white paper: filtering overhead",
	"qos": "IPQoS white paper: DSCP marking, TCP_STREAM send-size sweep and further tests",
	"nat": "NAT on a gateway: client — SUT (forwarding) — server",
}

// Build computes the Model of a results set.
func Build(set *result.Set) *Model {
	m := &Model{Run: set.Run, Skips: set.Skips, Interrupted: set.End == nil || set.End.Interrupted}
	if set.End != nil {
		m.LoadDuring = set.End.LoadDuring
	}
	tests := map[string]result.Test{}
	for _, t := range set.Run.Tests {
		tests[t.ID] = t
	}
	// Values per test, config, metric.
	vals := map[string]map[string][numMetrics][]float64{}
	type hookKey struct{ test, config, hook, name string }
	bpfNs := map[hookKey][]float64{}
	bpfRuns := map[hookKey][]float64{}
	// ns per packet by repetition, whatever the programs' names, for
	// the ratios to the floor of the same repetition
	type repKey struct{ test, config, hook string }
	bpfByRep := map[repKey]map[int]float64{}
	var hookOrder []hookKey
	// each program by what it is, not its ID (reloaded every repetition)
	type progKey struct{ test, config, hook, link, name string }
	progNs := map[progKey][]float64{}
	progRuns := map[progKey][]float64{}
	var progOrder []progKey
	for _, r := range set.Reps {
		if r.Rep < 1 {
			continue
		}
		if r.Error != "" {
			m.Failures = append(m.Failures, r)
			continue
		}
		m.Reps++
		if vals[r.Test] == nil {
			vals[r.Test] = map[string][numMetrics][]float64{}
		}
		v := vals[r.Test][r.Config]
		for k := Metric(0); k < numMetrics; k++ {
			v[k] = append(v[k], k.value(r, tests[r.Test]))
		}
		vals[r.Test][r.Config] = v
		for _, p := range r.BPF {
			k := progKey{r.Test, r.Config, p.Hook, p.Link, p.Name}
			if _, seen := progRuns[k]; !seen {
				progOrder = append(progOrder, k)
			}
			progRuns[k] = append(progRuns[k], float64(p.RunCnt))
			if p.RunCnt > 0 {
				progNs[k] = append(progNs[k], p.NsPerRun())
			}
		}
		per := hookCosts(r.BPF)
		for _, hook := range []string{"ingress", "egress"} {
			p, ok := per[hook]
			if !ok || p.RunCnt == 0 {
				continue // attached, but no packet reached it
			}
			k := hookKey{r.Test, r.Config, hook, p.Name}
			if _, seen := bpfNs[k]; !seen {
				hookOrder = append(hookOrder, k)
			}
			bpfNs[k] = append(bpfNs[k], p.NsPerRun())
			rk := repKey{r.Test, r.Config, hook}
			if bpfByRep[rk] == nil {
				bpfByRep[rk] = map[int]float64{}
			}
			bpfByRep[rk][r.Rep] = p.NsPerRun()
			bpfRuns[k] = append(bpfRuns[k], float64(p.RunCnt))
		}
	}
	var suites []string
	seen := map[string]bool{}
	for _, t := range set.Run.Tests {
		if !seen[t.Suite] {
			seen[t.Suite] = true
			suites = append(suites, t.Suite)
		}
	}
	for _, name := range suites {
		s := Suite{Name: name, Title: suiteTitles[name], Cells: map[string]map[string][numMetrics]Cell{}, BPF: map[string]map[string][]BPFCost{},
			Progs: map[string]map[string][]ProgCost{}}
		if s.Title == "" {
			s.Title = name
		}
		hasData := map[string]bool{}
		for _, t := range set.Run.Tests {
			if t.Suite != name {
				continue
			}
			s.Tests = append(s.Tests, t)
			cells := map[string][numMetrics]Cell{}
			for cfg, v := range vals[t.ID] {
				var c [numMetrics]Cell
				for k := range c {
					c[k] = Cell{Summary: stats.Summarize(v[k]), Diff: math.NaN()}
				}
				cells[cfg] = c
				hasData[cfg] = true
			}
			if base, ok := cells["none"]; ok {
				for cfg, c := range cells {
					for k := range c {
						c[k].Diff = stats.PctDiff(c[k].Median, base[k].Median)
						c[k].DiffCI = stats.Interval{Lo: math.NaN(), Hi: math.NaN()}
						if cfg != "none" {
							c[k].DiffCI = stats.DiffCI(vals[t.ID][cfg][k], vals[t.ID]["none"][k])
						}
					}
					cells[cfg] = c
				}
			}
			s.Cells[t.ID] = cells
			for _, k := range progOrder {
				if k.test != t.ID {
					continue
				}
				if s.Progs[t.ID] == nil {
					s.Progs[t.ID] = map[string][]ProgCost{}
				}
				s.Progs[t.ID][k.config] = append(s.Progs[t.ID][k.config], ProgCost{Hook: k.hook, Link: k.link, Name: k.name,
					Runs: stats.Summarize(progRuns[k]).Median, NsPerRun: stats.Summarize(progNs[k])})
			}
			for _, k := range hookOrder {
				if k.test != t.ID {
					continue
				}
				if s.BPF[t.ID] == nil {
					s.BPF[t.ID] = map[string][]BPFCost{}
				}
				var ratios []float64
				for _, f := range floorConfigs {
					floor := bpfByRep[repKey{k.test, f, k.hook}]
					if len(floor) == 0 {
						continue
					}
					for rep, ns := range bpfByRep[repKey{k.test, k.config, k.hook}] {
						if fl, ok := floor[rep]; ok && fl > 0 && !math.IsNaN(ns) {
							ratios = append(ratios, ns/fl)
						}
					}
					break
				}
				s.BPF[t.ID][k.config] = append(s.BPF[t.ID][k.config], BPFCost{Hook: k.hook, Name: k.name,
					NsPerPkt: stats.Summarize(bpfNs[k]), Runs: stats.Summarize(bpfRuns[k]).Median,
					OverFloor: stats.Summarize(ratios)})
			}
		}
		for _, c := range set.Run.Configs {
			if hasData[c.Name] {
				s.Configs = append(s.Configs, c.Name)
			}
		}
		// Configurations not in the header (should not happen) still show.
		var extra []string
		for c := range hasData {
			if !contains(s.Configs, c) {
				extra = append(extra, c)
			}
		}
		sort.Strings(extra)
		s.Configs = append(s.Configs, extra...)
		if len(s.Tests) > 0 {
			m.Suites = append(m.Suites, s)
		}
	}
	return m
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// hookCosts sums the programs of each hook into one cost per packet. The
// programs of one hook on one link (a filter and a NAT program, say) see
// the same packets: their times add up and the packets are counted once
// (the most runs of one of them); the links of a hook (the gateway's
// two interfaces) see different packets, which add up. Statistics that
// do not name their link (older results) sum times and runs alike.
func hookCosts(ps []result.ProgStat) map[string]*result.ProgStat {
	per := map[string]*result.ProgStat{}
	type hl struct{ hook, link string }
	most := map[hl]uint64{}
	named := true
	for _, p := range ps {
		named = named && p.Link != ""
	}
	for _, p := range ps {
		q, ok := per[p.Hook]
		if !ok {
			q = &result.ProgStat{Hook: p.Hook, Name: p.Name, ID: p.ID}
			per[p.Hook] = q
		}
		q.RunNs += p.RunNs
		if !named {
			q.RunCnt += p.RunCnt
			continue
		}
		k := hl{p.Hook, p.Link}
		if p.RunCnt > most[k] {
			q.RunCnt += p.RunCnt - most[k]
			most[k] = p.RunCnt
		}
	}
	return per
}

// Package run executes the bench matrix: repetitions interleaved across
// configurations (apply A, run its tests, remove A; B; C; then A again
// …), so slow drifts of the machine spread over every configuration
// instead of biasing one, with a warm-up after each apply, and every
// repetition streamed to the results as it completes.
package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

// Measurement is what a generator measured in one test. Units as in
// netperf: 10^6bits/s, Trans/s, % CPU, us/KB (streams) or us/Tr (RR).
// Local is the client's host and Remote the server's, as netperf says;
// the test's Client field tells which of them is the SUT.
type Measurement struct {
	Elapsed             time.Duration
	ThroughputMbps      float64
	TransPerSec         float64
	LocalCPU, RemoteCPU float64
	LocalSD, RemoteSD   float64
}

// Generator drives one test at a time, its client on the host the test's
// Client field names and its server on the other. Netperf implements it
// with the netperf library; tests use fakes.
type Generator interface {
	// Name identifies the generator in the results.
	Name() string
	// Run runs one test for about d.
	Run(ctx context.Context, t result.Test, d time.Duration) (Measurement, error)
}

// Plan is the matrix to measure.
type Plan struct {
	Configs  []*config.Config
	Tests    []result.Test
	Reps     int
	Duration time.Duration
	// Warmup, if positive, is the length of an unrecorded run of the
	// configuration's first test after each apply.
	Warmup time.Duration
}

// Progress is reported after every test.
type Progress struct {
	Done, Total int
	Rep         int
	Config      string
	Test        string
	Err         error
	// Skipped is set when the configuration could not be applied and
	// is left out of the rest of the run (Err says why, Test is empty).
	Skipped bool
}

// Runner executes a Plan.
type Runner struct {
	Plan Plan
	Gen  Generator
	// SUT is the host configurations are applied to.
	SUT *topo.Host
	// GW and GWGen are the gateway of the gateway topology and the
	// generator that drives traffic through it, for the NAT suite
	// (config.SuiteNAT); nil when the plan has no NAT test.
	GW    *topo.Host
	GWGen Generator
	// GWProbe is Probe for the gateway's programs.
	GWProbe func() ([]result.ProgStat, error)
	// Out receives the records; Header is written first, completed with
	// the plan, the generator's name and the start time.
	Out    *result.Writer
	Header result.Run
	// OnProgress, if set, is called after every test (from the
	// goroutine running Execute).
	OnProgress func(Progress)
	// Shape, if set, shapes the test link to a test's link profile
	// (result.Test.Link, "" = unshaped) before the test and its
	// warm-up; a failure fails the test.
	Shape func(link string) error
	// Probe, if set, returns the kernel's cumulative run-time statistics
	// of the eBPF programs attached to the SUT; it is read before and
	// after every test and the difference recorded with the test.
	Probe func() ([]result.ProgStat, error)
	// OnEnd, if set, completes the end record (the machine's load over
	// the run) before it is written.
	OnEnd func(*result.EndInfo)
	// Now is the clock (tests inject one).
	Now func() time.Time
}

// Total is the number of tests the plan runs (warm-ups excluded).
func (p Plan) Total() int {
	n := 0
	for _, c := range p.Configs {
		for _, t := range p.Tests {
			if c.Runs(t.Suite) {
				n++
			}
		}
	}
	return n * p.Reps
}

// Validate checks the plan. Besides malformed plans it refuses, with a
// message, every combination it would otherwise drop silently: a
// configuration (other than the baseline "none") that takes part in none
// of the selected tests, and a test that no selected configuration
// besides none runs (its numbers would have nothing to be compared
// with), unless none is the only configuration.
func (p Plan) Validate() error {
	switch {
	case len(p.Configs) == 0:
		return errors.New("run: no configuration")
	case len(p.Tests) == 0:
		return errors.New("run: no test")
	case p.Reps < 1:
		return fmt.Errorf("run: %d repetitions", p.Reps)
	case p.Duration <= 0:
		return fmt.Errorf("run: duration %v", p.Duration)
	}
	seen := map[string]bool{}
	for _, t := range p.Tests {
		if seen[t.ID] {
			return fmt.Errorf("run: test %q twice", t.ID)
		}
		seen[t.ID] = true
	}
	var others []*config.Config
	for _, c := range p.Configs {
		if c.Suite == "" {
			continue
		}
		others = append(others, c)
		if !slices.ContainsFunc(p.Tests, func(t result.Test) bool { return c.Runs(t.Suite) }) {
			return fmt.Errorf("run: configuration %s takes part in the %s tests and none is selected: add some (--tests %s) or drop it", c.Name, suiteName(c.Suite), c.Suite)
		}
	}
	if len(others) == 0 {
		return nil
	}
	for _, t := range p.Tests {
		if !slices.ContainsFunc(others, func(c *config.Config) bool { return c.Runs(t.Suite) }) {
			var names []string
			for _, c := range others {
				names = append(names, c.Name)
			}
			return fmt.Errorf("run: test %q is one of the %s tests, which none of %s runs: drop it or add a configuration of that suite", t.ID, suiteName(t.Suite), strings.Join(names, ", "))
		}
	}
	return nil
}

func suiteName(s string) string {
	switch s {
	case config.SuiteIPF:
		return "IPFilter (ipf)"
	case config.SuiteQoS:
		return "IPQoS (qos)"
	case config.SuiteNAT:
		return "NAT gateway (nat)"
	}
	return s
}

// Execute runs the plan. Configurations whose datapath is unavailable or
// fails to apply are recorded as skipped and the rest go on; a failed
// test is recorded with its error. Cancelling ctx stops after removing
// the configuration in place; the result then says Interrupted and the
// error is ctx's.
func (r *Runner) Execute(ctx context.Context) (err error) {
	p := r.Plan
	if err := p.Validate(); err != nil {
		return err
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	h := r.Header
	h.Version = result.Version
	h.Start = now()
	h.Runner = r.Gen.Name()
	h.Duration, h.Reps, h.Warmup = p.Duration, p.Reps, p.Warmup
	h.Configs = h.Configs[:0]
	for _, c := range p.Configs {
		h.Configs = append(h.Configs, result.Config{Name: c.Name, Family: string(c.Family), Description: c.Description, Suite: c.Suite})
	}
	h.Tests = append([]result.Test(nil), p.Tests...)
	if err := r.Out.Write(result.Record{Kind: result.KindRun, Run: &h}); err != nil {
		return fmt.Errorf("run: writing results: %w", err)
	}
	defer func() {
		end := &result.EndInfo{Time: now(), Interrupted: ctx.Err() != nil}
		if err != nil {
			end.Error = err.Error()
		}
		if r.OnEnd != nil {
			r.OnEnd(end)
		}
		if werr := r.Out.Write(result.Record{Kind: result.KindEnd, End: end}); werr != nil && err == nil {
			err = fmt.Errorf("run: writing results: %w", werr)
		}
	}()

	skipped := map[string]bool{}
	skip := func(c *config.Config, reason error) error {
		skipped[c.Name] = true
		if r.OnProgress != nil {
			r.OnProgress(Progress{Config: c.Name, Err: reason, Skipped: true})
		}
		return r.Out.Write(result.Record{Kind: result.KindSkip, Skip: &result.Skip{Config: c.Name, Reason: reason.Error()}})
	}
	total := p.Total()
	done := 0
	for rep := 1; rep <= p.Reps; rep++ {
		for _, c := range p.Configs {
			if skipped[c.Name] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			all := r.testsFor(c)
			// One apply per link profile, so a configuration that
			// depends on the line rate (an IPQoS adapter's declared
			// speed) is loaded for the profile it is measured at.
			for gi, tests := range ByLink(all) {
				a, err := r.apply(ctx, c, tests[0].Link)
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if werr := skip(c, err); werr != nil {
						return werr
					}
					left := len(all) * (p.Reps - rep)
					for _, g := range ByLink(all)[gi:] {
						left += len(g)
					}
					total -= left
					break
				}
				err = r.runTests(ctx, c, tests, rep, &done, total)
				if a != nil {
					if rerr := a.Remove(); rerr != nil {
						// A configuration that cannot be removed poisons
						// every later measurement: stop.
						return errors.Join(err, fmt.Errorf("run: removing %s: %w", c.Name, rerr))
					}
				}
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ByLink groups tests by link profile, in the order the profiles first
// appear, keeping the tests' order within each group.
func ByLink(ts []result.Test) [][]result.Test {
	var out [][]result.Test
	idx := map[string]int{}
	for _, t := range ts {
		i, ok := idx[t.Link]
		if !ok {
			i = len(out)
			idx[t.Link] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], t)
	}
	return out
}

func (r *Runner) gen(t result.Test) Generator {
	if t.Suite == config.SuiteNAT && r.GWGen != nil {
		return r.GWGen
	}
	return r.Gen
}

func (r *Runner) shape(link string) error {
	if r.Shape == nil {
		if link != "" {
			return fmt.Errorf("run: link profile %s asked for and the test bed cannot shape", link)
		}
		return nil
	}
	return r.Shape(link)
}

// ProgDelta returns, for every program in after, what it accumulated
// since before (programs are told apart by hook and ID; one absent from
// before counts from zero, as it was attached since). Programs that did
// not run stay, with zero counts: a program on the hook that no packet
// reached (NAT's, when the filter's programs translate the flow) is a
// fact of the configuration that the hook's total alone hides.
func ProgDelta(before, after []result.ProgStat) []result.ProgStat {
	var out []result.ProgStat
	for _, a := range after {
		d := a
		for _, b := range before {
			if b.Hook == a.Hook && b.ID == a.ID && b.RunNs <= a.RunNs && b.RunCnt <= a.RunCnt {
				d.RunNs, d.RunCnt = a.RunNs-b.RunNs, a.RunCnt-b.RunCnt
			}
		}
		out = append(out, d)
	}
	return out
}

func (r *Runner) testsFor(c *config.Config) []result.Test {
	var ts []result.Test
	for _, t := range r.Plan.Tests {
		if c.Runs(t.Suite) {
			ts = append(ts, t)
		}
	}
	return ts
}

func (r *Runner) apply(ctx context.Context, c *config.Config, link string) (config.Applier, error) {
	if c.New == nil {
		return nil, nil
	}
	a, err := c.New()
	if err != nil {
		return nil, err
	}
	host := r.SUT
	if c.Suite == config.SuiteNAT {
		if r.GW == nil {
			return nil, errors.New("run: the NAT configurations need the gateway topology, which this run did not build")
		}
		host = r.GW
	}
	h := *host
	if p, ok := topo.ProfileByName(link); ok {
		h.Speed = p.BitsPerSec
	}
	if err := a.Apply(ctx, &h); err != nil {
		return nil, fmt.Errorf("applying %s: %w", c.Name, err)
	}
	return a, nil
}

// runTests runs one repetition of a configuration's tests; it returns an
// error only for cancellation or a results write failure.
func (r *Runner) runTests(ctx context.Context, c *config.Config, tests []result.Test, rep int, done *int, total int) error {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	if r.Plan.Warmup > 0 {
		if err := r.shape(tests[0].Link); err == nil {
			if _, err := r.gen(tests[0]).Run(ctx, tests[0], r.Plan.Warmup); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	for _, t := range tests {
		start := now()
		var m Measurement
		var before []result.ProgStat
		err := r.shape(t.Link)
		probe := r.Probe
		if t.Suite == config.SuiteNAT {
			probe = r.GWProbe
		}
		if err == nil && probe != nil {
			before, _ = probe()
		}
		if err == nil {
			m, err = r.gen(t).Run(ctx, t, r.Plan.Duration)
		}
		if ctx.Err() != nil {
			// A test cut short measures nothing worth keeping.
			return ctx.Err()
		}
		rec := &result.Rep{
			Config: c.Name, Test: t.ID, Rep: rep, Time: start,
			ElapsedSec: m.Elapsed.Seconds(), ThroughputMbps: m.ThroughputMbps, TransPerSec: m.TransPerSec,
			LocalCPU: m.LocalCPU, RemoteCPU: m.RemoteCPU, LocalSD: m.LocalSD, RemoteSD: m.RemoteSD,
		}
		if err != nil {
			rec.Error = err.Error()
		} else if probe != nil {
			if after, perr := probe(); perr == nil {
				rec.BPF = ProgDelta(before, after)
			}
		}
		if werr := r.Out.Write(result.Record{Kind: result.KindRep, Rep: rec}); werr != nil {
			return fmt.Errorf("run: writing results: %w", werr)
		}
		*done++
		if r.OnProgress != nil {
			r.OnProgress(Progress{Done: *done, Total: total, Rep: rep, Config: c.Name, Test: t.ID, Err: err})
		}
	}
	return nil
}

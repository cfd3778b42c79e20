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
}

// Runner executes a Plan.
type Runner struct {
	Plan Plan
	Gen  Generator
	// SUT is the host configurations are applied to.
	SUT *topo.Host
	// Out receives the records; Header is written first, completed with
	// the plan, the generator's name and the start time.
	Out    *result.Writer
	Header result.Run
	// OnProgress, if set, is called after every test (from the
	// goroutine running Execute).
	OnProgress func(Progress)
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

// Validate checks the plan.
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
	return nil
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
		if werr := r.Out.Write(result.Record{Kind: result.KindEnd, End: end}); werr != nil && err == nil {
			err = fmt.Errorf("run: writing results: %w", werr)
		}
	}()

	skipped := map[string]bool{}
	skip := func(c *config.Config, reason error) error {
		skipped[c.Name] = true
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
			tests := r.testsFor(c)
			if len(tests) == 0 {
				continue
			}
			a, err := r.apply(ctx, c)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if werr := skip(c, err); werr != nil {
					return werr
				}
				total -= len(tests) * (p.Reps - rep + 1)
				continue
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
	return nil
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

func (r *Runner) apply(ctx context.Context, c *config.Config) (config.Applier, error) {
	if c.New == nil {
		return nil, nil
	}
	a, err := c.New()
	if err != nil {
		return nil, err
	}
	if err := a.Apply(ctx, r.SUT); err != nil {
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
		if _, err := r.Gen.Run(ctx, tests[0], r.Plan.Warmup); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	for _, t := range tests {
		start := now()
		m, err := r.Gen.Run(ctx, t, r.Plan.Duration)
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

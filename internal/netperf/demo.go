package netperf

import "time"

// Interim is one interim result of demo mode (netperf -D): what moved
// during Interval, which ended at End.
type Interim struct {
	Test string
	// Bytes moved by the client in the interval (both directions for the
	// request/response tests); Transactions completed (RR tests).
	Bytes, Transactions float64
	Interval            time.Duration
	End                 time.Time
}

// demoTicker is netperf's demo_interval_tick: the loops add the units of
// work they complete; the clock is read only once the units reach the
// current guess of one interval's worth (which is then re-estimated), or
// on every tick in "always timestamp" mode.
type demoTicker struct {
	always   bool
	interval time.Duration
	guess    float64 // units per interval
	units    float64 // units this interval
	bytes    float64 // bytes per unit (RR: request + response), 0 = units are bytes
	start    time.Time
	test     string
	emit     func(Interim)
}

func newDemoTicker(cfg *Config, test string, bytesPerUnit float64) *demoTicker {
	if cfg.DemoInterval <= 0 || cfg.Interim == nil {
		return nil
	}
	d := &demoTicker{always: cfg.DemoAlways, interval: cfg.DemoInterval, guess: cfg.DemoUnits,
		bytes: bytesPerUnit, test: test, emit: cfg.Interim}
	if d.guess <= 0 {
		d.guess = 100 // demo_rr_setup(100), which the omni path calls for every test
	}
	return d
}

func (d *demoTicker) begin() { d.start = time.Now() }

func (d *demoTicker) tick(units float64) {
	d.units += units
	if !d.always && d.units < d.guess {
		return
	}
	now := time.Now()
	actual := now.Sub(d.start)
	if !d.always && actual > 0 {
		// Lengthen the guess when short of an interval, shorten it when
		// over, whether or not a result is due.
		d.guess *= float64(d.interval) / float64(actual)
	}
	if actual >= d.interval {
		d.show(now, actual)
	}
}

func (d *demoTicker) show(now time.Time, actual time.Duration) {
	in := Interim{Test: d.test, Interval: actual, End: now}
	if d.bytes > 0 {
		in.Transactions, in.Bytes = d.units, d.units*d.bytes
	} else {
		in.Bytes = d.units
	}
	d.emit(in)
	d.units = 0
	d.start = now
}

// final reports what is left at the end of the test (demo_interval_final).
func (d *demoTicker) final() {
	if d != nil && d.units > 0 {
		now := time.Now()
		d.show(now, now.Sub(d.start))
	}
}

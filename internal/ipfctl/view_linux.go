package ipfctl

import (
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
)

// The datapath's report types, as ipfstat and the exporter read them.
type (
	// RuleInfo is one loaded rule with its counters.
	RuleInfo = bpf.RuleInfo
	// Stats are the global counters.
	Stats = bpf.Stats
	// State is one state-table entry.
	State = bpf.State
	// LogFlags are ipf -l's default logging choices.
	LogFlags = bpf.LogFlags
)

// The default logging flags.
const (
	LogPass    = bpf.LogPass
	LogBlock   = bpf.LogBlock
	LogNomatch = bpf.LogNomatch
)

// logFlagNames is the one table of the default-logging flags' names:
// ipf -V prints the short ones, ipfstat the long ones.
var logFlagNames = []struct {
	f           LogFlags
	short, long string
}{
	{LogPass, "pass", "packets passed through filter"},
	{LogBlock, "block", "packets blocked by filter"},
	{LogNomatch, "nomatch", "packets not matched by filter"},
}

// LogFlagNames returns the names of the flags set in f, short (ipf -V) or
// long (ipfstat).
func LogFlagNames(f LogFlags, long bool) []string {
	var out []string
	for _, n := range logFlagNames {
		if f&n.f != 0 {
			if long {
				out = append(out, n.long)
			} else {
				out = append(out, n.short)
			}
		}
	}
	return out
}

// Reader is the read-only view of the loaded filter that ipfstat uses.
type Reader interface {
	// Rules returns the rules of a set with their counters, main lists
	// first, then groups in the order they were defined.
	Rules(Set) ([]RuleInfo, error)
	Stats() (Stats, error)
	States() ([]State, error)
	StateMax() uint64
	LogFlags() LogFlags
	// ActiveSetNumber is IPFilter's number (0 or 1) of the active set.
	ActiveSetNumber() int
	// Ticks is IPFilter's clock: Ticks since boot.
	Ticks() uint64
	// Coverage is which interfaces the filter is on.
	Coverage() (Coverage, error)
	Close() error
}

// view is the Reader over a pinned datapath.
type view struct {
	dir string
	d   *bpf.Datapath
}

// OpenReader opens the datapath pinned in dir ("" = DefaultPinDir) for
// reading.
func OpenReader(dir string) (Reader, error) {
	dir = orDefault(dir)
	d, err := bpf.OpenPinned(dir)
	if err != nil {
		return nil, permissionHint(explainNotLoaded(dir, err))
	}
	return &view{dir: dir, d: d}, nil
}

// Rules takes the lock beside the pins shared, so that it never reads a
// set while a load is rewriting the slot it sits in.
func (v *view) Rules(s Set) ([]RuleInfo, error) {
	unlock, err := lockTx(v.dir, false, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return v.d.Rules(toBPF(s))
}

func (v *view) Stats() (Stats, error)    { return v.d.Stats() }
func (v *view) States() ([]State, error) { return v.d.States() }
func (v *view) StateMax() uint64         { return v.d.StateMax() }
func (v *view) LogFlags() LogFlags       { return v.d.LogFlags() }
func (v *view) ActiveSetNumber() int     { return v.d.ActiveSetNumber() }
func (v *view) Close() error             { return v.d.Close() }
func (v *view) Ticks() uint64            { return Ticks() }

func (v *view) Coverage() (Coverage, error) { return coverage(v.d) }

// Ticks returns IPFilter's tick counter (Tick units) since boot.
func Ticks() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return uint64(time.Duration(ts.Nano()) / Tick)
}

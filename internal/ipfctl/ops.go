package ipfctl

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"sluice/internal/rules/ipf"
)

// ErrNoKernel is returned for kernel operations when there is no kernel
// datapath (not Linux, or no Backend wired in).
var ErrNoKernel = fmt.Errorf("kernel datapath not available: %w", errors.ErrUnsupported)

// Set names one of the filter's two rule sets.
type Set uint8

// The rule sets: -A (default) and -I.
const (
	SetActive Set = iota
	SetInactive
)

func (s Set) String() string {
	if s == SetInactive {
		return "inactive"
	}
	return "active"
}

// FlushWhich is what `ipf -F` flushes from the rule lists.
type FlushWhich uint8

// The rule-list flush targets (-F i, -F o, -F a).
const (
	FlushIn FlushWhich = 1 << iota
	FlushOut
	FlushBoth = FlushIn | FlushOut
)

// OpKind is what one step of an ipf command line does.
type OpKind uint8

// The operations of ipf, in the order of its options.
const (
	// OpAdd adds Rules to Set (-f); rules with HasInsertAt go to that
	// position.
	OpAdd OpKind = iota + 1
	// OpRemove deletes Rules from Set (-r -f), matched by printed form.
	OpRemove
	// OpFlush empties the in and/or out lists (and their groups and
	// accounting rules) of Set (-F i|o|a). Result.Count is how many
	// rules went.
	OpFlush
	// OpFlushState removes state entries (-F s|S|N, Arg): "S" all, "s"
	// TCP past ESTABLISHED, "5".."11" that TCP state, a number >= 30 idle
	// longer than that many seconds. Expr is the parsed -m filter or nil.
	OpFlushState
	// OpSwap exchanges the sets (-s); Result.SetNo is the number of the
	// set that is now inactive.
	OpSwap
	// OpEnable loads the datapath and turns filtering on (-E).
	OpEnable
	// OpDisable removes the datapath completely (-D): detached, unpinned,
	// rules and state gone.
	OpDisable
	// OpZeroRules reports the counters of Rules in Set and zeroes them
	// (-z -f); Result.Counters has one entry per rule.
	OpZeroRules
	// OpZeroStats zeroes the global statistics (-Z); Result.Text is the
	// report printed before.
	OpZeroStats
	// OpLogFlags sets the default logging (-l Arg: pass, block, nomatch,
	// none, state, nat).
	OpLogFlags
	// OpTunables applies -T Arg ("list", "name", "name=value[,...]");
	// Result.Text is what to print.
	OpTunables
	// OpSync recompiles both sets with the interfaces as they are now (-y).
	OpSync
	// OpStatus reports the -V lines after the version (Result.Text).
	OpStatus
	// OpDCA is HP-UX's DCA mode (-m Arg: e enable, d disable, q query, t
	// the connections each keep limit holds); Result.Text is what to print.
	OpDCA
)

var opNames = [...]string{OpAdd: "-f", OpRemove: "-r -f", OpFlush: "-F", OpFlushState: "-F", OpSwap: "-s",
	OpEnable: "-E", OpDisable: "-D", OpZeroRules: "-z -f", OpZeroStats: "-Z", OpLogFlags: "-l",
	OpTunables: "-T", OpSync: "-y", OpStatus: "-V", OpDCA: "-m"}

// String names the option the operation comes from.
func (k OpKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// changesSets reports whether the operation edits the rule sets (and is
// therefore staged and written at once with its neighbours).
func (k OpKind) changesSets() bool {
	switch k {
	case OpAdd, OpRemove, OpFlush, OpSwap, OpSync:
		return true
	}
	return false
}

// Op is one step of an ipf command line.
type Op struct {
	Kind  OpKind
	Set   Set
	Rules []*ipf.Rule
	// File is where Rules came from ("-" for standard input), for errors.
	File  string
	Which FlushWhich
	Arg   string
	Expr  []ipf.ExprClause
}

// ZeroedRule is a rule and the counters ipf -z read before zeroing them.
type ZeroedRule struct {
	Rule        *ipf.Rule
	Hits, Bytes uint64
}

// Result is what one Op reports; which fields are set depends on its kind.
type Result struct {
	Count    int
	SetNo    int
	Text     string
	Counters []ZeroedRule
}

// ApplyOptions modify Apply.
type ApplyOptions struct {
	// ConfirmWithin, when positive, arms a rollback: unless Confirm is
	// called within this time, a detached watchdog process puts the rule
	// sets back as they were before Apply (ipf -W). Zero applies for good.
	ConfirmWithin time.Duration
	// Warn receives what is accepted but worth saying (a set nesting
	// groups deeper than the datapath follows); nil drops it.
	Warn func(msg string)
}

// Backend is the filter in the kernel that ipf drives; ipf never touches
// the datapath directly. Apply is the whole of a command line: either
// every operation is checked and applied, or (on an error found while
// checking) nothing changes.
type Backend interface {
	// Apply checks ops against the loaded rules, then applies them in
	// order as one transaction and returns one Result per op. Errors in
	// the input (a rule to remove that is not loaded, a set that does not
	// compile or fit, a bad tunable) are found before anything changes.
	Apply(ops []Op, opts ApplyOptions) ([]Result, error)
	// Plan is the dry run (ipf -n): it checks ops as Apply does and
	// returns what they would change in the loaded sets, changing
	// nothing. It returns a nil Diff when no datapath is loaded (or it
	// cannot be read, as for a user without privileges: a dry run only
	// checks the files then).
	Plan(ops []Op) (*Diff, error)
	// Confirm keeps the rules of a load applied with ConfirmWithin: the
	// pending rollback is cancelled (ipf -C). It fails when no load is
	// waiting for confirmation.
	Confirm() error
}

// Diff is what a command line would change in the loaded rule sets.
type Diff struct {
	// Lists are the lists with changes, active set first, then by list
	// (in, out, accounting, groups in order of appearance).
	Lists []ListDiff
	// Swapped is set when the sets would be exchanged.
	Swapped bool
	// Warnings are what Apply would pass to ApplyOptions.Warn.
	Warnings []string
}

// ListDiff is the change to one list (main list or group) of one set.
type ListDiff struct {
	Set   Set
	Group string // "" for the main lists
	Dir   ipf.Direction
	Acct  bool
	// Added and Removed are printed rules; a rule whose position changed
	// but is still there is in neither, and Reordered is set.
	Added, Removed []string
	Reordered      bool
}

// Version is the version string ipf -V and ipfstat -t print.
const Version = "IP Filter: v5.1.2 (Sluice)"

// WatchdogEnv marks the re-executed watchdog process; ipf's Main hands
// control to RunWatchdog when it is set.
const WatchdogEnv = "SLUICE_IPF_WATCHDOG"

// ErrNotConfirmable is returned by Confirm when no load waits for
// confirmation.
var ErrNotConfirmable = errors.New("no load is waiting for confirmation (ipf -W)")

// permissionHint turns a permission error into one that says what is
// missing; other errors pass unchanged.
func permissionHint(err error) error {
	if err == nil || !errors.Is(err, fs.ErrPermission) || verifierRejected(err) {
		return err
	}
	return &PermissionError{Err: err}
}

// PermissionError reports that the datapath could not be reached for
// lack of privileges.
type PermissionError struct{ Err error }

func (e *PermissionError) Error() string {
	return e.Err.Error() + ": the kernel datapath needs root (CAP_BPF, CAP_NET_ADMIN and CAP_SYS_ADMIN)"
}

func (e *PermissionError) Unwrap() error { return e.Err }

// isPermission reports whether err comes from missing privileges.
func isPermission(err error) bool { return errors.Is(err, fs.ErrPermission) }

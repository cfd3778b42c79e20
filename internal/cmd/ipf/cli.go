// Package ipf is the ipf(8) command: option handling, offline parsing and
// printing, and the kernel operations, which go through an
// ipfctl.Backend.
//
// A command line is handled in two phases. First every option is read in
// order, every file is read and parsed and every argument checked, with
// nothing sent to the kernel; any error ends the run there, having changed
// nothing. Then the operations go to the backend as one transaction
// (ipfctl.Backend.Apply), which checks them against the loaded rules and
// applies them in order under one lock.
package ipf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"sluice/internal/getopt"
	"sluice/internal/ipfctl"
	"sluice/internal/rulefile"
	"sluice/internal/rules/ipf"
)

// Version is the version string ipf -V prints.
const Version = ipfctl.Version

// Main runs ipf with args (without the program name) on the kernel
// datapath pinned in ipfctl.PinDir() and returns the exit status. When
// started as the rollback watchdog of an earlier ipf -W it runs that
// instead (see ipfctl.RunWatchdog).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if os.Getenv(ipfctl.WatchdogEnv) == "1" {
		return ipfctl.RunWatchdog(stdin, stdout)
	}
	c := &Command{Stdin: stdin, Stdout: stdout, Stderr: stderr, Backend: ipfctl.FilterBackend(ipfctl.PinDir())}
	return c.Run(args)
}

// Command is one run of ipf.
type Command struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Backend is the datapath; nil means none is available, and every
	// kernel operation fails with ipfctl.ErrNoKernel unless -n is given.
	Backend ipfctl.Backend
	// Getenv reads the environment (IPF_PREDEFINED); nil means os.Getenv.
	Getenv func(string) string
	// ReadFile reads rule files; nil means readBounded.
	ReadFile func(string) ([]byte, error)
}

// options are the flags seen so far; each -f is parsed with the options
// that precede it, as in IPFilter.
type options struct {
	noAction, verbose, noResolve, debug, remove bool
	inet6, inet4                                bool
	set                                         ipfctl.Set
	zero                                        bool
	expr                                        []ipf.ExprClause
}

// step is one operation and how to report its result.
type step struct {
	op      ipfctl.Op
	verbose bool
	print   ipf.PrintOptions // -z: how to print the rules
}

const optString = "46Ac:CdDEf:F:hIl:m:noPrRsT:vVW:yzZ"

// Usage is ipf's complete usage text (-h).
const Usage = `usage: ipf [-46AdDEhInoPrRsvVyzZ] [-C] [-W seconds] [-F i|o|a|s|S|N] [-f file]
           [-l block|pass|nomatch|none|state|nat] [-m expr|e|d|q|t] [-T list|name[=value][,...]]
  -f file    read rules from file ("-": standard input) and add them to the set
  -r         remove the rules of the following -f files instead of adding them
  -A, -I     act on the active set (the default) / on the inactive set
  -F i|o|a   flush the input, output or all rules (groups included) of the set
  -F s|S|N   flush state: s closing TCP entries, S all, N those in TCP state N
             (5..11) or idle for more than N seconds (N >= 30)
  -m expr    with -F: select the state entries to flush by an expression
  -m e|d|q|t HP-UX's DCA mode (keep limit): enable, disable, query, or
             show the connections each limit holds
  -s         swap the active and the inactive set
  -E, -D     enable the filter (load the datapath) / disable it (detach and
             remove everything: rules, state, counters)
  -l what    default logging: pass, block, nomatch (add), none (clear), state
  -T arg     tunables: list, show name, or set name=value[,name=value...]
  -y         re-read interface names and addresses into the loaded sets
  -z         with -f: print and zero the counters of those rules
  -Z         print and zero the statistics
  -V         print the version and the filter's status
  -n         dry run: parse and check everything, change nothing; on a host
             with a loaded filter, print what would change in each list
  -v         verbose: print each rule as parsed and what each step did
  -R         do not resolve host, network and interface names
  -4, -6     read the following files as IPv4 / IPv6 only
  -d         debug: print more of each rule
  -W sec     apply, then roll everything back by itself after sec seconds
             unless confirmed with ipf -C (a detached watchdog does it: a
             lost SSH session cannot leave a bad set in force)
  -C         confirm the pending -W load
  -o, -P     accepted for IPFilter compatibility, no effect
  -c lang    generate C code for the rules: not supported
  -h         print this help
The whole command line is checked first: every file parsed, rules to remove
found, tunables known, the new sets compiled and within the kernel's limits.
Only then is it applied, in command-line order, as one transaction under a
lock shared with other ipf and ippool runs. An error changes nothing.
`

// Run executes ipf with args (without the program name) and returns the
// exit status: 0 done, 1 an error, 2 a usage error.
func (c *Command) Run(args []string) int {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.ReadFile == nil {
		c.ReadFile = readBounded
	}
	if c.Stdin == nil {
		c.Stdin = strings.NewReader("")
	}
	var (
		o       options
		steps   []step
		failed  bool
		confirm bool
		within  time.Duration
		version bool
	)
	g := getopt.New(args, optString)
	sawAction := false
	for {
		opt, ok, err := g.Next()
		if err != nil {
			fmt.Fprintf(c.Stderr, "ipf: %v\n", err)
			fmt.Fprint(c.Stderr, Usage)
			return 2
		}
		if !ok {
			break
		}
		switch opt.Flag {
		case 'h':
			fmt.Fprint(c.Stdout, Usage)
			return 0
		case 'C':
			confirm = true
		case 'W':
			n, err := strconv.Atoi(opt.Arg)
			if err != nil || n < 1 {
				fmt.Fprintf(c.Stderr, "ipf: -W %s: expected a number of seconds\n", opt.Arg)
				return 2
			}
			within = time.Duration(n) * time.Second
			continue
		case 'V':
			version = true
		}
		sawAction = true
		st, err := c.parse(&o, opt.Flag, opt.Arg)
		if err != nil {
			fmt.Fprintf(c.Stderr, "ipf: %v\n", err)
			failed = true
			continue
		}
		steps = append(steps, st...)
	}
	if g.Optind() < len(args) || !sawAction {
		fmt.Fprint(c.Stderr, Usage)
		return 2
	}
	if failed {
		return 1
	}
	switch {
	case confirm:
		return c.confirm(steps)
	case o.noAction:
		return c.dryRun(steps, version)
	}
	if within > 0 && !changesSets(steps) {
		fmt.Fprintln(c.Stderr, "ipf: -W: the command line changes no rule set, so there is nothing to roll back")
		return 2
	}
	if len(steps) == 0 {
		return 0
	}
	if c.Backend == nil {
		fmt.Fprintf(c.Stderr, "ipf: %v\n", ipfctl.ErrNoKernel)
		return 1
	}
	ops := make([]ipfctl.Op, len(steps))
	for i := range steps {
		ops[i] = steps[i].op
	}
	warn := func(msg string) { fmt.Fprintf(c.Stderr, "ipf: warning: %s\n", msg) }
	res, err := c.Backend.Apply(ops, ipfctl.ApplyOptions{ConfirmWithin: within, Warn: warn})
	for i := range res {
		c.report(&steps[i], &res[i])
	}
	if err != nil {
		fmt.Fprintf(c.Stderr, "ipf: %v\n", err)
		return 1
	}
	if within > 0 {
		fmt.Fprintf(c.Stdout, "ipf: applied; rolled back in %d s unless confirmed with ipf -C\n", int(within/time.Second))
	}
	return 0
}

func changesSets(steps []step) bool {
	for _, s := range steps {
		switch s.op.Kind {
		case ipfctl.OpAdd, ipfctl.OpRemove, ipfctl.OpFlush, ipfctl.OpSwap, ipfctl.OpSync:
			return true
		}
	}
	return false
}

// confirm is ipf -C: it stands alone on its command line.
func (c *Command) confirm(steps []step) int {
	if len(steps) > 0 {
		fmt.Fprintln(c.Stderr, "ipf: -C confirms a pending -W load and takes no other options")
		return 2
	}
	if c.Backend == nil {
		fmt.Fprintf(c.Stderr, "ipf: %v\n", ipfctl.ErrNoKernel)
		return 1
	}
	if err := c.Backend.Confirm(); err != nil {
		fmt.Fprintf(c.Stderr, "ipf: -C: %v\n", err)
		return 1
	}
	fmt.Fprintln(c.Stdout, "ipf: load confirmed, rollback cancelled")
	return 0
}

// dryRun is ipf -n: the files were parsed and checked; on a host with a
// loaded filter the backend also checks the operations against it and
// says what they would change.
func (c *Command) dryRun(steps []step, version bool) int {
	if version {
		fmt.Fprintf(c.Stdout, "ipf: %s\nKernel: not available\nRunning: no\n", Version)
	}
	if c.Backend == nil || !changesSets(steps) {
		return 0
	}
	ops := make([]ipfctl.Op, 0, len(steps))
	for _, s := range steps {
		if s.op.Kind != ipfctl.OpStatus {
			ops = append(ops, s.op)
		}
	}
	d, err := c.Backend.Plan(ops)
	if err != nil {
		fmt.Fprintf(c.Stderr, "ipf: -n: %v\n", err)
		return 1
	}
	if d != nil {
		for _, w := range d.Warnings {
			fmt.Fprintf(c.Stderr, "ipf: warning: %s\n", w)
		}
		writeDiff(c.Stdout, d)
	}
	return 0
}

// writeDiff prints what a dry run would change, list by list.
func writeDiff(w io.Writer, d *ipfctl.Diff) {
	if d.Swapped {
		fmt.Fprintln(w, "# would swap the active and inactive sets")
	}
	if len(d.Lists) == 0 {
		fmt.Fprintln(w, "# no change to the loaded rules")
		return
	}
	for _, l := range d.Lists {
		name := "main list " + l.Dir.String()
		if l.Acct {
			name = "accounting list " + l.Dir.String()
		}
		if l.Group != "" {
			name = "group " + l.Group
		}
		fmt.Fprintf(w, "# %s set, %s: %d added, %d removed", l.Set, name, len(l.Added), len(l.Removed))
		if l.Reordered {
			fmt.Fprint(w, ", order changed")
		}
		fmt.Fprintln(w)
		for _, r := range l.Removed {
			fmt.Fprintf(w, "- %s\n", r)
		}
		for _, r := range l.Added {
			fmt.Fprintf(w, "+ %s\n", r)
		}
	}
}

// report prints what a step returned.
func (c *Command) report(s *step, r *ipfctl.Result) {
	switch s.op.Kind {
	case ipfctl.OpFlush:
		if s.verbose {
			fmt.Fprintf(c.Stdout, "%d filter rules removed\n", r.Count)
		}
	case ipfctl.OpFlushState:
		if s.verbose {
			fmt.Fprintf(c.Stdout, "%d state entries removed\n", r.Count)
		}
	case ipfctl.OpSwap:
		fmt.Fprintf(c.Stdout, "Set %d now inactive\n", r.SetNo)
	case ipfctl.OpSync:
		if s.verbose {
			fmt.Fprintln(c.Stdout, "filter sync'd")
		}
	case ipfctl.OpZeroStats, ipfctl.OpTunables, ipfctl.OpDCA:
		fmt.Fprint(c.Stdout, r.Text)
	case ipfctl.OpStatus:
		fmt.Fprintf(c.Stdout, "ipf: %s\n%s", Version, r.Text)
	case ipfctl.OpZeroRules:
		for _, rc := range r.Counters {
			fmt.Fprintf(c.Stdout, "hits %d bytes %d %s\n", rc.Hits, rc.Bytes, ipf.Format(rc.Rule, s.print))
		}
	}
}

// parse handles one option: it updates o and returns the operations the
// option stands for (none for a pure setting).
func (c *Command) parse(o *options, opt byte, arg string) ([]step, error) {
	op := func(k ipfctl.OpKind) []step { return []step{{op: ipfctl.Op{Kind: k, Set: o.set}, verbose: o.verbose}} }
	switch opt {
	case '4':
		o.inet4, o.inet6 = true, false
	case '6':
		o.inet6, o.inet4 = true, false
	case 'A':
		o.set = ipfctl.SetActive
	case 'I':
		o.set = ipfctl.SetInactive
	case 'c':
		return nil, fmt.Errorf("-c %s: generating C code: %w", arg, errors.ErrUnsupported)
	case 'd':
		o.debug = true
	case 'n':
		o.noAction = true
	case 'o', 'P':
		// -o does nothing in IPFilter either; -P (auth device) has no
		// separate device here.
	case 'r':
		o.remove = true
	case 'R':
		o.noResolve = true
	case 'v':
		o.verbose = true
	case 'z':
		o.zero = true
	case 'C':
	case 'm':
		if len(arg) == 1 && strings.Contains("edqt", arg) {
			// HP-UX: -m e|d|q|t is the DCA mode; 5.x's -m is an exp
			// filter, which is never one of these letters
			s := op(ipfctl.OpDCA)
			s[0].op.Arg = arg
			return s, nil
		}
		e, err := ipf.ParseExpr(arg)
		if err != nil {
			return nil, fmt.Errorf("-m: %w", err)
		}
		o.expr = e
	case 'V':
		return op(ipfctl.OpStatus), nil
	case 'f':
		return c.loadFile(o, arg)
	case 'F':
		return flush(o, arg)
	case 'E':
		return op(ipfctl.OpEnable), nil
	case 'D':
		return op(ipfctl.OpDisable), nil
	case 's':
		return op(ipfctl.OpSwap), nil
	case 'y':
		return op(ipfctl.OpSync), nil
	case 'Z':
		return op(ipfctl.OpZeroStats), nil
	case 'l':
		switch arg {
		case "pass", "block", "nomatch", "none", "state", "nat":
		default:
			return nil, fmt.Errorf("-l %s: expected pass, block, nomatch, none, state or nat", arg)
		}
		s := op(ipfctl.OpLogFlags)
		s[0].op.Arg = arg
		return s, nil
	case 'T':
		if err := checkTunables(arg); err != nil {
			return nil, fmt.Errorf("-T %s: %w", arg, err)
		}
		s := op(ipfctl.OpTunables)
		s[0].op.Arg = arg
		return s, nil
	}
	return nil, nil
}

func flush(o *options, arg string) ([]step, error) {
	var which ipfctl.FlushWhich
	switch arg {
	case "i", "I":
		which = ipfctl.FlushIn
	case "o", "O":
		which = ipfctl.FlushOut
	case "a", "A":
		which = ipfctl.FlushBoth
	default:
		if arg != "s" && arg != "S" && !isNumber(arg) {
			return nil, fmt.Errorf("-F %s: expected i, o, a, s, S or a number", arg)
		}
		return []step{{op: ipfctl.Op{Kind: ipfctl.OpFlushState, Arg: arg, Expr: o.expr}, verbose: o.verbose}}, nil
	}
	return []step{{op: ipfctl.Op{Kind: ipfctl.OpFlush, Set: o.set, Which: which}, verbose: o.verbose}}, nil
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}

// predefined reads IPF_PREDEFINED: `name=value` pairs separated by `;`.
func (c *Command) predefined() map[string]string {
	s := c.Getenv("IPF_PREDEFINED")
	if s == "" {
		return nil
	}
	vars := map[string]string{}
	for _, kv := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vars[strings.TrimSpace(k)] = v
	}
	return vars
}

// maxFileSize bounds a rule file: the datapath's 4 194 304 rules
// (bpf.MaxRules) of a blocklist's length fit; beyond this a file is a
// mistake (or an attack) and reading it would only exhaust memory. A
// variable so that a test can bound an endless source cheaply.
var maxFileSize int64 = 256 << 20

// readBounded reads a rule file of at most maxFileSize bytes: a FIFO or
// a device that never ends fails at the bound (rulefile).
func readBounded(name string) ([]byte, error) { return rulefile.Read(name, nil, maxFileSize) }

func (c *Command) readFile(name string) ([]byte, error) {
	if name == "-" {
		return rulefile.ReadFrom(c.Stdin, "reading standard input", maxFileSize)
	}
	if fi, err := os.Stat(name); err == nil && fi.Mode().IsRegular() && fi.Size() > maxFileSize {
		return nil, fmt.Errorf("reading %s: %d bytes, more than %d MiB", name, fi.Size(), maxFileSize>>20)
	}
	src, err := c.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return src, nil
}

// bigFile is the size of a rule file from which ipf trades memory for
// load time (about 100 000 rules).
const bigFile = 4 << 20

// bigFileGC turns the collector off for a big rule file, up to a memory
// limit of 1 GiB plus 40 bytes per byte of the file (a million-rule
// blocklist, 38.6 MB, peaks at 1.2 GB): what a load allocates stays
// live until the set is in the kernel, and the process ends right after,
// so a collection (two of them took ~0.6 s of CPU for a million rules)
// finds next to nothing to free. Past the limit the collector runs
// again. A lower limit set by the environment (GOMEMLIMIT) stays.
func bigFileGC(size int) {
	limit := int64(1<<30) + 40*int64(size)
	if cur := debug.SetMemoryLimit(-1); cur < limit {
		limit = cur
	}
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(-1)
}

// hugeHeapPerByte is about what a load allocates per byte of a big
// file (a million-rule blocklist of 38.6 MB: 1.5 GB).
const hugeHeapPerByte = 36

func (c *Command) loadFile(o *options, name string) ([]step, error) {
	src, err := c.readFile(name)
	if err != nil {
		return nil, err
	}
	if len(src) > bigFile {
		bigFileGC(len(src))
		hugeHeap(hugeHeapPerByte * len(src))
	}
	cfg, perr := ipf.ParseConfig(name, src, ipf.ParseOptions{
		NoResolve: o.noResolve, Inet6: o.inet6, Inet4: o.inet4, Vars: c.predefined(),
	})
	var rules []*ipf.Rule
	if cfg != nil {
		rules = cfg.Rules
		for _, w := range cfg.Warnings {
			fmt.Fprintln(c.Stderr, w)
		}
	}
	popt := ipf.PrintOptions{NoResolve: o.noResolve, Verbose: true, Debug: o.debug}
	if o.noAction {
		popt.Unresolved = ipf.MarkAllUnresolved
	} else {
		// one lookup per name (each reads every interface from the
		// kernel; -v prints every rule of a blocklist)
		unresolved := map[string]bool{}
		popt.Unresolved = func(n string) bool {
			u, ok := unresolved[n]
			if !ok {
				_, err := net.InterfaceByName(n)
				u = err != nil
				unresolved[n] = u
			}
			return u
		}
	}
	if o.verbose {
		for _, r := range rules {
			fmt.Fprint(c.Stdout, ipf.FormatInlineTables(r))
			fmt.Fprintln(c.Stdout, ipf.Format(r, popt))
		}
	}
	if perr != nil {
		var el ipf.ErrorList
		if errors.As(perr, &el) {
			for _, e := range el {
				fmt.Fprintf(c.Stderr, "ipf: %v\n", e)
			}
			return nil, fmt.Errorf("%s: %d error(s)", name, len(el))
		}
		return nil, perr
	}
	kind := ipfctl.OpAdd
	switch {
	case o.zero:
		kind = ipfctl.OpZeroRules
	case o.remove:
		kind = ipfctl.OpRemove
	}
	return []step{{op: ipfctl.Op{Kind: kind, Set: o.set, Rules: rules, File: name}, verbose: o.verbose, print: popt}}, nil
}

// checkTunables validates the syntax of a -T argument: "list", or
// name[=value] items separated by commas.
func checkTunables(arg string) error {
	if arg == "list" {
		return nil
	}
	for _, item := range strings.Split(arg, ",") {
		name, value, hasValue := strings.Cut(item, "=")
		if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			return fmt.Errorf("bad tunable name %q", name)
		}
		if hasValue && value == "" {
			return fmt.Errorf("missing value for %s", name)
		}
	}
	return nil
}

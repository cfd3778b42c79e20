// Package cli is the ipf(8) command: option handling, offline parsing and
// printing, and the kernel operations, which go through a Backend.
package ipf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"sluice/internal/getopt"
	"sluice/internal/rules/ipf"
)

// ErrNoKernel is returned for kernel operations when no Backend is wired in.
var ErrNoKernel = errors.New("kernel datapath not available")

// Set names one of the two rule sets of the filter.
type Set uint8

// The rule sets: -A (default) and -I.
const (
	SetActive Set = iota
	SetInactive
)

// FlushWhich is what `ipf -F` flushes from the rule lists.
type FlushWhich uint8

// The rule-list flush targets (-F i, -F o, -F a).
const (
	FlushIn FlushWhich = 1 << iota
	FlushOut
	FlushBoth = FlushIn | FlushOut
)

// Backend is the filter in the kernel (or any datapath) that ipf drives.
// The eBPF loader implements it; ipf never touches the datapath directly.
// Each method is one ioctl of the original: it must be atomic (a failed
// call changes nothing) and return an error wrapping the reason.
type Backend interface {
	// AddRules appends (remove=false) or deletes (remove=true) rules in
	// the given set: `ipf [-I] [-r] -f file`. Rules with HasInsertAt go
	// to that position.
	AddRules(set Set, rules []*ipf.Rule, remove bool) error
	// FlushRules empties the in and/or out lists (and their groups) of a
	// set and returns how many rules were removed: `ipf -F i|o|a`.
	FlushRules(set Set, which FlushWhich) (int, error)
	// FlushState removes state entries and returns how many: arg is
	// "S" (all), "s" (TCP past ESTABLISHED), "5".."11" (that TCP state) or
	// a number >= 30 (idle longer than that many seconds); expr is the
	// parsed `-m` filter or nil.
	FlushState(arg string, expr []ipf.ExprClause) (int, error)
	// Swap makes the inactive set active and returns the number of the
	// set that is now inactive: `ipf -s`.
	Swap() (int, error)
	// SetEnabled switches the whole filter on or off: `ipf -E` / `-D`.
	SetEnabled(on bool) error
	// ZeroRuleCounters returns the hits and bytes of a rule of the set
	// and zeroes them: `ipf -z -f file`.
	ZeroRuleCounters(set Set, r *ipf.Rule) (hits, bytes uint64, err error)
	// ZeroStats zeroes the global statistics and returns the `-Z` report
	// text (§6.1 of the reference), printed as is.
	ZeroStats() (string, error)
	// SetLogFlags sets the default logging (-l pass|block|nomatch|none|
	// state|nat).
	SetLogFlags(what string) error
	// Tunables applies `-T list` ("list", "name", "name=value[,...]")
	// and returns what to print.
	Tunables(arg string) (string, error)
	// SyncInterfaces re-reads interface addresses and indexes: `ipf -y`.
	SyncInterfaces() error
	// Status returns the `-V` lines after the first: Kernel, Running,
	// Log Flags, Default, Active list, Feature mask.
	Status() (string, error)
}

// DCABackend is a Backend with HP-UX's DCA mode (the connection limits of
// `keep limit` rules): `ipf -m e|d|q|t`.
type DCABackend interface {
	// DCA enables (e) or disables (d) the limits, queries the mode (q) or
	// shows the connection table (t), and returns what to print.
	DCA(mode byte) (string, error)
}

// Version is the version string ipf -V prints.
const Version = "IP Filter: v5.1.2 (Sluice)"

// Command is one run of ipf.
type Command struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Backend is the datapath; nil means none is available, and every
	// kernel operation fails with ErrNoKernel unless -n is given.
	Backend Backend
	// Getenv reads the environment (IPF_PREDEFINED); nil means os.Getenv.
	Getenv func(string) string
	// ReadFile reads rule files; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

// options are the flags seen so far; ipf acts on each as it is parsed.
type options struct {
	noAction, verbose, noResolve, debug, remove bool
	inet6, inet4                                bool
	set                                         Set
	zero                                        bool
	expr                                        []ipf.ExprClause
}

const optString = "46Ac:dDEf:F:Il:m:noPrRsT:vVyzZ"

// Run executes ipf with args (without the program name) and returns the
// exit status.
func (c *Command) Run(args []string) int {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.ReadFile == nil {
		c.ReadFile = os.ReadFile
	}
	if c.Stdin == nil {
		c.Stdin = strings.NewReader("")
	}
	var o options
	g := getopt.New(args, optString)
	sawAction := false
	for {
		opt, ok, err := g.Next()
		if err != nil {
			fmt.Fprintf(c.Stderr, "ipf: %v\n", err)
			c.usage()
			return 1
		}
		if !ok {
			break
		}
		sawAction = true
		if err := c.do(&o, opt.Flag, opt.Arg); err != nil {
			fmt.Fprintf(c.Stderr, "ipf: %v\n", err)
			return 1
		}
	}
	if g.Optind() < len(args) || !sawAction {
		c.usage()
		return 1
	}
	return 0
}

func (c *Command) usage() {
	fmt.Fprintln(c.Stderr, "usage: ipf [-46AdDEInoPrRsvVyzZ] [-l block|pass|nomatch|state|nat] [-c c] [-F i|o|a|s|S|N] [-m expr|e|d|q|t] [-T list] -f filename")
}

// dca carries out ipf -m e|d|q|t.
func (c *Command) dca(o *options, mode byte) error {
	b, ok, err := c.kernel(o)
	if err != nil || !ok {
		return err
	}
	db, ok := b.(DCABackend)
	if !ok {
		return fmt.Errorf("-m %c: DCA mode: %w", mode, errors.ErrUnsupported)
	}
	out, err := db.DCA(mode)
	if err != nil {
		return fmt.Errorf("-m %c: %w", mode, err)
	}
	fmt.Fprint(c.Stdout, out)
	return nil
}

// kernel returns the backend, or an error when the operation must reach
// the kernel and none is available. ok=false (with no error) means -n:
// skip the operation.
func (c *Command) kernel(o *options) (Backend, bool, error) {
	if o.noAction {
		return nil, false, nil
	}
	if c.Backend == nil {
		return nil, false, ErrNoKernel
	}
	return c.Backend, true, nil
}

func (c *Command) do(o *options, opt byte, arg string) error {
	switch opt {
	case '4':
		o.inet4, o.inet6 = true, false
	case '6':
		o.inet6, o.inet4 = true, false
	case 'A':
		o.set = SetActive
	case 'I':
		o.set = SetInactive
	case 'c':
		return fmt.Errorf("-c %s: generating C code is not supported", arg)
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
	case 'm':
		if len(arg) == 1 && strings.Contains("edqt", arg) {
			// HP-UX: -m e|d|q|t is the DCA mode; 5.x's -m is an exp
			// filter, which is never one of these letters
			return c.dca(o, arg[0])
		}
		e, err := ipf.ParseExpr(arg)
		if err != nil {
			return fmt.Errorf("-m: %w", err)
		}
		o.expr = e
	case 'V':
		fmt.Fprintf(c.Stdout, "ipf: %s\n", Version)
		b, ok, err := c.kernel(o)
		if err != nil || !ok {
			fmt.Fprintln(c.Stdout, "Kernel: not available")
			fmt.Fprintln(c.Stdout, "Running: no")
			return nil
		}
		s, err := b.Status()
		if err != nil {
			return fmt.Errorf("-V: %w", err)
		}
		fmt.Fprint(c.Stdout, s)
	case 'f':
		return c.loadFile(o, arg)
	case 'F':
		return c.flush(o, arg)
	case 'E', 'D':
		b, ok, err := c.kernel(o)
		if err != nil || !ok {
			return err
		}
		return b.SetEnabled(opt == 'E')
	case 's':
		b, ok, err := c.kernel(o)
		if err != nil || !ok {
			return err
		}
		n, err := b.Swap()
		if err != nil {
			return fmt.Errorf("swapping rule sets: %w", err)
		}
		fmt.Fprintf(c.Stdout, "Set %d now inactive\n", n)
	case 'y':
		b, ok, err := c.kernel(o)
		if err != nil || !ok {
			return err
		}
		if err := b.SyncInterfaces(); err != nil {
			return fmt.Errorf("syncing interfaces: %w", err)
		}
		if o.verbose {
			fmt.Fprintln(c.Stdout, "filter sync'd")
		}
	case 'Z':
		b, ok, err := c.kernel(o)
		if err != nil || !ok {
			return err
		}
		s, err := b.ZeroStats()
		if err != nil {
			return fmt.Errorf("zeroing statistics: %w", err)
		}
		fmt.Fprint(c.Stdout, s)
	case 'l':
		switch arg {
		case "pass", "block", "nomatch", "none", "state", "nat":
		default:
			return fmt.Errorf("-l %s: expected pass, block, nomatch, none, state or nat", arg)
		}
		b, ok, err := c.kernel(o)
		if err != nil || !ok {
			return err
		}
		return b.SetLogFlags(arg)
	case 'T':
		if err := checkTunables(arg); err != nil {
			return fmt.Errorf("-T %s: %w", arg, err)
		}
		b, ok, err := c.kernel(o)
		if err != nil || !ok {
			if err != nil {
				return fmt.Errorf("-T %s: %w", arg, err)
			}
			return nil
		}
		s, err := b.Tunables(arg)
		if err != nil {
			return fmt.Errorf("-T %s: %w", arg, err)
		}
		fmt.Fprint(c.Stdout, s)
	}
	return nil
}

func (c *Command) flush(o *options, arg string) error {
	var which FlushWhich
	switch arg {
	case "i", "I":
		which = FlushIn
	case "o", "O":
		which = FlushOut
	case "a", "A":
		which = FlushBoth
	default:
		if arg != "s" && arg != "S" && !isNumber(arg) {
			return fmt.Errorf("-F %s: expected i, o, a, s, S or a number", arg)
		}
		b, ok, err := c.kernel(o)
		if err != nil || !ok {
			return err
		}
		n, err := b.FlushState(arg, o.expr)
		if err != nil {
			return fmt.Errorf("flushing state: %w", err)
		}
		if o.verbose {
			fmt.Fprintf(c.Stdout, "%d state entries removed\n", n)
		}
		return nil
	}
	b, ok, err := c.kernel(o)
	if err != nil || !ok {
		return err
	}
	n, err := b.FlushRules(o.set, which)
	if err != nil {
		return fmt.Errorf("flushing rules: %w", err)
	}
	if o.verbose {
		fmt.Fprintf(c.Stdout, "%d filter rules removed\n", n)
	}
	return nil
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

func (c *Command) loadFile(o *options, name string) error {
	var src []byte
	var err error
	if name == "-" {
		src, err = io.ReadAll(c.Stdin)
	} else {
		src, err = c.ReadFile(name)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	rules, perr := ipf.Parse(name, src, ipf.ParseOptions{
		NoResolve: o.noResolve, Inet6: o.inet6, Inet4: o.inet4, Vars: c.predefined(),
	})
	popt := ipf.PrintOptions{NoResolve: o.noResolve, Verbose: true, Debug: o.debug}
	if o.noAction {
		popt.Unresolved = ipf.MarkAllUnresolved
	} else {
		popt.Unresolved = func(n string) bool { _, err := net.InterfaceByName(n); return err != nil }
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
			return fmt.Errorf("%s: %d error(s)", name, len(el))
		}
		return perr
	}
	b, ok, err := c.kernel(o)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if o.zero {
		for _, r := range rules {
			h, by, err := b.ZeroRuleCounters(o.set, r)
			if err != nil {
				return fmt.Errorf("zeroing counters: %w", err)
			}
			fmt.Fprintf(c.Stdout, "hits %d bytes %d %s\n", h, by, ipf.Format(r, popt))
		}
		return nil
	}
	if err := b.AddRules(o.set, rules, o.remove); err != nil {
		return fmt.Errorf("loading %s: %w", name, err)
	}
	return nil
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

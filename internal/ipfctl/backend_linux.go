package ipfctl

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf/link"

	"sluice/internal/bpf"
	cli "sluice/internal/cmd/ipf"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// Backend is ipf's cli.Backend over the pinned eBPF datapath. Every ipf
// run is a new process, so a Backend holds no state between calls but the
// open datapath handle.
type Backend struct {
	dir string
	d   *bpf.Datapath
	// loaded is set when d came from bpf.Load (programs available, so it
	// can attach); OpenPinned handles reach the maps only.
	loaded bool
	// failVerifier makes loads fail in the verifier (tests of the
	// failure path).
	failVerifier bool
	// pools is the ippool table store rules are compiled with (nil:
	// the one in PoolDir(), opened on first use).
	pools *PoolStore
}

var _ cli.Backend = (*Backend)(nil)

// Kernel returns the Backend ipf uses for the datapath pinned in dir.
func Kernel(dir string) cli.Backend { return New(dir) }

// New returns a Backend for the datapath pinned in dir ("" = default).
func New(dir string) *Backend { return &Backend{dir: dir} }

// Close releases the handle; the pinned datapath stays.
func (b *Backend) Close() error {
	if b.d == nil {
		return nil
	}
	err := b.d.Close()
	b.d = nil
	return err
}

func (b *Backend) pinDir() string {
	if b.dir == "" {
		return bpf.DefaultPinDir
	}
	return b.dir
}

// open returns the pinned datapath, or bpf.ErrNotLoaded (wrapped).
func (b *Backend) open() (*bpf.Datapath, error) {
	if b.d != nil {
		return b.d, nil
	}
	d, err := bpf.OpenPinned(b.dir)
	if err != nil {
		return nil, err
	}
	b.d = d
	return d, nil
}

// load makes sure the datapath is loaded and attached. The first time it
// attaches to ifaces, the interfaces the rules name (those that exist), or
// to every non-loopback interface when they name none; later it attaches
// only to named interfaces it is not on yet. The programs are loaded
// (running the verifier) only when something must be attached; loading
// reuses the pinned maps, so rules and state survive.
func (b *Backend) load(ifaces []string) (*bpf.Datapath, error) {
	var names []string
	for _, n := range ifaces {
		if _, err := net.InterfaceByName(n); err == nil {
			names = append(names, n)
		}
	}
	attached := map[int]bool{}
	if d, err := b.open(); err == nil {
		for _, idx := range d.Attached() {
			attached[idx] = true
		}
	}
	var missing []string
	if len(attached) > 0 {
		for _, n := range names {
			if ifc, err := net.InterfaceByName(n); err == nil && !attached[ifc.Index] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return b.d, nil
		}
	} else {
		missing = names // none: every non-loopback interface
	}
	if !b.loaded {
		d, err := bpf.Load(bpf.Options{PinDir: b.dir, ForceVerifierError: b.failVerifier})
		if err != nil {
			return nil, fmt.Errorf("loading the kernel datapath into %s: %w", b.pinDir(), err)
		}
		if b.d != nil {
			b.d.Close()
		}
		b.d, b.loaded = d, true
	}
	if err := b.d.Attach(missing); err != nil {
		return nil, err
	}
	return b.d, nil
}

func toSet(s cli.Set) bpf.Set {
	if s == cli.SetInactive {
		return bpf.Inactive
	}
	return bpf.Active
}

// currentRules re-parses the printed rules of a loaded set.
func currentRules(d *bpf.Datapath, s bpf.Set) ([]*ipf.Rule, error) {
	infos, err := d.Rules(s)
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		return nil, nil
	}
	var src strings.Builder
	for _, ri := range infos {
		src.WriteString(ri.Text)
		src.WriteByte('\n')
	}
	rules, err := ipf.Parse("(loaded "+s.String()+" set)", []byte(src.String()), ipf.ParseOptions{NoResolve: true})
	if err != nil {
		return nil, fmt.Errorf("re-reading the loaded rules: %w", err)
	}
	if len(rules) != len(infos) {
		return nil, fmt.Errorf("re-reading the loaded rules: got %d rules, want %d", len(rules), len(infos))
	}
	return rules, nil
}

// AddRules adds (or with remove, deletes) rules and reloads the set in
// one atomic step; on any error the set is as it was.
func (b *Backend) AddRules(set cli.Set, rules []*ipf.Rule, remove bool) error {
	s := toSet(set)
	// everything that can fail on the rules (parsing the loaded ones,
	// compiling) happens before the datapath is loaded or touched
	var cur []*ipf.Rule
	if d, err := b.open(); err == nil {
		if cur, err = currentRules(d, s); err != nil {
			return err
		}
	} else if !errors.Is(err, bpf.ErrNotLoaded) {
		return err
	}
	all, err := editRules(cur, rules, remove)
	if err != nil {
		return err
	}
	// the pool lock is held until the set is loaded, so an ippool edit
	// cannot slip in between and be lost
	pools, unlock, err := b.loadedPools()
	if err != nil {
		return err
	}
	defer unlock()
	im, err := bpf.Compile(all, bpf.CompileOptions{Pools: pools})
	if err != nil {
		return err
	}
	d, err := b.load(im.Interfaces())
	if err != nil {
		return err
	}
	return d.LoadRules(im, s)
}

// editRules returns cur with add appended, or with each rule of add
// removed (matched by its printed form, first occurrence).
func editRules(cur, add []*ipf.Rule, remove bool) ([]*ipf.Rule, error) {
	if !remove {
		return append(append([]*ipf.Rule(nil), cur...), add...), nil
	}
	out := append([]*ipf.Rule(nil), cur...)
	for _, r := range add {
		text := ipf.FormatRule(r)
		i := 0
		for i < len(out) && ipf.FormatRule(out[i]) != text {
			i++
		}
		if i == len(out) {
			return nil, fmt.Errorf("%s:%d: rule not loaded: %s", r.Pos.File, r.Pos.Line, text)
		}
		out = append(out[:i], out[i+1:]...)
	}
	return out, nil
}

// FlushRules empties lists of a set; with nothing loaded there is
// nothing to flush.
func (b *Backend) FlushRules(set cli.Set, which cli.FlushWhich) (int, error) {
	d, err := b.open()
	if errors.Is(err, bpf.ErrNotLoaded) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var w bpf.Which
	if which&cli.FlushIn != 0 {
		w |= bpf.FlushIn
	}
	if which&cli.FlushOut != 0 {
		w |= bpf.FlushOut
	}
	return d.Flush(w, toSet(set))
}

// tcpEstablished is IPFilter's TCP state number of ESTABLISHED; -F s
// flushes the states after it.
const tcpEstablished = 4

// FlushState removes state entries as ipf -F s|S|N does.
func (b *Backend) FlushState(arg string, expr []ipf.ExprClause) (int, error) {
	if expr != nil {
		return 0, errors.New("-m: state selection by expression is not supported by the kernel datapath")
	}
	match, err := stateMatcher(arg)
	if err != nil {
		return 0, err
	}
	d, err := b.open()
	if errors.Is(err, bpf.ErrNotLoaded) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if arg == "S" {
		return d.FlushStates(nil)
	}
	return d.FlushStates(match)
}

// stateMatcher returns the selection of ipf -F s, -F 5..11 and -F N>=30;
// a number below 30 outside 5..11 selects nothing, as in IPFilter.
func stateMatcher(arg string) (func(bpf.State) bool, error) {
	if arg == "S" {
		return func(bpf.State) bool { return true }, nil
	}
	if arg == "s" {
		return func(s bpf.State) bool {
			return s.Proto == 6 && (s.TCPState[0] > tcpEstablished || s.TCPState[1] > tcpEstablished)
		}, nil
	}
	n, err := strconv.ParseUint(arg, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("-F %s: expected s, S or a number", arg)
	}
	switch {
	case n >= 30:
		idle := time.Duration(n) * time.Second
		return func(s bpf.State) bool { return s.Idle > idle }, nil
	case n >= 5 && n <= 11:
		return func(s bpf.State) bool {
			return s.Proto == 6 && (s.TCPState[0] == uint8(n) || s.TCPState[1] == uint8(n))
		}, nil
	}
	return func(bpf.State) bool { return false }, nil
}

// Swap exchanges the sets, loading (and attaching) the datapath first if
// it is not there yet.
func (b *Backend) Swap() (int, error) {
	d, err := b.open()
	if errors.Is(err, bpf.ErrNotLoaded) {
		d, err = b.load(nil)
	}
	if err != nil {
		return 0, err
	}
	return d.Swap()
}

// SetEnabled implements -E and -D. -E loads the datapath (without
// attaching it) and turns filtering on; -D removes it completely, as
// unloading the ipf module does: detached from every interface and every
// pin deleted, rules and state gone.
func (b *Backend) SetEnabled(on bool) error {
	if on {
		if !b.loaded {
			d, err := bpf.Load(bpf.Options{PinDir: b.dir, ForceVerifierError: b.failVerifier})
			if err != nil {
				return fmt.Errorf("loading the kernel datapath into %s: %w", b.pinDir(), err)
			}
			if b.d != nil {
				b.d.Close()
			}
			b.d, b.loaded = d, true
		}
		return b.d.SetEnabled(true)
	}
	b.Close()
	b.loaded = false
	if err := Remove(b.pinDir()); err != nil {
		return fmt.Errorf("removing the datapath: %w", err)
	}
	return nil
}

// ZeroRuleCounters reports the counters of the first loaded rule printed
// as r is and zeroes them, leaving the other rules' counters as they are
// (ipf -z with a rule, as IPFilter's SIOCZRLST does).
func (b *Backend) ZeroRuleCounters(set cli.Set, r *ipf.Rule) (hits, bytes uint64, err error) {
	d, err := b.open()
	if err != nil {
		return 0, 0, err
	}
	s := toSet(set)
	infos, err := d.Rules(s)
	if err != nil {
		return 0, 0, err
	}
	text := ipf.FormatRule(r)
	for _, ri := range infos {
		if ri.Text == text {
			return d.ZeroRule(s, ri.Index)
		}
	}
	return 0, 0, fmt.Errorf("rule not loaded: %s", text)
}

// ZeroStats returns the -Z report and zeroes the global counters.
func (b *Backend) ZeroStats() (string, error) {
	d, err := b.open()
	if err != nil {
		return "", err
	}
	st, err := d.Stats()
	if err != nil {
		return "", err
	}
	out := FormatZeroStats(st)
	if err := d.ZeroStats(); err != nil {
		return "", err
	}
	return out, nil
}

// FormatZeroStats renders the statistics the way ipf -Z prints them.
func FormatZeroStats(s bpf.Stats) string {
	var w strings.Builder
	fmt.Fprintf(&w, "bad packets:\t\tin %d\tout %d\n", s.In.Bad, s.Out.Bad)
	fmt.Fprintf(&w, " input packets:\t\tblocked %d passed %d nomatch %d counted %d\n", s.In.Block, s.In.Pass, s.In.Nomatch, s.In.Acct)
	fmt.Fprintf(&w, "output packets:\t\tblocked %d passed %d nomatch %d counted %d\n", s.Out.Block, s.Out.Pass, s.Out.Nomatch, s.Out.Acct)
	fmt.Fprintf(&w, " input packets logged:\tblocked %d passed %d\n", s.In.LogBlock, s.In.LogPass)
	fmt.Fprintf(&w, "output packets logged:\tblocked %d passed %d\n", s.Out.LogBlock, s.Out.LogPass)
	return w.String()
}

// SetLogFlags implements ipf -l: pass, block and nomatch add to the
// logged verdicts, none clears them, state toggles state logging.
func (b *Backend) SetLogFlags(what string) error {
	d, err := b.open()
	if err != nil {
		return err
	}
	f := d.LogFlags()
	switch what {
	case "pass":
		f |= bpf.LogPass
	case "block":
		f |= bpf.LogBlock
	case "nomatch":
		f |= bpf.LogNomatch
	case "none":
		f = 0
	case "state":
		cur := uint64(0)
		for _, t := range d.Tunables() {
			if t.Name == "state_logging" {
				cur = t.Cur
			}
		}
		return d.SetTunable("state_logging", cur^1)
	case "nat":
		return errors.New("-l nat: the kernel datapath has no NAT")
	default:
		return fmt.Errorf("-l %s: unknown", what)
	}
	return d.SetLogFlags(f)
}

// Tunables implements ipf -T: "list", "name" (print) and
// "name=value,..." (set, each in turn).
func (b *Backend) Tunables(arg string) (string, error) {
	d, err := b.open()
	if err != nil {
		return "", err
	}
	ts := d.Tunables()
	find := func(name string) (bpf.Tunable, bool) {
		for _, t := range ts {
			if t.Name == name {
				return t, true
			}
		}
		return bpf.Tunable{}, false
	}
	var w strings.Builder
	if arg == "list" {
		for _, t := range ts {
			fmt.Fprintf(&w, "%s\tmin %d\tmax %d\tcurrent %d\n", t.Name, t.Min, t.Max, t.Cur)
		}
		return w.String(), nil
	}
	for _, item := range strings.Split(arg, ",") {
		name, value, set := strings.Cut(item, "=")
		t, ok := find(name)
		if !ok {
			return w.String(), fmt.Errorf("unknown tunable %q", name)
		}
		if !set {
			fmt.Fprintf(&w, "%s\tmin %d\tmax %d\tcurrent %d\n", t.Name, t.Min, t.Max, t.Cur)
			continue
		}
		v, err := strconv.ParseUint(value, 0, 64)
		if err != nil {
			return w.String(), fmt.Errorf("%s: bad value %q", name, value)
		}
		if err := d.SetTunable(name, v); err != nil {
			return w.String(), err
		}
	}
	return w.String(), nil
}

// SyncInterfaces recompiles both sets: interface names are resolved to
// indexes when a set is compiled, so an interface that appeared or was
// renamed since is picked up only by a reload.
func (b *Backend) SyncInterfaces() error {
	d, err := b.open()
	if err != nil {
		return err
	}
	pools, unlock, err := b.loadedPools()
	if err != nil {
		return err
	}
	defer unlock()
	for _, s := range []bpf.Set{bpf.Active, bpf.Inactive} {
		rules, err := currentRules(d, s)
		if err != nil {
			return err
		}
		im, err := bpf.Compile(rules, bpf.CompileOptions{Pools: pools})
		if err != nil {
			return err
		}
		if err := d.LoadRules(im, s); err != nil {
			return err
		}
	}
	return nil
}

// Status returns the ipf -V lines after the version.
func (b *Backend) Status() (string, error) {
	d, err := b.open()
	if errors.Is(err, bpf.ErrNotLoaded) {
		return fmt.Sprintf("Kernel: %s\nRunning: no\n", cli.Version), nil
	}
	if err != nil {
		return "", err
	}
	return formatStatus(d), nil
}

func formatStatus(d *bpf.Datapath) string {
	var w strings.Builder
	fmt.Fprintf(&w, "Kernel: %s\n", cli.Version)
	running := "no"
	if d.Enabled() {
		running = "yes"
	}
	fmt.Fprintf(&w, "Running: %s\n", running)
	f := d.LogFlags()
	fmt.Fprintf(&w, "Log Flags: %#x = ", uint32(f))
	var names []string
	if f&bpf.LogPass != 0 {
		names = append(names, "pass")
	}
	if f&bpf.LogBlock != 0 {
		names = append(names, "block")
	}
	if f&bpf.LogNomatch != 0 {
		names = append(names, "nomatch")
	}
	if len(names) == 0 {
		w.WriteString("none set\n")
	} else {
		w.WriteString(strings.Join(names, ", ") + "\n")
	}
	def := "nomatch -> block"
	for _, t := range d.Tunables() {
		if t.Name == "default_pass" {
			switch uint32(t.Cur) & ruleset.FRCmdMask {
			case ruleset.FRPass:
				def = "pass"
			case ruleset.FRBlock:
				def = "block"
			}
		}
	}
	fmt.Fprintf(&w, "Default: %s all, Logging: available\n", def)
	fmt.Fprintf(&w, "Active list: %d\n", d.ActiveSetNumber())
	fmt.Fprintf(&w, "Feature mask: %#x\n", featureMask)
	return w.String()
}

// featureMask is what ipf -V reports as compiled-in features: logging
// (0x1) and IPv6 (0x8); the datapath has no NAT, pools or auth.
const featureMask = 0x1 | 0x8

// Remove detaches and unpins the datapath in dir ("" = default) if one is
// there. Pins that no longer open as this version's maps (left by another
// build) are removed one by one, links first, so ipf -D always cleans up.
func Remove(dir string) error {
	if dir == "" {
		dir = bpf.DefaultPinDir
	}
	d, err := bpf.OpenPinned(dir)
	if errors.Is(err, bpf.ErrNotLoaded) {
		if _, serr := os.Stat(dir); serr != nil {
			return nil
		}
	} else if err == nil {
		return d.Remove()
	}
	var errs []error
	ents, rerr := os.ReadDir(dir)
	if rerr != nil {
		return rerr
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), "link_") {
			if l, err := link.LoadPinnedLink(p, nil); err == nil {
				// unpinning drops the last reference, which detaches
				if err := l.Unpin(); err != nil {
					errs = append(errs, err)
				}
				l.Close()
				continue
			}
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

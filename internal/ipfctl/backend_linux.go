package ipfctl

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"sluice/internal/bpf"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// Kernel is the Backend over the pinned eBPF datapath. Every ipf run is a
// new process, so a Kernel holds no state between calls but the open
// datapath handle.
type Kernel struct {
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
	// watchdog starts the rollback watchdog (nil: re-execute this
	// program, see startWatchdog).
	watchdog func(w *watchdogSpec) error
	// deferred are the attachments load put off while d is a first load
	// not yet published (see publish).
	deferred []attachReq
	// hook, when set, is called by tests at points of a transaction:
	// "publish" just before a first load is published (arg: its staging
	// directory), "step" after each step is committed.
	hook func(event, arg string)
	// aheadSaid is set once a load has warned of programs ahead of the
	// filter: one warning a command, however many sets it writes.
	aheadSaid bool
}

// attachReq is one call of load: the interfaces a set names, and whether
// a rule of it applies everywhere.
type attachReq struct {
	ifaces     []string
	everywhere bool
}

var _ Backend = (*Kernel)(nil)

// FilterBackend returns the Backend ipf uses for the datapath pinned in dir
// ("" = DefaultPinDir).
func FilterBackend(dir string) Backend { return NewKernel(dir) }

// NewKernel returns a Kernel for the datapath pinned in dir ("" = default).
func NewKernel(dir string) *Kernel { return &Kernel{dir: orDefault(dir)} }

// NewKernelWithPools returns a Kernel for the datapath pinned in dir whose
// pool tables live in poolDir ("" = PoolDir()).
func NewKernelWithPools(dir, poolDir string) *Kernel {
	return &Kernel{dir: orDefault(dir), pools: NewPoolStore(poolDir)}
}

// Close releases the handle; the pinned datapath stays. A first load
// that was not published (its command failed half way) is thrown away.
func (b *Kernel) Close() error {
	if b.d == nil {
		return nil
	}
	var err error
	if !b.d.Published() {
		err = b.d.Remove()
	} else {
		err = b.d.Close()
	}
	b.d, b.loaded, b.deferred = nil, false, nil
	return err
}

// publish makes a first load, built aside with the sets the step wrote
// into it, the datapath of the pin directory (one rename: other processes
// see no datapath or the whole of it), then attaches it where the loads
// of the step asked. It does nothing when no first load is pending.
func (b *Kernel) publish() ([]string, error) {
	if b.d == nil || b.d.Published() {
		return nil, nil
	}
	if b.hook != nil {
		b.hook("publish", b.d.Dir())
	}
	if err := b.d.Publish(); err != nil {
		return nil, permissionHint(err)
	}
	reqs := b.deferred
	b.deferred = nil
	var warnings []string
	for _, r := range reqs {
		_, w, err := b.load(r.ifaces, r.everywhere)
		warnings = append(warnings, w...)
		if err != nil {
			return warnings, err
		}
	}
	return warnings, nil
}

// open returns the pinned datapath, or bpf.ErrNotLoaded (wrapped).
func (b *Kernel) open() (*bpf.Datapath, error) {
	if b.d != nil {
		return b.d, nil
	}
	d, err := bpf.OpenPinned(b.dir)
	if err != nil {
		return nil, permissionHint(explainNotLoaded(b.dir, err))
	}
	if d.OlderLayout() && !ownedElsewhere(d) {
		// a datapath of an older Sluice: nothing that loads programs
		// works over its maps until a load moves it to this layout,
		// in place (the rules stay in force). Not another namespace's
		// (bpf/netns_linux.go): loading this Sluice's programs there
		// would change what that namespace runs before the change is
		// refused; it is opened as it is (the caller refuses a change,
		// and ipf -D removes it as it is)
		d.Close()
		if err := b.loadPrograms(); err != nil {
			return nil, err
		}
		return b.d, nil
	}
	b.d = d
	return d, nil
}

// ownedElsewhere reports whether d works in another network namespace than
// the caller's (an error reading it counts as no: the change's own check
// reports it).
func ownedElsewhere(d *bpf.Datapath) bool {
	return errors.Is(d.CheckNetNS(), bpf.ErrOtherNetNS)
}

// openIfLoaded is open with "not loaded" as (nil, nil).
func (b *Kernel) openIfLoaded() (*bpf.Datapath, error) {
	d, err := b.open()
	if errors.Is(err, bpf.ErrNotLoaded) {
		return nil, nil
	}
	return d, err
}

// load makes sure the datapath is loaded and on the interfaces it
// belongs on, and returns it. Every load, reload, swap and ipf -y comes
// through here, so the filter follows the interfaces as they come and go:
//
//   - interfaces that went away are forgotten (bpf.Datapath.Prune);
//   - the interfaces the rules name (ifaces, those that exist) are
//     attached if they are not yet;
//   - in all-interfaces mode, so is every non-loopback interface. The
//     mode is entered when a set with a rule that applies on every
//     interface is written (everywhere), or by a first load that names
//     no interface, or when unmatched packets are blocked (a packet on an
//     interface without the filter would pass), and lasts until ipf -D.
//     Outside it, a packet on an interface no rule names could only meet
//     the default pass, so the filter stays off those.
//
// A live interface is never detached (ipf -D detaches everything). The
// programs are loaded (running the verifier) only when something must be
// attached; loading reuses the pinned maps, so rules and state survive.
// An interface the rules do not name that cannot be attached is a
// warning, not an error (it shows as unfiltered in ipf -V and ipfstat):
// one odd device must not keep every rule set from loading.
func (b *Kernel) load(ifaces []string, everywhere bool) (*bpf.Datapath, []string, error) {
	var (
		hooked  = map[int]bool{}
		allMode = everywhere
		fresh   = true
	)
	if d, err := b.open(); err == nil {
		if _, err := d.Prune(); err != nil {
			return nil, nil, permissionHint(fmt.Errorf("forgetting interfaces that went away: %w", err))
		}
		if hooked, err = d.Hooked(); err != nil {
			return nil, nil, permissionHint(err)
		}
		fresh = len(hooked) == 0
		allMode = allMode || d.AllInterfaces()
	}
	if fresh && len(ifaces) == 0 {
		allMode = true // a first load that names no interface
	}
	if !allMode && defaultBlocks(b.d) {
		allMode = true
	}
	named := map[string]bool{}
	var missing []net.Interface
	for _, n := range ifaces {
		if ifc, err := net.InterfaceByName(n); err == nil && !hooked[ifc.Index] {
			named[n] = true
			missing = append(missing, *ifc)
		}
	}
	if allMode {
		all, err := net.Interfaces()
		if err != nil {
			return nil, nil, fmt.Errorf("listing interfaces: %w", err)
		}
		for _, ifc := range all {
			if ifc.Flags&net.FlagLoopback == 0 && !hooked[ifc.Index] && !named[ifc.Name] {
				missing = append(missing, ifc)
			}
		}
	}
	if b.d != nil && len(missing) == 0 && (!allMode || b.d.AllInterfaces()) {
		return b.d, b.aheadWarning(), nil
	}
	if err := b.loadPrograms(); err != nil {
		return nil, nil, err
	}
	if allMode && !b.d.AllInterfaces() {
		// before a first load is published, too: if this process is
		// killed before it attached, ipf -V and ipfstat report the
		// interfaces unfiltered and ipf -y attaches them
		if err := b.d.SetAllInterfaces(); err != nil {
			return nil, nil, permissionHint(err)
		}
	}
	if !b.d.Published() {
		// a first load: attached once its sets are written and it is
		// published (publish replays this call)
		b.deferred = append(b.deferred, attachReq{ifaces, everywhere})
		return b.d, nil, nil
	}
	var warnings []string
	attached := 0
	for _, ifc := range missing {
		if err := b.d.Attach([]string{ifc.Name}); err != nil {
			if named[ifc.Name] {
				return nil, nil, permissionHint(err)
			}
			warnings = append(warnings, fmt.Sprintf("%v: %s stays unfiltered", err, ifc.Name))
			continue
		}
		attached++
	}
	if attached > 0 {
		// the filter was appended to the interfaces' chains: NAT must
		// stay first inbound and last outbound
		if err := natKeepOrder(b.dir); err != nil {
			return nil, nil, err
		}
	}
	return b.d, append(warnings, b.aheadWarning()...), nil
}

// aheadWarning says, once a command, which other programs run before the
// published filter on its interfaces (chain_linux.go in internal/bpf): a
// load must not report success in silence while another tool's program
// passes packets past the rules.
func (b *Kernel) aheadWarning() []string {
	if b.aheadSaid || b.d == nil || !b.d.Published() {
		return nil
	}
	ahead, err := b.d.Ahead()
	if err != nil {
		return []string{fmt.Sprintf("cannot tell whether other programs run before the filter: %v", err)}
	}
	msg := Coverage{Ahead: AheadPrograms(ahead)}.aheadWarning()
	if msg == "" {
		return nil
	}
	b.aheadSaid = true
	return []string{msg}
}

// defaultBlocks reports whether the datapath blocks the packets no rule
// matches (the default_pass tunable): then an interface without the
// filter would pass what the filter blocks.
func defaultBlocks(d *bpf.Datapath) bool {
	if d == nil {
		return false
	}
	t, ok := findTunable(d.Tunables(), "default_pass")
	return ok && uint32(t.Cur)&ruleset.FRCmdMask != ruleset.FRPass
}

// everywhere reports whether a rule set has a rule that applies on every
// interface (no `on`, or `on *`/`on -`), which puts the datapath in
// all-interfaces mode (see load). Rules in groups count too, whatever
// their head names: erring towards more interfaces is safe.
func everywhere(rules []*ipf.Rule) bool {
	for _, r := range rules {
		if len(r.On) == 0 || r.On[0] == "" || r.On[0] == "*" || r.On[0] == "-" {
			return true
		}
	}
	return false
}

// loadPrograms loads the programs (the verifier runs) unless this Kernel
// already did; the pinned maps are reused.
func (b *Kernel) loadPrograms() error {
	if b.loaded {
		return nil
	}
	// a first load stays aside until publish
	d, err := bpf.Load(bpf.Options{PinDir: b.dir, ForceVerifierError: b.failVerifier, Unpublished: true})
	if err != nil {
		return permissionHint(fmt.Errorf("loading the kernel datapath into %s: %w", b.dir, err))
	}
	if b.d != nil {
		b.d.Close()
	}
	b.d, b.loaded = d, true
	return nil
}

func toBPF(s Set) bpf.Set {
	if s == SetInactive {
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

// flushRules returns rules without those of the flushed directions (with
// their groups and accounting rules) and how many went.
func flushRules(rules []*ipf.Rule, which FlushWhich) ([]*ipf.Rule, int) {
	var keep []*ipf.Rule
	for _, r := range rules {
		out := r.Dir == ipf.DirOut
		if (out && which&FlushOut != 0) || (!out && which&FlushIn != 0) {
			continue
		}
		keep = append(keep, r)
	}
	return keep, len(rules) - len(keep)
}

// tcpEstablished is IPFilter's TCP state number of ESTABLISHED; -F s
// flushes the states after it.
const tcpEstablished = 4

// dca is ipf -m e|d|q|t, HP-UX's DCA mode: e and d switch the keep-limit
// connection limits on and off, q prints the mode, t the connections each
// limit holds now (one line per rule and source; a cumulative limit has
// no source). [HP documents the options, not their output: the lines are
// Sluice's.]
func dca(d *bpf.Datapath, mode byte) (string, error) {
	switch mode {
	case 'e', 'd':
		return "", d.SetDCA(mode == 'e')
	case 'q':
		if d.DCAEnabled() {
			return "DCA: enabled\n", nil
		}
		return "DCA: disabled\n", nil
	case 't':
		counts, err := d.DCACounts()
		if err != nil {
			return "", err
		}
		sort.Slice(counts, func(i, j int) bool {
			a, c := counts[i], counts[j]
			if a.Rule.Set != c.Rule.Set {
				return a.Rule.Set < c.Rule.Set
			}
			if a.Rule.List != c.Rule.List {
				return a.Rule.List < c.Rule.List
			}
			if a.Rule.Number != c.Rule.Number {
				return a.Rule.Number < c.Rule.Number
			}
			return a.Src.Less(c.Src)
		})
		var w strings.Builder
		for _, c := range counts {
			group := "0"
			if c.Rule.List >= firstGroupList {
				name, err := d.ListName(c.Rule.Set, c.Rule.List)
				if err != nil {
					return "", err
				}
				group = name
			}
			src := "cumulative"
			if c.Src.IsValid() {
				src = c.Src.String()
			}
			fmt.Fprintf(&w, "@%s:%d %s connections %d\n", group, c.Rule.Number, src, c.Conns)
		}
		return w.String(), nil
	}
	return "", fmt.Errorf("unknown DCA mode %q", mode)
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

// logFlag applies ipf -l what to the flags f: pass, block and nomatch add
// to the logged verdicts, none clears them. state and nat are handled by
// the caller.
func logFlag(f bpf.LogFlags, what string) (bpf.LogFlags, error) {
	switch what {
	case "pass":
		return f | bpf.LogPass, nil
	case "block":
		return f | bpf.LogBlock, nil
	case "nomatch":
		return f | bpf.LogNomatch, nil
	case "none":
		return 0, nil
	}
	return f, fmt.Errorf("-l %s: unknown", what)
}

// setLogFlags implements ipf -l on the datapath.
func setLogFlags(d *bpf.Datapath, what string) error {
	if what == "state" {
		cur := uint64(0)
		for _, t := range d.Tunables() {
			if t.Name == "state_logging" {
				cur = t.Cur
			}
		}
		return d.SetTunable("state_logging", cur^1)
	}
	f, err := logFlag(d.LogFlags(), what)
	if err != nil {
		return err
	}
	return d.SetLogFlags(f)
}

// checkTunables checks a -T argument against the datapath's tunables:
// every name must exist and every value parse and lie within its range.
func checkTunables(ts []bpf.Tunable, arg string) error {
	if arg == "list" {
		return nil
	}
	for _, item := range strings.Split(arg, ",") {
		name, value, set := strings.Cut(item, "=")
		if err := checkNATTunable(name, 0, false); err != nil {
			return err
		}
		t, ok := findTunable(ts, name)
		if !ok {
			return fmt.Errorf("unknown tunable %q", name)
		}
		if !set {
			continue
		}
		v, err := strconv.ParseUint(value, 0, 64)
		if err != nil {
			return fmt.Errorf("%s: bad value %q", name, value)
		}
		if v < t.Min || v > t.Max {
			return fmt.Errorf("%s: %d is outside %d..%d", name, v, t.Min, t.Max)
		}
		if err := checkNATTunable(name, v, true); err != nil {
			return err
		}
	}
	return nil
}

// allTunables are the filter's tunables and NAT's (pinned beside it in
// dir), in name order.
func allTunables(d *bpf.Datapath, dir string) []bpf.Tunable {
	ts := append(d.Tunables(), natTunables(dir)...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts
}

func findTunable(ts []bpf.Tunable, name string) (bpf.Tunable, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t, true
		}
	}
	return bpf.Tunable{}, false
}

// tunables implements ipf -T: "list", "name" (print) and
// "name=value,..." (set, each in turn), for the filter's tunables and
// those of NAT (pinned beside it in dir).
func tunables(d *bpf.Datapath, dir, arg string) (string, error) {
	ts := allTunables(d, dir)
	var w strings.Builder
	line := func(t bpf.Tunable) {
		fmt.Fprintf(&w, "%s\tmin %d\tmax %d\tcurrent %d\n", t.Name, t.Min, t.Max, t.Cur)
	}
	if arg == "list" {
		for _, t := range ts {
			line(t)
		}
		return w.String(), nil
	}
	if err := checkTunables(ts, arg); err != nil {
		return "", err
	}
	for _, item := range strings.Split(arg, ",") {
		name, value, set := strings.Cut(item, "=")
		t, _ := findTunable(ts, name)
		if !set {
			line(t)
			continue
		}
		v, _ := strconv.ParseUint(value, 0, 64)
		apply := d.SetTunable
		if isNATTunable(name) {
			apply = func(name string, v uint64) error { return setNATTunable(dir, name, v) }
		}
		if err := apply(name, v); err != nil {
			return w.String(), err
		}
		if name == "nat_inline" && v != 0 {
			// allowed again: ipnat's rules may have it now
			if err := natInlineSync(dir); err != nil {
				return w.String(), err
			}
		}
	}
	return w.String(), nil
}

// status returns the ipf -V lines after the version, and a warning when
// interfaces the filter belongs on do not have it.
func status(d *bpf.Datapath) (string, []string) {
	var w strings.Builder
	fmt.Fprintf(&w, "Kernel: %s\n", Version)
	if d == nil {
		w.WriteString("Running: no\n")
		return w.String(), nil
	}
	running := "no"
	if d.Enabled() {
		running = "yes"
	}
	fmt.Fprintf(&w, "Running: %s\n", running)
	f := d.LogFlags()
	fmt.Fprintf(&w, "Log Flags: %#x = ", uint32(f))
	if names := LogFlagNames(f, false); len(names) == 0 {
		w.WriteString("none set\n")
	} else {
		w.WriteString(strings.Join(names, ", ") + "\n")
	}
	def := "nomatch -> block"
	if t, ok := findTunable(d.Tunables(), "default_pass"); ok {
		switch uint32(t.Cur) & ruleset.FRCmdMask {
		case ruleset.FRPass:
			def = "pass"
		case ruleset.FRBlock:
			def = "block"
		}
	}
	fmt.Fprintf(&w, "Default: %s all, Logging: available\n", def)
	fmt.Fprintf(&w, "Active list: %d\n", d.ActiveSetNumber())
	fmt.Fprintf(&w, "Feature mask: %#x\n", featureMask)
	// Sluice: the interfaces the filter runs on
	cov, err := coverage(d)
	if err != nil {
		fmt.Fprintf(&w, "Interfaces: unknown (%v)\n", err)
		return w.String(), nil
	}
	w.WriteString(cov.Lines())
	if msg := cov.Warning(); msg != "" {
		return w.String(), []string{msg}
	}
	return w.String(), nil
}

// featureMask is what ipf -V reports as compiled-in features: logging
// (0x1) and IPv6 (0x8); the datapath has no NAT, pools or auth.
const featureMask = 0x1 | 0x8

// Remove detaches and unpins the datapath in dir ("" = default) if one is
// there (bpf.RemovePinned: the directory goes out of the way first, so no
// process sees it half removed). Pins that no longer open as this
// version's maps (left by another build) are removed too, links first, so
// ipf -D always cleans up. The caller holds the lock.
func Remove(dir string) error {
	dir = orDefault(dir)
	// NAT goes with the filter, as it goes with the ipf module: its path
	// leaves the filter's programs before its maps go
	if err := natInlineOff(dir); err != nil {
		// the filter's pins do not open as a datapath (another build's,
		// half removed): it goes first, its links (the inline prefix's
		// included) detached, so that nothing reads NAT's maps, then NAT
		ferr := bpf.RemovePinned(dir)
		return permissionHint(errors.Join(ferr, removeNAT(dir)))
	}
	if err := removeNAT(dir); err != nil {
		return permissionHint(fmt.Errorf("removing NAT: %w", err))
	}
	return permissionHint(bpf.RemovePinned(dir))
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipfctl

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"sluice/internal/bpf"
	natbpf "sluice/internal/bpf/nat"
	gonat "sluice/internal/nat"
	"sluice/internal/rules/ipnat"
)

// NAT is ipnat's device: the kernel NAT datapath (sluice/internal/bpf/nat)
// pinned next to the filter's, in NATPinDir(dir). Like the filter's
// backend it keeps nothing between runs but what is pinned: the loaded
// rules are re-read from their printed text when rules are added or
// removed, and the whole set is compiled and swapped in at once.
type NAT struct {
	dir string // the filter's pin directory ("" = default)
	// forceTC attaches with the tc fallback (tests).
	forceTC bool
}

// NATDevice returns ipnat's device for the NAT datapath that belongs with
// the filter pinned in dir ("" = default).
func NATDevice(dir string) *NAT { return &NAT{dir: dir} }

// NATPinDir is where the NAT datapath that goes with the filter pinned in
// dir lives: the same path with "-nat" appended (/sys/fs/bpf/sluice-nat
// by default).
func NATPinDir(dir string) string {
	if dir == "" {
		return natbpf.DefaultPinDir
	}
	// the filter's datapath opens NAT's map there (inline NAT)
	return bpf.NATPinDir(dir)
}

func (n *NAT) pinDir() string { return NATPinDir(n.dir) }

// loadedRules returns the rules of the pinned datapath, re-parsed from
// their text, with their ids and hit counts.
func loadedRules(d *natbpf.Datapath) ([]*ipnat.Rule, []natbpf.RuleInfo, error) {
	infos, err := d.Rules()
	if err != nil {
		return nil, nil, err
	}
	if len(infos) == 0 {
		return nil, nil, nil
	}
	var src strings.Builder
	for _, ri := range infos {
		src.WriteString(ri.Text)
		src.WriteByte('\n')
	}
	f, err := ipnat.ParsePrinted("(loaded NAT rules)", src.String(), io.Discard)
	if err != nil {
		return nil, nil, fmt.Errorf("re-reading the loaded NAT rules: %w", err)
	}
	if len(f.Rules) != len(infos) {
		return nil, nil, fmt.Errorf("re-reading the loaded NAT rules: got %d rules, want %d", len(f.Rules), len(infos))
	}
	return f.Rules, infos, nil
}

// Apply makes one ipnat command line's change as one transaction, under
// the lock ipf takes for its own (lockTx beside the filter's pins), so
// that concurrent ipnat runs, and ipnat beside ipf or ippool, never lose
// each other's changes. Everything that depends only on the input is
// checked first (the files' rules compile for the kernel, rules to remove
// are loaded, the resulting set compiles): an error there changes
// nothing. Then, in IPFilter's order, the sessions are flushed, the new
// rule set is swapped in at once, NAT is attached where the rules need
// it, and the sessions of removed purge rules end. Should attaching fail,
// the previous rule set is made active again (a datapath this change
// created is removed). It returns how many sessions were flushed and how
// many rules cleared. The datapath is loaded (pinned beside the filter's)
// on first use.
func (n *NAT) Apply(ch NATChange) (flushed, cleared int, err error) {
	if ch.empty() {
		return 0, 0, nil
	}
	adding := false
	for _, f := range ch.Files {
		if len(f.Rules) == 0 || ch.Remove {
			continue
		}
		adding = true
		// what the kernel cannot do is refused with the file's positions
		if _, err := natbpf.Compile(f.Rules, natbpf.CompileOptions{File: f.Name}); err != nil {
			return 0, 0, err
		}
	}
	// the lock is made where pins can be (a directory off bpffs holds
	// no datapath, and there is nothing to lock)
	unlock, err := lockTx(orDefault(n.dir), true, adding || onBPFFS(orDefault(n.dir)))
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	// NAT's rules, sessions and interfaces are one namespace's, and so
	// are the filter's it goes with: a change from another namespace
	// than either's is refused before anything is written
	// (bpf/netns_linux.go, bpf/nat/netns_linux.go)
	if err := checkFilterNetNS(orDefault(n.dir)); err != nil {
		return 0, 0, err
	}
	d, err := natbpf.OpenPinned(n.pinDir())
	if err != nil && !errors.Is(err, natbpf.ErrNotLoaded) {
		return 0, 0, err
	}
	if d != nil {
		defer d.Close()
		if err := d.CheckNetNS(); err != nil {
			return 0, 0, err
		}
	}
	var cur []*ipnat.Rule
	var infos []natbpf.RuleInfo
	if d != nil {
		if cur, infos, err = loadedRules(d); err != nil {
			return 0, 0, err
		}
	}
	// the plan: the rule set after -C and the files, and the rules whose
	// sessions go with them
	all := append([]*ipnat.Rule(nil), cur...)
	ids := make([]uint32, len(infos))
	for i, ri := range infos {
		ids[i] = ri.ID
	}
	var purgeIDs []uint32
	changed := false
	if ch.Clear {
		cleared = len(all)
		for i, r := range all {
			if r.Purge {
				purgeIDs = append(purgeIDs, ids[i])
			}
		}
		all, ids, changed = nil, nil, true
	}
	for _, f := range ch.Files {
		if len(f.Rules) == 0 {
			continue
		}
		changed = true
		if !ch.Remove {
			all = append(all, f.Rules...)
			ids = append(ids, make([]uint32, len(f.Rules))...)
			continue
		}
		for _, r := range f.Rules {
			text := strings.TrimRight(r.String(), "\n")
			i := 0
			for i < len(all) && strings.TrimRight(all[i].String(), "\n") != text {
				i++
			}
			if i == len(all) {
				return 0, 0, fmt.Errorf("%s:%d: rule not loaded: %s", f.Name, r.Pos.Line, text)
			}
			if (ch.Purge || all[i].Purge) && ids[i] != 0 {
				purgeIDs = append(purgeIDs, ids[i])
			}
			all = append(all[:i], all[i+1:]...)
			ids = append(ids[:i], ids[i+1:]...)
		}
	}
	var im *natbpf.Image
	if changed {
		file := ""
		if len(ch.Files) > 0 {
			file = ch.Files[len(ch.Files)-1].Name
		}
		if im, err = natbpf.Compile(all, natbpf.CompileOptions{File: file}); err != nil {
			return 0, 0, err
		}
	}
	// the commit. NAT's path leaves the filter's programs first: NAT's
	// programs may become general (an L3 device), or be detached, or
	// their maps go, and the filter must not read them then; it is put
	// back at the end where it can be (natInlineSync)
	if err := natInlineOff(n.dir); err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, natInlineSync(n.dir)) }()
	if ch.Flush && d != nil {
		if flushed, err = d.FlushSessions(); err != nil {
			return 0, 0, fmt.Errorf("flushing the NAT table: %w", err)
		}
	}
	if !changed {
		if d == nil {
			return flushed, cleared, nil
		}
		return flushed, cleared, n.detachIfIdle(d)
	}
	if d == nil && len(all) == 0 {
		// nothing loaded and nothing to load (-C, or rules added and
		// removed again)
		return flushed, cleared, nil
	}
	created := d == nil
	if adding || created {
		// (re)load the programs over the pinned maps, so a change always
		// runs the current ones
		nd, err := natbpf.Load(natbpf.Options{PinDir: n.pinDir(), ForceTC: n.forceTC})
		if err != nil {
			return flushed, cleared, fmt.Errorf("loading the kernel NAT datapath into %s: %w", n.pinDir(), err)
		}
		defer nd.Close()
		d = nd
	}
	undo := func(cause error) error {
		if created {
			return errors.Join(cause, natbpf.Remove(n.pinDir()))
		}
		return errors.Join(cause, d.RevertRules(), n.sync(d, nil))
	}
	if err := d.LoadRules(im); err != nil {
		return flushed, cleared, undo(err)
	}
	if err := n.sync(d, im.Interfaces()); err != nil {
		return flushed, cleared, undo(err)
	}
	for _, id := range purgeIDs {
		if _, err := d.FlushRuleSessions(id); err != nil {
			return flushed, cleared, err
		}
	}
	if len(purgeIDs) > 0 {
		return flushed, cleared, n.detachIfIdle(d)
	}
	return flushed, cleared, nil
}

// sync attaches NAT to the named interfaces that exist and records their
// addresses (0/32 targets), or detaches it when there are neither rules
// nor sessions, so a host without NAT pays nothing.
func (n *NAT) sync(d *natbpf.Datapath, names []string) error {
	rules, err := d.Rules()
	if err != nil {
		return err
	}
	if len(rules) == 0 && d.Active() == 0 {
		return d.Detach()
	}
	var present []string
	var idx []int
	for _, name := range names {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			continue
		}
		present = append(present, name)
		idx = append(idx, ifc.Index)
		v4, v6 := ifAddrs(ifc)
		if err := d.SetIfAddr(ifc.Index, v4, v6); err != nil {
			return err
		}
	}
	if err := d.RetainIfAddrs(idx); err != nil {
		return err
	}
	return d.Attach(present)
}

// natLoaded reports whether NAT is loaded beside the filter pinned in
// dir.
func natLoaded(dir string) bool {
	d, err := natbpf.OpenPinned(NATPinDir(dir))
	if err != nil {
		return false
	}
	d.Close()
	return true
}

// resyncNAT is ipf -y for NAT (beside the filter pinned in dir): the
// loaded rules are compiled again with the interfaces as they are now
// (an interface made anew has another index), the addresses of the
// interfaces they name are read again (0/32 targets: new sessions get
// the address an interface has now; sessions made before keep theirs),
// and NAT is attached to those that appeared. Nothing happens when NAT
// is not loaded. The caller holds the transaction lock.
func resyncNAT(dir string) (err error) {
	d, err := natbpf.OpenPinned(NATPinDir(dir))
	if errors.Is(err, natbpf.ErrNotLoaded) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := natInlineOff(dir); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, natInlineSync(dir)) }()
	cur, _, err := loadedRules(d)
	if err != nil {
		return err
	}
	im, err := natbpf.Compile(cur, natbpf.CompileOptions{File: "(loaded NAT rules)"})
	if err != nil {
		return fmt.Errorf("-y: NAT: %w", err)
	}
	if err := d.LoadRules(im); err != nil {
		return fmt.Errorf("-y: NAT: %w", err)
	}
	n := &NAT{dir: dir}
	if err := n.sync(d, im.Interfaces()); err != nil {
		return fmt.Errorf("-y: NAT: %w", err)
	}
	return nil
}

// ifAddrs returns an interface's first IPv4 address and first IPv6
// address that is not link-local, as 0/32 targets take them.
func ifAddrs(ifc *net.Interface) (v4, v6 netip.Addr) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return
	}
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ad := pfx.Addr()
		switch {
		case ad.Is4() && !v4.IsValid():
			v4 = ad
		case ad.Is6() && !ad.IsLinkLocalUnicast() && !v6.IsValid():
			v6 = ad
		}
	}
	return
}

func (n *NAT) detachIfIdle(d *natbpf.Datapath) error {
	rules, err := d.Rules()
	if err != nil {
		return err
	}
	if len(rules) == 0 && d.Active() == 0 {
		return d.Detach()
	}
	return nil
}

// List writes ipnat -l: the rules (each after its hit count with -h),
// the sessions, newest first, and with verbose the host map.
func (n *NAT) List(w io.Writer, hits, verbose bool) error {
	var b strings.Builder
	b.WriteString("List of active MAP/Redirect filters:\n")
	d, err := natbpf.OpenPinned(n.pinDir())
	if err != nil && !errors.Is(err, natbpf.ErrNotLoaded) {
		return err
	}
	var sessions []natbpf.Session
	var hms []natbpf.Hostmap
	if d != nil {
		defer d.Close()
		rules, err := d.Rules()
		if err != nil {
			return err
		}
		for _, r := range rules {
			if hits {
				fmt.Fprintf(&b, "%d ", r.Hits)
			}
			b.WriteString(r.Text + "\n")
		}
		if sessions, err = d.Sessions(); err != nil {
			return err
		}
		if hms, err = d.Hostmaps(); err != nil {
			return err
		}
	}
	b.WriteString("\nList of active sessions:\n")
	for _, s := range sessions {
		b.WriteString(s.Info().String())
	}
	if verbose {
		b.WriteString("\nList of active host mappings:\n")
		for _, h := range hms {
			b.WriteString(gonat.HostmapInfo{OSrc: h.OSrc, ODst: h.ODst, NSrc: h.NSrc, NDst: h.NDst, Use: int(h.Use)}.String())
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// Stats writes ipnat -s in IPFilter 5.1's layout: the counters of each
// direction, then the global ones. Counters the kernel datapath has no
// occasion for (decapsulation, divert, logging) are printed as 0.
func (n *NAT) Stats(w io.Writer, verbose bool) error {
	d, err := natbpf.OpenPinned(n.pinDir())
	if err != nil && !errors.Is(err, natbpf.ErrNotLoaded) {
		return err
	}
	var st natbpf.Stats
	if d != nil {
		defer d.Close()
		if st, err = d.Stats(); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, FormatNATStats(st, verbose))
	return err
}

// FormatNATStats renders NAT statistics as ipnat -s prints them.
func FormatNATStats(st natbpf.Stats, verbose bool) string {
	var b strings.Builder
	for i, side := range []string{"in", "out"} {
		s := st.Side[i]
		for _, l := range []struct {
			v    uint64
			name string
		}{
			{s.ProxyFail, "proxy create fail"}, {0, "proxy fail"}, {s.BadNAT, "bad nat"}, {s.BadNAT, "bad nat new"},
			{s.IfAddr, "bad next addr"}, {0, "bucket max"}, {0, "clone nomem"}, {0, "decap bad"}, {0, "decap fail"},
			{0, "decap pullup"}, {0, "divert dup"}, {0, "divert exist"}, {s.BadNAT, "drop"}, {s.Wrap, "exhausted"},
			{0, "icmp address"}, {s.ICMP, "icmp basic"}, {0, "inuse"}, {0, "icmp mbuf wrong size"},
			{0, "icmp header unmatched"}, {0, "icmp rebuild failures"}, {0, "icmp short"}, {0, "icmp packet size wrong"},
			{s.IfAddr, "IFP address fetch failures"}, {s.Ignored, "packets untranslated"}, {s.InsertFail, "NAT insert failures"},
			{s.Miss, "NAT lookup misses"}, {0, "NAT lookup nowild"}, {s.IfAddr, "new ifpaddr failed"},
			{0, "memory requests failed"}, {s.TableMax, "table max reached"}, {s.Translated, "packets translated"},
			{0, "finalised failed"}, {s.Wrap, "search wraps"}, {0, "null translations"}, {s.Exists, "translation exists"},
			{0, "no memory"},
		} {
			fmt.Fprintf(&b, "%d\t%s %s\n", l.v, l.name, side)
		}
	}
	fmt.Fprintf(&b, "%d\tlog successes\n%d\tlog failures\n", 0, 0)
	fmt.Fprintf(&b, "%d\tadded in\n%d\tadded out\n", st.Side[0].Added, st.Side[1].Added)
	fmt.Fprintf(&b, "%d\tactive\n", st.Active)
	fmt.Fprintf(&b, "%d\ttransparent adds\n%d\tdivert build\n", 0, 0)
	fmt.Fprintf(&b, "%d\texpired\n", st.Expired)
	fmt.Fprintf(&b, "%d\tflush all\n%d\tflush closing\n%d\tflush queue\n%d\tflush state\n%d\tflush timeout\n",
		st.Flushed, 0, 0, 0, 0)
	fmt.Fprintf(&b, "%d\thostmap new\n%d\thostmap fails\n%d\thostmap add\n%d\thostmap NULL rule\n",
		st.HostmapNew, 0, st.HostmapAdd, 0)
	fmt.Fprintf(&b, "%d\tlog ok\n%d\tlog fail\n", 0, 0)
	fmt.Fprintf(&b, "%d\torphan count\n%d\trule count\n%d\tmap rules\n%d\trdr rules\n%d\twilds\n",
		0, st.Rules, st.MapRules, st.RdrRules, st.Wilds)
	if verbose {
		// Sluice's own lines: IPFilter's per-side "memory requests
		// failed" has no side to give a timer the kernel refused, and
		// IPFilter has no sweeper
		fmt.Fprintf(&b, "%d\ttable max\n", st.TableMax)
		fmt.Fprintf(&b, "%d\tsessions made without a timer\n", st.NoTimer)
		fmt.Fprintf(&b, "%d\ttimers set by the sweeper\n", st.SweepArmed)
		fmt.Fprintf(&b, "%d\tsessions ended by the sweeper\n", st.SweepEnded)
	}
	return b.String()
}

// removeNAT detaches and unpins the NAT datapath that goes with the
// filter pinned in dir (ipf -D removes NAT too).
func removeNAT(dir string) error { return natbpf.Remove(NATPinDir(dir)) }

// natKeepOrder puts NAT back in IPFilter's place around the filter after
// the filter was attached: first inbound, last outbound.
func natKeepOrder(dir string) error {
	d, err := natbpf.OpenPinned(NATPinDir(dir))
	if errors.Is(err, natbpf.ErrNotLoaded) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if len(d.Attached()) == 0 {
		return nil
	}
	// a move makes NAT's programs general meanwhile (the cookie): the
	// filter's programs leave its path out until it is over
	if err := natInlineOff(dir); err != nil {
		return err
	}
	return errors.Join(d.KeepOrder(), natInlineSync(dir))
}

// natInlineOff takes NAT's established path out of the filter's programs
// (bpf.SetNATInline(0)): before NAT's programs may become general (a move,
// an L3 device, the tc fallback), are detached, or its maps go.
func natInlineOff(dir string) error {
	return withFilter(dir, func(fd *bpf.Datapath) error {
		if on, _, _ := fd.NATInline(); !on {
			return nil
		}
		return permissionHint(fd.SetNATInline(0))
	})
}

// withFilter runs f on the filter pinned in dir; nothing when none is.
func withFilter(dir string, f func(*bpf.Datapath) error) error {
	fd, err := bpf.OpenPinned(orDefault(dir))
	if errors.Is(err, bpf.ErrNotLoaded) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fd.Close()
	return f(fd)
}

// natEgressOff takes the egress half of NAT's path out of the programs of
// the filter pinned in dir, if it is there: IPQoS's marker, attached
// behind the filter's egress program, would miss what the half
// translates (it ends the chain). qosmark refuses to attach behind it
// (ErrNATInline); ipqosadmin calls this first, so a boot that loads ipf,
// ipnat, then ipqosadmin works, with the ingress prefix kept.
func natEgressOff(dir string) error {
	fd, err := bpf.OpenPinned(orDefault(dir))
	if err != nil {
		// no filter (or none this build opens): no half to drop
		return nil
	}
	defer fd.Close()
	return fd.DropNATEgress()
}

// natInlineSync puts NAT's established IPv4 path inside the filter's
// programs (nat15: NAT's cost over the filter's falls from ~150-200 ns a
// packet to ~30-60) when it can be, and takes it out otherwise: on when
// the nat_inline tunable allows it, the filter is on, NAT has rules, NAT
// is attached with TCX only to interfaces the filter is attached to with
// TCX, and NAT's programs are plain (InlineSlots).
func natInlineSync(dir string) error {
	return withFilter(dir, func(fd *bpf.Datapath) error {
		var nspj uint32
		if nd, err := natbpf.OpenPinned(NATPinDir(dir)); err == nil {
			nspj = natInlineWanted(fd, nd)
			nd.Close()
		}
		if on, _, _ := fd.NATInline(); !on && nspj == 0 {
			return nil
		}
		return permissionHint(fd.SetNATInline(nspj))
	})
}

// natInlineWanted is the jiffy length to put NAT's path inside the
// filter's programs with, or 0 when it must stay out.
func natInlineWanted(fd *bpf.Datapath, nd *natbpf.Datapath) uint32 {
	if !fd.NATInlineAllowed() || !fd.Enabled() {
		return 0
	}
	if rules, err := nd.Rules(); err != nil || len(rules) == 0 {
		return 0
	}
	_, nspj, ok := nd.InlineSlots()
	at := nd.Attached()
	if !ok || len(at) == 0 {
		return 0
	}
	filt := map[int]bool{}
	for _, idx := range fd.Attached() {
		filt[idx] = true
	}
	for _, idx := range at {
		if !filt[idx] {
			return 0
		}
	}
	return nspj
}

// natTunables returns the NAT datapath's ipf -T tunables (their defaults
// when NAT is not loaded) as the filter's are listed.
func natTunables(dir string) []bpf.Tunable {
	ts := natbpf.DefaultTunables()
	if d, err := natbpf.OpenPinned(NATPinDir(dir)); err == nil {
		ts = d.TunableList()
		d.Close()
	}
	out := make([]bpf.Tunable, len(ts))
	for i, t := range ts {
		out[i] = bpf.Tunable{Name: t.Name, Min: t.Min, Max: t.Max, Cur: t.Cur}
	}
	return out
}

// isNATTunable reports whether name is one of NAT's tunables rather than
// the filter's.
func isNATTunable(name string) bool { return natbpf.IsTunable(name) }

// checkNATTunable checks an ipf -T name=value against the NAT datapath:
// nil for a name that is not IPFilter's NAT or proxy tunable, an error
// (wrapping errors.ErrUnsupported) for one the kernel has nothing to
// apply to, or for a value out of range.
func checkNATTunable(name string, v uint64, set bool) error {
	if err := natbpf.UnsupportedTunable(name); err != nil {
		return err
	}
	if !set || !natbpf.IsTunable(name) {
		return nil
	}
	return natbpf.CheckTunable(name, v)
}

// setNATTunable sets a NAT tunable. When NAT is not loaded yet its
// datapath is loaded (pinned beside the filter's, attached nowhere until
// rules need it), so tunables set before ipnat -f apply to the rules it
// loads, as IPFilter's boot order (ipf -T, then ipnat -f) has it. The
// caller holds the transaction lock.
func setNATTunable(dir, name string, v uint64) error {
	d, err := natbpf.OpenPinned(NATPinDir(dir))
	if errors.Is(err, natbpf.ErrNotLoaded) {
		d, err = natbpf.Load(natbpf.Options{PinDir: NATPinDir(dir)})
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return d.SetTunable(name, v)
}

// NetNSWarning returns what ipnat -l and -s say on standard error when
// NAT works in another network namespace than the caller's (its rules,
// sessions and interfaces are that namespace's), "" otherwise.
func (n *NAT) NetNSWarning() string {
	if err := natbpf.CheckNetNSAt(n.pinDir()); errors.Is(err, bpf.ErrOtherNetNS) {
		return "NAT works in another network namespace than this one: its rules, sessions and counters are that " +
			"namespace's; run ipnat there (nsenter --net=/run/netns/NAME …), or ipf -D to remove it"
	}
	return ""
}

// checkNATNetNS returns bpf.ErrOtherNetNS (wrapped) when the NAT loaded
// beside the filter pinned in dir works in another network namespace
// than the caller's; nil when it is this one's, none is recorded or NAT
// is not loaded. ipf's changes check it too: ipf -y and ipf -T change
// NAT, and a filter loaded there would run NAT's path inline. It reads
// the record alone (every ipf change asks).
func checkNATNetNS(dir string) error { return natbpf.CheckNetNSAt(NATPinDir(dir)) }

// checkFilterNetNS returns bpf.ErrOtherNetNS (wrapped) when the filter
// pinned in dir filters another network namespace than the caller's; nil
// when it is this one's or none is loaded.
func checkFilterNetNS(dir string) error {
	d, err := bpf.OpenPinned(dir)
	if errors.Is(err, bpf.ErrNotLoaded) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return d.CheckNetNS()
}

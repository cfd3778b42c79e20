//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"sluice/internal/qos"
	"sluice/internal/qos/tc"
)

// Load makes rs the active configuration, replacing any previous one. Its
// steps: check every adapter and plan its HTB classes (prepare), build and
// fill the new objects and pin them in next/ (the journal), switch each
// adapter to them (apply, each step with its undo), take the adapters
// that left the configuration back to normal, and make next/ the active
// configuration cur/ (commit, one rename). Without Continue, a failure in
// any step before the commit undoes the adapters already switched, so the
// previous configuration stays. A process killed half way leaves next/,
// from which the next ipqosadmin puts every adapter back as cur/ says
// (finishInterrupted): the old configuration or the new one, whole.
func Load(rs *qos.Ruleset, opts Options) (*Report, error) {
	dir := opts.dir()
	unlock, err := lockEnabled(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// another namespace's adapters: refused before anything (even the
	// finishing of an interrupted load) is done (netns_linux.go)
	if err := CheckNetNS(dir); err != nil {
		return nil, err
	}
	if err := finishInterrupted(dir, &opts); err != nil {
		return nil, err
	}
	old, err := openPinned(dir)
	if err != nil {
		return nil, err
	}
	defer old.Close()
	l := &loader{dir: dir, opts: opts, old: old, rep: &Report{}, ports: map[string]port{}}
	if l.linkRate = opts.LinkRate; l.linkRate == nil {
		l.linkRate = tc.LinkSpeed
	}
	defer l.closeLinks()
	todo, err := l.prepare(rs)
	if err != nil {
		return nil, err
	}
	if l.objs, err = newObjects(rs, l.ports); err != nil {
		return nil, err
	}
	defer l.objs.Close()
	if err := l.journal(); err != nil {
		return nil, fmt.Errorf("pinning new configuration: %w", err)
	}
	l.opts.step("journal")
	for _, pr := range todo {
		if err := l.apply(pr); err != nil {
			if !opts.Continue {
				l.rollback()
				_ = os.RemoveAll(filepath.Join(dir, "next"))
				return nil, err
			}
			l.rep.Skipped = append(l.rep.Skipped, err.Error())
			opts.logf("skipping: %v", err)
			_ = l.objs.Adapters.Delete(pr.port.ifindex)
			continue
		}
		l.rep.Attached = append(l.rep.Attached, pr.a.Name)
		l.opts.step("applied " + pr.a.Name)
	}
	l.detachRemoved()
	l.opts.step("detached")
	if err := l.commit(); err != nil {
		// next/ is still there: put cur/ back on every adapter
		l.rollback()
		return nil, errors.Join(fmt.Errorf("pinning new configuration: %w", err), finishInterrupted(dir, &opts))
	}
	l.opts.step("committed")
	if len(l.rep.Attached) > 0 {
		if err := claimNetNS(dir); err != nil {
			return nil, err
		}
	}
	return l.rep, nil
}

// loader is one Load in progress.
type loader struct {
	dir      string
	opts     Options
	linkRate func(string) uint64
	old      *pinned // the active configuration (nil: none)
	objs     *qosObjects
	rep      *Report
	// ports are the adapters being loaded, by name
	ports map[string]port
	// undo holds, in order, the steps of the adapters switched so far
	undo []func()
	// keep holds pinned links an undo step may still need
	keep []link.Link
}

// prepared is an adapter checked and planned, not touched yet.
type prepared struct {
	a    *qos.Adapter
	port port
	plan *tc.Plan
	old  *qos.Adapter
	vlan bool
}

// prepare checks every adapter before anything is touched: it exists, and
// its HTB plan fits its link. Under Continue a bad adapter is skipped.
func (l *loader) prepare(rs *qos.Ruleset) ([]prepared, error) {
	var todo []prepared
	for _, a := range rs.Adapters {
		pr, err := l.prepareOne(a)
		if err != nil {
			if !l.opts.Continue {
				return nil, err
			}
			l.rep.Skipped = append(l.rep.Skipped, err.Error())
			l.opts.logf("skipping: %v", err)
			continue
		}
		todo = append(todo, pr)
		l.ports[a.Name] = pr.port
	}
	return todo, nil
}

func (l *loader) prepareOne(a *qos.Adapter) (prepared, error) {
	dev, err := netlink.LinkByName(a.Name)
	if err != nil {
		return prepared{}, fmt.Errorf("adapter %s: %w", a.Name, err)
	}
	pt := port{ifindex: uint32(dev.Attrs().Index)}
	if dev.Attrs().EncapType == "ether" {
		pt.l2len = 14
	}
	plan, err := tc.NewPlan(a, l.rate(a))
	if err != nil {
		return prepared{}, err
	}
	pr := prepared{a: a, port: pt, plan: plan, vlan: tc.IsVLAN(a.Name)}
	if l.old != nil {
		pr.old = l.old.rs.Adapter(a.Name)
	}
	return pr, nil
}

// rate is an adapter's speed for percentage rates and HTB ceilings: the
// one the configuration declares (ipqos `speed`), else the link's.
func (l *loader) rate(a *qos.Adapter) uint64 {
	if a.Speed != 0 {
		return a.Speed
	}
	return l.linkRate(a.Name)
}

// rollback undoes the adapters switched so far, last first.
func (l *loader) rollback() {
	for i := len(l.undo) - 1; i >= 0; i-- {
		l.undo[i]()
	}
	l.undo = nil
}

func (l *loader) closeLinks() {
	for _, k := range l.keep {
		k.Close()
	}
}

// apply switches one adapter: qdiscs, VLAN priority map, then the program;
// on error it undoes its own steps, on success they join l.undo.
func (l *loader) apply(pr prepared) (err error) {
	var mine []func()
	defer func() {
		if err != nil {
			for i := len(mine) - 1; i >= 0; i-- {
				mine[i]()
			}
		} else {
			l.undo = append(l.undo, mine...)
		}
	}()
	if err := l.applyQdisc(pr, &mine); err != nil {
		return err
	}
	if err := l.applyVLAN(pr, &mine); err != nil {
		return err
	}
	if err := l.applyProgram(pr, &mine); err != nil {
		return err
	}
	if l.opts.failAt != nil {
		return l.opts.failAt(pr.a.Name)
	}
	return nil
}

// applyQdisc installs the adapter's HTB classes (or removes the old ones
// when the new configuration has none).
func (l *loader) applyQdisc(pr prepared, mine *[]func()) error {
	name := pr.a.Name
	var oldPlan *tc.Plan
	if pr.old != nil {
		oldPlan, _ = tc.NewPlan(pr.old, l.rate(pr.old))
	}
	restore := func() {
		if oldPlan != nil {
			_ = tc.Apply(oldPlan)
		} else {
			_ = tc.Remove(name)
		}
	}
	switch {
	case pr.plan != nil:
		l.opts.logf("adapter %s: htb with %d classes (link %d bit/s)", name, len(pr.plan.Classes)+1, pr.plan.Link)
		*mine = append(*mine, restore)
		return tc.Apply(pr.plan)
	case oldPlan != nil:
		*mine = append(*mine, restore)
		return tc.Remove(name)
	}
	return nil
}

// applyVLAN sets the egress QoS map of a VLAN device (skb->priority to
// 802.1p), clearing the old configuration's entries.
func (l *loader) applyVLAN(pr prepared, mine *[]func()) error {
	name := pr.a.Name
	newMap, oldMap := vlanMap(pr.a), vlanMap(pr.old)
	if len(newMap) == 0 && len(oldMap) == 0 {
		return nil
	}
	if !pr.vlan {
		if len(newMap) > 0 {
			l.opts.logf("adapter %s: not a VLAN device, vpr ignored", name)
		}
		return nil
	}
	set := map[uint32]uint32{}
	for k := range oldMap {
		set[k] = 0
	}
	for k, v := range newMap {
		set[k] = v
	}
	*mine = append(*mine, func() {
		back := map[uint32]uint32{}
		for k := range newMap {
			back[k] = 0
		}
		for k, v := range oldMap {
			back[k] = v
		}
		_ = tc.SetEgressQoS(name, back)
	})
	if err := tc.SetEgressQoS(name, set); err != nil {
		return err
	}
	l.opts.logf("adapter %s: egress qos map %v", name, newMap)
	return nil
}

// applyProgram points the adapter's TCX link at the new program: the
// pinned link is updated in place when it still runs there, else a new
// link is attached and pinned.
func (l *loader) applyProgram(pr prepared, mine *[]func()) error {
	name := pr.a.Name
	lpath := filepath.Join(l.dir, "links", name)
	if lk, err := link.LoadPinnedLink(lpath, nil); err == nil {
		l.keep = append(l.keep, lk) // the undo step may still need it
		here, err := placeOn(lk, pr.port.ifindex, name)
		if err != nil {
			return err
		}
		if here && l.old != nil {
			if err := lk.Update(l.objs.QosEgress); err != nil {
				return fmt.Errorf("adapter %s: updating link: %w", name, err)
			}
			oldProg := l.old.prog
			*mine = append(*mine, func() { _ = lk.Update(oldProg) })
			l.opts.logf("adapter %s: program replaced", name)
			return nil
		}
		// The device went away (or was recreated) since the last load, or
		// the pin is an orphan: start over on this device.
		l.opts.logf("adapter %s: dropping a stale link", name)
		detachLink(lpath, l.opts.logf)
	}
	lk, err := attachEgress(name, int(pr.port.ifindex), l.objs.QosEgress)
	if err != nil {
		if errors.Is(err, ErrNATInline) {
			return err
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			return fmt.Errorf("adapter %s: attaching tcx egress: %w (%w)", name, err, ErrNotSupported)
		}
		return fmt.Errorf("adapter %s: attaching tcx egress: %w", name, err)
	}
	defer lk.Close()
	if err := lk.Pin(lpath); err != nil {
		return fmt.Errorf("adapter %s: pinning link: %w", name, err)
	}
	*mine = append(*mine, func() { detachLink(lpath, l.opts.logf) })
	l.opts.logf("adapter %s: attached", name)
	return nil
}

// journal pins the new objects, whole, in next/ before any adapter is
// touched: built in staging/, then renamed, so next/ is never partial.
func (l *loader) journal() error {
	staging, next := filepath.Join(l.dir, "staging"), filepath.Join(l.dir, "next")
	_ = os.RemoveAll(staging)
	err := func() error {
		if err := os.Mkdir(staging, 0o700); err != nil {
			return err
		}
		if err := l.objs.QosEgress.Pin(filepath.Join(staging, "prog")); err != nil {
			return err
		}
		for n, m := range objMaps(l.objs) {
			if err := m.Pin(filepath.Join(staging, n)); err != nil {
				return err
			}
		}
		return os.Rename(staging, next)
	}()
	if err != nil {
		_ = os.RemoveAll(staging)
	}
	return err
}

// commit makes next/ the active configuration: exchanged with cur/ in one
// rename (then the old objects, now in next/, go), or renamed to cur/ on
// a first load. Killed after the exchange, the next ipqosadmin finds the
// old objects in next/ and cur/ new: it puts cur/ on the adapters, which
// have it already (finishInterrupted).
func (l *loader) commit() error {
	next, cur := filepath.Join(l.dir, "next"), filepath.Join(l.dir, "cur")
	if l.old == nil {
		return os.Rename(next, cur)
	}
	err := unix.Renameat2(unix.AT_FDCWD, next, unix.AT_FDCWD, cur, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// no RENAME_EXCHANGE on this bpffs: two renames, cur/ to prev/
		// first; finishInterrupted puts prev/ back if cur/ is missing
		prev := filepath.Join(l.dir, "prev")
		_ = os.RemoveAll(prev)
		if err := os.Rename(cur, prev); err != nil {
			return err
		}
		if err := os.Rename(next, cur); err != nil {
			_ = os.Rename(prev, cur)
			return err
		}
		return os.RemoveAll(prev)
	}
	if err != nil {
		return err
	}
	l.opts.step("exchanged")
	return os.RemoveAll(next)
}

// detachRemoved takes the adapters that left the configuration back to
// normal.
func (l *loader) detachRemoved() {
	if l.old == nil {
		return
	}
	for _, a := range l.old.rs.Adapters {
		if _, kept := l.ports[a.Name]; !kept {
			detach(l.dir, a, l.opts.logf)
		}
	}
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"sluice/internal/qos"
	"sluice/internal/qos/tc"
)

// Every change to the IPQoS state (Load, Unload, Disable, SetLogLevel,
// Resync) holds the flock of the state directory, and each first finishes
// what a process killed half way left (finishInterrupted):
//
//	staging/   a journal being pinned: nothing was applied yet, it goes
//	next/      a load between its journal and its commit: some adapters
//	           may run next/'s program, some cur/'s; every adapter is put
//	           back as cur/ says and those only next/ names are detached
//	unloading/ an unload half done: it is finished
//
// So after any interruption the adapters carry the old configuration or
// the new one, whole, as cur/ (what -showconfig prints) says.

// errVanished is lock's error when the directory was removed (Disable)
// while the caller waited for it.
var errVanished = errors.New("the IPQoS state directory was removed meanwhile")

// lockEnabled creates the state directory and the settings map (IPQoS
// enabled) if needed and locks it; it tries again when a Disable removed
// the directory while it waited.
func lockEnabled(dir string) (func(), error) {
	for {
		if err := makeDir(dir); err != nil {
			return nil, err
		}
		unlock, err := lock(dir)
		if errors.Is(err, errVanished) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := ensureSettings(dir); err != nil {
			unlock()
			return nil, err
		}
		return unlock, nil
	}
}

// finishInterrupted finishes, under the lock, what a killed process left
// (see the top of this file).
func finishInterrupted(dir string, o *Options) error {
	if err := os.RemoveAll(filepath.Join(dir, "staging")); err != nil {
		return err
	}
	// prev/ is the old configuration of a commit made with two renames
	// (no RENAME_EXCHANGE): killed between them, cur/ is missing
	prev, curDir := filepath.Join(dir, "prev"), filepath.Join(dir, "cur")
	if _, err := os.Stat(prev); err == nil {
		if _, err := os.Stat(curDir); errors.Is(err, os.ErrNotExist) {
			if err := os.Rename(prev, curDir); err != nil {
				return err
			}
		} else if err := os.RemoveAll(prev); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "unloading")); err == nil {
		o.logf("finishing an interrupted unload")
		return unloadLocked(dir, o)
	}
	next := filepath.Join(dir, "next")
	if _, err := os.Stat(next); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	o.logf("putting back the configuration an interrupted load was replacing")
	nx, err := openPinnedAt(next)
	if err != nil {
		return fmt.Errorf("reading the interrupted load's journal: %w", err)
	}
	defer nx.Close()
	cur, err := openPinned(dir)
	if err != nil {
		return err
	}
	defer cur.Close()
	var errs []error
	for _, a := range nx.rs.Adapters {
		var keep *qos.Adapter
		if cur != nil {
			keep = cur.rs.Adapter(a.Name)
		}
		if keep == nil {
			detach(dir, a, o.logf)
			continue
		}
		// the VLAN priorities the load may have set, before cur's
		if m := vlanMap(a); len(m) > 0 && tc.IsVLAN(a.Name) {
			for k := range m {
				m[k] = 0
			}
			_ = tc.SetEgressQoS(a.Name, m)
		}
	}
	if cur != nil {
		for ai := range cur.rs.Adapters {
			if err := attachAdapter(dir, cur, ai, o); err != nil && !errors.Is(err, errNoDevice) {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(next); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// errNoDevice is attachAdapter's error for an adapter whose device does
// not exist (now).
var errNoDevice = errors.New("no such device")

// attachAdapter puts configuration p on its adapter ai: HTB classes (or
// none), VLAN priority map, the adapters map entry for the device's
// ifindex, and the program, by updating the pinned link if it still runs
// on the device or attaching a new one.
func attachAdapter(dir string, p *pinned, ai int, o *Options) error {
	a := p.rs.Adapters[ai]
	dev, err := netlink.LinkByName(a.Name)
	if err != nil {
		return fmt.Errorf("adapter %s: %w", a.Name, errNoDevice)
	}
	lay, err := layout(p.rs)
	if err != nil {
		return err
	}
	rate := a.Speed
	if rate == 0 {
		if o.LinkRate != nil {
			rate = o.LinkRate(a.Name)
		} else {
			rate = tc.LinkSpeed(a.Name)
		}
	}
	plan, err := tc.NewPlan(a, rate)
	if err != nil {
		return err
	}
	if plan != nil {
		err = tc.Apply(plan)
	} else {
		err = tc.Remove(a.Name)
	}
	if err != nil {
		return err
	}
	if m := vlanMap(a); len(m) > 0 && tc.IsVLAN(a.Name) {
		if err := tc.SetEgressQoS(a.Name, m); err != nil {
			return err
		}
	}
	idx := uint32(dev.Attrs().Index)
	v := qosQosAdapter{FirstRule: lay.rule[ai], Nrules: uint32(len(a.Rules))}
	if dev.Attrs().EncapType == "ether" {
		v.L2len = 14
	}
	if err := p.maps["adapters"].Put(idx, &v); err != nil {
		return fmt.Errorf("adapter %s: writing its entry: %w", a.Name, err)
	}
	lpath := filepath.Join(dir, "links", a.Name)
	if lk, err := link.LoadPinnedLink(lpath, nil); err == nil {
		ok, err := placeOn(lk, idx, a.Name)
		if ok {
			err = lk.Update(p.prog)
		}
		lk.Close()
		if !ok && err != nil {
			return err
		}
		if ok {
			if err != nil {
				return fmt.Errorf("adapter %s: updating link: %w", a.Name, err)
			}
			o.logf("adapter %s: program replaced", a.Name)
			return nil
		}
		detachLink(lpath, o.logf)
	}
	lk, err := attachEgress(a.Name, int(idx), p.prog)
	if err != nil {
		if errors.Is(err, ErrNATInline) {
			return err
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			return fmt.Errorf("adapter %s: attaching tcx egress: %w (%w)", a.Name, err, ErrNotSupported)
		}
		return fmt.Errorf("adapter %s: attaching tcx egress: %w", a.Name, err)
	}
	defer lk.Close()
	if err := lk.Pin(lpath); err != nil {
		_ = lk.Detach()
		return fmt.Errorf("adapter %s: pinning link: %w", a.Name, err)
	}
	o.logf("adapter %s: attached", a.Name)
	return nil
}

// marked reports whether adapter a of p runs p's program on the device
// that has its name now, with its adapters entry.
func marked(dir string, p *pinned, a *qos.Adapter) bool {
	dev, err := netlink.LinkByName(a.Name)
	if err != nil {
		return false
	}
	idx := uint32(dev.Attrs().Index)
	lk, err := link.LoadPinnedLink(filepath.Join(dir, "links", a.Name), nil)
	if err != nil {
		return false
	}
	defer lk.Close()
	info, err := lk.Info()
	if err != nil || !live(lk, idx) {
		return false
	}
	pinfo, err := p.prog.Info()
	if err != nil {
		return false
	}
	if id, ok := pinfo.ID(); !ok || info.Program != id {
		return false
	}
	var v qosQosAdapter
	return p.maps["adapters"].Lookup(idx, &v) == nil
}

// Resync attaches the active configuration to the adapters it names that
// are not marked now: those absent at the load (skipped with -continue)
// that have appeared since, and those whose device was deleted and made
// again (a new ifindex). Adapters that are marked are not touched, so it
// costs a few lookups when nothing changed; with IPQoS disabled or no
// configuration loaded it does nothing and creates nothing. The udev rule
// runs it (ipfboot resync) for every interface that appears.
func Resync(dir string, log io.Writer) (*Report, error) {
	o := &Options{PinDir: dir, Log: log}
	dir = o.dir()
	rep := &Report{}
	if _, err := os.Stat(filepath.Join(dir, "settings")); errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	unlock, err := lock(dir)
	if errors.Is(err, errVanished) || errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := CheckNetNS(dir); err != nil {
		return nil, err
	}
	if err := finishInterrupted(dir, o); err != nil {
		return nil, err
	}
	p, err := openPinned(dir)
	if err != nil || p == nil {
		return rep, err
	}
	defer p.Close()
	var errs []error
	for ai, a := range p.rs.Adapters {
		if marked(dir, p, a) {
			continue
		}
		err := attachAdapter(dir, p, ai, o)
		switch {
		case errors.Is(err, errNoDevice):
			// not there (yet)
		case err != nil:
			rep.Skipped = append(rep.Skipped, err.Error())
			errs = append(errs, err)
		default:
			rep.Attached = append(rep.Attached, a.Name)
		}
	}
	if len(rep.Attached) > 0 {
		errs = append(errs, claimNetNS(dir))
	}
	return rep, errors.Join(errs...)
}

package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The pin directory's life cycle. A datapath appears and disappears as a
// whole: other processes (ipfstat, ipmon, the exporter, the rollback
// watchdog of ipf -W) open the pins at any time without a lock, so none
// of them may ever see a directory half made or half removed.
//
//   - A first Load builds everything in a staging directory beside the
//     final one (<dir>-staging-<pid>) and renames it into place when it is
//     complete (Publish): the rename is the commit point.
//   - RemovePinned marks the directory (a "removing" directory inside
//     it: the removal is decided), switches the filter off (one map
//     write: from then on every packet passes untouched, as with no
//     filter), detaches it, renames the directory out of the way
//     (<dir>-removing: no datapath for any process), then deletes what
//     it holds.
//   - A process killed half way leaves only those side directories, which
//     FinishInterrupted clears (Load and RemovePinned call it; so do the
//     commands that change the datapath, under their lock).
//   - OpenPinned only opens pins, never creates one. (It used to load the
//     maps by name with cilium/ebpf's PinByName, which creates and pins a
//     map that is missing: a reader that came while a first load was half
//     way pinned maps of its own beside the loader's, which then failed
//     with "pin map to …: file exists".)
//
// bpffs accepts no dot in a name, hence the dashes.

// stagingPrefix is the start of the name of a staging directory for the
// pin directory dir; the loader's process ID follows.
func stagingPrefix(dir string) string { return filepath.Clean(dir) + "-staging-" }

// removingDir is where RemovePinned moves a pin directory before clearing it.
func removingDir(dir string) string { return filepath.Clean(dir) + "-removing" }

// removingMark is the directory RemovePinned makes inside the pin
// directory before it changes anything: a removal was decided.
const removingMark = "removing"

// ErrIncomplete is returned by OpenPinned for a pin directory that has the
// datapath's config map but not all of its other maps: one of another
// Sluice version, or left by a process of an older one killed half way.
var ErrIncomplete = errors.New("datapath pins incomplete")

// newStaging creates a fresh staging directory for dir.
func newStaging(dir string) (string, error) {
	p := stagingPrefix(dir) + strconv.Itoa(os.Getpid())
	if err := clearPinDir(p, false); err != nil {
		return "", err
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		return "", fmt.Errorf("creating the staging directory %s: %w", p, err)
	}
	return p, nil
}

// publish renames a complete staging directory into place. dir may exist
// empty (an older Sluice created it first), or hold pins without the
// config map (left by a process killed while removing a datapath, before
// removal was atomic): those are swapped out and cleared.
func publish(staging, dir string) error {
	err := unix.Rename(staging, dir)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("publishing %s as %s: %w", staging, dir, err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "config")); serr == nil {
		// a datapath appeared meanwhile: this load raced another
		// loader that holds no lock; never replace a live datapath
		return fmt.Errorf("publishing %s: %s holds a datapath already (loaded meanwhile by another process)", staging, dir)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, staging, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("publishing %s as %s: %w", staging, dir, err)
	}
	// staging now holds the leftovers; the new datapath is attached
	// nowhere yet, so any clsact filter is theirs
	return clearPinDir(staging, true)
}

// FinishInterrupted clears what a process killed while loading or
// removing the datapath of dir left: a removal that was decided (it is
// finished), one whose directory was moved away but not cleared (its
// links may still be attached), and staging directories of loaders that
// are gone. A staging directory of a live process is left alone.
func FinishInterrupted(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, removingMark)); err == nil {
		return RemovePinned(dir)
	}
	return clearLeftovers(dir)
}

// clearLeftovers clears the side directories of dir that killed
// processes left (see FinishInterrupted).
func clearLeftovers(dir string) error {
	var errs []error
	// the clsact fallback's filters are found by name only: they are the
	// removed datapath's unless a datapath is loaded in dir now
	_, serr := os.Stat(filepath.Join(dir, "config"))
	if err := clearPinDir(removingDir(dir), errors.Is(serr, os.ErrNotExist)); err != nil {
		errs = append(errs, err)
	}
	prefix := stagingPrefix(dir)
	ents, err := os.ReadDir(filepath.Dir(prefix))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range ents {
		p := filepath.Join(filepath.Dir(prefix), e.Name())
		pid, ok := strings.CutPrefix(p, prefix)
		if !ok || !e.IsDir() {
			continue
		}
		if n, err := strconv.Atoi(pid); err == nil && n != os.Getpid() && processAlive(n) {
			continue
		}
		// a staging directory is never attached
		if err := clearPinDir(p, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// processAlive reports whether a process with that ID exists.
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// RemovePinned removes the datapath pinned in dir, if there is one (see
// the top of this file for the order of its steps): from the moment it
// switches the filter off every packet passes, and once it has renamed
// the directory no process finds a datapath; then the links are detached
// and the pins deleted. Pins that do not open as this version's objects
// (left by another build) go too. A process killed half way leaves the
// mark or the renamed directory, and FinishInterrupted (every later load,
// removal and change under ipfctl's lock) finishes the removal.
func RemovePinned(dir string) error { return removePinned(dir, nil) }

// removePinned is RemovePinned; step, when set, is called after each step
// (tests: a process killed there).
func removePinned(dir string, step func(string)) error {
	if dir == "" {
		dir = DefaultPinDir
	}
	if step == nil {
		step = func(string) {}
	}
	if err := clearLeftovers(dir); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, removingMark), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		if errors.Is(err, os.ErrNotExist) {
			return nil // nothing loaded
		}
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	step("marked")
	// off: the programs still attached until they are detached below
	// pass every packet untouched (pins of another build, which do not
	// open as this one's datapath, are only taken apart)
	if d, err := OpenPinned(dir); err == nil {
		if !d.OlderLayout() {
			// (an older Sluice's programs are only detached: the
			// switch would load programs over its maps)
			err = d.SetEnabled(false)
		}
		d.Close()
		if err != nil {
			return fmt.Errorf("switching the filter off: %w", err)
		}
	}
	step("off")
	// detached before the directory goes, so that no pin directory
	// means nothing attached
	if err := detachPinned(dir, true); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	step("detached")
	trash := removingDir(dir)
	if err := unix.Rename(dir, trash); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	step("renamed")
	return clearPinDir(trash, true)
}

// clearPinDir detaches the links pinned in dir, removes every pin and the
// directory; a missing directory is not an error. The clsact fallback's
// filters are not pinned: with clsact, when dir holds no TCX link, they
// are found by name and removed too.
func clearPinDir(dir string, clsact bool) error {
	if err := detachPinned(dir, clsact); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// detachPinned detaches the links pinned in dir and removes their pins;
// with clsact, when dir holds no TCX link, it removes the clsact
// fallback's filters (found by name) too.
func detachPinned(dir string, clsact bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	hadLinks := false
	for _, e := range ents {
		if _, _, ok := linkPin(e.Name()); !ok {
			continue
		}
		hadLinks = true
		errs = append(errs, detachPin(filepath.Join(dir, e.Name())))
	}
	if clsact && !hadLinks {
		// no TCX link: the datapath may run on the clsact fallback
		if err := detachClsact(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// detachClsact removes the filter's tc clsact filters (tcFilterName)
// from every interface of this network namespace.
func detachClsact() error { return DetachClsact(tcFilterName) }

// DetachClsact removes the tc clsact BPF filters named name from both
// hooks of every interface of this network namespace: what the
// fallback attach left when the kernel has no TCX (the filter's and
// NAT's removals share it).
func DetachClsact(name string) error {
	links, err := netlink.LinkList()
	if err != nil {
		return nil
	}
	var errs []error
	for _, l := range links {
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, err := netlink.FilterList(l, parent)
			if err != nil {
				continue
			}
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == name {
					if err := netlink.FilterDel(f); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// optionalMaps are the maps only programs newer than a datapath loaded by
// an older Sluice read, by the session that added them: none of the
// readers (ipfstat, ipmon, ipnat -l, ipf -V, the exporter) needs one, and
// the programs that use one treat a slot an older Sluice wrote as such
// (no runs4: its IPv4 runs are in runs; no RUN_FLAT or run_bits: no
// bitmap says a run is absent; srcs: the older programs refused max-srcs
// rules; nat_dm: read only with NAT inside, which a load sets up; st_dm: the
// older programs keep every flow in the states hash alone; frag_count: the
// older programs held no count, and the sweeper's first pass counts the
// fragment entries they left). A pin
// directory without them is such a datapath, whose rules are in force:
// OpenPinned opens the rest, Datapath.MissingMaps names them, and Load
// creates and pins them (PinByName) before the programs that read them
// are loaded. Any other map missing means a datapath half made or half
// removed: ErrIncomplete.
var optionalMaps = map[string]int{
	"runs4":        9,  // ld3: IPv4 runs in 8-byte keys
	"run_bits":     9,  // ld3: the runs bitmap
	"nat_dm":       11, // nat15: NAT's established path inside the filter
	"srcs":         13, // mxs13: max-srcs counted in the kernel
	"run_flat":     14, // ten14: the small sets' bitmap in a plain array
	"st_dm":        15, // est15: established flows' direct array (the states hash stays the authority)
	"run_flat_big": 15, // mil15: the large sets' bitmap in a plain array
	"frag_count":   19, // faith19: the fragment cache's count (frag_size)
}

// openPinnedMaps opens every map of spec pinned in dir, creating nothing,
// and names the optional maps (optionalMaps) that are not pinned. The
// caller closes the maps.
func openPinnedMaps(spec *ebpf.CollectionSpec, dir string) (map[string]*ebpf.Map, []string, error) {
	maps := map[string]*ebpf.Map{}
	var missing []string
	for name := range spec.Maps {
		if strings.HasPrefix(name, ".") {
			continue // .rodata/.bss belong to one program load
		}
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, os.ErrNotExist) {
			if _, ok := optionalMaps[name]; ok {
				missing = append(missing, name)
				continue
			}
		}
		if err != nil {
			for _, m := range maps {
				m.Close()
			}
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil, fmt.Errorf("%s: map %s is not pinned (a datapath half made or half removed, "+
					"or of a Sluice older than session 9: remove it with ipf -D and load again): %w", dir, name, ErrIncomplete)
			}
			return nil, nil, fmt.Errorf("opening pinned map %s in %s: %w", name, dir, err)
		}
		maps[name] = m
	}
	slices.Sort(missing)
	return maps, missing, nil
}

// assignPinned sets the fields of fm (filterMaps) to the maps of pinned,
// each checked against its spec as LoadAndAssign checks a replacement;
// the fields of maps that are not pinned stay nil. It takes the maps it
// sets out of pinned (the caller closes the rest).
func assignPinned(spec *ebpf.CollectionSpec, fm *filterMaps, pinned map[string]*ebpf.Map) error {
	v := reflect.ValueOf(fm).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Tag.Get("ebpf")
		m, ok := pinned[name]
		if !ok {
			continue
		}
		ms, ok := spec.Maps[name]
		if !ok {
			return fmt.Errorf("map %s is not in the object", name)
		}
		if err := ms.Compatible(m); err != nil {
			return fmt.Errorf("use pinned map %s: %w", name, err)
		}
		v.Field(i).Set(reflect.ValueOf(m))
		delete(pinned, name)
	}
	return nil
}

// detachPin detaches the link pinned at p and removes the pin. Detach
// now: dropping the pin alone releases the link later, from a workqueue.
func detachPin(p string) error {
	var errs []error
	if l, err := link.LoadPinnedLink(p, nil); err == nil {
		if err := l.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
			errs = append(errs, fmt.Errorf("detaching %s: %w", p, err))
		}
		l.Close()
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

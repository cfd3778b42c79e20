package bpf

// Tests of the pin directory's life cycle (pindir_linux.go): a datapath
// appears and disappears whole, whatever other processes do meanwhile and
// wherever a process is killed. Each is deterministic: the interleavings
// are made, not waited for.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"sluice/internal/rules/ipf"
	"sluice/internal/testutil/bpffs"
)

// entries lists the names in dir (nil when it does not exist), but for
// the kernel's own iterators at the root of a bpffs (maps.debug,
// progs.debug: no pin can have a dot in its name).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !strings.Contains(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// pinOne pins a fresh map of the filter's spec by name into dir, as a load
// does.
func pinOne(t *testing.T, dir, name string) {
	t.Helper()
	spec, err := filterSpec()
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Maps[name].Copy()
	ms.Pinning = ebpf.PinByName
	m, err := ebpf.NewMapWithOptions(ms, ebpf.MapOptions{PinPath: dir})
	if err != nil {
		t.Fatalf("pinning %s in %s: %v", name, dir, err)
	}
	m.Close()
}

// someMap names a map of the filter other than config (what a half-made
// or half-removed directory may hold without being a datapath).
func someMap(t *testing.T) string {
	t.Helper()
	spec, err := filterSpec()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range spec.Maps {
		if n != "config" && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names[0]
}

// TestPrivilegedOpenPinnedCreatesNothing is the race that failed
// ipf -W's first load in CI ("pin map to …/counters: file exists"): the
// rollback watchdog opened the pins while the loader was half way, when
// the config map was pinned and counters not yet. OpenPinned loaded the
// maps with PinByName, which creates and pins those that are missing, so
// the watchdog pinned its own counters under the loader's feet. Here the
// half-made directory is made directly: opening it must fail and leave it
// exactly as it was.
func TestPrivilegedOpenPinnedCreatesNothing(t *testing.T) {
	mnt := bpffs.Mount(t)
	dir := filepath.Join(mnt, "sluice")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	pinOne(t, dir, "config")
	before := entries(t, dir)
	d, err := OpenPinned(dir)
	if err == nil {
		d.Close()
	}
	if !errors.Is(err, ErrIncomplete) {
		t.Errorf("OpenPinned of a half-made directory: %v, want ErrIncomplete", err)
	}
	if after := entries(t, dir); !slices.Equal(after, before) {
		t.Errorf("OpenPinned changed the pin directory: %v, want %v", after, before)
	}
}

// TestPrivilegedFirstLoadPublishedWhole: a first load is invisible until
// it is published with its rules, then visible whole; attaching before
// that is refused.
func TestPrivilegedFirstLoadPublishedWhole(t *testing.T) {
	mnt := bpffs.Mount(t)
	dir := filepath.Join(mnt, "sluice")
	d, err := Load(Options{PinDir: dir, Unpublished: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Published() {
		t.Fatalf("a first load with Unpublished is published")
	}
	staging := d.Dir()
	if got, want := entries(t, mnt), []string{filepath.Base(staging)}; !slices.Equal(got, want) {
		t.Errorf("bpffs during the load: %v, want %v", got, want)
	}
	// every reader, at the worst moment: the load is complete but for
	// its publication
	for i := 0; i < 3; i++ {
		if r, err := OpenPinned(dir); !errors.Is(err, ErrNotLoaded) {
			if err == nil {
				r.Close()
			}
			t.Fatalf("OpenPinned during the first load: %v, want ErrNotLoaded", err)
		}
	}
	if got := entries(t, mnt); len(got) != 1 {
		t.Errorf("bpffs after the readers: %v", got)
	}
	if err := d.Attach([]string{"lo"}); err == nil {
		t.Errorf("Attach of an unpublished datapath succeeded")
	}
	rules, err := ipf.Parse("t", []byte("block in proto tcp from any to any port = 22\npass in all\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Compile(rules, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(); err != nil {
		t.Fatal(err)
	}
	if d.Dir() != dir || !d.Published() {
		t.Errorf("after Publish: in %s, published %v", d.Dir(), d.Published())
	}
	if got, want := entries(t, mnt), []string{"sluice"}; !slices.Equal(got, want) {
		t.Errorf("bpffs after publishing: %v, want %v", got, want)
	}
	r, err := OpenPinned(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	infos, err := r.Rules(Active)
	if err != nil || len(infos) != 2 {
		t.Errorf("rules seen by another opener after publishing: %d (%v), want 2", len(infos), err)
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, mnt); len(got) != 0 {
		t.Errorf("bpffs after Remove: %v", got)
	}
}

// deadPID returns the process ID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

// TestPrivilegedInterruptedLoadAndRemove makes what processes killed half
// way leave behind: a staging directory of a load that never published
// (and one of a loader still running, which must be left alone), a
// removal renamed out of the way but not cleared, and a first load
// published into a directory an older Sluice left half removed. The next
// load clears them and the datapath it makes is whole.
func TestPrivilegedInterruptedLoadAndRemove(t *testing.T) {
	mnt := bpffs.Mount(t)
	dir := filepath.Join(mnt, "sluice")
	dead := stagingPrefix(dir) + strconv.Itoa(deadPID(t))
	live := stagingPrefix(dir) + "1" // init: alive
	for _, p := range []string{dead, live, removingDir(dir), dir} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		pinOne(t, p, someMap(t))
	}
	// a reader finds no datapath in any of that
	if _, err := OpenPinned(dir); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("OpenPinned of leftovers: %v, want ErrNotLoaded", err)
	}
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("loading over the leftovers: %v", err)
	}
	defer d.Close()
	if got, want := entries(t, mnt), []string{"sluice", filepath.Base(live)}; !slices.Equal(got, want) {
		t.Errorf("bpffs after the load: %v, want %v", got, want)
	}
	r, err := OpenPinned(dir)
	if err != nil {
		t.Fatalf("OpenPinned after the load: %v", err)
	}
	r.Close()
	// removal is renamed first: killed right after that, the datapath
	// is gone for every reader, and the next removal finishes
	if err := os.Rename(dir, removingDir(dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPinned(dir); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("OpenPinned after an interrupted removal: %v, want ErrNotLoaded", err)
	}
	if err := RemovePinned(dir); err != nil {
		t.Fatal(err)
	}
	if got, want := entries(t, mnt), []string{filepath.Base(live)}; !slices.Equal(got, want) {
		t.Errorf("bpffs after RemovePinned: %v, want %v", got, want)
	}
}

// TestPrivilegedKilledRemoval stops RemovePinned after each of its steps,
// as a SIGKILL there would (runtime.Goexit: the deferred calls only close
// descriptors), on a datapath that blocks TCP port 8081: from the moment
// the filter is switched off every packet passes, a reader finds the
// whole datapath or none, and FinishInterrupted (what the next command
// runs) takes the rest apart.
func TestPrivilegedKilledRemoval(t *testing.T) {
	tp := newTopo(t)
	listenTCP(t, tp.b, "10.99.0.2:8081")
	for _, at := range []string{"marked", "off", "detached", "renamed"} {
		var (
			d   *Datapath
			err error
		)
		inNS(t, tp.b, func() {
			if d, err = Load(Options{PinDir: tp.pinDir}); err == nil {
				err = d.Attach([]string{tp.ifB})
			}
		})
		if err != nil {
			t.Fatalf("load/attach: %+v", err)
		}
		var im *Image
		inNS(t, tp.b, func() { im = compileText(t, "block in quick proto tcp from any to any port = 8081\n") })
		if err := d.LoadRules(im, Active); err != nil {
			t.Fatal(err)
		}
		d.Close()
		if tcpWorks(t, tp.a, "10.99.0.2:8081") {
			t.Fatalf("%s: port 8081 not blocked before the removal", at)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread is discarded
			if netns.Set(tp.b) != nil {
				return
			}
			removePinned(tp.pinDir, func(s string) {
				if s == at {
					runtime.Goexit()
				}
			})
		}()
		<-done
		r, err := OpenPinned(tp.pinDir)
		switch {
		case err == nil:
			if at != "marked" && r.Enabled() {
				t.Errorf("killed after %q: the datapath is loaded and on", at)
			}
			r.Close()
		case !errors.Is(err, ErrNotLoaded):
			t.Errorf("killed after %q: OpenPinned: %v", at, err)
		}
		if at != "marked" && !tcpWorks(t, tp.a, "10.99.0.2:8081") {
			t.Errorf("killed after %q: port 8081 still blocked", at)
		}
		inNS(t, tp.b, func() { err = FinishInterrupted(tp.pinDir) })
		if err != nil {
			t.Fatalf("killed after %q: FinishInterrupted: %v", at, err)
		}
		if got := entries(t, filepath.Dir(tp.pinDir)); len(got) != 0 {
			t.Errorf("killed after %q, then finished: bpffs holds %v", at, got)
		}
		if !tcpWorks(t, tp.a, "10.99.0.2:8081") {
			t.Errorf("killed after %q, then finished: port 8081 blocked", at)
		}
	}
}

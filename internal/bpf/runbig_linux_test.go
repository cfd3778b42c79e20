package bpf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/testutil/bpffs"
)

// TestPrivilegedRunBigPinned follows the large sets' array (run_flat_big,
// ensureRunBig) through the pin directory, as separate ipf processes
// meet it:
//   - a datapath keeps the one-entry array while its sets are small;
//   - a set that needs it pins the full array over that one;
//   - a process that opened the datapath before (its handle the
//     one-entry array) and then loads a large set takes the pinned array
//     rather than making another (a second array would leave the programs
//     of the first with a slot's words never written: false negatives);
//   - a reload of the directory (Load, OpenPinned) takes the pinned size;
//   - a directory whose array pin is lost (an older Sluice's: none) loads
//     with a one-entry array again, and the set in force still blocks its
//     addresses (its programs read run_bits).
//
// Every step checks that a run's address is blocked and another passes on
// the programs the datapath made for its active set.
func TestPrivilegedRunBigPinned(t *testing.T) {
	mnt := bpffs.Mount(t)
	dir := filepath.Join(mnt, "sluice")
	pinPath := filepath.Join(dir, "run_flat_big")
	load := func() *Datapath {
		t.Helper()
		d, err := Load(Options{PinDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	pinned := func() (uint32, uint32) {
		t.Helper()
		m, err := ebpf.LoadPinnedMap(pinPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return m.MaxEntries(), mapID(m)
	}
	// 198.18.0.7 is in runBigSet(n)'s inbound run, 198.19.200.1 in none
	verdicts := func(step string, d *Datapath) {
		t.Helper()
		for _, c := range []struct {
			src, want string
		}{{"198.18.0.7", "block"}, {"198.19.200.1", "pass"}} {
			frame := tcp4(c.src, "10.1.0.1", 40000, 80, ackF).build()
			ret, err := d.objs.SluiceIngress.Run(&ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)})
			if err != nil {
				t.Fatal(err)
			}
			if got := verdictName(ret); got != c.want {
				t.Errorf("%s: a packet from %s: %s, want %s", step, c.src, got, c.want)
			}
		}
	}
	large := compileText(t, runBigSet(runFlatMax+2))
	if !large.runBig {
		t.Fatal("the large set does not take the large array")
	}

	a := load()
	if err := a.LoadRules(compileText(t, runBigSet(1000)), Active); err != nil {
		t.Fatal(err)
	}
	if n, _ := pinned(); n != 1 {
		t.Fatalf("a small set: the pinned array has %d entries, want 1", n)
	}
	verdicts("a small set", a)

	b := load() // another process, its handle the one-entry array
	if err := a.LoadRules(large, Active); err != nil {
		t.Fatal(err)
	}
	n, id := pinned()
	if n != runBigEntries || mapID(a.objs.RunFlatBig) != id {
		t.Fatalf("a large set: the pinned array has %d entries (id %d, the loader's %d), want %d, the loader's",
			n, id, mapID(a.objs.RunFlatBig), runBigEntries)
	}
	verdicts("a large set", a)

	if b.objs.RunFlatBig.MaxEntries() != 1 {
		t.Fatalf("the other process's handle has %d entries before its load, want 1", b.objs.RunFlatBig.MaxEntries())
	}
	if err := b.LoadRules(compileText(t, runBigSet(runFlatMax+100)), Active); err != nil {
		t.Fatal(err)
	}
	if n2, id2 := pinned(); n2 != runBigEntries || id2 != id || mapID(b.objs.RunFlatBig) != id {
		t.Fatalf("a large set from another process: the pinned array %d entries, id %d (the other process's %d), want id %d",
			n2, id2, mapID(b.objs.RunFlatBig), id)
	}
	verdicts("a large set from another process", b)

	c := load() // a reload: the pinned array's size is taken
	verdicts("a reload", c)
	if mapID(c.objs.RunFlatBig) != id {
		t.Fatalf("a reload: the array's id %d, want the pinned %d", mapID(c.objs.RunFlatBig), id)
	}
	r, err := OpenPinned(dir)
	if err != nil {
		t.Fatalf("OpenPinned with the large array pinned: %v", err)
	}
	r.Close()

	// an older Sluice's directory has no such pin: a load makes the
	// one-entry array, and the set in force is still decided by run_bits
	if err := os.Remove(pinPath); err != nil {
		t.Fatal(err)
	}
	e := load()
	if n, _ := pinned(); n != 1 || e.runBigID() != 0 {
		t.Fatalf("a load without the pin: %d entries, want 1", n)
	}
	verdicts("a load without the array's pin", e)
	// and the next large set makes it again
	if err := e.LoadRules(large, Active); err != nil {
		t.Fatal(err)
	}
	if n, _ := pinned(); n != runBigEntries {
		t.Fatalf("a large set after the pin was lost: %d entries, want %d", n, runBigEntries)
	}
	verdicts("a large set after the pin was lost", e)
	if err := e.LoadRules(&Image{}, Active); err != nil {
		t.Fatal(err)
	}
}

// runBigSet is blocklist(n) without HP's stateless set after it (whose
// pass rules would pass a blocked address: a blocklist's rules are not
// quick), so that a run's address is blocked by its run alone.
func runBigSet(n int) string {
	var b strings.Builder
	for i := 0; i < n/2; i++ {
		fmt.Fprintf(&b, "block in from 198.%d.%d.%d/32 to any\nblock out from any to 198.%d.%d.%d/32\n",
			18+i>>16&1, i>>8&255, i&255, 18+i>>16&1, i>>8&255, i&255)
	}
	return b.String()
}

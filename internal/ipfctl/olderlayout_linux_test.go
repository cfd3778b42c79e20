package ipfctl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/bpf"
	"sluice/internal/testutil/bpffs"
)

// pinOlderStats replaces the statistics pinned in dir with a map of an
// older Sluice's layout: at2 set, a plain array (one value a CPU) of the
// statblock without the constant lists' counters (sessions 9 to 12);
// else the layout a Sluice before session 9 made, a one-entry per-CPU
// array of the statblock without those and its 8 words of padding.
func pinOlderStats(t *testing.T, dir string, at2 bool) {
	t.Helper()
	path := filepath.Join(dir, "stats")
	cur, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// statblock.fast: NSLOTS * 2 * FAST_MAX entries of 16 bytes
	size, n := cur.ValueSize()-3*2*16*16, cur.MaxEntries()
	cur.Close()
	spec := &ebpf.MapSpec{Name: "stats", Type: ebpf.Array, KeySize: 4, ValueSize: size, MaxEntries: n}
	if !at2 {
		spec.Type, spec.ValueSize, spec.MaxEntries = ebpf.PerCPUArray, size-64, 1
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := m.Pin(path); err != nil {
		t.Fatal(err)
	}
}

// TestPrivilegedOlderLayoutUpgrade: the ipf commands over a datapath an
// older Sluice loaded (its counters per-CPU, or at2's plain array without
// the constant lists' counters) move it to this layout in place with
// their first step (ipf -s and ipf -y here; any load does it too), and
// ipf -D removes one without moving it.
func TestPrivilegedOlderLayoutUpgrade(t *testing.T) {
	for _, at2 := range []bool{false, true} {
		name := "per-CPU"
		if at2 {
			name = "at2"
		}
		t.Run(name, func(t *testing.T) { testOlderLayoutUpgrade(t, at2) })
	}
}

func testOlderLayoutUpgrade(t *testing.T, at2 bool) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	apply := func(ops ...Op) {
		t.Helper()
		b := NewKernel(dir)
		defer b.Close()
		if _, err := b.Apply(ops, ApplyOptions{}); err != nil {
			t.Fatalf("%v: %v", ops, err)
		}
	}
	apply(Op{Kind: OpEnable})
	// ipf -s (which works on the opened datapath) and ipf -y (which
	// loads nothing when every interface is attached)
	for _, op := range []Op{{Kind: OpSwap}, {Kind: OpSync}} {
		pinOlderStats(t, dir, at2)
		d, err := bpf.OpenPinned(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !d.OlderLayout() {
			t.Fatal("the replaced statistics do not read as the older layout")
		}
		d.Close()
		apply(op)
		d, err = bpf.OpenPinned(dir)
		if err != nil {
			t.Fatal(err)
		}
		if d.OlderLayout() {
			t.Errorf("%v left the older layout in place", op)
		}
		d.Close()
	}
	pinOlderStats(t, dir, at2)
	apply(Op{Kind: OpDisable})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("pin directory after ipf -D of an older layout: %v", err)
	}
}

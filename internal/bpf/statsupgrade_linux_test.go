package bpf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/testutil/bpffs"
)

// pinOldStats replaces the statistics pinned in dir with a map of the
// per-CPU layout an older Sluice made, holding counts (each CPU's block
// its own numbers), and returns their sums.
func pinOldStats(t *testing.T, dir string, size uint32) (raw [numStats]uint64, drops [numReasons]uint64) {
	t.Helper()
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "stats", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: size, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	per := make([]oldStatblock, ncpu)
	for cpu := range per {
		for i := range per[cpu].V {
			per[cpu].V[i] = uint64(1000*(cpu+1) + i)
			raw[i] += per[cpu].V[i]
		}
		for i := range per[cpu].Drop {
			per[cpu].Drop[i] = uint64(100000*(cpu+1) + i)
			drops[i] += per[cpu].Drop[i]
		}
	}
	if size == uint32(len(per[0].V)+len(per[0].Drop))*8 {
		if err := m.Put(uint32(0), per); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "stats")); err != nil {
		t.Fatal(err)
	}
	if err := m.Pin(filepath.Join(dir, "stats")); err != nil {
		t.Fatal(err)
	}
	return raw, drops
}

func statSums(t *testing.T, d *Datapath) ([numStats]uint64, [numReasons]uint64) {
	t.Helper()
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	raw, drops, err := d.statBlock(ncpu)
	if err != nil {
		t.Fatal(err)
	}
	return raw, drops
}

// TestPrivilegedStatsUpgrade: a datapath an older Sluice pinned (its
// counters in a per-CPU array) is read as it is (OpenPinned: ipfstat,
// and every ipf command looks before it loads) and moved to this layout
// by the next reload, in place: its rules stay in force, its counts are
// carried, and the new programs count in the map now pinned. Counters of
// an unknown layout make the reload fail and change nothing.
func TestPrivilegedStatsUpgrade(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if err := d.LoadRules(compileText(t, "block in quick proto tcp from any to any port = 23\n"), Active); err != nil {
		t.Fatal(err)
	}
	d.Close()
	telnet := tcp4("10.0.0.1", "10.0.0.2", 40000, 23, synF).build()
	web := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF).build()
	raw, drops := pinOldStats(t, dir, uint32(numStats+numReasons)*8)

	r, err := OpenPinned(dir)
	if err != nil {
		t.Fatalf("OpenPinned over the older layout: %v", err)
	}
	if gr, gd := statSums(t, r); gr != raw || gd != drops {
		t.Errorf("the older layout's counts read as %v %v, want %v %v", gr, gd, raw, drops)
	}
	// what would load programs over its maps says what moves it
	if !r.OlderLayout() {
		t.Errorf("OlderLayout false over the older layout")
	}
	if err := r.SetEnabled(false); !errors.Is(err, ErrOlderLayout) {
		t.Errorf("switching an older layout's filter off: %v, want ErrOlderLayout", err)
	}
	r.Close()

	d, err = Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("reload over the older layout: %+v", err)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "stats"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Type() != ebpf.Array || oldStats(m) {
		t.Errorf("pinned statistics after the reload: %v", m.Type())
	}
	m.Close()
	if gr, gd := statSums(t, d); gr != raw || gd != drops {
		t.Errorf("counts after the reload %v %v, want %v %v", gr, gd, raw, drops)
	}
	if ri, err := d.Rules(Active); err != nil || len(ri) != 1 {
		t.Errorf("rules after the reload: %v, %v", ri, err)
	}
	for _, c := range []struct {
		frame []byte
		want  Verdict
	}{{telnet, VerdictBlock}, {web, VerdictPass}} {
		if v, _, err := d.Run(false, c.frame); err != nil || v != c.want {
			t.Errorf("after the reload: %v, %v; want %v", v, err, c.want)
		}
	}
	// the programs count in the pinned map: another process sees it
	r, err = OpenPinned(dir)
	if err != nil {
		t.Fatal(err)
	}
	gr, _ := statSums(t, r)
	r.Close()
	var more int
	for i := range gr {
		if gr[i] < raw[i] {
			t.Errorf("counter %d went down: %d, was %d", i, gr[i], raw[i])
		}
		if gr[i] > raw[i] {
			more++
		}
	}
	if more == 0 {
		t.Errorf("two packets counted nothing in the pinned statistics")
	}
	d.Close()

	if r, err := OpenPinned(dir); err != nil || r.OlderLayout() {
		t.Errorf("OpenPinned after the reload: %v (older layout: %v)", err, err == nil && r.OlderLayout())
	} else {
		r.Close()
	}

	// counters of neither layout: the reload fails, the pin stays
	pinOldStats(t, dir, 64)
	if d2, err := Load(Options{PinDir: dir}); !errors.Is(err, errStatsLayout) {
		if err == nil {
			d2.Close()
		}
		t.Errorf("reload over an unknown layout: %v, want errStatsLayout", err)
	}
	if m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "stats"), nil); err != nil || m.ValueSize() != 64 {
		t.Errorf("the unknown layout's map after the failed reload: %v", err)
	} else {
		m.Close()
	}
}

// TestPrivilegedRemoveOlderLayout: ipf -D removes a datapath of an older
// Sluice (its counters per-CPU) without switching it off first, which
// would load programs over its maps.
func TestPrivilegedRemoveOlderLayout(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	d.Close()
	pinOldStats(t, dir, uint32(numStats+numReasons)*8)
	if err := RemovePinned(dir); err != nil {
		t.Fatalf("RemovePinned of an older layout: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin directory after RemovePinned: %v", err)
	}
}

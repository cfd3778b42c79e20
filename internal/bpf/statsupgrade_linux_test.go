package bpf

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/testutil/bpffs"
)

// pinOldStats replaces the statistics pinned in dir with a map of an
// older Sluice's layout (layoutPerCPU: a one-entry per-CPU array;
// layoutAt2: a plain array of at2's statblock a CPU; layoutUnknown: a
// per-CPU array of 64 bytes) holding counts (each CPU's block its own
// numbers; none where an older layout never counted, the clean passes),
// and returns their sums.
func pinOldStats(t *testing.T, dir string, layout int) (raw [numStats]uint64, drops [numReasons]uint64) {
	t.Helper()
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	per := make([]oldStatblock, ncpu)
	for cpu := range per {
		for i := range per[cpu].V {
			if i%stDir >= stClean && i%stDir < stClean+4 && i < 2*stDir {
				continue
			}
			per[cpu].V[i] = uint64(1000*(cpu+1) + i)
			raw[i] += per[cpu].V[i]
		}
		for i := range per[cpu].Drop {
			per[cpu].Drop[i] = uint64(100000*(cpu+1) + i)
			drops[i] += per[cpu].Drop[i]
		}
	}
	var m *ebpf.Map
	switch layout {
	case layoutPerCPU:
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "stats", Type: ebpf.PerCPUArray, KeySize: 4,
			ValueSize: uint32(binary.Size(oldStatblock{})), MaxEntries: 1})
		if err == nil {
			err = m.Put(uint32(0), per)
		}
	case layoutAt2:
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "stats", Type: ebpf.Array, KeySize: 4,
			ValueSize: uint32(binary.Size(at2Statblock{})), MaxEntries: uint32(ncpu)})
		for cpu := 0; err == nil && cpu < ncpu; cpu++ {
			err = m.Put(uint32(cpu), at2Statblock{V: per[cpu].V, Drop: per[cpu].Drop})
		}
	default:
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "stats", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 64, MaxEntries: 1})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
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
// counters in a per-CPU array, or in at2's plain array without the
// constant lists' rule counters) is read as it is (OpenPinned: ipfstat,
// and every ipf command looks before it loads) and moved to this layout
// by the next reload, in place: its rules stay in force, its counts are
// carried (the rule's, which such a datapath's constant lists counted in
// hot_counts, too), and the new programs count in the map now pinned.
// Counters of an unknown layout make the reload fail and change nothing.
func TestPrivilegedStatsUpgrade(t *testing.T) {
	for _, l := range []struct {
		name   string
		layout int
	}{{"per-CPU", layoutPerCPU}, {"at2", layoutAt2}} {
		t.Run(l.name, func(t *testing.T) { testStatsUpgrade(t, l.layout) })
	}
}

func testStatsUpgrade(t *testing.T, layout int) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if err := d.LoadRules(compileText(t, "block in quick proto tcp from any to any port = 23\n"), Active); err != nil {
		t.Fatal(err)
	}
	// the older programs' counts of the rule (a constant list's too)
	// are in hot_counts: 7 on each CPU
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	hc := make([]filterHotCount, ncpu)
	for c := range hc {
		hc[c].C[0] = filterHotHits{Hits: 7, Bytes: 700}
	}
	if err := d.objs.HotCounts.Put(d.slotOf(Active)*listGroup0+listIn, hc); err != nil {
		t.Fatal(err)
	}
	d.Close()
	telnet := tcp4("10.0.0.1", "10.0.0.2", 40000, 23, synF).build()
	web := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF).build()
	raw, drops := pinOldStats(t, dir, layout)

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
	if ri, err := r.Rules(Active); err != nil || len(ri) != 1 || ri[0].Hits != uint64(7*ncpu) {
		t.Errorf("the older layout's rule: %+v, %v; want %d hits", ri, err, 7*ncpu)
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
	if ri, err := d.Rules(Active); err != nil || len(ri) != 1 || ri[0].Hits != uint64(7*ncpu) {
		t.Errorf("rules after the reload: %+v, %v; want %d hits", ri, err, 7*ncpu)
	}
	for _, c := range []struct {
		frame []byte
		want  Verdict
	}{{telnet, VerdictBlock}, {web, VerdictPass}} {
		if v, _, err := d.Run(false, c.frame); err != nil || v != c.want {
			t.Errorf("after the reload: %v, %v; want %v", v, err, c.want)
		}
	}
	// the new programs count the rule where they count (a constant
	// list: the statistics' block), added to what the old ones counted
	if ri, err := d.Rules(Active); err != nil || len(ri) != 1 || ri[0].Hits != uint64(7*ncpu+1) {
		t.Errorf("rules after a packet: %+v, %v; want %d hits", ri, err, 7*ncpu+1)
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
	pinOldStats(t, dir, layoutUnknown)
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
	pinOldStats(t, dir, layoutPerCPU)
	if err := RemovePinned(dir); err != nil {
		t.Fatalf("RemovePinned of an older layout: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin directory after RemovePinned: %v", err)
	}
}

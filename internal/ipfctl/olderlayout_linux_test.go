package ipfctl

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestPrivilegedOlderPinsCommands: the commands over a datapath pinned by
// a Sluice older than the maps added since session 9 (simulated: their
// pins and the pinned program variants removed; an older object's
// variants have another name). ipf -V and ipfstat's reader read it,
// rules and all, and say what it is without changing it; ipf -f moves it
// to this version (the pins are back) and its rules replace those in
// force.
func TestPrivilegedOlderPinsCommands(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	apply := func(ops ...Op) []Result {
		t.Helper()
		b := NewKernel(dir)
		defer b.Close()
		res, err := b.Apply(ops, ApplyOptions{})
		if err != nil {
			t.Fatalf("%v: %v", ops, err)
		}
		return res
	}
	apply(Op{Kind: OpAdd, Set: SetActive, Rules: parseRules(t, "block in proto tcp from any to any port = 23\npass in all\n")})
	older := []string{"nat_dm", "run_bits", "run_flat", "runs4", "srcs"}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if slices.Contains(older, e.Name()) || strings.HasPrefix(e.Name(), "spec_") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	pinned := func() []string {
		var out []string
		for _, n := range older {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				out = append(out, n)
			}
		}
		return out
	}

	b := NewKernel(dir)
	var warned []string
	res, err := b.Apply([]Op{{Kind: OpStatus}}, ApplyOptions{Warn: func(m string) { warned = append(warned, m) }})
	b.Close()
	if err != nil {
		t.Fatalf("ipf -V over the older pins: %v", err)
	}
	if want := "Datapath: an older Sluice's, without nat_dm run_bits run_flat runs4 srcs"; !strings.Contains(res[0].Text, want) {
		t.Errorf("ipf -V:\n%s\nwant a line %q", res[0].Text, want)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "loaded by an older Sluice") {
		t.Errorf("ipf -V's warnings %q, want one about the older Sluice", warned)
	}
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatalf("ipfstat's reader over the older pins: %v", err)
	}
	if ri, err := r.Rules(SetActive); err != nil || len(ri) != 2 {
		t.Errorf("ipfstat -i over the older pins: %v, %v; want 2 rules", ri, err)
	}
	if cov, err := r.Coverage(); err != nil || !slices.Equal(cov.OlderMaps, older) || !strings.Contains(cov.Warning(), "older Sluice") {
		t.Errorf("coverage over the older pins: %+v, %v", cov, err)
	}
	r.Close()
	if got := pinned(); len(got) != 0 {
		t.Fatalf("the readers pinned %v", got)
	}

	apply(Op{Kind: OpAdd, Set: SetActive, Rules: parseRules(t, "block in quick from 192.0.2.1 to any\n")})
	if got := pinned(); !slices.Equal(got, older) {
		t.Errorf("pins after ipf -f: %v, want %v", got, older)
	}
	r, err = OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ri, err := r.Rules(SetActive); err != nil || len(ri) != 3 {
		t.Errorf("rules after ipf -f: %v, %v; want 3", ri, err)
	}
	if cov, err := r.Coverage(); err != nil || len(cov.OlderMaps) != 0 || cov.Warning() != "" {
		t.Errorf("coverage after ipf -f: %+v, %v", cov, err)
	}
}

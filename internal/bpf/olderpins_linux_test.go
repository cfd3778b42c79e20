package bpf

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sluice/internal/testutil/bpffs"
)

// dropPins makes the datapath pinned in dir look like one an older Sluice
// loaded: the pins of names go (the programs loaded keep their maps), and
// so do the pinned program variants, which an older Sluice's object would
// have named with another hash (objHash) and a load would not reuse.
func dropPins(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "spec_") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestPrivilegedOlderPins: a datapath pinned by a Sluice older than the
// maps of optionalMaps (simulated: their pins removed). The readers open
// it and see its rules and counters, say what it lacks, and refuse to
// write rules or load programs over it; its programs still decide; a load
// pins the maps and decides with the rules in force, which a new set then
// replaces. Without the optional maps' handling OpenPinned fails with
// ErrIncomplete here.
func TestPrivilegedOlderPins(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer func() { d.Close() }()
	// no run in these rules: a slot an older Sluice wrote reads none of
	// the new maps, as this one's does not then (a run of this Sluice's
	// would be looked for in the maps the reload replaces)
	if err := d.LoadRules(compileText(t, "block in quick proto tcp from any to any port = 23\n"+
		"pass in quick proto tcp from any to any port = 80\n"), Active); err != nil {
		t.Fatal(err)
	}
	telnet := tcp4("10.0.0.1", "10.0.0.2", 40000, 23, synF).build()
	web := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF).build()
	expect := func(d *Datapath, when string) {
		t.Helper()
		for _, c := range []struct {
			frame []byte
			want  Verdict
		}{{telnet, VerdictBlock}, {web, VerdictPass}} {
			if v, _, err := d.Run(false, c.frame); err != nil || v != c.want {
				t.Errorf("%s: %v, %v; want %v", when, v, err, c.want)
			}
		}
	}
	expect(d, "loaded")
	optional := slices.Sorted(maps.Keys(optionalMaps))
	dropPins(t, dir, optional...)
	before := entries(t, dir)

	r, err := OpenPinned(dir)
	if err != nil {
		t.Fatalf("OpenPinned without the optional maps: %v", err)
	}
	if got := r.MissingMaps(); !slices.Equal(got, optional) {
		t.Errorf("MissingMaps %v, want %v", got, optional)
	}
	if !r.OlderLayout() {
		t.Errorf("OlderLayout false without %v", optional)
	}
	// the programs loaded still decide, counted where readers look
	expect(d, "with the pins removed")
	ri, err := r.Rules(Active)
	if err != nil || len(ri) != 2 || ri[0].Hits != 2 || ri[1].Hits != 2 {
		t.Errorf("rules read without the optional maps: %+v, %v; want 2 rules of 2 hits", ri, err)
	}
	if st, err := r.Stats(); err != nil || st.In.Block != 2 || st.In.Pass != 2 {
		t.Errorf("counters read without the optional maps: block %d pass %d (%v), want 2 and 2", st.In.Block, st.In.Pass, err)
	}
	// what writes says what to do, and changes nothing
	if err := r.LoadRules(compileText(t, "block in all\n"), Inactive); !errors.Is(err, ErrOlderLayout) {
		t.Errorf("rules written into it: %v, want ErrOlderLayout", err)
	}
	if err := r.SetEnabled(false); !errors.Is(err, ErrOlderLayout) {
		t.Errorf("switching it off: %v, want ErrOlderLayout", err)
	}
	r.Close()
	if after := entries(t, dir); !slices.Equal(after, before) {
		t.Errorf("the readers changed the pin directory: %v, want %v", after, before)
	}
	d.Close()

	// a load pins the maps; the rules in force stay until the swap
	d, err = Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("reload over the older pins: %+v", err)
	}
	for _, n := range optional {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("map %s after the reload: %v", n, err)
		}
	}
	expect(d, "reloaded")
	if r, err := OpenPinned(dir); err != nil || len(r.MissingMaps()) != 0 || r.OlderLayout() {
		t.Errorf("OpenPinned after the reload: %v", err)
	} else {
		r.Close()
	}
	// a set with runs (IPv4, the small sets' bitmap) in the maps pinned
	var set strings.Builder
	for i := 1; i <= 40; i++ {
		set.WriteString("block in quick from 192.0.2." + strconv.Itoa(i) + " to any\n")
	}
	set.WriteString("block in quick proto tcp from any to any port = 23\npass in quick proto tcp from any to any port = 80\n")
	if err := d.LoadRules(compileText(t, set.String()), Inactive); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Swap(); err != nil {
		t.Fatal(err)
	}
	expect(d, "after the swap")
	listed := tcp4("192.0.2.7", "10.0.0.2", 40000, 80, synF).build()
	if v, _, err := d.Run(false, listed); err != nil || v != VerdictBlock {
		t.Errorf("a listed source after the swap: %v, %v; want block", v, err)
	}
}

// TestPrivilegedRequiredPinMissing: a map that is not optional missing is
// a datapath half made or half removed: the readers fail closed, naming
// it, and leave the directory as it is.
func TestPrivilegedRequiredPinMissing(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	d.Close()
	dropPins(t, dir, "states", "run_flat")
	before := entries(t, dir)
	r, err := OpenPinned(dir)
	if err == nil {
		r.Close()
	}
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "map states is not pinned") {
		t.Errorf("OpenPinned without states: %v, want ErrIncomplete naming states", err)
	}
	if after := entries(t, dir); !slices.Equal(after, before) {
		t.Errorf("OpenPinned changed the pin directory: %v, want %v", after, before)
	}
}

// TestPrivilegedOlderPinsNoHalfWrite: over an older Sluice's datapath
// every write that would re-specialise the programs fails with
// ErrOlderLayout before it changes anything: the config (read back whole)
// and the pin directory are as they were. Before, DropNATEgress (ipqosadmin's
// natEgressOff) wrote NAT's word without its egress half and then failed, the
// programs in force still translating on egress; SetNATInline took the
// path's word out the same way; and setCfg wrote the value, failed and put
// it back, the filter off for the packets meanwhile (ipf -D's SetEnabled).
func TestPrivilegedOlderPinsNoHalfWrite(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer d.Close()
	if err := d.LoadRules(compileText(t, "block in quick proto tcp from any to any port = 23\n"), Active); err != nil {
		t.Fatal(err)
	}
	// NAT's path recorded as inline, both halves (the word only: a
	// session-13 datapath's, which the checks read before anything else)
	var c filterConf
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		t.Fatal(err)
	}
	if err := d.writeCfgRaw(&c, cfgNATInline, 4000000|uint64(natIngress|natEgress)<<32); err != nil {
		t.Fatal(err)
	}
	dropPins(t, dir, slices.Sorted(maps.Keys(optionalMaps))...)
	before := entries(t, dir)

	r, err := OpenPinned(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.OlderLayout() {
		t.Fatal("not an older datapath")
	}
	var want filterConf
	if err := r.objs.Config.Lookup(uint32(0), &want); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name string
		do   func() error
	}{
		{"DropNATEgress (ipqosadmin)", r.DropNATEgress},
		{"SetNATInline(0) (ipnat's natInlineOff)", func() error { return r.SetNATInline(0) }},
		{"SetNATInline on (ipnat's natInlineSync)", func() error { return r.SetNATInline(4000000) }},
		{"SetEnabled(false) (ipf -D)", func() error { return r.SetEnabled(false) }},
		{"SetDefaultBlock", func() error { return r.SetDefaultBlock(true) }},
		{"SetLogFlags", func() error { return r.SetLogFlags(LogBlock) }},
	} {
		if err := w.do(); !errors.Is(err, ErrOlderLayout) {
			t.Errorf("%s over the older datapath: %v, want ErrOlderLayout", w.name, err)
		}
		var got filterConf
		if err := r.objs.Config.Lookup(uint32(0), &got); err != nil {
			t.Fatal(err)
		}
		for k := range got.V {
			if got.V[k] != want.V[k] {
				t.Errorf("%s changed config %d: %#x, was %#x", w.name, k, got.V[k], want.V[k])
			}
		}
		if after := entries(t, dir); !slices.Equal(after, before) {
			t.Errorf("%s changed the pin directory: %v, want %v", w.name, after, before)
		}
	}
	// the programs in force still decide as loaded
	telnet := tcp4("10.0.0.1", "10.0.0.2", 40000, 23, synF).build()
	if v, _, err := d.Run(false, telnet); err != nil || v != VerdictBlock {
		t.Errorf("telnet after the refused writes: %v, %v; want block", v, err)
	}
}

package bpf

import (
	"path/filepath"
	"testing"

	"sluice/internal/testutil/bpffs"
)

// texts lists the rule texts of a set.
func texts(t *testing.T, d *Datapath, s Set) []string {
	t.Helper()
	rs, err := d.Rules(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.Text)
	}
	return out
}

// TestPrivilegedSetsStayComplete checks the slot discipline of LoadRules
// and Swap: a load of either set goes to the spare slot (the slots of the
// two sets are never written in place), and a Swap cut off after its
// first config writes still reads right and is finished by the next
// writer.
func TestPrivilegedSetsStayComplete(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer d.Remove()
	if err := d.LoadRules(compileText(t, "pass in all\n"), Active); err != nil {
		t.Fatal(err)
	}
	if err := d.LoadRules(compileText(t, "block in all\n"), Inactive); err != nil {
		t.Fatal(err)
	}
	a, i := d.slots()
	// an inactive load must not touch the inactive set's slot: that slot
	// is what ipfstat lists and ipf -s activates until the new one is whole
	if err := d.LoadRules(compileText(t, "block out all\n"), Inactive); err != nil {
		t.Fatal(err)
	}
	a2, i2 := d.slots()
	if a2 != a || i2 == i || i2 == a {
		t.Errorf("inactive load: slots (active %d, inactive %d) -> (%d, %d); want the inactive set on the spare slot", a, i, a2, i2)
	}
	if got := texts(t, d, Inactive); len(got) != 1 || got[0] != "block out all" {
		t.Errorf("inactive set %q", got)
	}

	// a Swap killed after the journal and the new active slot
	setNo := d.cfg(cfgSetNo)
	if err := d.setCfg(cfgSwapLog, swapLogValid|setNo<<8|uint64(a2)); err != nil {
		t.Fatal(err)
	}
	if err := d.setCfg(cfgActive, uint64(i2)); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, d, Active); len(got) != 1 || got[0] != "block out all" {
		t.Errorf("half-swapped: active %q, want the new one", got)
	}
	if got := texts(t, d, Inactive); len(got) != 1 || got[0] != "pass in all" {
		t.Errorf("half-swapped: inactive %q, want the old active one (from the journal)", got)
	}
	// the next writer, another process, finishes it
	d2, err := OpenPinned(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if err := d2.LoadRules(compileText(t, "count in all\n"), Inactive); err != nil {
		t.Fatal(err)
	}
	if j := d2.cfg(cfgSwapLog); j != 0 {
		t.Errorf("journal %#x after the next write, want 0", j)
	}
	if got := d2.cfg(cfgSetNo); got != setNo^1 {
		t.Errorf("set number %d after the finished swap, want %d", got, setNo^1)
	}
	if got := texts(t, d2, Active); len(got) != 1 || got[0] != "block out all" {
		t.Errorf("active %q after the finished swap", got)
	}
	if got := texts(t, d2, Inactive); len(got) != 1 || got[0] != "count in all" {
		t.Errorf("inactive %q after the next load", got)
	}
	if n, err := d2.Swap(); err != nil || n != int(setNo^1) {
		t.Errorf("Swap after recovery: %d, %v", n, err)
	}
}

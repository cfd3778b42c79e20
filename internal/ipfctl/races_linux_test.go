package ipfctl

// Races between the writers and readers of the datapath (issue 10: no
// lost update, no half-made state, two commands at once and a command
// killed half way are safe). The interleavings are made deterministic
// with hooks where they can be; the kill tests kill at points spread over
// a whole run.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sluice/internal/bpf"
)

// bpffsEntries lists the pin directories beside tp.pinDir (names with a
// dot are the kernel's own iterators at a bpffs root).
func (tp *topo) bpffsEntries() []string {
	tp.t.Helper()
	ents, err := os.ReadDir(filepath.Dir(tp.pinDir))
	if err != nil {
		tp.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !strings.Contains(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestPrivilegedReadersDuringFirstLoad is the CI failure of
// TestPrivilegedRollbackOfFirstLoad made deterministic: `ipf -W 1 -f
// first.conf` onto a host with no filter, with every process that opens
// the pins without the lock (the rollback watchdog, ipfstat, ipmon, the
// exporter, ipf -V) looking at the worst moment, when the load is
// complete but not yet published. They must see no datapath and create
// nothing; the load then appears whole, and the watchdog's rollback
// removes it whole.
func TestPrivilegedReadersDuringFirstLoad(t *testing.T) {
	tp := ownTopo(t)
	k := NewKernelWithPools(tp.pinDir, filepath.Join(tp.tmp, "pools"))
	var spec *watchdogSpec
	k.watchdog = func(w *watchdogSpec) error { spec = w; return nil }
	hooked := false
	k.beforePublish = func(staging string) {
		hooked = true
		before := tp.bpffsEntries()
		if !slices.Contains(before, filepath.Base(staging)) || slices.Contains(before, filepath.Base(tp.pinDir)) {
			t.Errorf("bpffs before publishing: %v (staging %s)", before, staging)
		}
		if NewKernel(tp.pinDir).tokenIs(spec.Token) {
			t.Errorf("the watchdog sees its token before the load is published")
		}
		if r, err := OpenReader(tp.pinDir); !errors.Is(err, bpf.ErrNotLoaded) {
			t.Errorf("ipfstat during the first load: %v, want not loaded", err)
			if err == nil {
				r.Close()
			}
		}
		if l, err := OpenLiveLog(tp.pinDir); !errors.Is(err, bpf.ErrNotLoaded) {
			t.Errorf("ipmon during the first load: %v, want not loaded", err)
			if err == nil {
				l.Close()
			}
		}
		if st, err := ReadStatus(tp.pinDir, filepath.Join(filepath.Dir(tp.pinDir), "qos")); err != nil || st.Filter != nil {
			t.Errorf("the exporter during the first load: %+v, %v; want no filter", st, err)
		}
		res, err := NewKernel(tp.pinDir).Apply([]Op{{Kind: OpStatus}}, ApplyOptions{})
		if err != nil || !strings.Contains(res[0].Text, "Running: no") {
			t.Errorf("ipf -V during the first load: %v, %v", res, err)
		}
		if after := tp.bpffsEntries(); !slices.Equal(after, before) {
			t.Errorf("the readers changed bpffs: %v, was %v", after, before)
		}
		// what is about to appear is complete already
		d, err := bpf.OpenPinned(staging)
		if err != nil {
			t.Errorf("the staged load: %v", err)
			return
		}
		defer d.Close()
		if infos, err := d.Rules(bpf.Active); err != nil || len(infos) != 2 || d.Token() != spec.Token {
			t.Errorf("the staged load: %d rules (%v), token %x; want 2 and %x", len(infos), err, d.Token(), spec.Token)
		}
	}
	ops := []Op{{Kind: OpAdd, Set: SetActive, Rules: parseRules(t, "block in all\npass out all\n")}}
	if err := tp.inNS(tp.b, func() error {
		_, err := k.Apply(ops, ApplyOptions{ConfirmWithin: time.Second})
		return err
	}); err != nil {
		t.Fatalf("ipf -W 1 -f first.conf: %v", err)
	}
	if !hooked {
		t.Fatalf("the first load was not published through Kernel.publish")
	}
	if got := tp.mustRun("ipfstat", "-io"); got != "block in all\npass out all\n" {
		t.Errorf("rules after the load:\n%s", got)
	}
	if n := tp.tcxPrograms("slb"); n != 2 {
		t.Errorf("%d programs attached to slb after the load, want 2", n)
	}
	// the watchdog, in this process: unconfirmed, it removes the filter
	spec.Deadline = time.Now()
	var restored bool
	err := tp.inNS(tp.b, func() error {
		var err error
		restored, err = watch(spec, 10*time.Millisecond)
		return err
	})
	if err != nil || !restored {
		t.Fatalf("the rollback: restored %v, %v", restored, err)
	}
	if got := tp.bpffsEntries(); !slices.Equal(got, []string{filepath.Base(lockDir(tp.pinDir))}) {
		t.Errorf("bpffs after the rollback of a first load: %v", got)
	}
	if n := tp.tcxPrograms("slb"); n != 0 {
		t.Errorf("%d programs attached to slb after the rollback", n)
	}
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"sluice/internal/qos/engine"
	"sluice/internal/qos/tc"
	"sluice/internal/rules/ipqos"
	"sluice/internal/testutil/netnstest"
)

// addPair adds a veth pair name (in a, with 10.<net>.0.1) — peer (in b,
// 10.<net>.0.2), both up.
func (tp *topo) addPair(t *testing.T, name, peer string, net int) {
	t.Helper()
	err := netnstest.Do(tp.a, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(tp.b)}); err != nil {
			return err
		}
		return setup(name, fmt.Sprintf("10.%d.0.1/24", net), fmt.Sprintf("fd00:%d::1/64", net))
	})
	if err == nil {
		err = netnstest.Do(tp.b, func() error {
			return setup(peer, fmt.Sprintf("10.%d.0.2/24", net), fmt.Sprintf("fd00:%d::2/64", net))
		})
	}
	if err != nil {
		t.Fatalf("adding %s: %v", name, err)
	}
}

func (tp *topo) delLink(t *testing.T, name string) {
	t.Helper()
	if err := netnstest.Do(tp.a, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	}); err != nil {
		t.Fatal(err)
	}
}

// dscpTo sends tagged datagrams to addr:9999 from a and returns the DSCP
// they carry on peer (in b).
func (tp *topo) dscpTo(t *testing.T, c *capture, addr, tag string) uint8 {
	t.Helper()
	udpSend(t, tp.a, "udp4", addr+":9999", tag, 3)
	fi, ok := c.waitFor(2*time.Second, func(fi frameInfo) bool { return tagged(fi, 9999, tag) })
	if !ok {
		t.Fatalf("%s: no packet captured", tag)
	}
	tcl, _ := engine.TrafficClass(fi.l3)
	return tcl >> 2
}

func (tp *topo) resync(t *testing.T) *Report {
	t.Helper()
	var rep *Report
	if err := netnstest.Do(tp.a, func() (err error) { rep, err = Resync(tp.pindir, nil); return }); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	return rep
}

func (tp *topo) linkID(t *testing.T, name string) link.ID {
	t.Helper()
	l, err := link.LoadPinnedLink(filepath.Join(tp.pindir, "links", name), nil)
	if err != nil {
		t.Fatalf("link of %s: %v", name, err)
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

const resyncConf = `filter voice {
    udp
    dstport 9999
}
policy ef {
    uses voice
    dscp 46
    max 50%
}
adapter qa0 {
    uses ef
}
adapter qn0 {
    uses ef
}
`

// TestPrivilegedResyncMarksNewAdapter: an adapter that ipqos.conf names
// but that did not exist at the load (skipped with -continue) is marked
// once it appears and Resync runs (what the udev rule does through
// ipfboot resync); so is one deleted and made again. A Resync with
// nothing new touches nothing, and with IPQoS disabled creates nothing.
func TestPrivilegedResyncMarksNewAdapter(t *testing.T) {
	tp := newTopo(t)
	rate := Options{LinkRate: func(string) uint64 { return 10e9 }}
	// disabled: nothing is made
	if rep := tp.resync(t); len(rep.Attached) != 0 {
		t.Errorf("Resync with IPQoS disabled attached %v", rep.Attached)
	}
	if _, err := os.Stat(tp.pindir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Resync with IPQoS disabled made %s: %v", tp.pindir, err)
	}
	opts := rate
	opts.Continue = true
	rep := tp.load(t, resyncConf, opts)
	if !slices.Equal(rep.Attached, []string{"qa0"}) || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "qn0") {
		t.Fatalf("load with qn0 missing: attached %v, skipped %v", rep.Attached, rep.Skipped)
	}
	tp.addPair(t, "qn0", "qn1", 97)
	capN := tp.capture(t, tp.b, "qn1")
	if got := tp.dscpTo(t, capN, "10.97.0.2", "before"); got != 0 {
		t.Fatalf("qn0 marks before the resync: DSCP %d", got)
	}
	if rep := tp.resync(t); !slices.Equal(rep.Attached, []string{"qn0"}) || len(rep.Skipped) != 0 {
		t.Fatalf("Resync after qn0 appeared: attached %v, skipped %v; want [qn0]", rep.Attached, rep.Skipped)
	}
	if got := tp.dscpTo(t, capN, "10.97.0.2", "after"); got != 46 {
		t.Errorf("qn0 after the resync: DSCP %d, want 46", got)
	}
	var installed bool
	if err := netnstest.Do(tp.a, func() (err error) { installed, err = tc.Installed("qn0"); return }); err != nil || !installed {
		t.Errorf("qn0's HTB classes after the resync: installed %v, %v", installed, err)
	}
	var si StateInfo
	if err := netnstest.Do(tp.a, func() (err error) { si, err = GetState(tp.pindir); return }); err != nil || si.State != Filtering {
		t.Errorf("state after the resync: %v (missing %v), %v; want filtering", si.State, si.Missing, err)
	}
	// nothing new: nothing touched
	ids := map[string]link.ID{"qa0": tp.linkID(t, "qa0"), "qn0": tp.linkID(t, "qn0")}
	if rep := tp.resync(t); len(rep.Attached) != 0 {
		t.Errorf("a second Resync attached %v", rep.Attached)
	}
	for n, id := range ids {
		if got := tp.linkID(t, n); got != id {
			t.Errorf("a Resync with nothing new replaced %s's link (%d, was %d)", n, got, id)
		}
	}
	// made again (a new ifindex): marked again
	tp.delLink(t, "qn0")
	tp.addPair(t, "qn0", "qn1", 97)
	capN = tp.capture(t, tp.b, "qn1")
	if rep := tp.resync(t); !slices.Equal(rep.Attached, []string{"qn0"}) {
		t.Fatalf("Resync after qn0 was made again: attached %v", rep.Attached)
	}
	if got := tp.dscpTo(t, capN, "10.97.0.2", "again"); got != 46 {
		t.Errorf("qn0 made again, after the resync: DSCP %d, want 46", got)
	}
	// unloaded: nothing to attach
	if err := netnstest.Do(tp.a, func() error { return Unload(tp.pindir, nil) }); err != nil {
		t.Fatal(err)
	}
	if rep := tp.resync(t); len(rep.Attached) != 0 {
		t.Errorf("Resync after Unload attached %v", rep.Attached)
	}
}

// killedIn runs f on a thread in ns and reports whether it ended by
// runtime.Goexit (a test's stand-in for SIGKILL: Load's deferred calls
// only close descriptors and unlock, which the kernel does for a killed
// process too).
func killedIn(ns netns.NsHandle, f func()) bool {
	done := make(chan bool, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is discarded
		if netns.Set(ns) != nil {
			done <- false
			return
		}
		killed := true
		defer func() { done <- killed }()
		f()
		killed = false
	}()
	return <-done
}

// checkWhole checks that the adapters carry the active configuration
// whole: each one it names (all exist here) runs its program with its
// HTB classes, the others run nothing and have no HTB classes.
func (tp *topo) checkWhole(t *testing.T, what string, all []string) string {
	t.Helper()
	var text string
	err := netnstest.Do(tp.a, func() error {
		p, err := openPinned(tp.pindir)
		if err != nil || p == nil {
			return fmt.Errorf("active configuration: %v, %v", p, err)
		}
		defer p.Close()
		text = p.text
		for _, name := range all {
			a := p.rs.Adapter(name)
			htb, err := tc.Installed(name)
			if err != nil {
				return err
			}
			_, lerr := os.Stat(filepath.Join(tp.pindir, "links", name))
			if a == nil {
				if htb || lerr == nil {
					t.Errorf("%s: %s is not configured but has HTB %v, a link (%v)", what, name, htb, lerr)
				}
				continue
			}
			if !marked(tp.pindir, p, a) || !htb {
				t.Errorf("%s: %s is configured but marked %v, HTB %v", what, name, marked(tp.pindir, p, a), htb)
			}
		}
		for _, d := range []string{"next", "staging", "prev", "unloading"} {
			if _, err := os.Stat(filepath.Join(tp.pindir, d)); err == nil {
				t.Errorf("%s: %s/ left", what, d)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return text
}

// TestPrivilegedKilledLoadLeavesOneConfiguration kills ipqosadmin -load at
// every step (after the journal, after each adapter switched, after the
// removed adapters were detached, after the exchange, after the commit),
// going from a configuration on qa0 to one on qa0 and qk0 and back. The
// next ipqosadmin (a Resync here) must leave the adapters carrying the old
// configuration or the new one whole, as -showconfig then says. A killed
// unload is finished.
func TestPrivilegedKilledLoadLeavesOneConfiguration(t *testing.T) {
	tp := newTopo(t)
	tp.addPair(t, "qk0", "qk1", 96)
	one := "filter f {\n    udp\n}\npolicy p {\n    uses f\n    dscp 10\n    max 40%\n}\nadapter qa0 {\n    uses p\n}\n"
	two := "filter f {\n    udp\n}\npolicy p {\n    uses f\n    dscp 20\n    max 30%\n}\nadapter qa0 {\n    uses p\n}\nadapter qk0 {\n    uses p\n}\n"
	norm := func(s string) string {
		cfg, err := ipqos.Parse("t", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return ipqos.Format(cfg)
	}
	opts := Options{LinkRate: func(string) uint64 { return 10e9 }}
	var mu sync.Mutex
	var steps []string
	for _, tr := range []struct{ from, to string }{{one, two}, {two, one}} {
		// the steps of this transition, from a run that is not killed
		tp.load(t, tr.from, opts)
		steps = nil
		o := opts
		o.stepDone = func(s string) { mu.Lock(); steps = append(steps, s); mu.Unlock() }
		tp.load(t, tr.to, o)
		ats := append([]string(nil), steps...)
		for _, at := range ats {
			tp.load(t, tr.from, opts)
			o := opts
			o.PinDir = tp.pindir
			o.stepDone = func(s string) {
				if s == at {
					runtime.Goexit()
				}
			}
			rs := compile(t, tr.to)
			if !killedIn(tp.a, func() { Load(rs, o) }) {
				t.Fatalf("the load was not killed at %q", at)
			}
			tp.resync(t)
			text := tp.checkWhole(t, "killed at "+at, []string{"qa0", "qk0"})
			if text != norm(tr.from) && text != norm(tr.to) {
				t.Errorf("killed at %q: active configuration\n%s", at, text)
			}
			// committed means the new one
			if (at == "exchanged" || at == "committed") && text != norm(tr.to) {
				t.Errorf("killed at %q, after the commit: the old configuration is active", at)
			}
		}
		t.Logf("killed at %v", ats)
	}
	// a killed unload is finished by the next ipqosadmin
	tp.load(t, two, opts)
	if !killedIn(tp.a, func() {
		o := Options{PinDir: tp.pindir, stepDone: func(s string) {
			if strings.HasPrefix(s, "unload detached") {
				runtime.Goexit()
			}
		}}
		unlock, err := lock(tp.pindir)
		if err != nil {
			return
		}
		defer unlock()
		unloadLocked(tp.pindir, &o)
	}) {
		t.Fatal("the unload was not killed")
	}
	tp.resync(t)
	err := netnstest.Do(tp.a, func() error {
		if p, err := openPinned(tp.pindir); p != nil || err != nil {
			p.Close()
			return fmt.Errorf("configuration after a killed unload and a resync: %v", err)
		}
		for _, n := range []string{"qa0", "qk0"} {
			if htb, _ := tc.Installed(n); htb {
				return fmt.Errorf("%s keeps its HTB classes after the unload", n)
			}
			if _, err := os.Stat(filepath.Join(tp.pindir, "links", n)); err == nil {
				return fmt.Errorf("%s keeps its link after the unload", n)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestPrivilegedConcurrentAdmin runs ipqosadmin's changes at once: four
// loads onto a fresh system (they used to race creating the settings
// map), then loads, an unload and a disable together. Every run must
// succeed or find nothing to do, and the adapters must end with one
// configuration whole, or none after a disable.
func TestPrivilegedConcurrentAdmin(t *testing.T) {
	tp := newTopo(t)
	tp.addPair(t, "qk0", "qk1", 96)
	conf := func(dscp int, adapters ...string) string {
		s := fmt.Sprintf("filter f {\n    udp\n}\npolicy p {\n    uses f\n    dscp %d\n    max 40%%\n}\n", dscp)
		for _, a := range adapters {
			s += "adapter " + a + " {\n    uses p\n}\n"
		}
		return s
	}
	opts := Options{PinDir: tp.pindir, LinkRate: func(string) uint64 { return 10e9 }}
	all := []string{"qa0", "qk0"}
	run := func(fs ...func() error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(fs))
		for i, f := range fs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = netnstest.Do(tp.a, f)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}
	}
	load := func(text string) func() error {
		rs := compile(t, text)
		return func() error { _, err := Load(rs, opts); return err }
	}
	run(load(conf(10, "qa0")), load(conf(11, "qk0")), load(conf(12, "qa0", "qk0")), load(conf(13, "qk0", "qa0")))
	tp.checkWhole(t, "after 4 loads at once", all)
	for i := 0; i < 3; i++ {
		run(load(conf(20, "qa0", "qk0")), func() error { return Unload(tp.pindir, nil) },
			func() error { return Disable(tp.pindir) }, load(conf(21, "qk0")),
			func() error { _, err := Resync(tp.pindir, nil); return err })
		if _, err := os.Stat(tp.pindir); errors.Is(err, os.ErrNotExist) {
			err := netnstest.Do(tp.a, func() error {
				for _, n := range all {
					if htb, _ := tc.Installed(n); htb {
						return fmt.Errorf("%s keeps HTB classes after a disable", n)
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			continue
		}
		if p, _ := openPinned(tp.pindir); p == nil {
			continue // unloaded last: checked by the unload tests
		} else {
			p.Close()
		}
		tp.checkWhole(t, fmt.Sprintf("round %d", i), all)
	}
}

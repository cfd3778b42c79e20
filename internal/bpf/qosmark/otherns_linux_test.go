//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"sluice/internal/bpf"
	"sluice/internal/testutil/netnstest"
)

// TestPrivilegedQoSOtherNetNSLinkPin: IPQoS's link pins are named after
// the adapter, and its check that a pin still runs on the adapter
// compared ifindexes, which every network namespace numbers from 1. A
// load from another namespace with an adapter of that name and ifindex
// updated the first namespace's link and said "program replaced",
// leaving its own adapter unmarked; now it is refused, and the first
// namespace's link stays.
func TestPrivilegedQoSOtherNetNSLinkPin(t *testing.T) {
	ns1, ns2 := netnstest.New(t), netnstest.New(t)
	pindir := testPinDir(t)
	const idx = 79
	egress := func() int {
		n, err := netnstest.TCXPrograms("slq0", ebpf.AttachTCXEgress)
		if err != nil {
			t.Error(err)
			return -1
		}
		return n
	}
	rs := compile(t, "filter f {\n    udp\n}\npolicy p {\n    uses f\n    dscp 10\n}\nadapter slq0 {\n    uses p\n}\n")
	opts := Options{PinDir: pindir, LinkRate: func(string) uint64 { return 10e9 }}
	if err := netnstest.Do(ns1, func() error {
		if err := netnstest.VethAt("slq0", idx); err != nil {
			return err
		}
		if err := Enable(pindir); err != nil {
			return err
		}
		_, err := Load(rs, opts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netnstest.Do(ns1, func() error { return Disable(pindir) }) })
	if err := netnstest.Do(ns2, func() error {
		if err := netnstest.VethAt("slq0", idx); err != nil {
			return err
		}
		_, err := Load(rs, opts)
		if err == nil || !strings.Contains(err.Error(), "another network namespace") {
			t.Errorf("a load from another namespace over its link pin: %v, want a refusal", err)
		}
		if n := egress(); n != 0 {
			t.Errorf("the other namespace's slq0 has %d egress programs, want none", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.Do(ns1, func() error {
		if n := egress(); n != 1 {
			t.Errorf("the first namespace's slq0 has %d egress programs, want IPQoS's", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPrivilegedQoSOtherNetNS: IPQoS loaded in one namespace, and its
// state directory used from another whose adapters have other names (no
// link pin collides). IPQoS recorded no namespace: the second load
// replaced the configuration, detaching the first namespace's adapter as
// "removed", and -showstats -reset, -loglevel and -resync changed the
// first namespace's state. Now each is refused with nothing changed;
// -unload works from anywhere (it detaches the links and leaves the
// adapters' qdiscs, which are the owner's), after which the state is
// claimed by the next load.
func TestPrivilegedQoSOtherNetNS(t *testing.T) {
	ns1, ns2 := netnstest.New(t), netnstest.New(t)
	pindir := testPinDir(t)
	egress := func(name string) int {
		n, err := netnstest.TCXPrograms(name, ebpf.AttachTCXEgress)
		if err != nil {
			t.Error(err)
			return -1
		}
		return n
	}
	// egressIn wants want egress programs on name of namespace ns
	egressIn := func(ns netns.NsHandle, name string, want int, when string) {
		t.Helper()
		if err := netnstest.Do(ns, func() error {
			if n := egress(name); n != want {
				t.Errorf("%s has %d egress programs %s, want %d", name, n, when, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	const conf = "filter f {\n    udp\n}\npolicy p {\n    uses f\n    dscp 10\n}\nadapter %s {\n    uses p\n}\n"
	rs1, rs2 := compile(t, fmt.Sprintf(conf, "slq1")), compile(t, fmt.Sprintf(conf, "slq2"))
	opts := Options{PinDir: pindir, LinkRate: func(string) uint64 { return 10e9 }}
	var here1 uint64
	if err := netnstest.Do(ns1, func() (err error) {
		if err := netnstest.VethAt("slq1", 81); err != nil {
			return err
		}
		if here1, err = bpf.NetNSID(); err != nil {
			return err
		}
		_, err = Load(rs1, opts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netnstest.Do(ns1, func() error { return Disable(pindir) }) })
	if own, err := NetNS(pindir); err != nil || own != here1 {
		t.Errorf("namespace recorded by the load: %d (%v), want %d", own, err, here1)
	}
	text, err := ActiveConfig(pindir)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, bpf.ErrOtherNetNS) || !strings.Contains(err.Error(), "ipqosadmin -unload") {
			t.Errorf("%s from another namespace: %v, want ErrOtherNetNS saying what to do", what, err)
		}
	}
	if err := netnstest.Do(ns2, func() error {
		if err := netnstest.VethAt("slq2", 82); err != nil {
			return err
		}
		_, err := Load(rs2, opts)
		refused("a load", err)
		_, err = Resync(pindir, nil)
		refused("-resync", err)
		refused("-showstats -reset", ResetStats(pindir))
		refused("-loglevel", SetLogLevel(pindir, 4))
		if n := egress("slq2"); n != 0 {
			t.Errorf("slq2 has %d egress programs after a refused load, want none", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := ActiveConfig(pindir); err != nil || got != text {
		t.Errorf("configuration after the refused load: %q (%v), want %q", got, err, text)
	}
	if lv, err := LogLevel(pindir); err != nil || lv != 0 {
		t.Errorf("log level after the refused -loglevel: %d (%v), want 0", lv, err)
	}
	egressIn(ns1, "slq1", 1, "after the other namespace's refused load")
	// the way out: -unload from the other namespace
	if err := netnstest.Do(ns2, func() error { return Unload(pindir, nil) }); err != nil {
		t.Fatalf("Unload from the other namespace: %v", err)
	}
	if got, err := ActiveConfig(pindir); err != nil || got != "" {
		t.Errorf("configuration after Unload: %q (%v), want none", got, err)
	}
	if own, err := NetNS(pindir); err != nil || own != 0 {
		t.Errorf("namespace recorded after Unload: %d (%v), want none", own, err)
	}
	egressIn(ns1, "slq1", 0, "after Unload")
	// and the next load claims it
	if err := netnstest.Do(ns2, func() error {
		if _, err := Load(rs2, opts); err != nil {
			return err
		}
		if n := egress("slq2"); n != 1 {
			t.Errorf("slq2 has %d egress programs after its load, want IPQoS's", n)
		}
		return Unload(pindir, nil)
	}); err != nil {
		t.Fatal(err)
	}
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"

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

package nat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"sluice/internal/bpf"
	"sluice/internal/testutil/bpffs"
	"sluice/internal/testutil/netnstest"
)

// TestPrivilegedAttachOtherNetNSLinkPin: NAT's link pins are named after
// an ifindex, which every network namespace numbers from 1. An Attach
// from another namespace whose interface has the ifindex of the one NAT
// is on used to update that interface's link and return success, leaving
// its own interface without NAT; now it is refused. A pin whose device
// went away no longer stands in for a new interface of that ifindex.
func TestPrivilegedAttachOtherNetNSLinkPin(t *testing.T) {
	ns1, ns2 := netnstest.New(t), netnstest.New(t)
	pin := filepath.Join(bpffs.Mount(t), "sluice-nat")
	const idx = 78
	progs := func(name string) int {
		n, err := netnstest.TCXPrograms(name, ebpf.AttachTCXIngress)
		if err != nil {
			t.Error(err)
			return -1
		}
		return n
	}
	var d1, d2 *Datapath
	if err := netnstest.Do(ns1, func() (err error) {
		if err = netnstest.VethAt("slnat", idx); err != nil {
			return err
		}
		if d1, err = Load(Options{PinDir: pin}); err != nil {
			return err
		}
		return d1.Attach([]string{"slnat"})
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d1.Close(); Remove(pin) })
	if err := netnstest.Do(ns2, func() (err error) {
		if err = netnstest.VethAt("slnat", idx); err != nil {
			return err
		}
		if d2, err = Load(Options{PinDir: pin}); err != nil {
			return err
		}
		t.Cleanup(func() { d2.Close() })
		// NAT records the namespace it was attached in
		if err := d2.CheckNetNS(); !errors.Is(err, bpf.ErrOtherNetNS) {
			t.Errorf("CheckNetNS from another namespace: %v, want ErrOtherNetNS", err)
		}
		err = d2.Attach([]string{"slnat"})
		if !errors.Is(err, bpf.ErrOtherNetNS) {
			t.Errorf("Attach from another namespace: %v, want ErrOtherNetNS", err)
		}
		if n := progs("slnat"); n != 0 {
			t.Errorf("the other namespace's slnat has %d ingress programs, want none", n)
		}
		// without the record (NAT attached by an older Sluice), the link
		// pin still refuses, and claims nothing
		rec := filepath.Join(pin, netnsPin)
		saved, err := ebpf.LoadPinnedMap(rec, nil)
		if err != nil {
			return err
		}
		defer saved.Close()
		if err := os.Remove(rec); err != nil {
			return err
		}
		err = d2.Attach([]string{"slnat"})
		if err == nil || !strings.Contains(err.Error(), "holds a link of another interface") {
			t.Errorf("Attach from another namespace over its link pin: %v, want a refusal", err)
		}
		if n := progs("slnat"); n != 0 {
			t.Errorf("the other namespace's slnat has %d ingress programs, want none", n)
		}
		if own, err := d2.NetNS(); err != nil || own != 0 {
			t.Errorf("a refused Attach recorded namespace %d (%v), want none", own, err)
		}
		return saved.Pin(rec)
	}); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.Do(ns1, func() error {
		l, err := netlink.LinkByName("slnat")
		if err != nil {
			return err
		}
		if err := netlink.LinkDel(l); err != nil {
			return err
		}
		if err := netnstest.VethAt("slnat2", idx); err != nil {
			return err
		}
		if err := d1.Attach([]string{"slnat2"}); err != nil {
			t.Errorf("Attach over a defunct link's pin: %v", err)
		}
		if n := progs("slnat2"); n != 1 {
			t.Errorf("slnat2 after Attach: %d ingress programs, want NAT's", n)
		}
		// detached everywhere, NAT works in no namespace
		if err := d1.Detach(); err != nil {
			return err
		}
		if own, err := d1.NetNS(); err != nil || own != 0 {
			t.Errorf("namespace recorded after Detach: %d (%v), want none", own, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := netnstest.Do(ns2, func() error {
		if err := d2.Attach([]string{"slnat"}); err != nil {
			t.Errorf("Attach from the other namespace once NAT was detached: %v", err)
		}
		if n := progs("slnat"); n != 1 {
			t.Errorf("slnat after Attach: %d ingress programs, want NAT's", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

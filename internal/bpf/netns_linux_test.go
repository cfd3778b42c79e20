package bpf

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"sluice/internal/testutil/bpffs"
	"sluice/internal/testutil/netnstest"
)

// TestPrivilegedAttachOtherNetNS: one pin directory seen from two network
// namespaces, whose interfaces have the same ifindex (every namespace
// numbers its own). The first Attach records its namespace; an Attach
// from the other is refused, where it used to find the first one's link
// pin under its interface's ifindex, update that link and return success
// with its own interface passing everything. A pin of a link whose
// device went away no longer stops a new interface of that ifindex from
// being attached, and a datapath of an older Sluice (no namespace
// recorded) whose pin is another namespace's link refuses too.
func TestPrivilegedAttachOtherNetNS(t *testing.T) {
	ns1, ns2 := netnstest.New(t), netnstest.New(t)
	pinDir := filepath.Join(bpffs.Mount(t), "sluice")
	const idx = 77
	in := func(ns netns.NsHandle, f func() error) {
		t.Helper()
		if err := netnstest.Do(ns, f); err != nil {
			t.Fatal(err)
		}
	}
	var d1, d2 *Datapath
	var id1, id2 uint64
	in(ns1, func() (err error) {
		if err = netnstest.VethAt("sldum", idx); err != nil {
			return err
		}
		if id1, err = NetNSID(); err != nil {
			return err
		}
		if d1, err = Load(Options{PinDir: pinDir}); err != nil {
			return err
		}
		if d1.NetNS() != 0 {
			return fmt.Errorf("a datapath attached nowhere records namespace %#x", d1.NetNS())
		}
		return d1.Attach([]string{"sldum"})
	})
	t.Cleanup(func() { d1.Remove() }) // from the test's own namespace: removal works from any
	if got := d1.NetNS(); got != id1 || got == 0 {
		t.Fatalf("after the first Attach the datapath records namespace %#x, want %#x", got, id1)
	}
	in(ns2, func() (err error) {
		if err = netnstest.VethAt("sldum", idx); err != nil {
			return err
		}
		if id2, err = NetNSID(); err != nil {
			return err
		}
		if id2 == id1 {
			return fmt.Errorf("two namespaces with one identifier %#x", id1)
		}
		d2, err = Load(Options{PinDir: pinDir})
		return err
	})
	defer d2.Close()

	in(ns2, func() error {
		if err := d2.CheckNetNS(); !errors.Is(err, ErrOtherNetNS) {
			t.Errorf("CheckNetNS from the other namespace: %v, want ErrOtherNetNS", err)
		}
		err := d2.Attach([]string{"sldum"})
		if !errors.Is(err, ErrOtherNetNS) {
			t.Errorf("Attach from the other namespace: %v, want ErrOtherNetNS", err)
		}
		if n, err := netnstest.TCXPrograms("sldum", ebpf.AttachTCXIngress); err != nil || n != 0 {
			t.Errorf("the other namespace's sldum: %d programs (%v), want none", n, err)
		}
		if h, err := d2.Hooked(); err != nil || len(h) != 0 {
			t.Errorf("Hooked from the other namespace: %v (%v), want none: ifindex %d here is not the filter's", h, err, idx)
		}
		return nil
	})
	in(ns1, func() error {
		if err := d1.CheckNetNS(); err != nil {
			t.Errorf("CheckNetNS from its own namespace: %v", err)
		}
		if h, err := d1.Hooked(); err != nil || !h[idx] {
			t.Errorf("Hooked from its own namespace: %v (%v), want ifindex %d", h, err, idx)
		}
		return nil
	})

	// an older Sluice's datapath records no namespace: the link pin
	// of ns1's interface still stops ns2's Attach
	if err := d1.setCfg(cfgNetNS, 0); err != nil {
		t.Fatal(err)
	}
	in(ns2, func() error {
		err := d2.Attach([]string{"sldum"})
		if err == nil || !strings.Contains(err.Error(), "holds a link of another interface") {
			t.Errorf("Attach over another namespace's link pin: %v, want a refusal", err)
		}
		if n, err := netnstest.TCXPrograms("sldum", ebpf.AttachTCXIngress); err != nil || n != 0 {
			t.Errorf("the other namespace's sldum after the refusal: %d programs (%v), want none", n, err)
		}
		return nil
	})
	// that Attach claimed the unrecorded datapath for ns2 before it
	// stopped; give it back
	if err := d1.setCfg(cfgNetNS, id1); err != nil {
		t.Fatal(err)
	}

	// the device goes and another takes its ifindex: the defunct link's
	// pin must not stand in for an attachment
	in(ns1, func() error {
		l, err := netlink.LinkByName("sldum")
		if err != nil {
			return err
		}
		if err := netlink.LinkDel(l); err != nil {
			return err
		}
		if err := netnstest.VethAt("sldum2", idx); err != nil {
			return err
		}
		if err := d1.Attach([]string{"sldum2"}); err != nil {
			t.Errorf("Attach over a defunct link's pin: %v", err)
		}
		if n, err := netnstest.TCXPrograms("sldum2", ebpf.AttachTCXIngress); err != nil || n != 1 {
			t.Errorf("sldum2 after Attach: %d programs (%v), want the filter's", n, err)
		}
		if h, err := d1.Hooked(); err != nil || !h[idx] {
			t.Errorf("Hooked after re-attaching: %v (%v), want ifindex %d", h, err, idx)
		}
		return nil
	})
}

// TestNetNSID: the identifier is stable on one thread, and another
// namespace's differs.
func TestPrivilegedNetNSID(t *testing.T) {
	a, err := NetNSID()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NetNSID()
	if err != nil || a != b || a == 0 {
		t.Fatalf("NetNSID twice: %#x, %#x (%v)", a, b, err)
	}
	var c uint64
	if err := netnstest.Do(netnstest.New(t), func() (err error) { c, err = NetNSID(); return }); err != nil {
		t.Fatal(err)
	}
	if c == a || c == 0 {
		t.Errorf("another namespace's identifier %#x, this one's %#x", c, a)
	}
}

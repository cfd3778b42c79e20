//go:build linux

package topo

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"sluice/internal/testutil"
)

// gone checks that nothing of a test bed is left: no mount point for its
// namespaces and no veth in the current namespace.
func gone(t *testing.T, names []string, links [2]string) {
	t.Helper()
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(NetNSDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s still exists (stat: %v)", n, err)
		}
	}
	for _, l := range links {
		if _, err := netlink.LinkByName(l); err == nil {
			t.Errorf("link %s exists in the root namespace", l)
		}
	}
}

func TestPrivilegedTopoTCP(t *testing.T) {
	testutil.RequireRoot(t)
	ctx := context.Background()
	tp, err := New(ctx, Options{MTU: 9000, GRO: Off, GSO: Off, TSO: Off})
	if err != nil {
		t.Fatal(err)
	}
	names, links := tp.NetNSNames(), tp.Links()
	t.Cleanup(func() { _ = tp.Close() })
	if len(names) != 2 {
		t.Fatalf("got %d namespaces, want 2", len(names))
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(NetNSDir, n)); err != nil {
			t.Fatalf("namespace %s: %v", n, err)
		}
	}
	if _, err := netlink.LinkByName(links[0]); err == nil {
		t.Errorf("veth %s visible in the root namespace", links[0])
	}
	gro, gso, tso, err := tp.Offloads(SUT)
	if err != nil {
		t.Fatal(err)
	}
	if gro || gso || tso {
		t.Errorf("offloads gro=%v gso=%v tso=%v, want all off", gro, gso, tso)
	}

	for r := range 2 {
		h := tp.Host(Role(r))
		linkHasNoIPv6(t, h, h.Link)
	}
	for _, pair := range [][2]netip.Addr{{PeerAddr, SUTAddr}} {
		var ln net.Listener
		if err := tp.Do(Peer, func() (err error) {
			ln, err = net.Listen("tcp", netip.AddrPortFrom(pair[0], 0).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(c, c)
			c.Close()
		}()
		var c net.Conn
		if err := tp.Do(SUT, func() (err error) {
			d := net.Dialer{Timeout: 3 * time.Second}
			c, err = d.Dial("tcp", ln.Addr().String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo: got %q, %v", buf, err)
		}
		if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); got != pair[1] {
			t.Errorf("client address %s, want %s", got, pair[1])
		}
		c.Close()
		ln.Close()
	}
	// The addresses live only inside the namespaces.
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, _ := netip.AddrFromSlice(a.IP); ip.Unmap() == SUTAddr || ip.Unmap() == PeerAddr {
			t.Errorf("address %s present in the root namespace", ip)
		}
	}
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	gone(t, names, links)
}

// linkHasNoIPv6 checks that a test bed's link carries no IPv6: switched
// off, and not even a link-local address. With IPv6 on, the kernel's own
// router solicitations, MLD reports and neighbour solicitations after the
// link comes up ran the filter under test during `sluice bench`'s
// measured runs (and of the tests that use the test bed).
func linkHasNoIPv6(t *testing.T, h *Host, link string) {
	t.Helper()
	var off []byte
	var addrs []netlink.Addr
	if err := h.Do(func() error {
		var err error
		if off, err = os.ReadFile("/proc/sys/net/ipv6/conf/" + link + "/disable_ipv6"); err != nil {
			return err
		}
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		addrs, err = netlink.AddrList(l, netlink.FAMILY_V6)
		return err
	}); err != nil {
		t.Fatalf("%s %s: %v", h.Role, link, err)
	}
	if string(off) != "1\n" {
		t.Errorf("%s %s: disable_ipv6 is %q, want 1", h.Role, link, off)
	}
	if len(addrs) > 0 {
		t.Errorf("%s %s: IPv6 addresses %v", h.Role, link, addrs)
	}
}

func TestPrivilegedTopoSweep(t *testing.T) {
	testutil.RequireRoot(t)
	// A namespace named like one of a dead process (PID 0x7fffffff
	// cannot exist) is swept; one of this live process is not.
	dead := "slbtest-2147483647-00000000-sut"
	h, err := newNamed(dead)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	t.Cleanup(func() { _ = os.Remove(filepath.Join(NetNSDir, dead)) })
	tp, err := New(context.Background(), Options{Prefix: "slbtest"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	removed, err := Sweep("slbtest")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != dead {
		t.Errorf("swept %v, want [%s]", removed, dead)
	}
	for _, n := range tp.NetNSNames() {
		if _, err := os.Stat(filepath.Join(NetNSDir, n)); err != nil {
			t.Errorf("live namespace %s was swept: %v", n, err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{MTU: 10}, {Prefix: "a-b"}, {CPUs: []int{-1}}} {
		if _, err := New(context.Background(), o); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", o)
		}
	}
}

func TestParseToggle(t *testing.T) {
	for in, want := range map[string]Toggle{"": Default, "on": On, "OFF": Off} {
		got, err := ParseToggle(in)
		if err != nil || got != want {
			t.Errorf("ParseToggle(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseToggle("maybe"); err == nil {
		t.Error("ParseToggle(maybe) succeeded")
	}
}

func TestPrivilegedTopoPin(t *testing.T) {
	testutil.RequireRoot(t)
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	if before.Count() < 2 {
		t.Skip("one CPU: pinning is not observable")
	}
	tp, err := New(context.Background(), Options{Prefix: "slbpin", CPUs: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	var during unix.CPUSet
	if err := unix.SchedGetaffinity(0, &during); err != nil {
		t.Fatal(err)
	}
	if during.Count() != 1 || !during.IsSet(0) {
		t.Errorf("while pinned: %d CPUs (CPU 0 set: %v), want only CPU 0", during.Count(), during.IsSet(0))
	}
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("affinity not restored: %d CPUs, want %d", after.Count(), before.Count())
	}
}

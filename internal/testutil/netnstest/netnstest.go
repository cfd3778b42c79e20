//go:build linux

// Package netnstest gives privileged tests network namespaces of their
// own, so the links, addresses and programs a test makes never touch the
// host's and vanish with the test.
package netnstest

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"sluice/internal/testutil"
)

// New creates an anonymous network namespace with lo up. Its handle is
// closed when the test ends; being the last reference, that destroys the
// namespace and whatever links are left in it. It needs root
// (testutil.RequireRoot).
func New(t testing.TB) netns.NsHandle {
	t.Helper()
	testutil.RequireRoot(t)
	var h netns.NsHandle
	errc := make(chan error, 1)
	go func() {
		// The thread stays in the new namespace and is discarded with the
		// goroutine, never handed back to the scheduler.
		runtime.LockOSThread()
		var err error
		h, err = netns.New()
		if err == nil {
			if lo, e := netlink.LinkByName("lo"); e == nil {
				err = netlink.LinkSetUp(lo)
			}
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("creating netns: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// Do runs fn on an OS thread switched into ns and returns its error.
// The thread is never handed back to the Go scheduler (the goroutine
// exits while locked, so the runtime discards the thread), which keeps
// the namespace from leaking into unrelated goroutines.
func Do(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("entering netns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// VethAt adds an up veth named name with the given ifindex (0: the
// kernel's choice) to the calling thread's namespace, its peer name+"p"
// left down: an interface to attach programs to whose ifindex a test
// chooses (every namespace numbers its own, so two namespaces can each
// have one of the same ifindex). The dummy driver is not in every kernel.
func VethAt(name string, index int) error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, Index: index}, PeerName: name + "p"}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("adding %s (ifindex %d): %w", name, index, err)
	}
	return netlink.LinkSetUp(v)
}

// TCXPrograms returns how many programs run on the TCX hook typ
// (ingress or egress) of the interface named name in the calling
// thread's namespace.
func TCXPrograms(name string, typ ebpf.AttachType) (int, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return 0, err
	}
	q, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: typ})
	if err != nil {
		return 0, fmt.Errorf("programs on %s: %w", name, err)
	}
	return len(q.Programs), nil
}

//go:build linux

// Package netnstest gives privileged tests network namespaces of their
// own, so the links, addresses and programs a test makes never touch the
// host's and vanish with the test.
package netnstest

import (
	"fmt"
	"runtime"
	"testing"

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

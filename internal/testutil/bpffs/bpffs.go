//go:build linux

// Package bpffs gives a privileged test a bpffs of its own, so the pins it
// makes neither meet another test's nor outlive it.
package bpffs

import (
	"testing"

	"golang.org/x/sys/unix"

	"sluice/internal/testutil"
)

// Mount mounts a fresh bpffs (mode 0700) on a temporary directory and
// returns that directory. The mount is detached when the test ends, before
// the directory is removed. A test that cannot mount one is skipped, or
// failed under CI (testutil.SkipOrFail); so is one that does not run as
// root.
func Mount(t testing.TB) string {
	t.Helper()
	testutil.RequireRoot(t)
	mnt := t.TempDir()
	if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
		testutil.SkipOrFail(t, "mounting a bpffs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test bpffs %s: %v", mnt, err)
		}
	})
	return mnt
}

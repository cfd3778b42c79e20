//go:build linux

// Package bpffs gives a privileged test a bpffs of its own, so the pins it
// makes neither meet another test's nor outlive it. It is the one place
// tests mount bpffs (never on the host's /sys/fs/bpf).
package bpffs

import (
	"fmt"
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
	unmount, err := MountAt(mnt)
	if err != nil {
		testutil.SkipOrFail(t, "%v", err)
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return mnt
}

// MountAt mounts a fresh bpffs (mode 0700) on dir, which must exist, for a
// fixture that outlives one test (a topology several tests share); the
// caller unmounts it with the returned function (a lazy detach, so open
// pins do not keep it busy).
func MountAt(dir string) (unmount func() error, err error) {
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return nil, fmt.Errorf("mounting a bpffs on %s: %w", dir, err)
	}
	return func() error {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting the test bpffs %s: %w", dir, err)
		}
		return nil
	}, nil
}

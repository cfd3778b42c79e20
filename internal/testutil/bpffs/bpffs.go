//go:build linux

// Package bpffs gives a privileged test a bpffs of its own, so the pins it
// makes neither meet another test's nor outlive it. It is the one place
// tests mount bpffs (never on the host's /sys/fs/bpf).
package bpffs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"sluice/internal/mountinfo"
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

// ownerFile names the file beside a test's mount point that holds the pid
// of the process that mounted it: hidden, so that no reaper of other mounts
// beside it (the bench's, by name prefix) takes it for one of its own.
func ownerFile(mp string) string {
	mp = filepath.Clean(mp)
	return filepath.Join(filepath.Dir(mp), "."+filepath.Base(mp)+".sluice-bpffs-pid")
}

// MountAt mounts a fresh bpffs (mode 0700) on dir, which must exist, for a
// fixture that outlives one test (a topology several tests share); the
// caller unmounts it with the returned function (a lazy detach, so open
// pins do not keep it busy). It first detaches the mounts of test
// processes that died before their cleanup ran (Reap).
func MountAt(dir string) (unmount func() error, err error) {
	Reap()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return nil, fmt.Errorf("mounting a bpffs on %s: %w", dir, err)
	}
	owner := ownerFile(dir)
	// best effort: without it the mount is only not reaped
	_ = os.WriteFile(owner, []byte(strconv.Itoa(os.Getpid())), 0o600)
	return func() error {
		os.Remove(owner)
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting the test bpffs %s: %w", dir, err)
		}
		return nil
	}, nil
}

// Reap detaches the bpffs mounts that MountAt made for a process that is
// gone: a test binary killed by go test's timeout (or by hand) runs no
// cleanup, and its mounts, with the maps pinned there, stayed until the
// host rebooted. Only mounts with MountAt's owner file beside them are
// touched, and only when that pid no longer runs (a pid taken again by
// another process keeps its mount: never one too many). Returns the mount
// points detached.
func Reap() []string {
	mps, err := mountinfo.BPF()
	if err != nil {
		return nil
	}
	var reaped []string
	for _, mp := range mps {
		b, err := os.ReadFile(ownerFile(mp))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || mountinfo.Alive(pid) {
			continue
		}
		if unix.Unmount(mp, unix.MNT_DETACH) == nil {
			os.Remove(ownerFile(mp))
			reaped = append(reaped, mp)
		}
	}
	return reaped
}

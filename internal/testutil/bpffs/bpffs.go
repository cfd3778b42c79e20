//go:build linux

// Package bpffs gives a privileged test a bpffs of its own, so the pins it
// makes neither meet another test's nor outlive it. It is the one place
// tests mount bpffs (never on the host's /sys/fs/bpf).
package bpffs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// ownerSuffix names the file beside a test's mount point that holds the
// pid of the process that mounted it.
const ownerSuffix = ".sluice-bpffs-pid"

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
	owner := filepath.Clean(dir) + ownerSuffix
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
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var reaped []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		mp, ok := bpfMountPoint(sc.Text())
		if !ok {
			continue
		}
		b, err := os.ReadFile(mp + ownerSuffix)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		if unix.Unmount(mp, unix.MNT_DETACH) == nil {
			os.Remove(mp + ownerSuffix)
			reaped = append(reaped, mp)
		}
	}
	return reaped
}

// bpfMountPoint returns the mount point of a mountinfo line if its file
// system is bpf (proc(5): fields, " - ", fstype, source, options).
func bpfMountPoint(line string) (string, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return "", false
	}
	f, g := strings.Fields(pre), strings.Fields(post)
	if len(f) < 5 || len(g) < 1 || g[0] != "bpf" {
		return "", false
	}
	return unescape(f[4]), true
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// alive reports whether process pid exists (kill with signal 0; EPERM is
// a process of another user).
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

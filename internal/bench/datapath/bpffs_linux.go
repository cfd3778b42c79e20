package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"sluice/internal/mountinfo"
)

// mountPrefix starts the names of the private bpffs directories; the PID
// that follows lets SweepMounts tell a dead bench's mount from a live one.
const mountPrefix = "sluice-bench-bpffs-"

// privateFS is a bpffs mounted on a temporary directory for one Apply.
type privateFS struct{ dir string }

func mountPrivate() (*privateFS, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", mountPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("datapath: %w", err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("datapath: mounting a bpffs on %s: %w", dir, err)
	}
	return &privateFS{dir: dir}, nil
}

// unmount drops the mount, and with it any pin still in it, and removes
// the directory.
func (f *privateFS) unmount() error {
	var errs []error
	if err := unix.Unmount(f.dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		errs = append(errs, fmt.Errorf("datapath: unmounting %s: %w", f.dir, err))
	}
	if err := os.Remove(f.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("datapath: %w", err))
	}
	return errors.Join(errs...)
}

// Mounts lists the private bpffs directories of process pid that are
// still mounted (tests check that none outlives a run).
func Mounts(pid int) ([]string, error) {
	all, err := mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range all {
		if p, ok := mountPID(m); ok && p == pid {
			out = append(out, m)
		}
	}
	return out, nil
}

// SweepMounts unmounts and removes the private bpffs directories of
// processes that no longer exist, and returns them. Those of live
// processes, concurrent benches included, are left alone.
func SweepMounts() ([]string, error) {
	all, err := mounts()
	if err != nil {
		return nil, err
	}
	// Directories whose mount is already gone are cleaned up too.
	ents, _ := os.ReadDir(os.TempDir())
	seen := map[string]bool{}
	for _, m := range all {
		seen[m] = true
	}
	for _, e := range ents {
		p := filepath.Join(os.TempDir(), e.Name())
		if strings.HasPrefix(e.Name(), mountPrefix) && !seen[p] {
			all = append(all, p)
		}
	}
	var swept []string
	var errs []error
	for _, m := range all {
		pid, ok := mountPID(m)
		if !ok || pid == os.Getpid() || mountinfo.Alive(pid) {
			continue
		}
		if err := (&privateFS{dir: m}).unmount(); err != nil {
			errs = append(errs, err)
			continue
		}
		swept = append(swept, m)
	}
	return swept, errors.Join(errs...)
}

// mountPID reads the PID out of a private mount's path.
func mountPID(path string) (int, bool) {
	name := filepath.Base(path)
	if filepath.Dir(path) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(name, mountPrefix) {
		return 0, false
	}
	s, _, ok := strings.Cut(strings.TrimPrefix(name, mountPrefix), "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(s)
	return pid, err == nil && pid > 0
}

// mounts lists the bpffs mount points of our private kind in this
// process's mount namespace.
func mounts() ([]string, error) {
	all, err := mountinfo.BPF()
	if err != nil {
		return nil, fmt.Errorf("datapath: %w", err)
	}
	var out []string
	for _, mp := range all {
		if _, ok := mountPID(mp); ok {
			out = append(out, mp)
		}
	}
	return out, nil
}

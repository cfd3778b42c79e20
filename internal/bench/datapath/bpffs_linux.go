package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
		if !ok || pid == os.Getpid() || alive(pid) {
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

func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
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
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("datapath: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || fields[sep+1] != "bpf" {
			continue
		}
		if _, ok := mountPID(mp); ok {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
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

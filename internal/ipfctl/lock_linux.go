package ipfctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
)

// bpffsRoot is where the host mounts bpffs; pins under it are shared by
// every process of the mount namespace.
const bpffsRoot = "/sys/fs/bpf"

// lockDir is the directory whose flock serialises the changes to the
// datapath pinned in pinDir. It sits beside the pins, on the same bpffs
// (which holds directories but no regular files, and no names with a
// dot), so it exists exactly
// where the pins can, and it is not among them: the datapath's own lock
// on the pin directory is taken inside each write, while this one spans a
// whole read-modify-write. It stays when the datapath is removed (ipf -D)
// so that a process waiting on it never races one that made a new one.
func lockDir(pinDir string) string { return filepath.Clean(pinDir) + "-lock" }

// ErrForeignBPFFS is returned when the pins would land on a bpffs private
// to this process's mount namespace and vanish when it exits.
var ErrForeignBPFFS = errors.New("/sys/fs/bpf is not the host's bpffs here: this process runs in a mount namespace of its own " +
	"(as under `ip netns exec`, which mounts a private /sys), so pins made here would vanish when it exits; " +
	"enter only the network namespace instead (`nsenter --net=/run/netns/NAME ipf ...`), " +
	"or run the command from the host's mount namespace")

// initMountNS reports whether this process shares the mount namespace of
// PID 1 (the host's, or a container's own). ok is false when that cannot
// be told. Where PID 1's namespaces are hidden (an init that is not
// dumpable), kthreadd, PID 2 of the host's PID namespace, serves: kernel
// threads live in the initial mount namespace.
var initMountNS = func() (same, ok bool) {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return false, false
	}
	for _, pid := range []string{"1", "2"} {
		if pid == "2" {
			if comm, err := os.ReadFile("/proc/2/comm"); err != nil || string(comm) != "kthreadd\n" {
				continue
			}
		}
		if init, err := os.Readlink("/proc/" + pid + "/ns/mnt"); err == nil {
			return self == init, true
		}
	}
	return false, false
}

// prepareBPFFS makes sure the parent of pinDir is a bpffs that outlives
// this process. When /sys/fs/bpf has none mounted it mounts one, as
// systemd does at boot, but only in the host's mount namespace: in a
// private one (ip netns exec) it refuses with ErrForeignBPFFS. Any other
// directory must already be on a bpffs.
func prepareBPFFS(pinDir string) error {
	parent := filepath.Dir(filepath.Clean(pinDir))
	var st unix.Statfs_t
	err := unix.Statfs(parent, &st)
	if err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return permissionHint(fmt.Errorf("statfs %s: %w", parent, err))
	}
	if parent != bpffsRoot {
		return fmt.Errorf("%s is not on a bpf filesystem (mount one: mount -t bpf bpf %s)", pinDir, parent)
	}
	if same, ok := initMountNS(); ok && !same {
		return ErrForeignBPFFS
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return permissionHint(fmt.Errorf("creating %s: %w", parent, err))
	}
	if err := unix.Mount("bpf", parent, "bpf", 0, "mode=0700"); err != nil {
		return permissionHint(fmt.Errorf("mounting bpffs on %s: %w", parent, err))
	}
	return nil
}

// explainNotLoaded turns "not loaded" into ErrForeignBPFFS when the
// reason is that this process sees a private /sys (ip netns exec), where
// the host's pins cannot be seen at all.
func explainNotLoaded(dir string, err error) error {
	if !errors.Is(err, bpf.ErrNotLoaded) || filepath.Dir(filepath.Clean(dir)) != bpffsRoot {
		return err
	}
	var st unix.Statfs_t
	if unix.Statfs(bpffsRoot, &st) == nil && st.Type == unix.BPF_FS_MAGIC {
		return err
	}
	if same, ok := initMountNS(); ok && !same {
		return ErrForeignBPFFS
	}
	return err
}

// lockTx takes the lock beside the pins of dir: exclusive for a change,
// shared for a reader. With create it first makes sure bpffs is there
// (prepareBPFFS) and creates the lock directory; without, a missing one
// means nothing is loaded and no lock is needed (unlock is then a no-op).
func lockTx(dir string, exclusive, create bool) (unlock func(), err error) {
	p := lockDir(dir)
	if create {
		if err := prepareBPFFS(dir); err != nil {
			return nil, err
		}
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, permissionHint(fmt.Errorf("creating the lock %s: %w", p, err))
		}
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if !create && errors.Is(err, unix.ENOENT) {
			return func() {}, nil
		}
		return nil, permissionHint(fmt.Errorf("opening the lock %s: %w", p, err))
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(fd, how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("locking %s: %w", p, err)
	}
	return func() { unix.Close(fd) }, nil
}

// Package mountinfo reads this process's mount table for the bpffs mounts
// Sluice makes for itself (the bench's private ones, the tests'), and
// tells whether the process that made one still runs: one reader for both
// reapers of mounts left by a process that died.
package mountinfo

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// BPF lists the mount points of the bpffs mounts in this process's mount
// namespace.
func BPF() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mp, ok := bpfMountPoint(sc.Text()); ok {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// bpfMountPoint returns the mount point of a mountinfo line if its file
// system is bpf (proc(5): ID parent major:minor root mountpoint options
// ... - fstype source options).
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

// Alive reports whether process pid exists (kill with signal 0; EPERM is
// a process of another user).
func Alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

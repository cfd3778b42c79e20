//go:build linux

package bpffs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sluice/internal/testutil"
)

func TestBPFMountPoint(t *testing.T) {
	for _, c := range []struct {
		line, mp string
		ok       bool
	}{
		{`36 35 0:31 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:14 - bpf bpf rw,mode=700`, "/sys/fs/bpf", true},
		{`120 29 0:52 / /tmp/Test\040x/001 rw,relatime - bpf bpf rw,mode=700`, "/tmp/Test x/001", true},
		{`25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw`, "", false},
		{`garbage`, "", false},
	} {
		mp, ok := bpfMountPoint(c.line)
		if mp != c.mp || ok != c.ok {
			t.Errorf("%q: %q %v, want %q %v", c.line, mp, ok, c.mp, c.ok)
		}
	}
}

// TestReap: a mount whose owner died is detached; one whose owner lives
// (this process) and one without an owner file are left alone.
func TestReap(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	dead, live, bare := filepath.Join(root, "dead"), filepath.Join(root, "live"), filepath.Join(root, "bare")
	var unmounts []func() error
	for _, d := range []string{dead, live, bare} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		u, err := MountAt(d)
		if err != nil {
			testutil.SkipOrFail(t, "%v", err)
		}
		unmounts = append(unmounts, u)
	}
	defer func() {
		for _, u := range unmounts {
			u() // the reaped one's fails: already detached
		}
	}()
	os.Remove(bare + ownerSuffix)
	// a pid that was a process and is no more
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dead+ownerSuffix, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	got := Reap()
	if !slices.Contains(got, dead) || slices.Contains(got, live) || slices.Contains(got, bare) {
		t.Fatalf("reaped %v, want %s and neither %s nor %s", got, dead, live, bare)
	}
	mounted := map[string]bool{}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if mp, ok := bpfMountPoint(l); ok {
			mounted[mp] = true
		}
	}
	if mounted[dead] || !mounted[live] || !mounted[bare] {
		t.Errorf("mounted after Reap: dead %v, live %v, bare %v", mounted[dead], mounted[live], mounted[bare])
	}
}

//go:build linux

package bpffs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"sluice/internal/mountinfo"
	"sluice/internal/testutil"
)

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
	os.Remove(ownerFile(bare))
	// a pid that was a process and is no more
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ownerFile(dead), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	got := Reap()
	if !slices.Contains(got, dead) || slices.Contains(got, live) || slices.Contains(got, bare) {
		t.Fatalf("reaped %v, want %s and neither %s nor %s", got, dead, live, bare)
	}
	mounted := map[string]bool{}
	mps, err := mountinfo.BPF()
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range mps {
		mounted[mp] = true
	}
	if mounted[dead] || !mounted[live] || !mounted[bare] {
		t.Errorf("mounted after Reap: dead %v, live %v, bare %v", mounted[dead], mounted[live], mounted[bare])
	}
}

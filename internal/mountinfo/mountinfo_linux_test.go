package mountinfo

import (
	"os"
	"os/exec"
	"testing"
)

func TestBPFMountPoint(t *testing.T) {
	for _, c := range []struct {
		line, mp string
		ok       bool
	}{
		{`36 35 0:31 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:14 - bpf bpf rw,mode=700`, "/sys/fs/bpf", true},
		{`120 29 0:52 / /tmp/Test\040x/001 rw,relatime - bpf bpf rw,mode=700`, "/tmp/Test x/001", true},
		{`121 29 0:53 / /tmp/a\134b rw - bpf bpf rw`, `/tmp/a\b`, true},
		{`25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw`, "", false},
		{`garbage`, "", false},
		{`1 2 3 - bpf`, "", false},
	} {
		mp, ok := bpfMountPoint(c.line)
		if mp != c.mp || ok != c.ok {
			t.Errorf("%q: %q %v, want %q %v", c.line, mp, ok, c.mp, c.ok)
		}
	}
}

func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if Alive(cmd.Process.Pid) {
		t.Errorf("pid %d of a process that exited is alive", cmd.Process.Pid)
	}
}

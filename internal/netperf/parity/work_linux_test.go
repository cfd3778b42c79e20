package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcCtx reads this process's context switches from /proc, as the
// measurement reads the server's: sleeping blocks, so the voluntary
// count must grow by at least the number of sleeps.
func TestProcCtx(t *testing.T) {
	v0, _, err := procCtx(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		time.Sleep(time.Millisecond)
	}
	v1, _, err := procCtx(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if v1-v0 < 20 {
		t.Errorf("20 sleeps: voluntary switches %d → %d", v0, v1)
	}
	if _, _, err := procCtx(pidMaxLimit); err == nil {
		t.Error("a PID that cannot exist gave no error")
	}
}

// TestSetAffinity moves a running child to one CPU, as the measurement
// moves a server between request/response tests and streams.
func TestSetAffinity(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := setAffinity(cmd.Process.Pid, 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Cpus_allowed_list:\t0\n") {
		t.Errorf("after binding to CPU 0:\n%s", b)
	}
}

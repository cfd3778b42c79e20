package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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

// TestAttachCounter counts this process's own system calls with perf
// stat -p between start and stop: at least the getppid calls made in
// between, and not wildly more (the runtime's own calls meanwhile). It
// needs perf (linux-perf), which the measurement needs too.
func TestAttachCounter(t *testing.T) {
	if err := perfAvailable(); err != nil {
		t.Skipf("no perf to count with: %v", err)
	}
	c, err := attachCounter(os.Getpid(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	// Calls before start must not count.
	for range 5000 {
		syscall.Getppid()
	}
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for range n {
		syscall.Getppid()
	}
	counts, err := c.stop()
	if err != nil {
		t.Fatal(err)
	}
	if got := counts["raw_syscalls:sys_enter"]; got < n || got > n+1500 {
		t.Errorf("%d getppid calls counted as %d system calls", n, got)
	}
	if _, ok := counts["context-switches"]; !ok {
		t.Errorf("no context switch count in %v", counts)
	}
}

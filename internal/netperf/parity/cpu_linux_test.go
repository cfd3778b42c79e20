package main

import (
	"os"
	"syscall"
	"testing"
)

// TestProcCPU reads this process's CPU clock by PID, as the measurement
// reads the server's, and compares it with getrusage.
func TestProcCPU(t *testing.T) {
	pid := os.Getpid()
	before, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 { // some CPU time
		x ^= i * i
	}
	_ = x
	after, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	self := tv(ru.Utime) + tv(ru.Stime)
	if after <= before {
		t.Errorf("process clock did not advance: %v then %v", before, after)
	}
	// rusage is read later, so it can only be ahead; by a little.
	if self < after-0.001 || self > after+0.5 {
		t.Errorf("process clock %v s, rusage %v s", after, self)
	}
	for _, pid := range []int{0, -1, pidMaxLimit} {
		if _, err := procCPU(pid); err == nil {
			t.Errorf("PID %d, which cannot exist, gave no error", pid)
		}
	}
}

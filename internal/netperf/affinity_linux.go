package netperf

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// withCPUAffinity runs fn on a goroutine-locked thread bound to cpu, as
// netperf -T binds itself (and netserver binds the test) to one CPU. The
// thread's previous mask is restored afterwards. cpu < 0 runs fn as is.
func withCPUAffinity(cpu int, fn func() error) error {
	if cpu < 0 {
		return fn()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("reading cpu affinity: %w", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("binding to cpu %d: %w", cpu, err)
	}
	defer unix.SchedSetaffinity(0, &old)
	return fn()
}

// currentCPU reports the CPU the calling thread runs on (for tests).
func currentCPU() (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return -1, err
	}
	if set.Count() != 1 {
		return -1, nil
	}
	for c := range 1024 {
		if set.IsSet(c) {
			return c, nil
		}
	}
	return -1, nil
}

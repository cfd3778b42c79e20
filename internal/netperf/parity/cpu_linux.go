package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// procCPU returns the CPU seconds a process has used so far, every thread
// of it (exited ones included), from its process CPU clock: the kernel's
// own run-time accounting in ns, not /proc/PID/stat's 10 ms ticks.
func procCPU(pid int) (float64, error) {
	if pid <= 0 || pid >= pidMaxLimit {
		// 0 would name the calling process's clock; larger ones do
		// not fit the clock ID.
		return 0, fmt.Errorf("no process %d", pid)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(processClock(pid), &ts); err != nil {
		return 0, err
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9, nil
}

// processClock is the clock ID of pid's process-wide CPU clock, as glibc's
// clock_getcpuclockid makes it: MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED).
func processClock(pid int) int32 {
	const cpuclockSched = 2
	return int32(^pid<<3 | cpuclockSched)
}

// pidMaxLimit is the kernel's PID_MAX_LIMIT: no PID reaches it.
const pidMaxLimit = 1 << 22

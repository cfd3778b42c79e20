package bpf

import "golang.org/x/sys/unix"

// monotonicNow is what the program's clock reads (bpf_ktime_get_coarse_ns):
// CLOCK_MONOTONIC_COARSE.
func monotonicNow() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		return 0, err
	}
	return uint64(ts.Nano()), nil
}

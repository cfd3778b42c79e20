package bpf

import "golang.org/x/sys/unix"

// monotonicNow is what bpf_ktime_get_ns returns: CLOCK_MONOTONIC.
func monotonicNow() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return uint64(ts.Nano()), nil
}

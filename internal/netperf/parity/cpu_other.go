//go:build !linux

package main

import (
	"errors"
	"fmt"
)

// procCPU needs Linux's process CPU clocks.
func procCPU(int) (float64, error) {
	return 0, fmt.Errorf("reading another process's CPU time: %w", errors.ErrUnsupported)
}

// procCtx needs Linux's /proc.
func procCtx(int) (int64, int64, error) {
	return 0, 0, fmt.Errorf("reading another process's context switches: %w", errors.ErrUnsupported)
}

// setAffinity needs Linux's sched_setaffinity.
func setAffinity(int, int) error {
	return fmt.Errorf("binding another process to a CPU: %w", errors.ErrUnsupported)
}

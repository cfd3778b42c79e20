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

//go:build !linux

package syscount

import (
	"errors"
	"fmt"
)

// Available: counting system calls needs Linux's perf.
func Available(...string) error {
	return fmt.Errorf("counting system calls: %w", errors.ErrUnsupported)
}

// Counter is Linux's perf stat -p.
type Counter struct{}

// Attach needs Linux's perf.
func Attach(int, string) (*Counter, error) {
	return nil, fmt.Errorf("counting system calls: %w", errors.ErrUnsupported)
}

// AttachEvents needs Linux's perf.
func AttachEvents(int, string, ...string) (*Counter, error) {
	return nil, fmt.Errorf("counting system calls: %w", errors.ErrUnsupported)
}

// Start needs Linux's perf.
func (*Counter) Start() error { return errors.ErrUnsupported }

// Stop needs Linux's perf.
func (*Counter) Stop() (Counts, error) { return nil, errors.ErrUnsupported }

// Close does nothing.
func (*Counter) Close() {}

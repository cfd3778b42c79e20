//go:build !linux

package ipfstat

import (
	"errors"
	"fmt"
	"io"
)

// source is the datapath ipfstat reads: none outside Linux.
type source struct{}

var kernel source

func report(w io.Writer, stderr io.Writer, f flags, src source) error {
	return fmt.Errorf("the kernel datapath needs Linux: %w", errors.ErrUnsupported)
}

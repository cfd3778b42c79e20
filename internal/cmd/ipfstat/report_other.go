//go:build !linux

package ipfstat

import (
	"errors"
	"io"
)

func report(w io.Writer, stderr io.Writer, f flags) error {
	return errors.New("the kernel datapath needs Linux")
}

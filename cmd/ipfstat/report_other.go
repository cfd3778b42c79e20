//go:build !linux

package main

import (
	"errors"
	"io"
)

func report(w io.Writer, stderr io.Writer, f flags) error {
	return errors.New("the kernel datapath needs Linux")
}

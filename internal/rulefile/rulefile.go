// Package rulefile reads the commands' rule and configuration files with
// a bound: a FIFO or a device has no size to check first, and one that
// never ends (`ipf -f /dev/zero`, a pipe whose writer stays open) would
// otherwise grow the command until the host's memory is gone (ops17
// measured 45 MB/s). One reader for ipf, ipnat, ippool, ipftest and
// ipqosadmin, each with its own bound.
package rulefile

import (
	"fmt"
	"io"
	"os"
)

// Read reads name ("-": stdin) whole, or fails once it holds more than max
// bytes. The error names the file ("(stdin)" for "-"); a regular file
// larger than max fails before it is read.
func Read(name string, stdin io.Reader, max int64) ([]byte, error) {
	r, shown := stdin, "(stdin)"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > max {
			return nil, fmt.Errorf("%s: %d bytes, more than %d MiB", name, fi.Size(), max>>20)
		}
		r, shown = f, name
	}
	return ReadFrom(r, shown, max)
}

// ReadFrom reads r whole, or fails once it holds more than max bytes; the
// error starts with shown. For commands that open their files themselves.
func ReadFrom(r io.Reader, shown string, max int64) ([]byte, error) {
	src, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(src)) > max {
		return nil, fmt.Errorf("%s: more than %d MiB", shown, max>>20)
	}
	return src, err
}

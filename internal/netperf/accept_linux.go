package netperf

import (
	"errors"

	"golang.org/x/sys/unix"
)

func isTemporaryAccept(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ECONNABORTED)
}

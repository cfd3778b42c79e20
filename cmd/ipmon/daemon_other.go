//go:build !unix

package main

import "errors"

func daemonize([]string) (bool, error) {
	return false, errors.New("daemon mode is not available on this system")
}

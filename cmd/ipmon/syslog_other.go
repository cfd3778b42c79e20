//go:build !unix

package main

import "errors"

func openSyslog(string) (sysLogger, error) {
	return nil, errors.New("syslog is not available on this system")
}

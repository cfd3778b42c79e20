//go:build !unix

package ipmon

import "errors"

func openSyslog(string) (sysLogger, error) {
	return nil, errors.New("syslog is not available on this system")
}

//go:build !unix

package ipmon

import "errors"

func daemonize([]string) (bool, error) {
	return false, errors.New("daemon mode is not available on this system")
}

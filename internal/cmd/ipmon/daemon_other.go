//go:build !unix

package ipmon

import (
	"errors"
	"fmt"
)

func daemonize([]string) (bool, error) {
	return false, fmt.Errorf("daemon mode on this system: %w", errors.ErrUnsupported)
}

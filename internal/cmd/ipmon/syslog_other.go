//go:build !unix

package ipmon

import (
	"errors"
	"fmt"
)

func openSyslog(string) (sysLogger, error) {
	return nil, fmt.Errorf("syslog on this system: %w", errors.ErrUnsupported)
}

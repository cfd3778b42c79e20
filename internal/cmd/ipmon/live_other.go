//go:build !linux

package ipmon

import "errors"

func openLive() (recordSource, error) {
	return nil, errors.New("no kernel log on this system: give a log file with -f")
}

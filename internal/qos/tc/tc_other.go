//go:build !linux

package tc

import "errors"

// ErrNotSupported is returned off Linux: shaping needs Linux qdiscs.
var ErrNotSupported = errors.New("qdisc shaping is only supported on Linux")

// ErrNotVLAN is returned by SetEgressQoS for a device that is not a VLAN.
var ErrNotVLAN = errors.New("not a VLAN device")

// Apply is not supported off Linux.
func Apply(*Plan) error { return ErrNotSupported }

// Installed is not supported off Linux.
func Installed(string) (bool, error) { return false, ErrNotSupported }

// Remove is not supported off Linux.
func Remove(string) error { return ErrNotSupported }

// Drops is not supported off Linux.
func Drops(string) (map[uint16]uint64, error) { return nil, ErrNotSupported }

// SetEgressQoS is not supported off Linux.
func SetEgressQoS(string, map[uint32]uint32) error { return ErrNotSupported }

// IsVLAN is always false off Linux.
func IsVLAN(string) bool { return false }

// LinkSpeed is unknown off Linux.
func LinkSpeed(string) uint64 { return 0 }

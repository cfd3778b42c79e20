//go:build !linux

package ipfctl

import (
	cli "sluice/internal/cmd/ipf"
	ippoolcmd "sluice/internal/cmd/ippool"
)

// Kernel returns nil: there is no kernel datapath outside Linux, so ipf
// only parses and prints (-n).
func Kernel(dir string) cli.Backend { return nil }

// PoolDevice returns nil: without the datapath ippool only checks files.
func PoolDevice(dir, poolDir string) ippoolcmd.Device { return nil }

//go:build !linux

package ipfctl

import (
	"sluice/internal/pool/ippoolcmd"
	"sluice/internal/rules/ipf/cli"
)

// Kernel returns nil: there is no kernel datapath outside Linux, so ipf
// only parses and prints (-n).
func Kernel(dir string) cli.Backend { return nil }

// PoolDevice returns nil: without the datapath ippool only checks files.
func PoolDevice(dir, poolDir string) ippoolcmd.Device { return nil }

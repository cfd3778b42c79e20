//go:build !linux

package ipfctl

import "sluice/internal/rules/ipf/cli"

// Kernel returns nil: there is no kernel datapath outside Linux, so ipf
// only parses and prints (-n).
func Kernel(dir string) cli.Backend { return nil }

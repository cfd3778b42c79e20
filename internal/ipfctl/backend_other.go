//go:build !linux

package ipfctl

import "io"

// FilterBackend returns nil: there is no kernel datapath outside Linux, so
// ipf only parses and prints (-n).
func FilterBackend(dir string) Backend { return nil }

// PoolBackend returns nil: without the datapath ippool only checks files.
func PoolBackend(dir, poolDir string) PoolDevice { return nil }

// RunWatchdog has nothing to watch outside Linux.
func RunWatchdog(stdin io.Reader, ack io.Writer) int { return 1 }

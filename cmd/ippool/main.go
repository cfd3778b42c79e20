// Command ippool loads, checks, lists and edits IPFilter address pools.
// On Linux the tables are kept in /run/sluice/pools (or $SLUICE_POOL_DIR)
// and applied to the eBPF datapath pinned under /sys/fs/bpf/sluice (or
// $SLUICE_BPF_DIR).
package main

import (
	"os"

	ippoolcmd "sluice/internal/cmd/ippool"
	"sluice/internal/ipfctl"
)

func main() {
	c := &ippoolcmd.Command{Device: ipfctl.PoolDevice(ipfctl.PinDir(), ""), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	os.Exit(c.Run(os.Args[1:]))
}

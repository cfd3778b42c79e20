// Command ippool loads, checks, lists and edits IPFilter address pools.
// On Linux the tables are kept in /run/sluice/pools (or $SLUICE_POOL_DIR)
// and applied to the eBPF datapath pinned under /sys/fs/bpf/sluice (or
// $SLUICE_BPF_DIR); its code is in internal/cmd/ippool.
package main

import (
	"os"

	"sluice/internal/cmd/ippool"
)

func main() { os.Exit(ippool.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

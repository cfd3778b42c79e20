// Command ipf parses, prints and loads IPFilter rules (see ipf(8)). On
// Linux it drives the eBPF datapath pinned under /sys/fs/bpf/sluice (or
// $SLUICE_BPF_DIR); its code is in internal/cmd/ipf.
package main

import (
	"os"

	"sluice/internal/cmd/ipf"
)

func main() { os.Exit(ipf.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

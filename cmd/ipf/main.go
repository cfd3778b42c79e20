// Command ipf parses, prints and loads IPFilter rules (see ipf(8)). On
// Linux it drives the eBPF datapath pinned under /sys/fs/bpf/sluice (or
// $SLUICE_BPF_DIR).
package main

import (
	"os"

	cli "sluice/internal/cmd/ipf"
	"sluice/internal/ipfctl"
)

func main() {
	c := &cli.Command{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Backend: ipfctl.Kernel(ipfctl.PinDir())}
	os.Exit(c.Run(os.Args[1:]))
}

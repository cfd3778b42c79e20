// Command sluice runs Sluice's benchmarks: `sluice bench` measures the
// IPFilter and IPQoS white papers' tests with nftables beside, `sluice
// report` re-makes the report from raw results. See internal/bench/cli.
package main

import (
	"os"

	"sluice/internal/bench/datapath"
	cli "sluice/internal/cmd/sluice"
)

func main() {
	// The eBPF IPFilter and IPQoS datapaths (internal/bpf,
	// internal/bpf/qosmark) behind the sluice-* configurations; each apply
	// pins them on a private bpffs of its own (package datapath).
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, datapath.Datapaths()))
}

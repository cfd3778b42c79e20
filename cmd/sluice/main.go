// Command sluice runs Sluice's benchmarks: `sluice bench` measures the
// IPFilter and IPQoS white papers' tests with nftables beside, `sluice
// report` re-makes the report from raw results. See internal/bench/cli.
package main

import (
	"os"

	"sluice/internal/bench/cli"
	"sluice/internal/bench/config"
)

// datapaths are Sluice's datapaths offered to the bench. The lead plugs
// internal/bpf (IPF: load an ipf.conf rule set and attach it to host.Link
// inside host.NetNS) and internal/qos (QoS: load an ipqos.conf) in here;
// while a field is nil its configurations are skipped and reported as
// "datapath not available".
var datapaths = config.Datapaths{}

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, datapaths))
}

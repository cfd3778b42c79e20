// Command sluice runs Sluice's benchmarks: `sluice bench` measures the
// IPFilter and IPQoS white papers' tests with nftables beside, `sluice
// report` re-makes the report from raw results. See internal/bench/cli.
package main

import (
	"os"

	"sluice/internal/bench/cli"
	"sluice/internal/bench/config"
)

// datapaths are Sluice's datapaths offered to the bench. While a field is
// nil its configurations (sluice-*) are skipped and reported as "datapath
// not available". The lead plugs them in here, following the contract of
// config.IPFLoader and config.QoSLoader (see config.ExampleDatapaths):
//
//   - IPF: parse and compile the ipf.conf text (internal/rules,
//     internal/bpf.Compile), then in Apply load internal/bpf with a pin
//     directory of its own (bpf.Options.PinDir, not the default /sys/fs/bpf/sluice,
//     which ipf(8) owns), attach it to host.Link from inside host.NetNS
//     (host.Do), and in Remove detach and remove the pins.
//   - QoS: the same with internal/bpf/qos and the ipqos.conf text, whose
//     adapter is already host.Link; its own pin directory too.
var datapaths = config.Datapaths{}

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, datapaths))
}

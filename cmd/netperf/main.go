// Command netperf is a Go netperf 2.7 client, wire-compatible with the C
// netserver (omni protocol) and printing the same output.
package main

import (
	"os"

	cli "sluice/internal/cmd/netperf"
)

func main() { os.Exit(cli.NetperfMain(os.Args[1:], os.Stdout, os.Stderr)) }

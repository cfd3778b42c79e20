// Command netperf is a Go netperf 2.7, wire-compatible with the C
// netserver (omni protocol) and printing the same output; its code is in
// internal/cmd/netperf.
package main

import (
	"os"

	"sluice/internal/cmd/netperf"
)

func main() { os.Exit(netperf.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

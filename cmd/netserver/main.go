// Command netserver is a Go netserver compatible with netperf 2.7 clients.
package main

import (
	"os"

	cli "sluice/internal/cmd/netperf"
)

func main() { os.Exit(cli.NetserverMain(os.Args[1:], os.Stdout, os.Stderr)) }

// Command netserver is a Go netserver compatible with netperf 2.7 clients;
// its code is in internal/cmd/netserver.
package main

import (
	"os"

	"sluice/internal/cmd/netserver"
)

func main() { os.Exit(netserver.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

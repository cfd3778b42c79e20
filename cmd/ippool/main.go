// Command ippool loads, checks and prints IPFilter address pools.
package main

import (
	"os"

	"sluice/internal/pool/ippoolcmd"
)

func main() {
	os.Exit(ippoolcmd.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Command ipmon is IPFilter's ipmon; its code is in internal/cmd/ipmon.
package main

import (
	"os"

	"sluice/internal/cmd/ipmon"
)

func main() { os.Exit(ipmon.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

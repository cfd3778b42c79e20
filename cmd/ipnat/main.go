// Command ipnat checks, prints and loads IPFilter NAT rules.
package main

import (
	"os"

	ipnatcmd "sluice/internal/cmd/ipnat"
)

func main() {
	os.Exit(ipnatcmd.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Command ipfstat is IPFilter's ipfstat; its code is in internal/cmd/ipfstat.
package main

import (
	"os"

	"sluice/internal/cmd/ipfstat"
)

func main() { os.Exit(ipfstat.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

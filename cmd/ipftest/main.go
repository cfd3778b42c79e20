// Command ipftest runs packets through Sluice's reference IPFilter engine
// (ipf-reference §6.6).
package main

import (
	"os"

	"sluice/internal/cmd/ipftest"
)

func main() {
	os.Exit(ipftest.Main(ipftest.Env{Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}

// Command ipf parses, prints and loads IPFilter rules (see ipf(8)).
package main

import (
	"os"

	"sluice/internal/rules/ipf/cli"
)

func main() {
	c := &cli.Command{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	os.Exit(c.Run(os.Args[1:]))
}

package ipftest

import (
	"sluice/internal/rules/ipf"
)

// printRule prints a rule as printfr does. Userland ipftest resolves every
// interface, so no "(!)" marks appear; verbose adds "# count N" as -v does.
func printRule(r *ipf.Rule, resolve, verbose bool) string {
	return ipf.Format(r, ipf.PrintOptions{NoResolve: !resolve, Verbose: verbose})
}

// Command ipqosadmin administers Sluice's IPQoS (HP-UX IPQoS semantics):
// it verifies, loads and unloads configurations, shows state, configuration
// and counters, and classifies packet files offline with -test.
package main

import (
	"os"

	admin "sluice/internal/cmd/ipqosadmin"
)

func main() {
	os.Exit(admin.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

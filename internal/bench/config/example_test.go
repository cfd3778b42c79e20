package config_test

import (
	"context"
	"fmt"
	"strings"

	"sluice/internal/bench/config"
	"sluice/internal/bench/topo"
)

// attached stands in for a datapath: a real Applier attaches to
// host.Link from inside host.NetNS (host.Do) and detaches in Remove.
type attached struct{ rules string }

func (a *attached) Apply(_ context.Context, h *topo.Host) error {
	fmt.Printf("attach %d rules to %s\n", strings.Count(a.rules, "\n"), h.Link)
	return nil
}

func (a *attached) Remove() error {
	fmt.Println("detach")
	return nil
}

// Plugging a datapath into the bench: cmd/sluice passes Datapaths to the
// registry, and the sluice-* configurations then load their rule sets
// through it instead of being skipped.
func ExampleDatapaths() {
	dp := config.Datapaths{
		IPF: func(rules string) (config.Applier, error) {
			// Parse and compile here: an error becomes the skip reason.
			return &attached{rules: rules}, nil
		},
	}
	reg := config.Builtin(dp)
	c, _ := reg.Get("sluice-stateful")
	a, err := c.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(c.Rules[:strings.IndexByte(c.Rules, '\n')+1])
	_ = a.Apply(context.Background(), &topo.Host{Link: "sl0s"})
	_ = a.Remove()

	q, _ := reg.Get("sluice-qos")
	if _, err := q.New(); err != nil {
		fmt.Println("sluice-qos:", err)
	}
	// Output:
	// pass in proto tcp from any to any keep state
	// attach 6 rules to sl0s
	// detach
	// sluice-qos: datapath not available
}

package bench

import (
	"sluice/internal/bench/run"
	"sluice/internal/bench/topo"
)

// NetperfGenerator uses the netperf library: locally with an in-process
// netserver in each namespace, in remote mode against the remote
// machine's netserver on port.
func NetperfGenerator(port int) GeneratorFactory {
	return func(tb *topo.Topo) (run.Generator, func() error, error) {
		g, err := run.NewNetperf(tb, port)
		if err != nil {
			return nil, nil, err
		}
		return g, g.Close, nil
	}
}

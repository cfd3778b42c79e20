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

// GatewayFactory starts the traffic generator of the gateway topology.
type GatewayFactory func(gw *topo.Gateway) (run.Generator, func() error, error)

// NetperfGateway uses the netperf library on the gateway topology.
func NetperfGateway() GatewayFactory {
	return func(gw *topo.Gateway) (run.Generator, func() error, error) {
		g, err := run.NewGatewayNetperf(gw)
		if err != nil {
			return nil, nil, err
		}
		return g, g.Close, nil
	}
}

// ExternalGenerator runs external netperf and netserver binaries (see
// run.External); in remote mode only netperf runs here, against the
// remote's netserver on port.
func ExternalGenerator(netperf, netserver string, port int) GeneratorFactory {
	return func(tb *topo.Topo) (run.Generator, func() error, error) {
		g, err := run.NewExternal(netperf, netserver, tb, nil, port)
		if err != nil {
			return nil, nil, err
		}
		return g, g.Close, nil
	}
}

// ExternalGateway runs external binaries on the gateway topology.
func ExternalGateway(netperf, netserver string) GatewayFactory {
	return func(gw *topo.Gateway) (run.Generator, func() error, error) {
		g, err := run.NewExternal(netperf, netserver, nil, gw, 0)
		if err != nil {
			return nil, nil, err
		}
		return g, g.Close, nil
	}
}

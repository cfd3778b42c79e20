package bench

import (
	"context"
	"fmt"

	"sluice/internal/bench/run"
	"sluice/internal/bench/topo"
)

// NetperfGenerator uses the netperf library: locally against a netserver
// in the peer namespace (a child process, see run.Netserver), in remote
// mode against the remote machine's netserver on port.
func NetperfGenerator(port int) GeneratorFactory {
	return func(tb *topo.Topo) (run.Generator, func() error, error) {
		if tb.Remote() {
			h := tb.Host(topo.Peer)
			addr := h.Addr
			if !addr.IsValid() {
				addr = h.Addr6
			}
			return &run.Netperf{Host: addr.String(), Port: port}, func() error { return nil }, nil
		}
		ns, err := run.StartNetserver(context.Background(), tb)
		if err != nil {
			return nil, nil, err
		}
		g := &run.Netperf{Host: ns.Addr.Addr().String(), Port: int(ns.Addr.Port()), NetNS: tb.NetNSPath(topo.SUT)}
		return g, ns.Close, nil
	}
}

// BuiltinGenerator uses run.Builtin, the in-process stand-in (local
// mode only).
func BuiltinGenerator(tb *topo.Topo) (run.Generator, func() error, error) {
	if tb.Remote() {
		return nil, nil, fmt.Errorf("the builtin generator has no remote server; use netperf with --remote")
	}
	g, err := run.NewBuiltin(tb)
	if err != nil {
		return nil, nil, err
	}
	return g, g.Close, nil
}

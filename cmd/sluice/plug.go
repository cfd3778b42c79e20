package main

import (
	"errors"

	"sluice/internal/bench"
	"sluice/internal/bench/config"
	"sluice/internal/bench/run"
	"sluice/internal/bench/topo"
)

// datapaths returns Sluice's datapaths for the bench. The lead plugs
// internal/bpf (IPF: load an ipf.conf rule set, attach to host.Link in
// host.NetNS) and internal/qos (QoS: load an ipqos.conf) in here; until
// then the sluice configurations are skipped as "datapath not available".
func datapaths() config.Datapaths {
	return config.Datapaths{}
}

// generator picks the traffic generator. The built-in stand-in runs
// until internal/netperf offers Run and NewServer (see run.Builtin).
func generator(remote string) bench.GeneratorFactory {
	return func(tb *topo.Topo) (run.Generator, func() error, error) {
		if remote != "" {
			return nil, nil, errors.New("--remote needs the netperf library's client (internal/netperf Run), which this build lacks")
		}
		g, err := run.NewBuiltin(tb)
		if err != nil {
			return nil, nil, err
		}
		return g, g.Close, nil
	}
}

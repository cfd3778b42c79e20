package run

import (
	"context"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/netperf"
)

// Netperf drives tests through the netperf library (internal/netperf)
// against a netserver at Host:Port, with CPU measured at both ends
// (-c -C), from the namespace NetNS ("" = the current one). Test lengths
// are whole seconds, as on netperf's wire.
type Netperf struct {
	Host  string
	Port  int
	NetNS string
}

// Name implements Generator.
func (n *Netperf) Name() string { return "netperf" }

// Run implements Generator.
func (n *Netperf) Run(ctx context.Context, t result.Test, d time.Duration) (Measurement, error) {
	// The protocol carries the test length in whole seconds (a server
	// given 0 falls back to its default of 10 s), so round.
	d = max(time.Second, d.Round(time.Second))
	cfg := netperf.Config{
		Test:      t.Name,
		Host:      n.Host,
		Port:      n.Port,
		Duration:  d,
		SendSize:  t.SendSize,
		ReqSize:   t.ReqSize,
		RespSize:  t.RespSize,
		LocalCPU:  true,
		RemoteCPU: true,
		NetNS:     n.NetNS,
	}
	r, err := netperf.Run(ctx, cfg)
	if err != nil {
		return Measurement{}, err
	}
	return Measurement{
		Elapsed:        r.Elapsed,
		ThroughputMbps: r.ThroughputMbps,
		TransPerSec:    r.TransPerSec,
		LocalCPU:       r.LocalCPU,
		RemoteCPU:      r.RemoteCPU,
		LocalSD:        r.LocalSD,
		RemoteSD:       r.RemoteSD,
	}, nil
}

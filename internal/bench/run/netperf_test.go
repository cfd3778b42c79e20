package run

import (
	"context"
	"net"
	"testing"
	"time"

	"sluice/internal/netperf"
)

// TestNetperfLoopback runs the paper's four tests through the adapter
// against an in-process netserver on loopback and checks that every
// figure the report uses arrives with the right sign and unit.
func TestNetperfLoopback(t *testing.T) {
	srv, err := netperf.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	g := &Netperf{Host: "127.0.0.1", Port: srv.Addr().(*net.TCPAddr).Port}
	for _, tc := range append(IPFTests()[2:4], IPFTests()[6:]...) {
		m, err := g.Run(context.Background(), tc, 300*time.Millisecond) // rounded up to 1 s
		if err != nil {
			t.Fatalf("%s: %v", tc.ID, err)
		}
		if m.Elapsed < 900*time.Millisecond || m.Elapsed > 3*time.Second {
			t.Errorf("%s: elapsed %v, want about 1 s", tc.ID, m.Elapsed)
		}
		if tc.Stream() && m.ThroughputMbps <= 0 || !tc.Stream() && m.TransPerSec <= 0 {
			t.Errorf("%s: no rate: %+v", tc.ID, m)
		}
		if m.LocalCPU < 0 || m.RemoteCPU < 0 || m.LocalSD <= 0 || m.RemoteSD <= 0 {
			t.Errorf("%s: CPU not measured at both ends: %+v", tc.ID, m)
		}
	}
}

//go:build linux

package run

import (
	"context"
	"syscall"
	"testing"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
	"sluice/internal/testutil"
)

func TestPrivilegedBuiltin(t *testing.T) {
	testutil.RequireRoot(t)
	tb, err := topo.New(context.Background(), topo.Options{Prefix: "slbrun"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Close() })
	g, err := NewBuiltin(tb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	for _, tc := range append(IPFTests()[2:4], IPFTests()[6:]...) {
		m, err := g.Run(context.Background(), tc, 300*time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", tc.ID, err)
		}
		t.Logf("%s: %.0f Mbit/s %.0f Trans/s CPU %.1f%% SD %.3f", tc.ID, m.ThroughputMbps, m.TransPerSec, m.LocalCPU, m.LocalSD)
		if tc.Stream() && m.ThroughputMbps <= 0 || !tc.Stream() && m.TransPerSec <= 0 {
			t.Errorf("%s: no traffic measured: %+v", tc.ID, m)
		}
		if m.LocalCPU <= 0 || m.LocalSD <= 0 {
			t.Errorf("%s: no CPU measured: %+v", tc.ID, m)
		}
		if m.Elapsed < 300*time.Millisecond {
			t.Errorf("%s: elapsed %v < duration", tc.ID, m.Elapsed)
		}
	}
	// Cancelling stops a test well before its duration.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = g.Run(ctx, result.Test{ID: "x", Name: TCPMaerts, SendSize: 1024}, 10*time.Second)
	if err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("cancelled run: err %v after %v", err, time.Since(start))
	}
}

// TestPrivilegedNetserver runs netperf through the namespaces: the
// client in the SUT, netserver (a child process) in the peer.
func TestPrivilegedNetserver(t *testing.T) {
	testutil.RequireRoot(t)
	tb, err := topo.New(context.Background(), topo.Options{Prefix: "slbns"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Close() })
	ns, err := StartNetserver(context.Background(), tb)
	if err != nil {
		t.Fatal(err)
	}
	pid := ns.cmd.Process.Pid
	g := &Netperf{Host: ns.Addr.Addr().String(), Port: int(ns.Addr.Port()), NetNS: tb.NetNSPath(topo.SUT)}
	for _, tc := range []result.Test{IPFTests()[0], IPFTests()[7]} {
		m, err := g.Run(context.Background(), tc, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.ID, err)
		}
		if m.ThroughputMbps+m.TransPerSec <= 0 || m.LocalSD <= 0 || m.RemoteSD <= 0 {
			t.Errorf("%s: %+v", tc.ID, m)
		}
	}
	if err := ns.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("netserver child %d still alive", pid)
	}
}

// Package netservertest runs an in-process netserver
// (sluice/internal/netperf) for the length of a test.
package netservertest

import (
	"context"
	"net"
	"testing"

	"sluice/internal/netperf"
)

// Serve runs s until the test ends, then stops it and waits for every
// connection it started, failing the test if Serve failed. It returns the
// server's TCP port.
func Serve(t testing.TB, s *netperf.Server) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("netserver: %v", err)
		}
	})
	return s.Addr().(*net.TCPAddr).Port
}

// Loopback starts a netserver on a free port of 127.0.0.1 for the length
// of the test and returns its port.
func Loopback(t testing.TB) int {
	t.Helper()
	s, err := netperf.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, s)
}

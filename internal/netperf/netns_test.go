//go:build linux

package netperf

import (
	"context"
	"net"
	"testing"
	"time"

	"sluice/internal/bench/topo"
	"sluice/internal/testutil/topotest"
)

// TestPrivilegedNetNS runs the server in one namespace and the client in
// another, joined by a veth pair, so the test only passes if both sides
// really open their sockets in their own namespaces.
func TestPrivilegedNetNS(t *testing.T) {
	tp := topotest.New(t, "slnpt")
	cli, srv := tp.NetNSPath(topo.SUT), tp.NetNSPath(topo.Peer)
	host := topo.PeerAddr.String()

	s, err := NewServerNS(host+":0", srv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The address only exists behind the veth in the client namespace, so
	// reaching it proves the client sockets moved.
	p := s.Addr().(*net.TCPAddr).Port

	for _, test := range []string{TCPRR, TCPCRR, UDPRR, TCPStream, UDPStream, TCPMaerts} {
		cfg := Config{Test: test, Host: host, Port: p, NetNS: cli, Transactions: 300}
		if !kinds[test].rr {
			cfg.Transactions, cfg.Duration = 0, time.Second
		}
		r, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s across namespaces: %v", test, err)
		}
		if kinds[test].rr && r.Transactions != 300 || !kinds[test].rr && r.ThroughputMbps <= 0 {
			t.Errorf("%s: %+v", test, *r)
		}
	}
}

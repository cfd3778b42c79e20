package netperf

import (
	"context"
	"net"
	"testing"
	"time"
)

// startServer runs an in-process netserver on an ephemeral loopback port;
// opts configure it before it starts serving.
func startServer(t *testing.T, opts ...func(*Server)) (*Server, int) {
	t.Helper()
	s, err := NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.IdleTimeout = 3 * time.Second
	s.Logf = t.Logf
	for _, o := range opts {
		o(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, s.Addr().(*net.TCPAddr).Port
}

func TestAllTestsWithCPU(t *testing.T) {
	_, port := startServer(t)
	for _, name := range []string{TCPStream, TCPMaerts, TCPRR, TCPCRR, UDPStream, UDPRR} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Test: name, Host: "127.0.0.1", Port: port, Duration: 500 * time.Millisecond, LocalCPU: true, RemoteCPU: true}
			if name == UDPStream {
				cfg.SendSize = 1024
			}
			start := time.Now()
			r, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			t.Logf("%+v", *r)
			if r.Elapsed < 400*time.Millisecond || r.Elapsed > 2*time.Second {
				t.Errorf("elapsed %v", r.Elapsed)
			}
			if kinds[name].rr {
				if r.Transactions < 100 || r.RemoteTrans < r.Transactions-1 {
					t.Errorf("transactions local %d remote %d", r.Transactions, r.RemoteTrans)
				}
				if r.TransPerSec <= 0 {
					t.Errorf("trans/s %v", r.TransPerSec)
				}
			} else if r.ThroughputMbps <= 1 {
				t.Errorf("throughput %v", r.ThroughputMbps)
			}
			switch name {
			case TCPStream:
				if r.RemoteBytesRecv != r.BytesSent {
					t.Errorf("server got %d bytes, client sent %d", r.RemoteBytesRecv, r.BytesSent)
				}
			case TCPMaerts:
				if r.RemoteBytesSent != r.BytesRecv {
					t.Errorf("server sent %d bytes, client got %d", r.RemoteBytesSent, r.BytesRecv)
				}
			case UDPStream:
				if r.RemoteBytesRecv <= 0 || r.RemoteBytesRecv > r.BytesSent {
					t.Errorf("server got %d bytes, client sent %d", r.RemoteBytesRecv, r.BytesSent)
				}
				if r.ThroughputMbps > r.SendThroughputMbps {
					t.Errorf("received %v Mbit/s > sent %v", r.ThroughputMbps, r.SendThroughputMbps)
				}
			}
			if r.LocalCPU < 0 || r.LocalCPU > 100.01 || r.RemoteCPU < 0 || r.RemoteCPU > 100.01 {
				t.Errorf("cpu local %v remote %v", r.LocalCPU, r.RemoteCPU)
			}
			if r.LocalSD <= 0 || r.RemoteSD <= 0 {
				t.Errorf("service demand local %v remote %v", r.LocalSD, r.RemoteSD)
			}
		})
	}
}

func TestIPv6Loopback(t *testing.T) {
	s, err := NewServerNetwork("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	port := s.Addr().(*net.TCPAddr).Port
	for _, test := range []string{TCPRR, UDPRR} {
		r, err := Run(context.Background(), Config{Test: test, Host: "::1", Port: port, Family: 6, Transactions: 100})
		if err != nil {
			t.Fatalf("%s over IPv6: %v", test, err)
		}
		if r.RemoteTrans != 100 {
			t.Errorf("%s: remote saw %d transactions, want 100", test, r.RemoteTrans)
		}
	}
}

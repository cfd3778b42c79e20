package netperf

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"sluice/internal/netperf/proto"
)

func quickRR(t *testing.T, port int) {
	t.Helper()
	r, err := Run(context.Background(), Config{Test: TCPRR, Host: "127.0.0.1", Port: port, Transactions: 200})
	if err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
	if r.Transactions != 200 || r.RemoteTrans != 200 {
		t.Fatalf("got %d local / %d remote transactions, want 200", r.Transactions, r.RemoteTrans)
	}
}

func dialCtl(t *testing.T, port int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for s.ActiveConns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d control connections still open", s.ActiveConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServerSurvivesBadClients(t *testing.T) {
	s, port := startServer(t, func(s *Server) { s.IdleTimeout = 300 * time.Millisecond })

	t.Run("truncated", func(t *testing.T) {
		c := dialCtl(t, port)
		c.Write(make([]byte, 100))
		c.Close()
		quickRR(t, port)
	})
	t.Run("unknown type gets 998", func(t *testing.T) {
		c := dialCtl(t, port)
		for _, typ := range []int32{10, 13, 94, 99, 12345} {
			var m proto.Msg
			m.SetHeader(typ, -1)
			if err := proto.WriteMsg(c, &m); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if err := proto.ReadMsg(c, &m); err != nil {
				t.Fatal(err)
			}
			if m.Errno() != proto.ErrnoUnknownType {
				t.Errorf("type %d: got errno %d, want 998", typ, m.Errno())
			}
		}
		quickRR(t, port)
	})
	t.Run("invalid request gets errno", func(t *testing.T) {
		c := dialCtl(t, port)
		req := proto.Request{Direction: 7, SocketType: 1, IPFamily: 4, TestLength: 1}
		var m proto.Msg
		req.Encode(&m)
		proto.WriteMsg(c, &m)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if err := proto.ReadMsg(c, &m); err != nil {
			t.Fatal(err)
		}
		if m.Errno() != errnoEINVAL {
			t.Errorf("got errno %d, want %d", m.Errno(), errnoEINVAL)
		}
	})
	t.Run("garbage request", func(t *testing.T) {
		c := dialCtl(t, port)
		var m proto.Msg
		for k := range m {
			m[k] = byte(k*7 + 3)
		}
		m.SetHeader(proto.TypeDoOmni, -1)
		proto.WriteMsg(c, &m)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if err := proto.ReadMsg(c, &m); err != nil {
			t.Fatal(err)
		}
		if m.Errno() == 0 {
			t.Error("garbage request accepted")
		}
		quickRR(t, port)
	})
	t.Run("idle connection times out", func(t *testing.T) {
		c := dialCtl(t, port)
		c.Write(make([]byte, 10)) // half a message, then silence
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		start := time.Now()
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("got %v, want EOF from the server", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("closed after %v", d)
		}
	})
	for _, test := range []struct {
		name string
		req  proto.Request
	}{
		{"vanish during TCP_STREAM", proto.Request{Direction: proto.DirServerRecvs, SocketType: 1, Protocol: 6, IPFamily: 4, TestLength: 30, RecvSize: -1, SendSize: -1}},
		{"vanish during TCP_RR -N", proto.Request{Direction: proto.DirBoth, SocketType: 1, Protocol: 6, IPFamily: 4, TestLength: -1000000, RequestSize: 1, ResponseSize: 1}},
		{"vanish during UDP_RR -N", proto.Request{Direction: proto.DirBoth, SocketType: 2, Protocol: 17, IPFamily: 4, TestLength: -1000000, RequestSize: 1, ResponseSize: 1}},
		{"vanish during TCP_MAERTS", proto.Request{Direction: proto.DirServerSends, SocketType: 1, Protocol: 6, IPFamily: 4, TestLength: 30, RecvSize: -1, SendSize: -1}},
		{"vanish before data connect", proto.Request{Direction: proto.DirServerRecvs, SocketType: 1, Protocol: 6, IPFamily: 4, TestLength: 30}},
	} {
		t.Run(test.name, func(t *testing.T) {
			c := dialCtl(t, port)
			var m proto.Msg
			test.req.Encode(&m)
			proto.WriteMsg(c, &m)
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if err := proto.ReadMsg(c, &m); err != nil {
				t.Fatal(err)
			}
			var rsp proto.Response
			rsp.Decode(&m)
			if rsp.Errno != 0 {
				t.Fatalf("errno %d", rsp.Errno)
			}
			if test.name != "vanish before data connect" {
				network := "tcp"
				if test.req.SocketType == 2 {
					network = "udp"
				}
				d, err := net.Dial(network, "127.0.0.1:"+strconv.Itoa(int(rsp.DataPort)))
				if err != nil {
					t.Fatal(err)
				}
				d.Write([]byte("x"))
				time.Sleep(50 * time.Millisecond)
				d.Close()
			}
			c.Close()
			start := time.Now()
			waitIdle(t, s)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("server noticed after %v", d)
			}
			quickRR(t, port)
		})
	}
}

func TestServerConcurrentClients(t *testing.T) {
	_, port := startServer(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			test := []string{TCPRR, UDPRR, TCPCRR, TCPStream}[k%4]
			cfg := Config{Test: test, Host: "127.0.0.1", Port: port, Transactions: 300}
			if test == TCPStream {
				cfg.Transactions = 0
				cfg.Duration = time.Second
			}
			r, err := Run(context.Background(), cfg)
			if err == nil && kinds[test].rr && r.Transactions != 300 {
				err = errors.New(test + ": wrong transaction count")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestPassphrase(t *testing.T) {
	_, port := startServer(t, func(s *Server) { s.Passphrase = "s3cret" })
	cfg := Config{Test: TCPRR, Host: "127.0.0.1", Port: port, Transactions: 10, Passphrase: "wrong", ResponseTimeout: 2 * time.Second}
	if _, err := Run(context.Background(), cfg); err == nil {
		t.Error("wrong passphrase accepted")
	}
	cfg.Passphrase = ""
	if _, err := Run(context.Background(), cfg); err == nil {
		t.Error("missing passphrase accepted")
	}
	cfg.Passphrase = "s3cret"
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Errorf("right passphrase: %v", err)
	}
}

func TestTransactionsAndConfidence(t *testing.T) {
	_, port := startServer(t)
	for _, test := range []string{TCPRR, UDPRR, TCPCRR} {
		r, err := Run(context.Background(), Config{Test: test, Host: "127.0.0.1", Port: port, Transactions: 500, Latency: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Transactions != 500 || r.RemoteTrans != 500 {
			t.Errorf("%s: got %d/%d transactions, want 500", test, r.Transactions, r.RemoteTrans)
		}
		if r.MinLatency > r.MeanLatency || r.MeanLatency > r.MaxLatency || r.P99Latency > r.MaxLatency || r.MeanLatency <= 0 {
			t.Errorf("%s: latencies min %v mean %v p99 %v max %v", test, r.MinLatency, r.MeanLatency, r.P99Latency, r.MaxLatency)
		}
	}
	r, err := Run(context.Background(), Config{Test: TCPRR, Host: "127.0.0.1", Port: port, Transactions: 2000, ConfMax: 3, ConfMin: 3, LocalCPU: true, RemoteCPU: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Confidence == nil || r.Confidence.Iterations != 3 || r.Transactions != 6000 {
		t.Fatalf("got confidence %+v, transactions %d", r.Confidence, r.Transactions)
	}
	if r.Confidence.Throughput < 0 || r.Confidence.Level != 99 || r.Confidence.Width != 5 {
		t.Errorf("got %+v", *r.Confidence)
	}
}

func TestRunErrors(t *testing.T) {
	if _, err := Run(context.Background(), Config{Test: "SCTP_STREAM", Host: "127.0.0.1"}); err == nil {
		t.Error("unknown test accepted")
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if _, err := Run(context.Background(), Config{Test: TCPRR, Host: "127.0.0.1", Port: port}); err == nil {
		t.Error("run against a closed port succeeded")
	}
	// Cancelling the context aborts a long test promptly.
	_, sport := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Run(ctx, Config{Test: TCPStream, Host: "127.0.0.1", Port: sport, Duration: 20 * time.Second}); err == nil {
		t.Error("cancelled run succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancel took %v", d)
	}
}

func TestCPUAffinity(t *testing.T) {
	var got int
	err := withCPUAffinity(0, func() error {
		var err error
		got, err = currentCPU()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != 0 {
		t.Errorf("bound thread reports cpu %d, want 0", got)
	}
	// Both ends honour -T; the run must still work.
	_, port := startServer(t)
	r, err := Run(context.Background(), Config{Test: TCPRR, Host: "127.0.0.1", Port: port, Transactions: 100,
		BindLocalCPU: true, LocalCPUAffinity: 0, BindRemoteCPU: true, RemoteCPUAffinity: 0})
	if err != nil || r.RemoteTrans != 100 {
		t.Fatalf("bound run: %v %+v", err, r)
	}
	if err := withCPUAffinity(100000, func() error { return nil }); err == nil {
		t.Error("binding to a CPU that does not exist succeeded")
	}
}

// TestServerTimerEndsSilentTests: a client that keeps its control
// connection but goes silent on the data connection (or never sends
// UDP_STREAM's end marker) gets its results when netserver's timer fires,
// at the test length plus netserver's 4 s pad, with the pad taken off
// the elapsed time, as netserver's SIGALRM ends such a test.
func TestServerTimerEndsSilentTests(t *testing.T) {
	_, port := startServer(t, func(s *Server) { s.IdleTimeout = 30 * time.Second })
	for _, tc := range []struct {
		name string
		req  proto.Request
	}{
		{"TCP_RR", proto.Request{Direction: proto.DirBoth, SocketType: 1, Protocol: 6, IPFamily: 4, TestLength: 1, RequestSize: 1, ResponseSize: 1}},
		{"UDP_STREAM", proto.Request{Direction: proto.DirServerRecvs, SocketType: 2, Protocol: 17, IPFamily: 4, TestLength: 1, RecvSize: -1, SendSize: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dialCtl(t, port)
			var m proto.Msg
			tc.req.Encode(&m)
			proto.WriteMsg(c, &m)
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if err := proto.ReadMsg(c, &m); err != nil {
				t.Fatal(err)
			}
			var rsp proto.Response
			rsp.Decode(&m)
			network := "tcp"
			if tc.req.SocketType == 2 {
				network = "udp"
			}
			d, err := net.Dial(network, "127.0.0.1:"+strconv.Itoa(int(rsp.DataPort)))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			d.Write([]byte("x")) // one request (or datagram), then silence
			start := time.Now()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if err := proto.ReadMsg(c, &m); err != nil {
				t.Fatalf("no results: %v", err)
			}
			took := time.Since(start)
			var res proto.Results
			res.Decode(&m)
			if took < 4*time.Second || took > 7*time.Second {
				t.Errorf("results after %v, want about 5 s (1 s + netserver's 4 s pad)", took)
			}
			if res.Elapsed < 0.5 || res.Elapsed > 2.5 {
				t.Errorf("elapsed %v s, want about 1 (the pad taken off)", res.Elapsed)
			}
			if res.BytesReceived != 1 {
				t.Errorf("received %d bytes, want 1", res.BytesReceived)
			}
		})
	}
}

package netperf

import (
	"net"
	"net/netip"
	"testing"
)

// tcpPair returns a connected loopback pair with an echo server running
// serveRR on the far end, exactly as netserver's TCP_RR loop does.
func tcpRRPair(tb testing.TB, size int) net.Conn {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer s.Close()
		req, rsp := make([]byte, size), make([]byte, size)
		for serveRR(s, req, rsp) == nil {
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(); <-done })
	return c
}

func udpRRPair(tb testing.TB) (*net.UDPConn, netip.AddrPort) {
	tb.Helper()
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	t := &serverTest{recvBuf: make([]byte, 1), sendBuf: make([]byte, 1), req: nil}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(t.recvBuf)
			if err != nil || n == 0 {
				return
			}
			srv.WriteToUDPAddrPort(t.sendBuf, from)
		}
	}()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	dst := srv.LocalAddr().(*net.UDPAddr).AddrPort()
	tb.Cleanup(func() { c.Close(); srv.Close(); <-done })
	return c, dst
}

func TestRRTransactionZeroAlloc(t *testing.T) {
	c := tcpRRPair(t, 1)
	req, rsp := make([]byte, 1), make([]byte, 1)
	if a := testing.AllocsPerRun(2000, func() {
		if err := rrTransact(c, req, rsp); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("TCP_RR transaction: %v allocs, want 0", a)
	}
	h := newLatencyHist()
	if a := testing.AllocsPerRun(1000, func() { h.add(12345) }); a != 0 {
		t.Errorf("latency histogram: %v allocs, want 0", a)
	}
	u, dst := udpRRPair(t)
	if a := testing.AllocsPerRun(2000, func() {
		if err := udpTransact(u, dst, req, rsp); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("UDP_RR transaction: %v allocs, want 0", a)
	}
}

func BenchmarkTCPRRTransaction(b *testing.B) {
	c := tcpRRPair(b, 1)
	req, rsp := make([]byte, 1), make([]byte, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := rrTransact(c, req, rsp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUDPRRTransaction(b *testing.B) {
	u, dst := udpRRPair(b)
	req, rsp := make([]byte, 1), make([]byte, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := udpTransact(u, dst, req, rsp); err != nil {
			b.Fatal(err)
		}
	}
}

package netperf

import (
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"sluice/internal/netperf/proto"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// rawPair returns a connected loopback TCP pair of data sockets with the
// loops' options, client end first.
func rawPair(tb testing.TB) (int, int) {
	tb.Helper()
	lfd, err := newDataSocket(4, true, sockOpts{reuseAddr: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer unix.Close(lfd)
	if err := bindTo(lfd, netip.AddrPortFrom(loopback, 0)); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Listen(lfd, 5); err != nil {
		tb.Fatal(err)
	}
	cfd, err := newDataSocket(4, true, sockOpts{})
	if err != nil {
		tb.Fatal(err)
	}
	dst := toRaw(localAddr(lfd))
	if e := connectTo(cfd, &dst); e != 0 {
		tb.Fatal(e)
	}
	sfd, e := sysAccept(lfd)
	if e != 0 {
		tb.Fatal(e)
	}
	tb.Cleanup(func() { unix.Close(cfd); unix.Close(sfd) })
	return cfd, sfd
}

// rrServer serves TCP_RR (or UDP_RR) transactions on fd with netserver's
// loop until the client goes away.
func rrServer(tb testing.TB, fd int, udp bool) {
	t := &serverTest{req: &proto.Request{Direction: proto.DirBoth}, udp: udp,
		recvBuf: make([]byte, 1), sendBuf: make([]byte, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if udp {
			_ = t.udpData(fd)
		} else {
			_ = t.tcpRR(fd)
		}
	}()
	tb.Cleanup(func() {
		t.ph.fds.add(fd, udp)
		t.ph.fds.abort()
		<-done
	})
}

func rrClient(fd int, test string, dst rawSockaddr) *clientLoop {
	return &clientLoop{c: &client{cfg: &Config{}, kind: kinds[test]}, ph: &phase{},
		p: params{reqSize: 1, respSize: 1}, fd: fd, dst: dst}
}

// rawReceiver is newRawReceiver for a test: the receives are raw if a
// slot is free, and the slot is given back at cleanup.
func rawReceiver(tb testing.TB, fd int) *rawConn {
	tb.Helper()
	r, err := newRawReceiver(fd)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.close)
	return &r
}

// mallocs counts the heap allocations f makes (in the whole process).
func mallocs(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.Mallocs - a.Mallocs
}

// perTransaction runs n and then n+extra transactions and returns the
// allocations the extra ones made, per transaction: both ends of the loop
// run in this process, so the server's loop is counted too.
func perTransaction(t *testing.T, run func(n int64) error) float64 {
	t.Helper()
	if err := run(100); err != nil { // warm up
		t.Fatal(err)
	}
	const n, extra = 200, 4000
	var err error
	small := mallocs(func() { err = run(n) })
	if err != nil {
		t.Fatal(err)
	}
	large := mallocs(func() { err = run(n + extra) })
	if err != nil {
		t.Fatal(err)
	}
	if large < small {
		return 0
	}
	return float64(large-small) / extra
}

func TestTransactionsDoNotAllocate(t *testing.T) {
	t.Run("TCP_RR", func(t *testing.T) {
		cfd, sfd := rawPair(t)
		rrServer(t, sfd, false)
		l := rrClient(cfd, TCPRR, rawSockaddr{})
		r := rawReceiver(t, cfd)
		req, rsp := make([]byte, 1), make([]byte, 1)
		if a := perTransaction(t, func(n int64) error {
			l.st, l.limit = loopStats{}, n
			return l.tcpRRLoop(r, req, rsp)
		}); a > 0.01 {
			t.Errorf("TCP_RR: %.3f allocations per transaction, want 0", a)
		}
	})
	t.Run("UDP_RR", func(t *testing.T) {
		sfd, err := newDataSocket(4, false, sockOpts{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(sfd) })
		if err := bindTo(sfd, netip.AddrPortFrom(loopback, 0)); err != nil {
			t.Fatal(err)
		}
		rrServer(t, sfd, true)
		cfd, err := newDataSocket(4, false, sockOpts{recvErr: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(cfd) })
		l := rrClient(cfd, UDPRR, toRaw(localAddr(sfd)))
		r := rawReceiver(t, cfd)
		req, rsp := make([]byte, 1), make([]byte, 1)
		if a := perTransaction(t, func(n int64) error {
			l.st, l.limit = loopStats{}, n
			return l.udpRRLoop(r, req, rsp)
		}); a > 0.01 {
			t.Errorf("UDP_RR: %.3f allocations per transaction, want 0", a)
		}
	})
	t.Run("TCP_CRR", func(t *testing.T) {
		lfd, err := newDataSocket(4, true, sockOpts{reuseAddr: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := bindTo(lfd, netip.AddrPortFrom(loopback, 0)); err != nil {
			t.Fatal(err)
		}
		if err := unix.Listen(lfd, 5); err != nil {
			t.Fatal(err)
		}
		srv := &serverTest{req: &proto.Request{Direction: proto.DirBoth, Flags: proto.FlagConnectTest},
			recvBuf: make([]byte, 1), sendBuf: make([]byte, 1)}
		srv.ph.fds.add(lfd, false)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.crrLoop(lfd, time.Now())
		}()
		t.Cleanup(func() { srv.ph.fds.abort(); <-done; unix.Close(lfd) })
		l := rrClient(-1, TCPCRR, toRaw(localAddr(lfd)))
		l.fam = 4
		if a := perTransaction(t, func(n int64) error {
			l.st, l.limit, l.fd = loopStats{}, n, -1
			return l.crr()
		}); a > 0.01 {
			t.Errorf("TCP_CRR: %.3f allocations per transaction, want 0", a)
		}
	})
	h := newLatencyHist()
	if a := testing.AllocsPerRun(1000, func() { h.add(12345) }); a != 0 {
		t.Errorf("latency histogram: %v allocs, want 0", a)
	}
}

func BenchmarkTCPRRTransaction(b *testing.B) {
	cfd, sfd := rawPair(b)
	rrServer(b, sfd, false)
	l := rrClient(cfd, TCPRR, rawSockaddr{})
	r := rawReceiver(b, cfd)
	req, rsp := make([]byte, 1), make([]byte, 1)
	b.ReportAllocs()
	l.limit = int64(b.N)
	b.ResetTimer()
	if err := l.tcpRRLoop(r, req, rsp); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSend1K compares 1 KB stream sends made as ordinary blocking
// system calls ("blocking", the baseline) with sysWrite's raw non-blocking
// attempt first ("raw-first"), in process CPU time per send (the reader
// draining the other end included). Compare the two within one run:
//
//	go test -run - -bench Send1K -count 6 ./internal/netperf/
func BenchmarkSend1K(b *testing.B) {
	for _, bc := range []struct {
		name string
		send func(fd int, buf []byte) (int, unix.Errno)
	}{
		{"blocking", func(fd int, buf []byte) (int, unix.Errno) {
			return sendBlocking(fd, unsafe.Pointer(&buf[0]), len(buf))
		}},
		{"raw-first", sysWrite},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfd, sfd := rawPair(b)
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, 128<<10)
				for {
					if n, e := sysRead(sfd, buf); n == 0 || e != 0 {
						return
					}
				}
			}()
			buf := make([]byte, 1024)
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				if _, e := bc.send(cfd, buf); e != 0 {
					b.Fatal(e)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			_ = unix.Shutdown(cfd, unix.SHUT_WR)
			<-done
		})
	}
}

// processCPU is the process's CPU time so far in ns.
func processCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

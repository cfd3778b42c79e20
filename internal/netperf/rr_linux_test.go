package netperf

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/netperf/proto"
)

// slowPause outlasts rawCallTimeout, so a raw receive waiting across it
// times out (EAGAIN) and is made again.
const slowPause = 3 * rawCallTimeout / 2

// watchdog shuts the sockets down if the test is still running after 10
// s, so a loop that would wait forever fails instead.
func watchdog(t *testing.T, fds ...int) {
	w := time.AfterFunc(10*time.Second, func() {
		for _, fd := range fds {
			_ = unix.Shutdown(fd, unix.SHUT_RDWR)
		}
	})
	t.Cleanup(func() { w.Stop() })
}

// pattern fills a buffer of n bytes with a recognisable pattern.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// writeSlowly writes b in two pieces with a pause between (and before
// the first when pauseFirst), so the peer receives part of it first.
func writeSlowly(t *testing.T, fd int, b []byte, pauseFirst bool) {
	if pauseFirst {
		time.Sleep(slowPause)
	}
	half := len(b) / 2
	for _, part := range [][]byte{b[:half], b[half:]} {
		if n, e := sysWrite(fd, part); e != 0 || n != len(part) {
			t.Errorf("writing: %d of %d bytes, %v", n, len(part), e)
			return
		}
		time.Sleep(slowPause)
	}
}

// TestTCPRRLoopsSlowAndSplitMessages runs both ends' TCP_RR loops, whose
// common calls are made in line, against a peer that pauses longer than
// the raw receive's timeout and sends every message in two pieces: the
// loops must finish the receives (the timeout's EAGAIN, a partial
// receive) and the sends (requests larger than rawSendMax go by an
// ordinary call) with every byte in place.
func TestTCPRRLoopsSlowAndSplitMessages(t *testing.T) {
	SpareProc()
	const trans = 3
	for _, sizes := range []struct{ req, rsp int }{{100, 3000}, {rawSendMax + 1000, 2}} {
		req, rsp := pattern(sizes.req, 1), pattern(sizes.rsp, 2)
		t.Run("client", func(t *testing.T) {
			cfd, sfd := rawPair(t)
			watchdog(t, cfd, sfd)
			done := make(chan struct{})
			go func() { // the peer: ordinary calls
				defer close(done)
				got := make([]byte, len(req))
				for range trans {
					if n, e := readFull(sfd, got); e != 0 || n != len(got) || !bytes.Equal(got, req) {
						t.Errorf("peer: request %d of %d bytes (%v), intact %v", n, len(got), e, bytes.Equal(got, req))
						return
					}
					writeSlowly(t, sfd, rsp, true)
				}
			}()
			l := rrClient(cfd, TCPRR, rawSockaddr{})
			l.p = params{reqSize: len(req), respSize: len(rsp)}
			l.limit = trans
			r := rawReceiver(t, cfd)
			if !r.raw {
				t.Fatal("no raw slot for the loop")
			}
			got := make([]byte, len(rsp))
			if err := l.tcpRRLoop(r, req, got); err != nil {
				t.Fatal(err)
			}
			<-done
			if l.st.trans != trans || !bytes.Equal(got, rsp) {
				t.Errorf("%d transactions, response intact %v; want %d, true", l.st.trans, bytes.Equal(got, rsp), trans)
			}
		})
		t.Run("server", func(t *testing.T) {
			cfd, sfd := rawPair(t)
			watchdog(t, cfd, sfd)
			st := &serverTest{req: &proto.Request{Direction: proto.DirBoth},
				recvBuf: make([]byte, len(req)), sendBuf: rsp}
			st.ph.fds.add(sfd, false)
			errc := make(chan error, 1)
			go func() { errc <- st.tcpRR(sfd) }()
			got := make([]byte, len(rsp))
			for i := range trans {
				writeSlowly(t, cfd, req, i > 0)
				if n, e := readFull(cfd, got); e != 0 || n != len(got) || !bytes.Equal(got, rsp) {
					t.Fatalf("response %d of %d bytes (%v), intact %v", n, len(got), e, bytes.Equal(got, rsp))
				}
			}
			_ = unix.Shutdown(cfd, unix.SHUT_WR) // the end of the test
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if st.trans != trans || !bytes.Equal(st.recvBuf, req) {
				t.Errorf("%d transactions, request intact %v; want %d, true", st.trans, bytes.Equal(st.recvBuf, req), trans)
			}
		})
	}
}

// TestUDPRRLoopsSlowPeer runs both ends' UDP_RR loops against a peer that
// answers (or asks) only after longer than the raw receive's timeout.
func TestUDPRRLoopsSlowPeer(t *testing.T) {
	SpareProc()
	const trans = 3
	req, rsp := pattern(200, 3), pattern(700, 4)
	udpSocket := func(t *testing.T) (int, rawSockaddr) {
		fd, err := newDataSocket(4, false, sockOpts{recvErr: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := bindTo(fd, netip.AddrPortFrom(loopback, 0)); err != nil {
			t.Fatal(err)
		}
		return fd, toRaw(localAddr(fd))
	}
	t.Run("client", func(t *testing.T) {
		cfd, _ := udpSocket(t)
		sfd, saddr := udpSocket(t)
		watchdog(t, cfd, sfd)
		done := make(chan struct{})
		go func() { // the peer: ordinary calls
			defer close(done)
			got := make([]byte, 2*len(req))
			var from rawSockaddr
			for range trans {
				if n, e := sysRecvfrom(sfd, got, &from); e != 0 || !bytes.Equal(got[:n], req) {
					t.Errorf("peer: request of %d bytes (%v), intact %v", n, e, bytes.Equal(got[:n], req))
					return
				}
				time.Sleep(slowPause)
				if _, e := sysSendto(sfd, rsp, &from); e != 0 {
					t.Errorf("peer: %v", e)
					return
				}
			}
		}()
		l := rrClient(cfd, UDPRR, saddr)
		l.limit = trans
		r := rawReceiver(t, cfd)
		if !r.raw {
			t.Fatal("no raw slot for the loop")
		}
		got := make([]byte, len(rsp))
		if err := l.udpRRLoop(r, req, got); err != nil {
			t.Fatal(err)
		}
		<-done
		if l.st.trans != trans || !bytes.Equal(got, rsp) {
			t.Errorf("%d transactions, response intact %v; want %d, true", l.st.trans, bytes.Equal(got, rsp), trans)
		}
	})
	t.Run("server", func(t *testing.T) {
		sfd, saddr := udpSocket(t)
		cfd, _ := udpSocket(t)
		watchdog(t, cfd, sfd)
		st := &serverTest{req: &proto.Request{Direction: proto.DirBoth}, udp: true,
			recvBuf: make([]byte, len(req)), sendBuf: rsp}
		st.ph.fds.add(sfd, true)
		errc := make(chan error, 1)
		go func() { errc <- st.udpData(sfd) }()
		got := make([]byte, 2*len(rsp))
		for range trans {
			time.Sleep(slowPause)
			if _, e := sysSendto(cfd, req, &saddr); e != 0 {
				t.Fatal(e)
			}
			if n, e := sysRead(cfd, got); e != 0 || !bytes.Equal(got[:n], rsp) {
				t.Fatalf("response of %d bytes (%v), intact %v", n, e, bytes.Equal(got[:n], rsp))
			}
		}
		if _, e := sysSendto(cfd, nil, &saddr); e != 0 { // netperf's end-of-test marker
			t.Fatal(e)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if st.trans != trans || !bytes.Equal(st.recvBuf, req) {
			t.Errorf("%d transactions, request intact %v; want %d, true", st.trans, bytes.Equal(st.recvBuf, req), trans)
		}
	})
}

// TestStreamLoopsSlowPeer runs TCP_STREAM's sending loop (netperf) against
// a peer that drains slowly, so raw sends find the buffer full past their
// timeout (EAGAIN, or part of a buffer sent), and its receiving loop
// (netserver) against a peer that pauses longer than the raw receive's
// timeout between sends: every byte must be counted once.
func TestStreamLoopsSlowPeer(t *testing.T) {
	SpareProc()
	t.Run("sender", func(t *testing.T) {
		cfd, sfd := rawPair(t)
		watchdog(t, cfd, sfd)
		for _, fd := range []int{cfd, sfd} {
			// Small buffers, so a send blocks before long.
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 64<<10)
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10)
		}
		got := make(chan int64, 1)
		go func() { // the peer: reads slowly until the sender's shutdown
			var total int64
			buf := make([]byte, 64<<10)
			for {
				time.Sleep(slowPause)
				n, e := sysRead(sfd, buf)
				if e != 0 || n == 0 {
					break
				}
				total += int64(n)
			}
			_ = unix.Shutdown(sfd, unix.SHUT_WR) // netserver's close
			got <- total
		}()
		l := rrClient(cfd, TCPStream, rawSockaddr{})
		l.p = params{sendSize: 64 << 10}
		l.limit = 1 << 20
		if err := l.tcpStream(); err != nil {
			t.Fatal(err)
		}
		if total := <-got; total != l.st.bytesTx || total < l.limit {
			t.Errorf("sent %d bytes, the peer received %d; want equal and at least %d", l.st.bytesTx, total, l.limit)
		}
	})
	t.Run("receiver", func(t *testing.T) {
		cfd, sfd := rawPair(t)
		watchdog(t, cfd, sfd)
		st := &serverTest{req: &proto.Request{Direction: proto.DirServerRecvs}, recvBuf: make([]byte, 1000)}
		st.ph.fds.add(sfd, false)
		errc := make(chan error, 1)
		go func() { errc <- st.tcpRecv(sfd) }()
		msg := pattern(2500, 5)
		for range 3 {
			writeSlowly(t, cfd, msg, true)
		}
		_ = unix.Shutdown(cfd, unix.SHUT_WR) // the end of the test
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if want := uint64(3 * len(msg)); st.bytesRx != want {
			t.Errorf("received %d bytes, want %d", st.bytesRx, want)
		}
	})
}

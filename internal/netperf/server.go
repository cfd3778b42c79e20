package netperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"sluice/internal/netperf/cpu"
	"sluice/internal/netperf/proto"
)

// Server is an in-process netserver. It serves any number of control
// connections concurrently, each in its own goroutine; a failing or
// malicious client only ever ends its own connection. The exported fields
// must be set before Serve is called.
type Server struct {
	// Passphrase, when set, must arrive in a PASSPHRASE message before
	// anything else, or the connection is closed (netserver -Z).
	Passphrase string
	// IdleTimeout closes a control connection that sends no complete
	// request for this long (default 2 minutes).
	IdleTimeout time.Duration
	// Logf receives diagnostics; nil discards them.
	Logf func(format string, args ...any)
	// NetNS, when set, is the network namespace path in which data
	// sockets are opened; set it when the control listener was opened in
	// that namespace (see NewServerNS).
	NetNS string

	ln net.Listener

	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	tests    atomic.Int64
	failures atomic.Int64
}

// NewServer listens on addr ("host:port") for control connections.
func NewServer(addr string) (*Server, error) {
	return NewServerNetwork("tcp", addr)
}

// NewServerNS is NewServer with the control listener and every data socket
// opened in the network namespace at nsPath.
func NewServerNS(addr, nsPath string) (*Server, error) {
	var s *Server
	err := inNetNS(nsPath, func() error {
		var err error
		s, err = NewServer(addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.NetNS = nsPath
	return s, nil
}

// ActiveConns returns the number of open control connections.
func (s *Server) ActiveConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// NewServerNetwork is NewServer restricted to "tcp", "tcp4" or "tcp6".
func NewServerNetwork(network, addr string) (*Server, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("control listener: %w", err)
	}
	return &Server{ln: ln, conns: map[net.Conn]struct{}{}}, nil
}

// Addr returns the control listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// TestsRun returns how many DO_OMNI requests were answered and how many of
// them failed.
func (s *Server) TestsRun() (ok, failed int64) { return s.tests.Load(), s.failures.Load() }

// Serve accepts control connections until ctx ends or Close is called,
// and returns after every connection it started has finished.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				// Return only once every connection's goroutine is done,
				// so nothing outlives Serve.
				s.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporaryAccept(err) {
				// EMFILE and friends: back off instead of spinning.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("netserver accept: %w", err)
		}
		delay = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			s.wg.Wait()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.handle(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// ServeConn serves one control connection that is already open, as
// netserver does when inetd starts it with the connection on its standard
// input, and returns when the client is done. Close aborts it.
func (s *Server) ServeConn(c net.Conn) {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	s.handle(c)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close stops accepting, closes every control connection (which aborts
// running tests) and waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// ctlConn is a control connection plus bytes a watcher read ahead.
type ctlConn struct {
	net.Conn
	pending []byte
}

func (c *ctlConn) readMsg(m *proto.Msg) error {
	n := copy(m[:], c.pending)
	c.pending = c.pending[n:]
	_, err := io.ReadFull(c.Conn, m[n:])
	if err == io.EOF && n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (s *Server) handle(raw net.Conn) {
	c := &ctlConn{Conn: raw}
	defer c.Close()
	defer func() {
		// One connection's bug must never take the daemon down.
		if r := recover(); r != nil {
			s.failures.Add(1)
			s.logf("netserver: %v: internal error: %v", raw.RemoteAddr(), r)
		}
	}()
	idle := s.IdleTimeout
	if idle <= 0 {
		idle = 2 * time.Minute
	}
	authed := s.Passphrase == ""
	var m proto.Msg
	for {
		_ = c.SetReadDeadline(time.Now().Add(idle))
		if err := c.readMsg(&m); err != nil {
			if err != io.EOF {
				s.logf("netserver: %v: reading request: %v", raw.RemoteAddr(), err)
			}
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		typ := m.Type()
		if !authed {
			if typ != proto.TypePassphrase || m.Passphrase() != s.Passphrase {
				s.logf("netserver: %v: bad or missing passphrase", raw.RemoteAddr())
				return
			}
			authed = true
			continue
		}
		switch typ {
		case proto.TypePassphrase:
			// No passphrase configured: accept any, as netserver does.
		case proto.TypeDoOmni:
			var req proto.Request
			req.Decode(&m)
			s.tests.Add(1)
			if err := s.omni(c, &req); err != nil {
				s.failures.Add(1)
				s.logf("netserver: %v: %v", raw.RemoteAddr(), err)
				if errors.Is(err, errControlLost) {
					return
				}
			}
		default:
			var rsp proto.Response
			rsp.Errno = proto.ErrnoUnknownType
			var out proto.Msg
			rsp.Encode(&out)
			out.SetHeader(typ, proto.ErrnoUnknownType)
			if err := proto.WriteMsg(c, &out); err != nil {
				return
			}
		}
	}
}

var errControlLost = errors.New("control connection lost")

// maxMsgBuf caps any per-test buffer a request can make the server allocate.
const maxMsgBuf = 16 << 20

// Linux errno values sent back for bad requests.
const (
	errnoEINVAL       = 22
	errnoEADDRNOTAVAL = 99
)

type serverTest struct {
	req    *proto.Request
	udp    bool
	padded bool  // timer is L+4 (quirk Q3)
	limit  int64 // -l -N: transactions (RR) or bytes (streams), 0 = timed
	ph     phase

	recvBuf, sendBuf []byte

	bytesRx, bytesTx     uint64
	recvCalls, sendCalls uint32
	trans                uint32
	timedOut             bool
	// lssEnd and lsrEnd are the data socket's buffer sizes when it was
	// last seen (TCP_CRR: its first connection's).
	lssEnd, lsrEnd int
	retrans        int
	cong           string
	y              yielder
	// crrTrans counts TCP_CRR transactions for the idle watcher, which
	// sets idle when it ends the test.
	crrTrans atomic.Uint32
	idle     atomic.Bool
}

func validRequest(r *proto.Request) error {
	switch {
	case r.Direction != proto.DirServerRecvs && r.Direction != proto.DirServerSends && r.Direction != proto.DirBoth:
		return fmt.Errorf("bad direction %d", r.Direction)
	case r.SocketType != 1 && r.SocketType != 2:
		return fmt.Errorf("bad socket type %d", r.SocketType)
	case r.IPFamily != proto.FamilyINET && r.IPFamily != proto.FamilyINET6 && r.IPFamily != 0:
		return fmt.Errorf("bad address family %d", r.IPFamily)
	case r.DataPort < 0 || r.DataPort > 65535:
		return fmt.Errorf("bad data port %d", r.DataPort)
	case r.Direction == proto.DirBoth && (r.RequestSize < 1 || r.RequestSize > maxMsgBuf || r.ResponseSize < 1 || r.ResponseSize > maxMsgBuf):
		return fmt.Errorf("bad request/response sizes %d,%d", r.RequestSize, r.ResponseSize)
	case r.RecvSize > maxMsgBuf || r.SendSize > maxMsgBuf || r.SendBufSize > maxMsgBuf || r.RecvBufSize > maxMsgBuf:
		return fmt.Errorf("sizes too large")
	case r.TestLength == 0 || r.TestLength > 86400:
		return fmt.Errorf("bad test length %d", r.TestLength)
	}
	return nil
}

// omni runs one DO_OMNI request: response, data phase, results. Errors
// before the response are reported to the client as serv_errno.
func (s *Server) omni(c *ctlConn, req *proto.Request) error {
	var out proto.Msg
	fail := func(errno int32, err error) error {
		rsp := proto.Response{Errno: errno}
		rsp.Encode(&out)
		if werr := proto.WriteMsg(c, &out); werr != nil {
			return fmt.Errorf("%w: %v", errControlLost, werr)
		}
		return err
	}
	if err := validRequest(req); err != nil {
		return fail(errnoEINVAL, fmt.Errorf("rejecting request: %w", err))
	}
	t := &serverTest{req: req, udp: req.SocketType == 2, retrans: -1}
	if req.TestLength < 0 {
		t.limit = -int64(req.TestLength)
	}
	serverSendsOnly := req.Direction == proto.DirServerSends

	// Data sockets go where the control connection arrived, which is right
	// for loopback, namespaces and -L alike.
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	ip := local.Addr().Unmap()
	if req.IPFamily == proto.FamilyINET6 && ip.Is4() || req.IPFamily == proto.FamilyINET && ip.Is6() {
		ip = proto.AddrFromWords(req.NetserverIP, req.IPFamily)
	}
	fam := 4
	if ip.Is6() {
		fam = 6
	}
	// As netserver's create_data_socket: requested buffer sizes,
	// SO_REUSEADDR, TCP_NODELAY when asked (accepted connections inherit
	// them).
	opts := sockOpts{sndBuf: int(req.SendBufSize), rcvBuf: int(req.RecvBufSize), reuseAddr: true,
		noDelay: req.Flags&proto.FlagNoDelay != 0 && !t.udp}
	lfd := -1
	open := func() error {
		fd, err := newDataSocket(fam, !t.udp, opts)
		if err != nil {
			return err
		}
		err = bindTo(fd, netip.AddrPortFrom(ip, uint16(req.DataPort)))
		if err != nil && req.DataPort != 0 {
			err = bindTo(fd, netip.AddrPortFrom(ip, 0)) // the port of a previous iteration may be gone
		}
		if err == nil && !t.udp {
			err = unix.Listen(fd, 5) // netserver's backlog
		}
		if err != nil {
			unix.Close(fd)
			return err
		}
		lfd = fd
		return nil
	}
	var err error
	if s.NetNS != "" {
		err = inNetNS(s.NetNS, open)
	} else {
		err = open()
	}
	if err != nil {
		return fail(errnoEADDRNOTAVAL, fmt.Errorf("data listener: %w", err))
	}
	t.ph.fds.add(lfd, t.udp)
	defer t.ph.fds.closeFd(lfd)
	dataPort := int(localAddr(lfd).Port())
	snd, rcv := sockBuf(lfd)
	t.lssEnd, t.lsrEnd = snd, rcv

	rsp := proto.Response{
		RecvBufSize: int32(rcv), SendBufSize: int32(snd),
		RecvSize: req.RecvSize, RecvWidth: req.RecvWidth,
		SendSize: req.SendSize, SendWidth: req.SendWidth,
		DataPort: int32(dataPort), SocketPrio: -1, SocketTos: -1,
		Flags: req.Flags & (proto.FlagMeasureCPU | proto.FlagNoDelay),
	}
	recvSize, sendSize := int(req.RecvSize), int(req.SendSize)
	switch req.Direction {
	case proto.DirBoth:
		recvSize, sendSize = int(req.RequestSize), int(req.ResponseSize)
		rsp.RecvSize, rsp.SendSize = req.RequestSize, req.ResponseSize
	case proto.DirServerRecvs:
		if recvSize <= 0 {
			recvSize = rcv
		}
		if t.udp {
			recvSize = max(recvSize, maxUDPPayload+1)
		}
		rsp.RecvSize = int32(recvSize)
		if rsp.RecvWidth == 0 {
			rsp.RecvWidth = int32(max(rcv/max(recvSize, 1)+1, 2))
		}
	case proto.DirServerSends:
		if sendSize <= 0 {
			sendSize = snd
		}
		if t.udp && sendSize > maxUDPPayload {
			sendSize = maxUDPPayload
		}
		rsp.SendSize = int32(sendSize)
		if rsp.SendWidth == 0 {
			rsp.SendWidth = int32(max(snd/max(sendSize, 1)+1, 2))
		}
	}
	recvSize = min(max(recvSize, 1), maxMsgBuf)
	sendSize = min(max(sendSize, 1), maxMsgBuf)
	if req.Direction&proto.DirServerRecvs != 0 {
		t.recvBuf = make([]byte, recvSize)
	}
	if req.Direction&proto.DirServerSends != 0 {
		t.sendBuf = make([]byte, sendSize)
	}
	measure := req.Flags&proto.FlagMeasureCPU != 0
	if measure {
		rsp.CPURate = 100 // CLK_TCK: calibration is instantaneous with /proc/stat
	}
	rsp.Encode(&out)
	if err := proto.WriteMsg(c, &out); err != nil {
		return fmt.Errorf("%w: %v", errControlLost, err)
	}

	// Watch the control connection: a client that vanishes mid-test must
	// not leave the data phase waiting for its timer.
	w := watchCtl(c.Conn, t.ph.fds.abort)

	if !serverSendsOnly && t.limit == 0 {
		t.padded = true
	}
	var start time.Time
	var cpu0 cpu.Sample
	if measure {
		cpu0, _ = cpu.Read()
	}
	bind := int(req.CPUAffinity)
	if bind >= runtime.NumCPU() {
		bind = -1 // netserver ignores CPUs it does not have
	}
	dataErr := withCPUAffinity(bind, func() error {
		// As netserver: the timer starts before the first accept.
		start = time.Now()
		d := noDeadline
		if t.limit == 0 {
			d = time.Duration(req.TestLength) * time.Second
			if t.padded {
				d += padTime
			}
		}
		// netserver's SIGALRM interrupts whatever call is blocked.
		t.ph.startTimer(d, 0)
		defer t.ph.stopTimer()
		switch {
		case t.udp:
			return t.udpLoop(lfd)
		case req.Flags&proto.FlagConnectTest != 0:
			return t.crrLoop(lfd, start)
		default:
			return t.tcpData(lfd)
		}
	})
	end := time.Now()
	var cpu1 cpu.Sample
	if measure {
		cpu1, _ = cpu.Read()
	}
	elapsed := end.Sub(start).Seconds()
	if t.timedOut && t.padded {
		elapsed -= padTime.Seconds()
	}
	res := proto.Results{
		BytesReceived: t.bytesRx, RecvCalls: t.recvCalls,
		BytesSent: t.bytesTx, SendCalls: t.sendCalls,
		Trans: t.trans, Elapsed: float32(elapsed),
		ServDem: -1, TransportRetrx: int32(t.retrans),
		RecvBufSize: int32(t.lsrEnd), SendBufSize: int32(t.lssEnd),
		// CPUMethod and NumCPUs stay 0 (method 'U') unless measured, as
		// in a netserver child that has not measured CPU.
	}
	if req.Flags&proto.FlagRoutingAllowed != 0 && req.Flags&proto.FlagConnectTest == 0 {
		res.CongControl = t.cong
	}
	if measure && cpu0 != nil && cpu1 != nil {
		u := cpu.Compute(cpu0, cpu1, 1)
		res.CPUUtil, res.CPUUser, res.CPUSystem = float32(u.Util), float32(u.User), float32(u.System)
		res.CPUIOWait, res.CPUIRQ, res.CPUSoftIRQ = float32(u.IOWait), float32(u.IRQ), float32(u.SoftIRQ)
		res.CPUMethod, res.NumCPUs = proto.CPUMethodProcStat, int32(u.NumCPUs)
		res.PeakCPUID, res.PeakCPUUtil = int32(u.PeakID), float32(u.Peak)
	}

	// Stop the watcher; keep anything it read as the start of the next
	// message.
	pend, werr := w.stop()
	c.pending = append(c.pending[:0], pend...)
	if werr != nil {
		return fmt.Errorf("%w during the data phase: %v", errControlLost, werr)
	}
	res.Encode(&out)
	if err := proto.WriteMsg(c, &out); err != nil {
		return fmt.Errorf("%w: %v", errControlLost, err)
	}
	if dataErr != nil {
		return fmt.Errorf("data phase: %w", dataErr)
	}
	return nil
}

// padTime is netserver's PAD_TIME: a receiving server's timer runs this
// much past the test length so that the client ends the test (quirk Q3).
const padTime = 4 * time.Second

// ended classifies how a call failed (e) or met the end of its stream
// (e == 0): an abort, the timer's interruption at the deadline (a timeout,
// as netserver's SIGALRM), or else e itself (nil: a real end of stream).
func (t *serverTest) ended(e unix.Errno) error {
	switch t.ph.ended() {
	case errAborted:
		return errAborted
	case errTimedOut:
		t.timedOut = true
		return errTimedOut
	}
	if e != 0 {
		return e
	}
	return nil
}

// running reports whether the loop should go on: until the timer, or
// until the -N count is used up.
func (t *serverTest) running(done int64) bool {
	if t.limit > 0 {
		return done < t.limit && !t.ph.stop.Load()
	}
	return !t.ph.stop.Load()
}

// accept waits for a connection on the listening socket lfd, within the
// test's time.
func (t *serverTest) accept(lfd int) (int, error) {
	for {
		fd, e := sysAccept(lfd)
		if e == 0 {
			if !t.ph.fds.add(fd, false) {
				unix.Close(fd)
				return -1, errAborted
			}
			return fd, nil
		}
		if e == unix.ECONNABORTED {
			continue
		}
		return -1, t.ended(e)
	}
}

// tcpData serves TCP_STREAM, TCP_MAERTS and TCP_RR on one connection.
func (t *serverTest) tcpData(lfd int) error {
	fd, err := t.accept(lfd)
	if err != nil {
		if err == errTimedOut {
			return nil
		}
		return fmt.Errorf("accepting data connection: %w", err)
	}
	defer t.ph.fds.closeFd(fd)
	switch t.req.Direction {
	case proto.DirServerRecvs:
		err = t.tcpRecv(fd)
	case proto.DirServerSends:
		err = t.tcpSend(fd)
	default:
		err = t.tcpRR(fd)
	}
	t.lssEnd, t.lsrEnd = sockBuf(fd)
	_, t.retrans, t.cong = tcpFacts(fd)
	if err == errTimedOut {
		err = nil
	}
	return err
}

func (t *serverTest) tcpRecv(fd int) error {
	r, err := newRawReceiver(fd)
	if err != nil {
		return err
	}
	defer r.close()
	t.y.period = r.yieldPeriod()
	buf := t.recvBuf
	for t.running(int64(t.bytesRx)) {
		n, e := 0, unix.Errno(0)
		if r.raw { // in line, see clientLoop.tcpRRLoop
			m, errno := rawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(bufPtr(buf)), uintptr(len(buf)), 0, 0, 0)
			n, e = int(m), unix.Errno(errno)
			if e != 0 {
				n, e = r.recvAfter(buf, e)
			}
		} else {
			n, e = r.recv(buf)
		}
		if e != 0 || n == 0 {
			// n == 0: the client's shutdown, the end of the test.
			return t.ended(e)
		}
		t.bytesRx += uint64(n)
		t.recvCalls++
		t.y.tick()
	}
	return nil
}

func (t *serverTest) tcpSend(fd int) error {
	w, err := newRawSender(fd)
	if err != nil {
		return err
	}
	defer w.close()
	t.y.period = w.yieldPeriod()
	buf := t.sendBuf
	for t.running(int64(t.bytesTx)) {
		n, e := w.send(buf)
		if n > 0 {
			t.bytesTx += uint64(n)
			t.sendCalls++
			t.y.tick()
		}
		if e != 0 {
			return t.ended(e)
		}
	}
	return nil
}

func (t *serverTest) tcpRR(fd int) error {
	// A rawConn as the client's loops: see clientLoop.tcpRR.
	r, err := newRawReceiver(fd)
	if err != nil {
		return err
	}
	defer r.close()
	t.y.period = r.yieldPeriod()
	// The common calls are made in line: see clientLoop.tcpRRLoop.
	req, rsp := t.recvBuf, t.sendBuf
	sfd := uintptr(fd)
	rawSend := len(rsp) <= rawSendMax
	for t.running(int64(t.trans)) {
		got, e := len(req), unix.Errno(0)
		if r.raw {
			n, errno := rawSyscall6(unix.SYS_RECVFROM, sfd, uintptr(bufPtr(req)), uintptr(len(req)), 0, 0, 0)
			if errno != 0 || n != uintptr(len(req)) {
				got, e = r.recvRest(req, n, unix.Errno(errno))
			}
		} else {
			got, e = readFull(fd, req)
		}
		if e != 0 || got != len(req) {
			// An error, the timer or an abort; or else the client's
			// shutdown: the end of the test.
			return t.ended(e)
		}
		if rawSend {
			n, errno := rawSyscall6(unix.SYS_SENDTO, sfd, uintptr(bufPtr(rsp)), uintptr(len(rsp)), unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, 0, 0)
			if errno != 0 || n != uintptr(len(rsp)) {
				_, e = sendRest(fd, rsp, n, unix.Errno(errno))
			}
		} else {
			_, e = sysWrite(fd, rsp)
		}
		if e != 0 {
			return t.ended(e)
		}
		t.recvCalls++
		t.sendCalls++
		t.trans++
		t.y.tick()
		t.bytesRx += uint64(len(req))
		t.bytesTx += uint64(len(rsp))
	}
	return nil
}

// recvFull reads a whole request; io.EOF if the client closed before one
// was complete.
func (t *serverTest) recvFull(r *rawConn, b []byte) error {
	n, e := r.recvFull(b)
	if e == 0 && n == len(b) {
		return nil
	}
	if err := t.ended(e); err != nil {
		return err
	}
	return io.EOF
}

func (t *serverTest) sendAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, e := sysWrite(fd, b)
		if e != 0 {
			return t.ended(e)
		}
		b = b[n:]
	}
	return nil
}

// crrIdle ends a TCP_CRR test once the client has stopped connecting after
// the test length, so results come back without netserver's 4 s pad.
const crrIdle = 300 * time.Millisecond

// crrLoop accepts one connection per transaction.
func (t *serverTest) crrLoop(lfd int, start time.Time) error {
	if t.req.TestLength > 0 {
		// After the test length, a watcher ends the test (by shutting
		// the listener down) once a crrIdle passes without a transaction.
		lengthEnd := start.Add(time.Duration(t.req.TestLength) * time.Second)
		var last uint32
		var watch *time.Timer
		watch = time.AfterFunc(time.Until(lengthEnd)+crrIdle, func() {
			if n := t.crrTrans.Load(); n != last {
				last = n
				watch.Reset(crrIdle)
				return
			}
			t.idle.Store(true)
			t.ph.fds.interruptFd(lfd)
		})
		defer watch.Stop()
	}
	for t.running(int64(t.trans)) {
		fd, e := sysAccept(lfd)
		if e != 0 {
			switch e {
			case unix.ECONNABORTED, unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
				continue
			}
			if t.idle.Load() {
				return nil // the client is done
			}
			if err := t.ended(e); err != errTimedOut {
				return err
			}
			return nil
		}
		if !t.ph.fds.add(fd, false) {
			unix.Close(fd)
			return errAborted
		}
		rc := rawConn{fd: fd} // ordinary calls
		err := t.recvFull(&rc, t.recvBuf)
		if err == nil {
			err = t.sendAll(fd, t.sendBuf)
		}
		if t.trans == 0 {
			t.lssEnd, t.lsrEnd = sockBuf(fd)
		}
		t.ph.fds.closeFd(fd)
		if err != nil {
			switch err {
			case errAborted:
				return err
			case errTimedOut:
				return nil
			}
			continue // a probe or a client that gave up mid-transaction
		}
		t.recvCalls++
		t.sendCalls++
		t.trans++
		t.crrTrans.Add(1)
		t.y.tick()
		t.bytesRx += uint64(len(t.recvBuf))
		t.bytesTx += uint64(len(t.sendBuf))
	}
	return nil
}

func (t *serverTest) udpLoop(fd int) error {
	err := t.udpData(fd)
	if err == errTimedOut {
		return nil
	}
	return err
}

func (t *serverTest) udpData(fd int) error {
	if t.req.Direction == proto.DirServerRecvs {
		r, err := newRawReceiver(fd)
		if err != nil {
			return err
		}
		defer r.close()
		t.y.period = r.yieldPeriod()
		buf := t.recvBuf
		for t.running(int64(t.bytesRx)) {
			n, e := 0, unix.Errno(0)
			if r.raw { // in line, see clientLoop.tcpRRLoop
				m, errno := rawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(bufPtr(buf)), uintptr(len(buf)), 0, 0, 0)
				n, e = int(m), unix.Errno(errno)
				if e != 0 {
					n, e = r.recvAfter(buf, e)
				}
			} else {
				n, e = r.recv(buf)
			}
			if e == unix.ECONNREFUSED {
				continue // an ICMP error for an earlier datagram
			}
			if e != 0 || n == 0 {
				// n == 0: netperf's end-of-test marker, or the timer's
				// or an abort's shutdown.
				return t.ended(e)
			}
			t.bytesRx += uint64(n)
			t.recvCalls++
			t.y.tick()
		}
		return nil
	}
	// UDP_RR: a rawConn as the client's loops (see clientLoop.tcpRR).
	r, err := newRawReceiver(fd)
	if err != nil {
		return err
	}
	defer r.close()
	t.y.period = r.yieldPeriod()
	// The common calls are made in line: see clientLoop.tcpRRLoop.
	var from rawSockaddr
	sfd := uintptr(fd)
	req, rsp := t.recvBuf, t.sendBuf
	for t.running(int64(t.trans)) {
		var n int
		var e unix.Errno
		if r.raw {
			from.len = unix.SizeofSockaddrAny
			got, errno := rawSyscall6(unix.SYS_RECVFROM, sfd, uintptr(bufPtr(req)), uintptr(len(req)), 0,
				uintptr(unsafe.Pointer(&from.any)), uintptr(unsafe.Pointer(&from.len)))
			n, e = int(got), unix.Errno(errno)
			if e == unix.EAGAIN || e == unix.EINTR {
				runtime.Gosched() // as rawConn.recvFrom
				n, e = r.recvFrom(req, &from)
			}
		} else {
			n, e = r.recvFrom(req, &from)
		}
		if e == unix.ECONNREFUSED {
			continue
		}
		if e != 0 || n == 0 {
			return t.ended(e)
		}
		t.bytesRx += uint64(n)
		t.recvCalls++
		sent, errno := rawSyscall6(unix.SYS_SENDTO, sfd, uintptr(bufPtr(rsp)), uintptr(len(rsp)), unix.MSG_DONTWAIT,
			uintptr(unsafe.Pointer(&from.any)), uintptr(from.len))
		if errno != 0 {
			if _, e := sendtoRest(fd, rsp, &from, sent, unix.Errno(errno)); e != 0 {
				if isTransientSend(e) || e == unix.ECONNREFUSED {
					continue
				}
				return t.ended(e)
			}
		}
		t.bytesTx += uint64(len(t.sendBuf))
		t.sendCalls++
		t.trans++
		t.y.tick()
	}
	return nil
}

// ListenerFile returns a duplicate of the control listener's socket, for
// handing to a daemonized child.
func (s *Server) ListenerFile() (*os.File, error) {
	tl, ok := s.ln.(*net.TCPListener)
	if !ok {
		return nil, errors.New("netserver: listener is not TCP")
	}
	return tl.File()
}

// NewServerFromListener serves on an already-bound listener.
func NewServerFromListener(ln net.Listener) *Server {
	return &Server{ln: ln, conns: map[net.Conn]struct{}{}}
}

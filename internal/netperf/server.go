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

// Close stops accepting, closes every control connection (which aborts
// running tests) and waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
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
	req      *proto.Request
	udp      bool
	padded   bool // timer is L+4 (quirk Q3)
	deadline time.Time
	limit    int64 // -N transactions/sends, 0 = timed

	recvBuf, sendBuf []byte

	bytesRx, bytesTx     uint64
	recvCalls, sendCalls uint32
	trans                uint32
	timedOut             bool

	closeMu sync.Mutex
	closers []io.Closer
	aborted bool
}

func (t *serverTest) track(c io.Closer) bool {
	t.closeMu.Lock()
	defer t.closeMu.Unlock()
	if t.aborted {
		c.Close()
		return false
	}
	t.closers = append(t.closers, c)
	return true
}

func (t *serverTest) abort() {
	t.closeMu.Lock()
	defer t.closeMu.Unlock()
	t.aborted = true
	for _, c := range t.closers {
		c.Close()
	}
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
	t := &serverTest{req: req, udp: req.SocketType == 2}
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
	var extra func(fd int)
	if req.Flags&proto.FlagNoDelay != 0 && !t.udp {
		extra = setNoDelay
	}
	lc := net.ListenConfig{Control: sockBufControl(int(req.SendBufSize), int(req.RecvBufSize), extra)}
	network := "tcp"
	if t.udp {
		network = "udp"
	}
	var (
		ln  net.Listener
		pc  net.PacketConn
		err error
	)
	listen := func(port int32) error {
		addr := netip.AddrPortFrom(ip, uint16(port)).String()
		if t.udp {
			pc, err = lc.ListenPacket(context.Background(), network, addr)
		} else {
			ln, err = lc.Listen(context.Background(), network, addr)
		}
		return err
	}
	listenAny := func() error {
		if listen(req.DataPort) != nil && req.DataPort != 0 {
			err = listen(0) // the port of a previous iteration may be gone
		}
		return err
	}
	if s.NetNS != "" {
		if nerr := inNetNS(s.NetNS, listenAny); nerr != nil && err == nil {
			err = nerr
		}
	} else {
		_ = listenAny()
	}
	if err != nil {
		return fail(errnoEADDRNOTAVAL, fmt.Errorf("data listener: %w", err))
	}
	var dataPort int
	var snd, rcv int
	if t.udp {
		t.track(pc)
		dataPort = pc.LocalAddr().(*net.UDPAddr).Port
		snd, rcv = sockBufs(pc)
	} else {
		t.track(ln)
		dataPort = ln.Addr().(*net.TCPAddr).Port
		snd, rcv = sockBufs(ln)
	}
	defer t.abort()

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
	watch := make(chan struct{})
	var wbuf [proto.MsgSize]byte
	var wn int
	var werr error
	go func() {
		wn, werr = c.Conn.Read(wbuf[:])
		close(watch)
		var ne net.Error
		if !(errors.As(werr, &ne) && ne.Timeout()) {
			t.abort()
		}
	}()

	if !serverSendsOnly && t.limit == 0 {
		t.padded = true
	}
	var start time.Time
	var cpu0 cpu.Sample
	begin := func() {
		start = time.Now()
		if t.limit == 0 {
			d := time.Duration(req.TestLength) * time.Second
			if t.padded {
				d += 4 * time.Second
			}
			t.deadline = start.Add(d)
		}
		if measure {
			cpu0, _ = cpu.Read()
		}
	}
	var data net.Conn
	bind := int(req.CPUAffinity)
	if bind >= runtime.NumCPU() {
		bind = -1 // netserver ignores CPUs it does not have
	}
	dataErr := withCPUAffinity(bind, func() error {
		var err error
		switch {
		case t.udp:
			begin()
			err = t.udpLoop(pc)
		case req.Flags&proto.FlagConnectTest != 0:
			begin()
			err = t.crrLoop(ln)
		default:
			data, err = t.accept(ln, req)
			if err == nil {
				begin()
				err = t.tcpLoop(data)
			}
		}
		return err
	})
	end := time.Now()
	var cpu1 cpu.Sample
	if measure {
		cpu1, _ = cpu.Read()
	}
	elapsed := end.Sub(start).Seconds()
	if start.IsZero() {
		elapsed = 0
	}
	if t.timedOut && t.padded {
		elapsed -= 4
	}
	res := proto.Results{
		BytesReceived: t.bytesRx, RecvCalls: t.recvCalls,
		BytesSent: t.bytesTx, SendCalls: t.sendCalls,
		Trans: t.trans, Elapsed: float32(elapsed),
		ServDem: -1, TransportRetrx: -1,
		RecvBufSize: int32(rcv), SendBufSize: int32(snd),
	}
	if data != nil {
		s2, r2 := sockBufs(data)
		res.SendBufSize, res.RecvBufSize = int32(s2), int32(r2)
		if req.Flags&proto.FlagConnectTest == 0 {
			_, retr, cc := tcpInfo(data)
			res.TransportRetrx = int32(retr)
			if req.Flags&proto.FlagRoutingAllowed != 0 {
				res.CongControl = cc
			}
		}
		data.Close()
	}
	if measure && cpu0 != nil && cpu1 != nil {
		u := cpu.Compute(cpu0, cpu1, 1)
		res.CPUUtil, res.CPUUser, res.CPUSystem = float32(u.Util), float32(u.User), float32(u.System)
		res.CPUIOWait, res.CPUIRQ, res.CPUSoftIRQ = float32(u.IOWait), float32(u.IRQ), float32(u.SoftIRQ)
		res.CPUMethod, res.NumCPUs = proto.CPUMethodProcStat, int32(u.NumCPUs)
		res.PeakCPUID, res.PeakCPUUtil = int32(u.PeakID), float32(u.Peak)
	}
	t.abort()

	// Stop the watcher; keep anything it read as the start of the next
	// message.
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
	<-watch
	_ = c.Conn.SetReadDeadline(time.Time{})
	if wn > 0 {
		c.pending = append(c.pending[:0], wbuf[:wn]...)
	}
	var ne net.Error
	if werr != nil && !(errors.As(werr, &ne) && ne.Timeout()) {
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

// noDeadline stands in for "no timer" in -N tests; a bound still exists so
// a silent peer cannot pin the goroutine forever.
const noDeadline = time.Hour

func (t *serverTest) dl() time.Time {
	if t.deadline.IsZero() {
		return time.Now().Add(noDeadline)
	}
	return t.deadline
}

func (t *serverTest) accept(ln net.Listener, req *proto.Request) (net.Conn, error) {
	wait := time.Minute
	if req.TestLength > 0 {
		wait += time.Duration(req.TestLength) * time.Second
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(wait))
	c, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("accepting data connection: %w", err)
	}
	ln.Close()
	if !t.track(c) {
		return nil, errors.New("aborted")
	}
	return c, nil
}

// endErr classifies how a data loop ended: EOF and the timer are normal.
func (t *serverTest) endErr(err error) error {
	if err == nil || err == io.EOF {
		return nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.timedOut = true
		return nil
	}
	return err
}

func (t *serverTest) tcpLoop(c net.Conn) error {
	_ = c.SetDeadline(t.dl())
	switch t.req.Direction {
	case proto.DirServerRecvs:
		for {
			n, err := c.Read(t.recvBuf)
			if n > 0 {
				t.bytesRx += uint64(n)
				t.recvCalls++
			}
			if err != nil {
				return t.endErr(err)
			}
		}
	case proto.DirServerSends:
		for t.limit == 0 || int64(t.sendCalls) < t.limit {
			n, err := c.Write(t.sendBuf)
			t.bytesTx += uint64(n)
			if n > 0 {
				t.sendCalls++
			}
			if err != nil {
				return t.endErr(err)
			}
		}
		return nil
	default:
		for {
			if err := serveRR(c, t.recvBuf, t.sendBuf); err != nil {
				return t.endErr(err)
			}
			t.recvCalls++
			t.sendCalls++
			t.trans++
			t.bytesRx += uint64(len(t.recvBuf))
			t.bytesTx += uint64(len(t.sendBuf))
		}
	}
}

// serveRR reads one full request and writes the response. It does not
// allocate.
func serveRR(c net.Conn, req, rsp []byte) error {
	if _, err := io.ReadFull(c, req); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		return err
	}
	_, err := c.Write(rsp)
	return err
}

// crrLoop accepts one connection per transaction. Besides the timer and -N
// it ends when the client has stopped connecting after the test length, so
// results come back without netperf's 4 s pad.
func (t *serverTest) crrLoop(ln net.Listener) error {
	tl := ln.(*net.TCPListener)
	var lengthEnd time.Time
	if t.req.TestLength > 0 {
		lengthEnd = time.Now().Add(time.Duration(t.req.TestLength) * time.Second)
	}
	const idle = 300 * time.Millisecond
	for t.limit == 0 || int64(t.trans) < t.limit {
		now := time.Now()
		dl := t.dl()
		if !lengthEnd.IsZero() {
			dl = minTime(dl, maxTime(lengthEnd, now).Add(idle))
		}
		_ = tl.SetDeadline(dl)
		c, err := tl.Accept()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !lengthEnd.IsZero() && time.Now().Before(t.deadline) {
				if time.Now().After(lengthEnd) {
					return nil // idle after the test length: the client is done
				}
				continue
			}
			return t.endErr(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		err = serveRR(c, t.recvBuf, t.sendBuf)
		c.Close()
		if err != nil {
			if err == io.EOF {
				continue // a probe or a client that gave up mid-transaction
			}
			continue
		}
		t.recvCalls++
		t.sendCalls++
		t.trans++
		t.bytesRx += uint64(len(t.recvBuf))
		t.bytesTx += uint64(len(t.sendBuf))
	}
	return nil
}

func (t *serverTest) udpLoop(pc net.PacketConn) error {
	uc := pc.(*net.UDPConn)
	_ = uc.SetDeadline(t.dl())
	if t.req.Direction == proto.DirServerRecvs {
		for {
			n, err := uc.Read(t.recvBuf)
			if err != nil {
				return t.endErr(err)
			}
			if n == 0 {
				return nil // netperf's end-of-test marker
			}
			t.bytesRx += uint64(n)
			t.recvCalls++
		}
	}
	for {
		n, from, err := uc.ReadFromUDPAddrPort(t.recvBuf)
		if err != nil {
			return t.endErr(err)
		}
		if n == 0 {
			return nil
		}
		t.bytesRx += uint64(n)
		t.recvCalls++
		if _, err := uc.WriteToUDPAddrPort(t.sendBuf, from); err != nil {
			if isTransientSendErr(err) {
				continue
			}
			return t.endErr(err)
		}
		t.bytesTx += uint64(len(t.sendBuf))
		t.sendCalls++
		t.trans++
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

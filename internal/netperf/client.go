package netperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"sluice/internal/netperf/cpu"
	"sluice/internal/netperf/proto"
)

// Run performs one netperf test (with -i, every iteration of it) against a
// netserver and returns the measurements. Cancelling ctx aborts the test.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.NetNS != "" {
		var res *Result
		err := inNetNS(cfg.NetNS, func() error {
			var err error
			res, err = run(ctx, &cfg)
			return err
		})
		return res, err
	}
	return run(ctx, &cfg)
}

// ErrRemote is wrapped by errors the netserver reported in serv_errno.
var ErrRemote = errors.New("netperf: remote error")

// ErrNoControl is wrapped by the error of a run that could not connect to
// netserver.
var ErrNoControl = errors.New("netperf: establishing control connection")

type client struct {
	cfg    *Config
	kind   testKind
	ctl    net.Conn
	server netip.Addr
	// data is where the data connection goes: the server, or DataHost;
	// dataLocal the address data sockets bind to.
	data, dataLocal netip.Addr
	family          int32
	local           netip.Addr
	msg             proto.Msg
	// pending holds control bytes read ahead by the data phase's watcher.
	pending []byte
}

func run(ctx context.Context, cfg *Config) (*Result, error) {
	k, err := lookupTest(cfg.Test)
	if err != nil {
		return nil, err
	}
	// The wire carries sizes as int32; larger ones cannot be honoured and
	// would make the data loops' buffer allocations panic.
	for _, v := range []int{cfg.SendSize, cfg.RecvSize, cfg.LocalSendSize, cfg.RemoteSendSize, cfg.LocalRecvSize, cfg.RemoteRecvSize,
		cfg.ReqSize, cfg.RespSize, cfg.LocalSendBuf, cfg.LocalRecvBuf, cfg.RemoteSendBuf, cfg.RemoteRecvBuf} {
		if v > maxSize || v < 0 {
			return nil, fmt.Errorf("netperf: size %d out of range (0 to %d)", v, maxSize)
		}
	}
	if cfg.Duration <= 0 && cfg.Transactions <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Host == "" {
		cfg.Host = "localhost"
	}
	c := &client{cfg: cfg, kind: k}
	if err := c.dial(ctx); err != nil {
		return nil, err
	}
	defer c.ctl.Close()
	stop := context.AfterFunc(ctx, func() { c.ctl.Close() })
	defer stop()
	if cfg.Connected != nil {
		cfg.Connected()
	}

	iters := 1
	if cfg.ConfMax > 1 {
		iters = min(max(cfg.ConfMax, 3), 30)
	}
	minIters := 1
	if iters > 1 {
		minIters = min(max(cfg.ConfMin, 3), iters)
	}
	var all []*Result
	dataPort := cfg.RemoteDataPort
	for i := 0; i < iters; i++ {
		r, port, err := c.iteration(ctx, dataPort)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		dataPort = port // netperf asks for the same data port again
		all = append(all, r)
		if iters > 1 && len(all) >= minIters {
			if conf := confidenceOf(all, cfg); conf.Met {
				break
			}
		}
	}
	// netperf half-closes and waits for netserver to close.
	if tc, ok := c.ctl.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		_ = c.ctl.SetReadDeadline(time.Now().Add(60 * time.Second))
		_, _ = io.Copy(io.Discard, c.ctl)
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return averageResults(all, cfg), nil
}

func (c *client) dial(ctx context.Context) error {
	network := "tcp"
	switch c.cfg.Family {
	case 4:
		network = "tcp4"
	case 6:
		network = "tcp6"
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	if c.cfg.LocalAddr != "" {
		ip, err := netip.ParseAddr(c.cfg.LocalAddr)
		if err != nil {
			return fmt.Errorf("netperf: bad local address %q: %w", c.cfg.LocalAddr, err)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip.AsSlice(), Zone: ip.Zone()}
	}
	// Resolve here so the dial uses one literal address (and therefore one
	// goroutine, which matters inside a network namespace).
	ip, err := resolveHost(ctx, c.cfg.Host, c.cfg.Family)
	if err != nil {
		return err
	}
	ctl, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), strconv.Itoa(c.cfg.Port)))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoControl, err)
	}
	c.ctl = ctl
	ra := ctl.RemoteAddr().(*net.TCPAddr).AddrPort()
	la := ctl.LocalAddr().(*net.TCPAddr).AddrPort()
	c.server, c.local = ra.Addr().Unmap(), la.Addr().Unmap()
	c.data = c.server
	if h := c.cfg.DataHost; h != "" {
		a, err := resolveHost(ctx, h, c.cfg.Family)
		if err != nil {
			ctl.Close()
			return err
		}
		c.data = a
	}
	c.family = proto.FamilyINET
	if c.data.Is6() {
		c.family = proto.FamilyINET6
	}
	// Data sockets bind to the control connection's local address when
	// they can (it is the right one for namespaces and -L).
	c.dataLocal = c.local
	if c.local.Is4() != c.data.Is4() {
		c.dataLocal = netip.IPv4Unspecified()
		if c.data.Is6() {
			c.dataLocal = netip.IPv6Unspecified()
		}
	}
	if c.cfg.Passphrase != "" {
		if err := proto.EncodePassphrase(&c.msg, c.cfg.Passphrase); err != nil {
			ctl.Close()
			return err
		}
		if err := proto.WriteMsg(ctl, &c.msg); err != nil {
			ctl.Close()
			return fmt.Errorf("netperf: sending passphrase: %w", err)
		}
	}
	return nil
}

// readMsg reads the next control message, starting with any bytes the
// data phase's watcher read ahead.
func (c *client) readMsg(m *proto.Msg) error {
	n := copy(m[:], c.pending)
	c.pending = c.pending[n:]
	_, err := io.ReadFull(c.ctl, m[n:])
	if err == io.EOF && n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// resolveHost returns host's address, preferring the family asked for
// (IPv4 unless 6).
func resolveHost(ctx context.Context, host string, family int) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("netperf: resolving %q: %v", host, err)
	}
	ip := ips[0]
	for _, a := range ips {
		if family == 6 && a.Is6() || family != 6 && a.Is4() {
			ip = a
			break
		}
	}
	return ip.Unmap(), nil
}

func (c *client) exchange(m *proto.Msg, timeout time.Duration) error {
	_ = c.ctl.SetDeadline(time.Now().Add(timeout))
	defer c.ctl.SetDeadline(time.Time{})
	if err := c.readMsg(m); err != nil {
		return fmt.Errorf("netperf: waiting for netserver: %w", err)
	}
	return nil
}

// loopStats is what a client data loop counted.
type loopStats struct {
	bytesTx, bytesRx     int64
	sendCalls, recvCalls int64
	trans, failed        int64
	elapsed              time.Duration
	lssEnd, lsrEnd, mss  int
	retrans              int
	cong                 string
	lat                  *latencyHist
}

// ErrControlLost is wrapped by the error of a test whose netserver closed
// the control connection (or died) during the data phase.
var ErrControlLost = errors.New("netserver closed the control connection")

func (c *client) iteration(ctx context.Context, dataPort int) (*Result, int, error) {
	cfg, k := c.cfg, c.kind
	fam := 4
	if c.family == proto.FamilyINET6 {
		fam = 6
	}
	// The first data socket is made before the request, as netperf does:
	// its buffer sizes go into the request.
	opts := c.sockOpts()
	fd, err := newDataSocket(fam, !k.udp(), opts)
	if err != nil {
		return nil, 0, fmt.Errorf("netperf: data socket: %w", err)
	}
	var ph phase
	ph.fds.add(fd, k.udp())
	defer func() {
		if fd >= 0 {
			ph.fds.closeFd(fd)
		}
	}()
	lss, lsr := sockBuf(fd)
	p := resolve(cfg, k, lss, lsr)

	netperfPort := 0
	switch {
	case k.udp():
		if err := bindTo(fd, netip.AddrPortFrom(c.dataLocal, uint16(cfg.LocalDataPort))); err != nil {
			return nil, 0, fmt.Errorf("netperf: binding the data socket: %w", err)
		}
		netperfPort = int(localAddr(fd).Port())
	case k.crr:
		netperfPort = cfg.LocalDataPort
		if cfg.LocalAddr != "" {
			if err := bindTo(fd, netip.AddrPortFrom(c.dataLocal, 0)); err != nil {
				return nil, 0, fmt.Errorf("netperf: binding the data socket: %w", err)
			}
		}
	case cfg.LocalAddr != "" || cfg.LocalDataPort != 0:
		if err := bindTo(fd, netip.AddrPortFrom(c.dataLocal, uint16(cfg.LocalDataPort))); err != nil {
			return nil, 0, fmt.Errorf("netperf: binding the data socket: %w", err)
		}
	}

	req := buildRequest(cfg, p, c.family, proto.IPWords(c.data), dataPort, netperfPort)
	req.Encode(&c.msg)
	_ = c.ctl.SetWriteDeadline(time.Now().Add(time.Minute))
	if err := proto.WriteMsg(c.ctl, &c.msg); err != nil {
		return nil, 0, fmt.Errorf("netperf: sending request: %w", err)
	}
	timeout := cfg.ResponseTimeout
	if timeout <= 0 {
		timeout = 120 * time.Second
	}
	if err := c.exchange(&c.msg, timeout); err != nil {
		return nil, 0, err
	}
	var rsp proto.Response
	rsp.Decode(&c.msg)
	if rsp.Errno != 0 {
		return nil, 0, fmt.Errorf("%w %d from netserver", ErrRemote, rsp.Errno)
	}
	if rsp.DataPort <= 0 || rsp.DataPort > 65535 {
		return nil, 0, fmt.Errorf("netperf: netserver gave data port %d", rsp.DataPort)
	}
	l := &clientLoop{c: c, ph: &ph, p: p, fd: fd, fam: fam, opts: opts,
		dst: toRaw(netip.AddrPortFrom(c.data, uint16(rsp.DataPort)))}
	if cfg.Transactions > 0 {
		l.limit = cfg.Transactions
	}
	if k.rr {
		l.demo = newDemoTicker(cfg, k.name, float64(p.reqSize+p.respSize))
	} else {
		l.demo = newDemoTicker(cfg, k.name, 0)
	}
	if cfg.Latency {
		l.st.lat = newLatencyHist()
	}

	// A netserver that dies or closes the control connection ends the
	// test at once (its data socket may never answer again).
	w := watchCtl(c.ctl, ph.fds.abort)
	var cpu0 cpu.Sample
	if cfg.LocalCPU {
		cpu0, _ = cpu.Read()
	}
	bind := -1
	if cfg.BindLocalCPU {
		bind = cfg.LocalCPUAffinity
	}
	err = withCPUAffinity(bind, func() error {
		// A request/response in flight at the end gets a quarter
		// second to complete, a stream's last send or netserver's last
		// MAERTS data two seconds.
		grace := 250 * time.Millisecond
		if !k.rr {
			grace = 2 * time.Second
		}
		if l.limit > 0 {
			ph.startTimer(noDeadline, grace)
		} else {
			ph.startTimer(cfg.Duration, grace)
		}
		defer ph.stopTimer()
		if l.demo != nil {
			l.demo.begin()
		}
		l.start = time.Now()
		if !k.udp() && !k.crr {
			if e := connectTo(l.fd, &l.dst); e != 0 {
				if ph.ended() == errAborted {
					return errAborted
				}
				return fmt.Errorf("netperf: %s: connecting the data socket: %w", k.name, e)
			}
		}
		switch {
		case k.udp() && k.rr:
			return l.udpRR()
		case k.udp():
			return l.udpStream()
		case k.crr:
			fd = -1 // the loop owns the first socket
			return l.crr()
		case k.rr:
			return l.tcpRR()
		case k.clientSends():
			return l.tcpStream()
		default:
			return l.tcpMaerts()
		}
	})
	var cpu1 cpu.Sample
	if cfg.LocalCPU {
		cpu1, _ = cpu.Read()
	}
	l.demo.final()
	pend, werr := w.stop()
	c.pending = append(c.pending[:0], pend...)
	if err != nil {
		if errors.Is(err, errAborted) {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			return nil, 0, fmt.Errorf("netperf: %s: %w during the test", k.name, ErrControlLost)
		}
		return nil, 0, err
	}
	if werr != nil {
		return nil, 0, fmt.Errorf("netperf: %s: %w during the test: %v", k.name, ErrControlLost, werr)
	}
	wait := 120*time.Second + time.Duration(max(req.TestLength, 0))*time.Second
	if err := c.exchange(&c.msg, wait); err != nil {
		return nil, 0, err
	}
	var res proto.Results
	res.Decode(&c.msg)
	if res.Errno != 0 {
		return nil, 0, fmt.Errorf("%w %d from netserver results", ErrRemote, res.Errno)
	}
	r := c.compute(p, &rsp, &res, &l.st, cpu0, cpu1)
	return r, int(rsp.DataPort), nil
}

// sockOpts are the client's data socket options.
func (c *client) sockOpts() sockOpts {
	k := c.kind
	o := sockOpts{sndBuf: c.cfg.LocalSendBuf, rcvBuf: c.cfg.LocalRecvBuf}
	if k.udp() {
		// IP_RECVERR reports a netserver's closed port (ICMP) as
		// ECONNREFUSED on the next call, as netperf's enable_enobufs
		// does for UDP_STREAM.
		o.recvErr = true
		o.dontRoute = !k.rr && !c.cfg.AllowRouting
	} else {
		o.noDelay = c.cfg.NoDelay
	}
	o.reuseAddr = c.cfg.LocalDataPort != 0
	return o
}

func (c *client) compute(p params, rsp *proto.Response, res *proto.Results, st *loopStats, cpu0, cpu1 cpu.Sample) *Result {
	cfg, k := c.cfg, c.kind
	secs := st.elapsed.Seconds()
	r := &Result{
		Test: k.name, Elapsed: st.elapsed,
		BytesSent: st.bytesTx, BytesRecv: st.bytesRx,
		Transactions: st.trans,
		LocalCPU:     -1, RemoteCPU: -1, LocalSD: -1, RemoteSD: -1,
		LSS: p.lss, LSR: p.lsr, RSS: int(rsp.SendBufSize), RSR: int(rsp.RecvBufSize),
		LSSEnd: st.lssEnd, LSREnd: st.lsrEnd,
		RSSEnd: int(res.SendBufSize), RSREnd: int(res.RecvBufSize),
		LocalSendSize: p.sendSize, LocalRecvSize: p.recvSize,
		RemoteSendSize: int(rsp.SendSize), RemoteRecvSize: int(rsp.RecvSize),
		ReqSize: p.reqSize, RespSize: p.respSize,
		LocalSendCalls: st.sendCalls, LocalRecvCalls: st.recvCalls,
		RemoteBytesSent: int64(res.BytesSent), RemoteBytesRecv: int64(res.BytesReceived),
		RemoteSendCalls: int64(res.SendCalls), RemoteRecvCalls: int64(res.RecvCalls),
		RemoteTrans: int64(res.Trans), RemoteElapsed: float64(res.Elapsed),
		RemoteCongControl: res.CongControl,
		FailedSends:       st.failed,
		MSS:               st.mss,
		LocalSendWidth:    p.sendWidth, LocalRecvWidth: p.recvWidth,
		RemoteSendWidth: int(rsp.SendWidth), RemoteRecvWidth: int(rsp.RecvWidth),
		LocalRetrans: st.retrans, RemoteRetrans: int(res.TransportRetrx),
		LocalCongControl: st.cong,
	}
	// netserver reports its CPU count and method whenever it has measured
	// (quirk Q1 makes the rest of its CPU fields junk unless -C asked).
	r.RemoteCPUStats.NumCPUs, r.RemoteCPUStats.Method = int(res.NumCPUs), methodLetter(res.CPUMethod)
	if !k.rr {
		r.LSSEnd, r.LSREnd = max(r.LSSEnd, 0), max(r.LSREnd, 0)
	}
	var rate float64 // KB/s or trans/s for service demand
	if secs > 0 {
		if k.rr {
			r.TransPerSec = float64(st.trans) / secs
			rate = r.TransPerSec
		} else {
			bytes := st.bytesTx
			if !k.clientSends() {
				bytes = st.bytesRx
			}
			r.ThroughputMbps = float64(bytes) * 8 / secs / 1e6
			// Service demand is per byte the client moved, on both sides,
			// as in netperf.
			rate = float64(bytes) / 1024 / secs
			if k.udp() {
				r.SendThroughputMbps = r.ThroughputMbps
				r.ThroughputMbps = float64(res.BytesReceived) * 8 / secs / 1e6
			}
		}
	}
	if cfg.LocalCPU && cpu0 != nil && cpu1 != nil {
		u := cpu.Compute(cpu0, cpu1, 1)
		r.LocalCPU = u.Util
		r.LocalCPUStats = CPUStats{u.Util, u.User, u.System, u.IOWait, u.IRQ, u.SoftIRQ, u.Peak, u.PeakID, u.NumCPUs, 'S'}
		r.LocalSD = cpu.ServiceDemand(u.Util, rate, u.NumCPUs)
	}
	if cfg.RemoteCPU && rsp.Flags&proto.FlagMeasureCPU != 0 {
		n := int(res.NumCPUs)
		r.RemoteCPU = float64(res.CPUUtil)
		r.RemoteCPUStats = CPUStats{float64(res.CPUUtil), float64(res.CPUUser), float64(res.CPUSystem),
			float64(res.CPUIOWait), float64(res.CPUIRQ), float64(res.CPUSoftIRQ),
			float64(res.PeakCPUUtil), int(res.PeakCPUID), n, methodLetter(res.CPUMethod)}
		r.RemoteSD = cpu.ServiceDemand(r.RemoteCPU, rate, n)
	}
	if st.lat != nil {
		st.lat.fill(r)
	}
	return r
}

func methodLetter(m int32) byte {
	switch m {
	case proto.CPUMethodProcStat:
		return 'S'
	case 0:
		return 'U'
	}
	return '?'
}

// noDeadline stands in for "no timer" in -N tests; a bound still exists so
// a silent peer cannot pin the loop forever.
const noDeadline = time.Hour

// clientLoop is one iteration's data phase on the client side.
type clientLoop struct {
	c     *client
	ph    *phase
	p     params
	fd    int
	fam   int
	opts  sockOpts
	dst   rawSockaddr
	limit int64 // -l -N: transactions (RR) or bytes (streams); 0 = timed
	demo  *demoTicker
	start time.Time
	st    loopStats
	y     yielder
}

// fail turns a failed data socket call into the loop's outcome: nil when
// the test's time was up (the timer interrupting a call, as netperf's
// SIGALRM does), errAborted when the sockets were shut down from outside.
func (l *clientLoop) fail(what string, e error) error {
	switch l.ph.ended() {
	case errAborted:
		return errAborted
	case errTimedOut:
		return nil
	}
	return fmt.Errorf("netperf: %s: %s: %w", l.c.kind.name, what, e)
}

// finishTCP records the connection's final sizes and closes it netperf's
// way: shut down our side and wait for the server's close, so that the
// server has seen every byte.
func (l *clientLoop) finishTCP() {
	l.st.lssEnd, l.st.lsrEnd = sockBuf(l.fd)
	l.st.mss, l.st.retrans, l.st.cong = tcpFacts(l.fd)
	l.ph.extend(time.Minute) // the server may have buffers to drain
	_ = unix.Shutdown(l.fd, unix.SHUT_WR)
	var b [256]byte
	for {
		n, e := sysRead(l.fd, b[:])
		if e != 0 || n == 0 {
			return
		}
	}
}

func (l *clientLoop) tcpStream() error {
	buf := make([]byte, l.p.sendSize)
	st := &l.st
	w, err := newRawSender(l.fd)
	if err != nil {
		return l.fail("setting the send timeout", err)
	}
	defer w.close()
	l.y.period = w.yieldPeriod()
	for !l.ph.stop.Load() && (l.limit == 0 || st.bytesTx < l.limit) {
		var t0 time.Time
		if st.lat != nil {
			t0 = time.Now()
		}
		// The common case, the whole buffer sent by one raw call, in
		// line (see tcpRRLoop).
		var n int
		var e unix.Errno
		if w.raw {
			m, errno := rawSyscall6(unix.SYS_SENDTO, uintptr(w.fd), uintptr(bufPtr(buf)), uintptr(len(buf)), unix.MSG_NOSIGNAL, 0, 0)
			n, e = int(m), unix.Errno(errno)
			if e != 0 || n != len(buf) {
				n, e = w.sendRest(buf, m, e)
			}
		} else {
			n, e = w.send(buf)
		}
		if st.lat != nil {
			st.lat.add(time.Since(t0))
		}
		if n > 0 {
			st.bytesTx += int64(n)
			st.sendCalls++
		}
		if e != 0 {
			err = l.fail("sending", e)
			break
		}
		if l.demo != nil {
			l.demo.tick(float64(n))
		}
		l.y.tick()
	}
	if err != nil {
		return err
	}
	l.finishTCP()
	st.elapsed = time.Since(l.start)
	return nil
}

func (l *clientLoop) tcpMaerts() error {
	buf := make([]byte, l.p.recvSize)
	st := &l.st
	r, err := newRawReceiver(l.fd)
	if err != nil {
		return l.fail("setting the receive timeout", err)
	}
	defer r.close()
	l.y.period = r.yieldPeriod()
	for {
		var t0 time.Time
		if st.lat != nil {
			t0 = time.Now()
		}
		n, e := r.recv(buf)
		if st.lat != nil {
			st.lat.add(time.Since(t0))
		}
		if e != 0 {
			if err := l.fail("receiving", e); err != nil {
				return err
			}
			break
		}
		if n == 0 {
			// netserver's close at the end of its test, or our timer.
			if l.ph.ended() == errAborted {
				return errAborted
			}
			break
		}
		st.bytesRx += int64(n)
		st.recvCalls++
		if l.demo != nil {
			l.demo.tick(float64(n))
		}
		l.y.tick()
	}
	st.elapsed = time.Since(l.start)
	r.close() // finishTCP blocks for the server's close
	l.finishTCP()
	return nil
}

// tcpRR receives through a rawConn, as the stream receivers do, for the
// reason rawConn's comment gives for the request/response loops.
func (l *clientLoop) tcpRR() error {
	req, rsp := make([]byte, l.p.reqSize), make([]byte, l.p.respSize)
	r, err := newRawReceiver(l.fd)
	if err != nil {
		return l.fail("setting the receive timeout", err)
	}
	l.y.period = r.yieldPeriod()
	err = l.tcpRRLoop(&r, req, rsp)
	r.close() // finishTCP blocks for the server's close
	l.rrTotals()
	if err != nil {
		return err
	}
	l.finishTCP()
	return nil
}

// rrDone reports whether a request/response loop is over: the count
// (-- -N style limits) reached, or the timer's stop.
func (l *clientLoop) rrDone() bool {
	if l.limit > 0 {
		return l.st.trans >= l.limit
	}
	return l.ph.stop.Load()
}

// rrStart is a transaction's start time, read only when latencies are
// kept.
func (l *clientLoop) rrStart() time.Time {
	if l.st.lat != nil {
		return time.Now()
	}
	return time.Time{}
}

// rrExtras records a transaction begun at t0 in the latency histogram
// and demo mode's count.
func (l *clientLoop) rrExtras(t0 time.Time) {
	if l.st.lat != nil {
		l.st.lat.add(time.Since(t0))
	}
	if l.demo != nil {
		l.demo.tick(1)
	}
}

// rrTotals derives a request/response test's call and byte counts from
// its transactions (one request and one response each).
func (l *clientLoop) rrTotals() {
	st := &l.st
	st.elapsed = time.Since(l.start)
	st.sendCalls, st.recvCalls = st.trans, st.trans
	st.bytesTx, st.bytesRx = st.trans*int64(l.p.reqSize), st.trans*int64(l.p.respSize)
}

// tcpRRLoop runs transactions until the timer or the count ends it. It
// does not allocate.
//
// A transaction's common case, a request sent whole by one raw call and
// a response received whole by another, is made in line, rawSyscall6
// called from here: every system call empties the TLB (page-table
// isolation without PCID, as on this project's virtual machines), so
// each function's page the loop passes through costs a TLB miss per call,
// and helpers spread over the package's text cost a few per transaction.
// Anything else (a partial or refused call, ordinary calls when no raw
// slot was free, the latency histogram, demo mode) is a call away.
func (l *clientLoop) tcpRRLoop(r *rawConn, req, rsp []byte) error {
	fd := uintptr(l.fd)
	rawSend := len(req) <= rawSendMax
	for !l.rrDone() {
		t0 := l.rrStart()
		var e unix.Errno
		if rawSend {
			n, errno := rawSyscall6(unix.SYS_SENDTO, fd, uintptr(bufPtr(req)), uintptr(len(req)), unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, 0, 0)
			if errno != 0 || n != uintptr(len(req)) {
				_, e = sendRest(l.fd, req, n, unix.Errno(errno))
			}
		} else {
			_, e = sysWrite(l.fd, req)
		}
		if e != 0 {
			return l.fail("sending a request", e)
		}
		got := len(rsp)
		if r.raw {
			n, errno := rawSyscall6(unix.SYS_RECVFROM, fd, uintptr(bufPtr(rsp)), uintptr(len(rsp)), 0, 0, 0)
			if errno != 0 || n != uintptr(len(rsp)) {
				got, e = r.recvRest(rsp, n, unix.Errno(errno))
			}
		} else {
			got, e = readFull(l.fd, rsp)
		}
		if e != 0 || got < len(rsp) {
			var err error = errClosedData
			if e != 0 {
				err = e
			}
			return l.fail("receiving a response", err)
		}
		l.st.trans++
		if l.st.lat != nil || l.demo != nil {
			l.rrExtras(t0)
		}
		l.y.tick()
	}
	return nil
}

var errClosedData = errors.New("netserver closed the data connection")

// crr makes a connection per transaction with plain socket, bind,
// connect, send, receive and close calls: 7 system calls where net.Dialer
// and a net.Conn spent about 30.
//
// As netperf's pick_next_port_number, each connection binds the next local
// port of 5000–65535 (from a random start, skipping the server's), with
// SO_REUSEADDR: binding a given port is a hash lookup, where leaving the
// choice to connect costs the kernel a search of the ephemeral range for a
// free 4-tuple on every connection.
func (l *clientLoop) crr() error {
	req, rsp := make([]byte, l.p.reqSize), make([]byte, l.p.respSize)
	var drain [64]byte
	st := &l.st
	fd := l.fd
	opts := l.opts
	opts.reuseAddr = true
	local := l.c.dataLocal
	if !local.IsValid() {
		local = netip.IPv4Unspecified()
		if l.fam == 6 {
			local = netip.IPv6Unspecified()
		}
	}
	bindAddr := toRaw(netip.AddrPortFrom(local, 0))
	ports := newCRRPorts(fromRaw(&l.dst).Port())
	var err error
	for {
		if l.limit > 0 {
			if st.trans >= l.limit {
				break
			}
		} else if l.ph.stop.Load() {
			break
		}
		var t0 time.Time
		if st.lat != nil {
			t0 = time.Now()
		}
		if fd < 0 {
			if fd, err = newDataSocket(l.fam, true, opts); err != nil {
				err = l.fail("data socket", err)
				break
			}
			if e := ports.bind(fd, &bindAddr); e != 0 {
				unix.Close(fd)
				fd = -1
				err = l.fail("binding", e)
				break
			}
			if !l.ph.fds.add(fd, false) {
				unix.Close(fd)
				fd = -1
				err = errAborted
				break
			}
		}
		if e := connectTo(fd, &l.dst); e != 0 {
			l.ph.fds.closeFd(fd)
			fd = -1
			if e == unix.EADDRNOTAVAIL || e == unix.EADDRINUSE {
				continue // out of local ports for the moment: netperf's "transient" error
			}
			err = l.fail("connecting", e)
			break
		}
		e := l.crrTransact(fd, req, rsp, drain[:])
		if st.trans == 0 {
			st.lssEnd, st.lsrEnd = sockBuf(fd)
			st.mss, _, _ = tcpFacts(fd)
			st.retrans = -1
		}
		l.ph.fds.closeFd(fd)
		fd = -1
		if e != nil {
			err = l.fail("transaction", e)
			break
		}
		if st.lat != nil {
			st.lat.add(time.Since(t0))
		}
		st.trans++
		if l.demo != nil {
			l.demo.tick(1)
		}
		l.y.tick()
	}
	if fd >= 0 {
		l.ph.fds.closeFd(fd)
	}
	st.elapsed = time.Since(l.start)
	st.sendCalls, st.recvCalls = st.trans, st.trans
	st.bytesTx, st.bytesRx = st.trans*int64(l.p.reqSize), st.trans*int64(l.p.respSize)
	return err
}

// crrTransact sends the request, reads the response and waits for the
// server's close, so the server (as in netperf) holds the TIME_WAIT.
func (l *clientLoop) crrTransact(fd int, req, rsp, drain []byte) error {
	if n, e := sysWrite(fd, req); e != 0 {
		return e
	} else if n != len(req) {
		return io.ErrShortWrite
	}
	n, e := readFull(fd, rsp)
	if e != 0 {
		return e
	}
	if n != len(rsp) {
		return io.ErrUnexpectedEOF
	}
	for {
		n, e := sysRead(fd, drain)
		if e != 0 {
			return e
		}
		if n == 0 {
			return nil
		}
	}
}

func (l *clientLoop) udpRR() error {
	req, rsp := make([]byte, l.p.reqSize), make([]byte, l.p.respSize)
	r, err := newRawReceiver(l.fd)
	if err != nil {
		return l.fail("setting the receive timeout", err)
	}
	l.y.period = r.yieldPeriod()
	err = l.udpRRLoop(&r, req, rsp)
	r.close()
	l.rrTotals()
	if err != nil {
		return err
	}
	l.udpEnd()
	return nil
}

// udpRRLoop runs transactions until the timer or the count ends it. It
// does not allocate.
func (l *clientLoop) udpRRLoop(r *rawConn, req, rsp []byte) error {
	// The common calls are made in line, as in tcpRRLoop.
	st := &l.st
	fd := uintptr(l.fd)
	for !l.rrDone() {
		t0 := l.rrStart()
		n, errno := rawSyscall6(unix.SYS_SENDTO, fd, uintptr(bufPtr(req)), uintptr(len(req)), unix.MSG_DONTWAIT,
			uintptr(unsafe.Pointer(&l.dst.any)), uintptr(l.dst.len))
		if errno != 0 {
			if _, e := sendtoRest(l.fd, req, &l.dst, n, unix.Errno(errno)); e != 0 {
				if isTransientSend(e) {
					st.failed++
					continue
				}
				return l.fail("sending a request", e)
			}
		}
		// A lost datagram leaves this waiting, as netperf waits, until
		// the timer interrupts it.
		for {
			var got int
			var e unix.Errno
			if r.raw {
				n, errno := rawSyscall6(unix.SYS_RECVFROM, fd, uintptr(bufPtr(rsp)), uintptr(len(rsp)), 0, 0, 0)
				got, e = int(n), unix.Errno(errno)
				if e == unix.EAGAIN || e == unix.EINTR {
					runtime.Gosched() // as rawConn.recv
					got, e = r.recv(rsp)
				}
			} else {
				got, e = r.recv(rsp)
			}
			if e != 0 {
				return l.fail("receiving a response", e)
			}
			if got > 0 {
				break
			}
			if why := l.ph.ended(); why != nil {
				return l.fail("receiving a response", why)
			}
			// An empty datagram is no response: wait on.
		}
		st.trans++
		if st.lat != nil || l.demo != nil {
			l.rrExtras(t0)
		}
		l.y.tick()
	}
	return nil
}

func (l *clientLoop) udpStream() error {
	buf := make([]byte, l.p.sendSize)
	st := &l.st
	var err error
	for !l.ph.stop.Load() && (l.limit == 0 || st.bytesTx < l.limit) {
		var t0 time.Time
		if st.lat != nil {
			t0 = time.Now()
		}
		// The common case in line (see tcpRRLoop).
		m, errno := rawSyscall6(unix.SYS_SENDTO, uintptr(l.fd), uintptr(bufPtr(buf)), uintptr(len(buf)), unix.MSG_DONTWAIT,
			uintptr(unsafe.Pointer(&l.dst.any)), uintptr(l.dst.len))
		n, e := int(m), unix.Errno(errno)
		if e != 0 {
			n, e = sendtoRest(l.fd, buf, &l.dst, m, e)
		}
		if st.lat != nil {
			st.lat.add(time.Since(t0))
		}
		if e != 0 {
			if isTransientSend(e) {
				st.failed++
				continue
			}
			// ECONNREFUSED: the netserver's port is gone (netperf's
			// "send_data: data send error").
			err = l.fail("send_data: data send error", e)
			break
		}
		st.bytesTx += int64(n)
		st.sendCalls++
		if l.demo != nil {
			l.demo.tick(float64(n))
		}
		l.y.tick()
	}
	st.elapsed = time.Since(l.start)
	if err != nil {
		return err
	}
	l.udpEnd()
	return nil
}

// udpEnd sends netperf's end-of-test marker: three empty datagrams.
func (l *clientLoop) udpEnd() {
	for range 3 {
		_, _ = sysSendto(l.fd, nil, &l.dst)
	}
	l.st.lssEnd, l.st.lsrEnd = sockBuf(l.fd)
	l.st.mss, l.st.retrans = -1, -1
}

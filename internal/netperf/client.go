package netperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

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

type client struct {
	cfg    *Config
	kind   testKind
	ctl    net.Conn
	server netip.Addr
	family int32
	local  netip.Addr
	msg    proto.Msg
}

func run(ctx context.Context, cfg *Config) (*Result, error) {
	k, err := lookupTest(cfg.Test)
	if err != nil {
		return nil, err
	}
	// The wire carries sizes as int32; larger ones cannot be honoured and
	// would make the data loops' buffer allocations panic.
	for _, v := range []int{cfg.SendSize, cfg.RecvSize, cfg.ReqSize, cfg.RespSize, cfg.LocalSockBuf, cfg.RemoteSockBuf} {
		if v > math.MaxInt32 || v < math.MinInt32 {
			return nil, fmt.Errorf("netperf: size %d out of range", v)
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
	host := c.cfg.Host
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if lerr != nil || len(ips) == 0 {
			return fmt.Errorf("netperf: resolving %q: %v", host, lerr)
		}
		ip = ips[0]
		for _, a := range ips {
			if c.cfg.Family == 6 && a.Is6() || c.cfg.Family != 6 && a.Is4() {
				ip = a
				break
			}
		}
	}
	ctl, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), strconv.Itoa(c.cfg.Port)))
	if err != nil {
		return fmt.Errorf("netperf: establishing control connection: %w", err)
	}
	c.ctl = ctl
	ra := ctl.RemoteAddr().(*net.TCPAddr).AddrPort()
	la := ctl.LocalAddr().(*net.TCPAddr).AddrPort()
	c.server, c.local = ra.Addr().Unmap(), la.Addr().Unmap()
	c.family = proto.FamilyINET
	if c.server.Is6() {
		c.family = proto.FamilyINET6
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

func (c *client) exchange(m *proto.Msg, timeout time.Duration) error {
	_ = c.ctl.SetDeadline(time.Now().Add(timeout))
	defer c.ctl.SetDeadline(time.Time{})
	if err := proto.ReadMsg(c.ctl, m); err != nil {
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
	lat                  *latencyHist
}

func (c *client) iteration(ctx context.Context, dataPort int) (*Result, int, error) {
	cfg, k := c.cfg, c.kind
	sockType := 1
	if k.udp() {
		sockType = 2
	}
	fam := 4
	if c.family == proto.FamilyINET6 {
		fam = 6
	}
	lss, lsr, err := probeSockBufs(fam, sockType, cfg.LocalSockBuf, cfg.LocalSockBuf)
	if err != nil {
		return nil, 0, fmt.Errorf("netperf: probing socket buffers: %w", err)
	}
	p := resolve(cfg, k, lss, lsr)

	var udp *net.UDPConn
	netperfPort := 0
	if k.udp() {
		laddr := &net.UDPAddr{IP: c.local.AsSlice(), Port: cfg.LocalDataPort}
		var extra func(int)
		if !k.rr {
			extra = setDontRoute
		}
		lc := net.ListenConfig{Control: sockBufControl(cfg.LocalSockBuf, cfg.LocalSockBuf, extra)}
		pc, err := lc.ListenPacket(ctx, "udp", laddr.String())
		if err != nil {
			return nil, 0, fmt.Errorf("netperf: data socket: %w", err)
		}
		udp = pc.(*net.UDPConn)
		defer udp.Close()
		netperfPort = udp.LocalAddr().(*net.UDPAddr).Port
	} else if k.crr {
		netperfPort = cfg.LocalDataPort
	}

	req := buildRequest(cfg, p, c.family, proto.IPWords(c.server), dataPort, netperfPort)
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
	dst := netip.AddrPortFrom(c.server, uint16(rsp.DataPort))

	var cpu0 cpu.Sample
	if cfg.LocalCPU {
		cpu0, _ = cpu.Read()
	}
	var st loopStats
	bind := -1
	if cfg.BindLocalCPU {
		bind = cfg.LocalCPUAffinity
	}
	err = withCPUAffinity(bind, func() error {
		var err error
		if k.udp() {
			st, err = c.udpData(ctx, udp, dst, p)
		} else if k.crr {
			st, err = c.crrData(ctx, dst, p)
		} else {
			st, err = c.tcpData(ctx, dst, p)
		}
		return err
	})
	var cpu1 cpu.Sample
	if cfg.LocalCPU {
		cpu1, _ = cpu.Read()
	}
	if err != nil {
		return nil, 0, err
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
	r := c.compute(p, &rsp, &res, &st, cpu0, cpu1)
	return r, int(rsp.DataPort), nil
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
	}
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

func (c *client) dialer(p params) *net.Dialer {
	var extra func(int)
	if c.cfg.NoDelay {
		extra = setNoDelay
	}
	d := &net.Dialer{Timeout: 30 * time.Second, Control: sockBufControl(c.cfg.LocalSockBuf, c.cfg.LocalSockBuf, extra)}
	if c.cfg.LocalAddr != "" || c.cfg.LocalDataPort != 0 && !c.kind.crr {
		port := 0
		if !c.kind.crr {
			port = c.cfg.LocalDataPort
		}
		d.LocalAddr = &net.TCPAddr{IP: c.local.AsSlice(), Port: port}
	}
	return d
}

func (c *client) endTime(start time.Time) time.Time {
	if c.cfg.Transactions > 0 {
		return start.Add(noDeadline)
	}
	return start.Add(c.cfg.Duration)
}

func timedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

func (c *client) tcpData(ctx context.Context, dst netip.AddrPort, p params) (loopStats, error) {
	var st loopStats
	conn, err := c.dialer(p).DialContext(ctx, "tcp", dst.String())
	if err != nil {
		return st, fmt.Errorf("netperf: data connection: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	start := time.Now()
	end := c.endTime(start)
	limit := c.cfg.Transactions
	switch {
	case c.kind.rr:
		req, rsp := make([]byte, p.reqSize), make([]byte, p.respSize)
		if c.cfg.Latency {
			st.lat = newLatencyHist()
		}
		_ = conn.SetDeadline(end)
		for limit == 0 || st.trans < limit {
			var t0 time.Time
			if st.lat != nil {
				t0 = time.Now()
			}
			if err = rrTransact(conn, req, rsp); err != nil {
				break
			}
			if st.lat != nil {
				st.lat.add(time.Since(t0))
			}
			st.trans++
		}
		st.elapsed = time.Since(start)
		st.sendCalls, st.recvCalls = st.trans, st.trans
		st.bytesTx, st.bytesRx = st.trans*int64(p.reqSize), st.trans*int64(p.respSize)
		if err != nil && !timedOut(err) {
			return st, fmt.Errorf("netperf: TCP_RR transaction: %w", err)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		_ = conn.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, conn)
	case c.kind.clientSends():
		buf := make([]byte, p.sendSize)
		_ = conn.SetWriteDeadline(end)
		for limit == 0 || st.sendCalls < limit {
			n, werr := conn.Write(buf)
			st.bytesTx += int64(n)
			if n > 0 {
				st.sendCalls++
			}
			if werr != nil {
				err = werr
				break
			}
		}
		if err != nil && !timedOut(err) {
			return st, fmt.Errorf("netperf: sending: %w", err)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		_ = conn.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, conn)
		st.elapsed = time.Since(start)
	default:
		buf := make([]byte, p.recvSize)
		_ = conn.SetReadDeadline(end.Add(time.Minute))
		for {
			n, rerr := conn.Read(buf)
			st.bytesRx += int64(n)
			if n > 0 {
				st.recvCalls++
			}
			if rerr != nil {
				if rerr != io.EOF {
					return st, fmt.Errorf("netperf: receiving: %w", rerr)
				}
				break
			}
		}
		st.elapsed = time.Since(start)
	}
	st.lssEnd, st.lsrEnd = sockBufs(conn)
	st.mss, _, _ = tcpInfo(conn)
	return st, nil
}

// rrTransact sends one request and reads the whole response. It does not
// allocate.
func rrTransact(c net.Conn, req, rsp []byte) error {
	if _, err := c.Write(req); err != nil {
		return err
	}
	_, err := io.ReadFull(c, rsp)
	return err
}

func (c *client) crrData(ctx context.Context, dst netip.AddrPort, p params) (loopStats, error) {
	var st loopStats
	d := c.dialer(p)
	req, rsp := make([]byte, p.reqSize), make([]byte, p.respSize)
	var drain [64]byte
	start := time.Now()
	end := c.endTime(start)
	limit := c.cfg.Transactions
	if c.cfg.Latency {
		st.lat = newLatencyHist()
	}
	addr := dst.String()
	for (limit == 0 || st.trans < limit) && time.Now().Before(end) {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		t0 := time.Now()
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return st, fmt.Errorf("netperf: TCP_CRR connect: %w", err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		err = rrTransact(conn, req, rsp)
		if err == nil {
			// Wait for the server's close so it, not us, holds TIME_WAIT.
			_, err = conn.Read(drain[:])
			if err == io.EOF {
				err = nil
			}
		}
		if st.lssEnd == 0 {
			st.lssEnd, st.lsrEnd = sockBufs(conn)
		}
		conn.Close()
		if err != nil {
			return st, fmt.Errorf("netperf: TCP_CRR transaction: %w", err)
		}
		if st.lat != nil {
			st.lat.add(time.Since(t0))
		}
		st.trans++
	}
	st.elapsed = time.Since(start)
	st.sendCalls, st.recvCalls = st.trans, st.trans
	st.bytesTx, st.bytesRx = st.trans*int64(p.reqSize), st.trans*int64(p.respSize)
	return st, nil
}

func (c *client) udpData(ctx context.Context, conn *net.UDPConn, dst netip.AddrPort, p params) (loopStats, error) {
	var st loopStats
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	start := time.Now()
	end := c.endTime(start)
	limit := c.cfg.Transactions
	var err error
	if c.kind.rr {
		req, rsp := make([]byte, p.reqSize), make([]byte, p.respSize)
		if c.cfg.Latency {
			st.lat = newLatencyHist()
		}
		_ = conn.SetDeadline(end)
		for limit == 0 || st.trans < limit {
			var t0 time.Time
			if st.lat != nil {
				t0 = time.Now()
			}
			if err = udpTransact(conn, dst, req, rsp); err != nil {
				break
			}
			if st.lat != nil {
				st.lat.add(time.Since(t0))
			}
			st.trans++
		}
		st.elapsed = time.Since(start)
		st.sendCalls, st.recvCalls = st.trans, st.trans
		st.bytesTx, st.bytesRx = st.trans*int64(p.reqSize), st.trans*int64(p.respSize)
	} else {
		buf := make([]byte, p.sendSize)
		_ = conn.SetWriteDeadline(end)
		for limit == 0 || st.sendCalls < limit {
			n, werr := conn.WriteToUDPAddrPort(buf, dst)
			if werr != nil {
				if isTransientSendErr(werr) {
					st.failed++
					continue
				}
				err = werr
				break
			}
			st.bytesTx += int64(n)
			st.sendCalls++
		}
		st.elapsed = time.Since(start)
	}
	if err != nil && !timedOut(err) {
		return st, fmt.Errorf("netperf: %s: %w", c.kind.name, err)
	}
	// Three empty datagrams tell netserver the test is over.
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	for range 3 {
		_, _ = conn.WriteToUDPAddrPort(nil, dst)
	}
	st.lssEnd, st.lsrEnd = sockBufs(conn)
	return st, nil
}

// udpTransact sends one request datagram and waits for a response from the
// server. It does not allocate.
func udpTransact(c *net.UDPConn, dst netip.AddrPort, req, rsp []byte) error {
	if _, err := c.WriteToUDPAddrPort(req, dst); err != nil {
		return err
	}
	_, _, err := c.ReadFromUDPAddrPort(rsp)
	return err
}

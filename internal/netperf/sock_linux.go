package netperf

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The data phase runs on plain blocking sockets driven by direct system
// calls, as the C netperf does, rather than through the net package: a
// Go net.Conn costs an EAGAIN read, an epoll wait and a goroutine wake-up
// per blocked call, which more than doubled the CPU per transaction of
// the request/response tests. A blocked system call parks only its own
// thread; the Go scheduler leaves it alone while other processors are
// idle.
//
// Ending a blocked call: netperf's SIGALRM interrupts whatever call is
// blocked when the test's time is up. Here a timer sets the loop's stop
// flag, which each iteration reads, and a second one shuts the sockets
// down a little later if a call is still blocked (a lost datagram, a
// silent peer); an abort (lost control connection, cancelled context,
// server shutdown) shuts them down at once. Shutting a socket down wakes
// a call blocked on it, which close alone would not. The sockets carry
// no SO_RCVTIMEO/SO_SNDTIMEO: a blocking call with a timeout arms and
// cancels a kernel timer every time, which measurably slowed every
// transaction. Sockets are closed only by the goroutine that owns them,
// after its loop has returned, so a descriptor number is never reused
// under a call still using it.

// rawSockaddr is a socket address in the kernel's layout, built once so
// the loops pass it to sendto without converting or allocating.
type rawSockaddr struct {
	any unix.RawSockaddrAny
	len uint32
}

func toRaw(ap netip.AddrPort) rawSockaddr {
	var r rawSockaddr
	a := ap.Addr()
	if a.Is4() || a.Is4In6() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.any))
		sa.Family = unix.AF_INET
		sa.Addr = a.Unmap().As4()
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(ap.Port()>>8), byte(ap.Port())
		r.len = unix.SizeofSockaddrInet4
		return r
	}
	sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&r.any))
	sa.Family = unix.AF_INET6
	sa.Addr = a.As16()
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(ap.Port()>>8), byte(ap.Port())
	r.len = unix.SizeofSockaddrInet6
	return r
}

func fromRaw(r *rawSockaddr) netip.AddrPort {
	switch r.any.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.any))
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(p[0])<<8|uint16(p[1]))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&r.any))
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(p[0])<<8|uint16(p[1]))
	}
	return netip.AddrPort{}
}

// sockOpts are the options a data socket gets at creation, before bind and
// connect, as netperf's create_data_socket sets them.
type sockOpts struct {
	sndBuf, rcvBuf int  // SO_SNDBUF/SO_RCVBUF when > 0
	noDelay        bool // TCP_NODELAY (-D)
	dontRoute      bool // SO_DONTROUTE (UDP_STREAM)
	recvErr        bool // IP_RECVERR: report ICMP errors and ENOBUFS on unconnected UDP
	reuseAddr      bool
}

// newDataSocket opens a blocking socket for family 4 or 6.
func newDataSocket(family int, stream bool, o sockOpts) (int, error) {
	af := unix.AF_INET
	if family == 6 {
		af = unix.AF_INET6
	}
	typ := unix.SOCK_DGRAM
	if stream {
		typ = unix.SOCK_STREAM
	}
	fd, err := unix.Socket(af, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := applyOpts(fd, af, o); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func applyOpts(fd, af int, o sockOpts) error {
	var err error
	set := func(level, opt, v int) {
		if err == nil {
			err = unix.SetsockoptInt(fd, level, opt, v)
		}
	}
	if o.sndBuf > 0 {
		set(unix.SOL_SOCKET, unix.SO_SNDBUF, o.sndBuf)
	}
	if o.rcvBuf > 0 {
		set(unix.SOL_SOCKET, unix.SO_RCVBUF, o.rcvBuf)
	}
	if o.reuseAddr {
		set(unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	}
	if o.noDelay {
		set(unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	if o.dontRoute {
		set(unix.SOL_SOCKET, unix.SO_DONTROUTE, 1)
	}
	if o.recvErr {
		if af == unix.AF_INET6 {
			set(unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
		} else {
			set(unix.IPPROTO_IP, unix.IP_RECVERR, 1)
		}
	}
	return err
}

// setPort stores a port in the address.
func (r *rawSockaddr) setPort(port uint16) {
	// The port is at the same offset in sockaddr_in and sockaddr_in6.
	sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.any))
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port)
}

// bindRaw binds fd to an address in the kernel's layout.
func bindRaw(fd int, sa *rawSockaddr) unix.Errno {
	_, _, e := syscall.Syscall(unix.SYS_BIND, uintptr(fd), uintptr(unsafe.Pointer(&sa.any)), uintptr(sa.len))
	return e
}

// crrPorts hands out TCP_CRR's local ports as netperf's
// pick_next_port_number does: one after another through
// [crrPortMin, crrPortMax) from a random start, never the server's port.
type crrPorts struct {
	next, avoid uint16
}

// netperf's default client_port_min and client_port_max.
const crrPortMin, crrPortMax = 5000, 65535

func newCRRPorts(avoid uint16) crrPorts {
	return crrPorts{next: uint16(crrPortMin + rand.IntN(crrPortMax-crrPortMin)), avoid: avoid}
}

func (c *crrPorts) take() uint16 {
	p := c.next
	if p == c.avoid {
		p++
	}
	if p >= crrPortMax || p < crrPortMin {
		p = crrPortMin
	}
	c.next = p + 1
	return p
}

// bind binds fd to the next free port at sa's address. A port some other
// socket holds is skipped (netperf would stop); after a whole cycle of
// ports in use it gives up with EADDRINUSE.
func (c *crrPorts) bind(fd int, sa *rawSockaddr) unix.Errno {
	for range crrPortMax - crrPortMin {
		sa.setPort(c.take())
		e := bindRaw(fd, sa)
		if e != unix.EADDRINUSE {
			return e
		}
	}
	return unix.EADDRINUSE
}

func bindTo(fd int, ap netip.AddrPort) error {
	sa := toRaw(ap)
	_, _, e := syscall.Syscall(unix.SYS_BIND, uintptr(fd), uintptr(unsafe.Pointer(&sa.any)), uintptr(sa.len))
	if e != 0 {
		return e
	}
	return nil
}

// connectTo connects a blocking socket.
func connectTo(fd int, sa *rawSockaddr) unix.Errno {
	for {
		_, _, e := syscall.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa.any)), uintptr(sa.len))
		if e != unix.EINTR {
			return e
		}
	}
}

func localAddr(fd int) netip.AddrPort {
	var sa rawSockaddr
	sa.len = unix.SizeofSockaddrAny
	_, _, e := syscall.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&sa.any)), uintptr(unsafe.Pointer(&sa.len)))
	if e != 0 {
		return netip.AddrPort{}
	}
	return fromRaw(&sa)
}

// The system call wrappers below return the errno rather than an error so
// the loops never box a value; EINTR is retried.

// sysRead receives on a socket. recvfrom, as netperf's recv, goes straight
// to the socket; read takes the VFS path (position lock, fsnotify).
func sysRead(fd int, b []byte) (int, unix.Errno) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	for {
		n, _, e := syscall.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(p), uintptr(len(b)), 0, 0, 0)
		if e != unix.EINTR {
			if e != 0 {
				return 0, e
			}
			return int(n), 0
		}
	}
}

// Sends first try without blocking, as a raw system call: a send that
// finds room in the socket buffer (most of them) then skips the Go
// scheduler's bookkeeping around a call that might block (entersyscall and
// exitsyscall), which on a 1 KB send is several per cent of its cost. Only
// a send that would block (EAGAIN) is made again as an ordinary, blocking
// call, which lets the scheduler run other goroutines meanwhile: a raw
// call must never block, or it would hold its processor (and stop the
// world for a garbage collection) for as long as the peer keeps it waiting.

// rawSendMax is the largest stream send tried raw first. The bookkeeping
// saved is a fixed cost, lost in the copy of a larger one, and a large
// send is the more likely to find room for only part of itself, which
// would cost a second call for the rest.
const rawSendMax = 8 << 10

// sysWrite sends on a connected socket. MSG_NOSIGNAL turns a peer's reset
// into EPIPE rather than a SIGPIPE. On a blocking socket it returns once
// all of b is sent, or with the bytes sent before an error.
func sysWrite(fd int, b []byte) (int, unix.Errno) {
	if len(b) > rawSendMax {
		return sendBlocking(fd, bufPtr(b), len(b))
	}
	n, e := rawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(bufPtr(b)), uintptr(len(b)), unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, 0, 0)
	return sendRest(fd, b, n, unix.Errno(e))
}

// sendRest completes sysWrite after its raw attempt returned n, e (the
// request/response loops make that attempt in line).
func sendRest(fd int, b []byte, n uintptr, e unix.Errno) (int, unix.Errno) {
	sent := 0
	switch {
	case e == 0 && int(n) == len(b):
		return int(n), 0
	case e == 0:
		sent = int(n) // part of b: block for the rest
	case e != unix.EAGAIN && e != unix.EINTR:
		return 0, e
	}
	for sent < len(b) {
		// A blocking send returns early only if a signal interrupts
		// it after some of b went.
		m, e := sendBlocking(fd, unsafe.Add(bufPtr(b), sent), len(b)-sent)
		if e != 0 {
			return sent, e
		}
		sent += m
	}
	return sent, 0
}

// bufPtr is the address of b's first byte, nil for an empty b.
func bufPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// sendBlocking sends n bytes at p with an ordinary (blocking) call.
func sendBlocking(fd int, p unsafe.Pointer, n int) (int, unix.Errno) {
	for {
		m, _, e := syscall.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(n), unix.MSG_NOSIGNAL, 0, 0)
		if e != unix.EINTR {
			if e != 0 {
				return 0, e
			}
			return int(m), 0
		}
	}
}

// sysSendto sends one datagram to an address.
func sysSendto(fd int, b []byte, to *rawSockaddr) (int, unix.Errno) {
	n, e := rawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(bufPtr(b)), uintptr(len(b)), unix.MSG_DONTWAIT,
		uintptr(unsafe.Pointer(&to.any)), uintptr(to.len))
	return sendtoRest(fd, b, to, n, unix.Errno(e))
}

// sendtoRest completes sysSendto after its raw attempt returned n, e (the
// request/response loops make that attempt in line).
func sendtoRest(fd int, b []byte, to *rawSockaddr, n uintptr, e unix.Errno) (int, unix.Errno) {
	if e == 0 {
		return int(n), 0
	}
	if e != unix.EAGAIN && e != unix.EINTR {
		return 0, e
	}
	for {
		n, _, e := syscall.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(bufPtr(b)), uintptr(len(b)), 0,
			uintptr(unsafe.Pointer(&to.any)), uintptr(to.len))
		if e != unix.EINTR {
			if e != 0 {
				return 0, e
			}
			return int(n), 0
		}
	}
}

// sysRecvfrom receives one datagram and stores its source in from.
func sysRecvfrom(fd int, b []byte, from *rawSockaddr) (int, unix.Errno) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	for {
		from.len = unix.SizeofSockaddrAny
		n, _, e := syscall.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(p), uintptr(len(b)), 0,
			uintptr(unsafe.Pointer(&from.any)), uintptr(unsafe.Pointer(&from.len)))
		if e != unix.EINTR {
			if e != 0 {
				return 0, e
			}
			return int(n), 0
		}
	}
}

func sysAccept(fd int) (int, unix.Errno) {
	for {
		nfd, _, e := syscall.Syscall6(unix.SYS_ACCEPT4, uintptr(fd), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
		if e != unix.EINTR {
			if e != 0 {
				return -1, e
			}
			return int(nfd), 0
		}
	}
}

// A stream receiver (TCP_STREAM's netserver, TCP_MAERTS's netperf,
// UDP_STREAM's netserver) blocks in every receive, most of them briefly,
// and a stream sender (TCP_STREAM's netperf, TCP_MAERTS's netserver) in
// every send that finds the socket buffer full.
// Made as an ordinary system call, each receive tells the Go scheduler
// its thread may block (entersyscall, exitsyscall), and the runtime's
// monitor (sysmon) keeps watching it: it wakes every 20 µs to 10 ms to
// see whether a processor has sat in a call long enough to be taken, and
// each processor it does take (a receive blocked 10 ms on a loaded
// machine) sends it back to 20 µs for a millisecond or more. Measured on
// a Go netserver receiving TCP_STREAM 16K: 1 300 monitor sleeps a second
// and 3–4× C's context switches per KB.
//
// A rawConn receives (or sends) with raw system calls instead, which the
// scheduler does not see: the goroutine counts as running, the monitor
// has nothing to take and backs off to its 10 ms sleep. A raw call that
// blocks holds its processor, so the wait is bounded: the socket gets an
// SO_RCVTIMEO (SO_SNDTIMEO) while the loop uses it, and a call that
// times out (EAGAIN) or is interrupted by a signal (EINTR: with a socket
// timeout the kernel does not restart it) yields before it is made
// again. That is what lets a stop-the-world (a garbage collection)
// through: the runtime's preemption signal interrupts the call, and
// Gosched hands over the processor; the loops around it do not allocate,
// so a collection during a test is rare anyway. The test's end still
// comes by shutdown (the late timer, an abort), which wakes the call.
//
// The request/response loops (both ends of TCP_RR and UDP_RR) receive
// through a rawConn too, for another reason: each transaction blocks once
// in its receive, and as an ordinary call that receive went through
// entersyscall and exitsyscall, whose code and data (the goroutine's,
// thread's and processor's state) are several more pages touched per
// transaction, at a TLB miss each (see clientLoop.tcpRRLoop). Raw, with the
// timeout's kernel timer armed in each blocking receive instead, a Go→Go
// TCP_RR transaction cost 2–3 % less CPU (docs/results/2026-12-03-np10).
//
// Only GOMAXPROCS-1 loops at a time block in raw calls (SpareProc makes
// sure there are at least two processors): the last processor is left
// for everything else, the test's timers, the control connections, the
// other loops of a netserver serving several tests, which would
// otherwise wait for a raw loop's yield or timeout. A loop that finds
// no slot makes ordinary calls, as before.
type rawConn struct {
	fd  int
	opt int  // SO_RCVTIMEO or SO_SNDTIMEO, while raw
	raw bool // calls are raw; false: ordinary calls (sysRead, sysWrite)
}

// rawCallTimeout bounds how long a raw call holds its processor when
// nothing moves (and how long a stop-the-world waits for it if the
// preemption signal is lost). A timeout costs a wake-up, so not much
// shorter; data streams, so it is rarely reached during a test.
const rawCallTimeout = 20 * time.Millisecond

// rawLoops counts the loops making raw calls.
var rawLoops atomic.Int32

// takeRawSlot reports whether one more loop may make raw calls, and
// counts it if so.
func takeRawSlot() bool {
	limit := int32(runtime.GOMAXPROCS(0) - 1)
	for {
		n := rawLoops.Load()
		if n >= limit {
			return false
		}
		if rawLoops.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// newRawReceiver prepares fd for a receive loop and newRawSender for a
// send loop: raw calls if a slot is free, ordinary ones otherwise. Every
// receive (send) on fd must go through the rawConn until close.
func newRawReceiver(fd int) (rawConn, error) { return newRawConn(fd, unix.SO_RCVTIMEO) }

func newRawSender(fd int) (rawConn, error) { return newRawConn(fd, unix.SO_SNDTIMEO) }

func newRawConn(fd, opt int) (rawConn, error) {
	c := rawConn{fd: fd, opt: opt}
	if !takeRawSlot() {
		return c, nil
	}
	if err := setSockTimeout(fd, opt, rawCallTimeout); err != nil {
		rawLoops.Add(-1)
		return rawConn{fd: -1}, err
	}
	c.raw = true
	return c, nil
}

// close takes the timeout off again, for the blocking calls that follow
// (netperf's closing handshake waits for the peer's close), and frees
// the slot. It may be called more than once.
func (c *rawConn) close() {
	if c.raw {
		_ = setSockTimeout(c.fd, c.opt, 0)
		rawLoops.Add(-1)
		c.raw = false
	}
}

// yieldPeriod is the loop's yielder period: see yieldEveryRaw.
func (c *rawConn) yieldPeriod() time.Duration {
	if c.raw {
		return yieldEveryRaw
	}
	return yieldEvery
}

func setSockTimeout(fd, opt int, d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv)
}

// recv receives into b as sysRead does.
func (c *rawConn) recv(b []byte) (int, unix.Errno) {
	if !c.raw {
		return sysRead(c.fd, b)
	}
	for {
		n, e := rawSyscall6(unix.SYS_RECVFROM, uintptr(c.fd), uintptr(bufPtr(b)), uintptr(len(b)), 0, 0, 0)
		switch unix.Errno(e) {
		case 0:
			return int(n), 0
		case unix.EAGAIN, unix.EINTR:
			// The timeout, or a signal (perhaps the runtime asking
			// for the processor): let the scheduler have it.
			runtime.Gosched()
		default:
			return 0, unix.Errno(e)
		}
	}
}

// recvRest completes recvFull after a raw attempt at receiving b returned
// n, e (the request/response loops make that attempt in line).
func (c *rawConn) recvRest(b []byte, n uintptr, e unix.Errno) (int, unix.Errno) {
	got := 0
	switch e {
	case 0:
		if n == 0 {
			return 0, 0
		}
		got = int(n)
	case unix.EAGAIN, unix.EINTR:
		runtime.Gosched()
	default:
		return 0, e
	}
	m, e := c.recvFull(b[got:])
	return got + m, e
}

// recvFull receives len(b) bytes, as readFull does.
func (c *rawConn) recvFull(b []byte) (int, unix.Errno) {
	if !c.raw {
		return readFull(c.fd, b)
	}
	n := 0
	for n < len(b) {
		m, e := c.recv(b[n:])
		if e != 0 {
			return n, e
		}
		if m == 0 {
			return n, 0
		}
		n += m
	}
	return n, 0
}

// recvFrom receives one datagram as sysRecvfrom does.
func (c *rawConn) recvFrom(b []byte, from *rawSockaddr) (int, unix.Errno) {
	if !c.raw {
		return sysRecvfrom(c.fd, b, from)
	}
	for {
		from.len = unix.SizeofSockaddrAny
		n, e := rawSyscall6(unix.SYS_RECVFROM, uintptr(c.fd), uintptr(bufPtr(b)), uintptr(len(b)), 0,
			uintptr(unsafe.Pointer(&from.any)), uintptr(unsafe.Pointer(&from.len)))
		switch unix.Errno(e) {
		case 0:
			return int(n), 0
		case unix.EAGAIN, unix.EINTR:
			runtime.Gosched()
		default:
			return 0, unix.Errno(e)
		}
	}
}

// send sends all of b as sysWrite does: it returns len(b), or the bytes
// sent before an error. A raw send cut short by the timeout or a signal
// (part of b sent, or EAGAIN/EINTR with none) yields and goes on. Raw,
// a full buffer costs one call, not a failed non-blocking one and a
// blocking one after it.
func (c *rawConn) send(b []byte) (int, unix.Errno) {
	if !c.raw {
		return sysWrite(c.fd, b)
	}
	sent := 0
	for sent < len(b) {
		n, e := rawSyscall6(unix.SYS_SENDTO, uintptr(c.fd), uintptr(unsafe.Pointer(&b[sent])), uintptr(len(b)-sent), unix.MSG_NOSIGNAL, 0, 0)
		switch unix.Errno(e) {
		case 0:
			sent += int(n)
			if sent < len(b) {
				runtime.Gosched()
			}
		case unix.EAGAIN, unix.EINTR:
			runtime.Gosched()
		default:
			return sent, unix.Errno(e)
		}
	}
	return sent, 0
}

// sendRest completes send after a raw attempt at sending b returned n, e
// (the stream loops make that attempt in line).
func (c *rawConn) sendRest(b []byte, n uintptr, e unix.Errno) (int, unix.Errno) {
	sent := 0
	switch e {
	case 0:
		sent = int(n)
	case unix.EAGAIN, unix.EINTR:
	default:
		return 0, e
	}
	runtime.Gosched() // as send
	m, e := c.send(b[sent:])
	return sent + m, e
}

// recvAfter completes recv after a raw attempt at receiving b failed
// with e (the stream loops make that attempt in line).
func (c *rawConn) recvAfter(b []byte, e unix.Errno) (int, unix.Errno) {
	if e == unix.EAGAIN || e == unix.EINTR {
		runtime.Gosched() // as recv
		return c.recv(b)
	}
	return 0, e
}

// readFull reads len(b) bytes, as netperf's recv loop does for the
// request/response tests. It returns the bytes read and the errno of the
// call that stopped it; a clean end of stream before b is full returns
// n < len(b) with errno 0.
func readFull(fd int, b []byte) (int, unix.Errno) {
	n := 0
	for n < len(b) {
		m, e := sysRead(fd, b[n:])
		if e != 0 {
			return n, e
		}
		if m == 0 {
			return n, 0
		}
		n += m
	}
	return n, 0
}

// sockBuf reads SO_SNDBUF and SO_RCVBUF.
func sockBuf(fd int) (snd, rcv int) {
	snd, rcv = -1, -1
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
		snd = v
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
		rcv = v
	}
	return snd, rcv
}

// tcpFacts returns a TCP socket's MSS, retransmissions and congestion
// control.
func tcpFacts(fd int) (mss, retrans int, cc string) {
	mss, retrans = -1, -1
	if v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_MAXSEG); err == nil {
		mss = v
	}
	if ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
		retrans = int(ti.Total_retrans)
	}
	if s, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION); err == nil {
		cc = s
	}
	return
}

// probeSockBufs reports the buffer sizes a fresh socket of this kind gets
// (after applying the requested sizes).
func probeSockBufs(family, sockType int, snd, rcv int) (int, int, error) {
	fd, err := newDataSocket(family, sockType == 1, sockOpts{sndBuf: snd, rcvBuf: rcv})
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	s, r := sockBuf(fd)
	return s, r, nil
}

// fdSet holds the data sockets of one test so that the test's timer and
// an abort can shut them down from other goroutines. Its mutex orders a
// shutdown against the owner's close: a descriptor leaves the set before
// it is closed.
type fdSet struct {
	mu      sync.Mutex // guards fds; aborted is set under it
	fds     []fdEntry
	aborted atomic.Bool
}

type fdEntry struct {
	fd    int
	dgram bool
}

// add records fd (dgram for a UDP socket); it reports false, after
// shutting fd down, when the test has already been aborted.
func (s *fdSet) add(fd int, dgram bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aborted.Load() {
		_ = unix.Shutdown(fd, unix.SHUT_RDWR)
		return false
	}
	s.fds = append(s.fds, fdEntry{fd, dgram})
	return true
}

// remove forgets fd, which its owner is about to close.
func (s *fdSet) remove(fd int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.fds {
		if e.fd == fd {
			s.fds = append(s.fds[:i], s.fds[i+1:]...)
			return
		}
	}
}

// closeFd removes fd from the set and closes it.
func (s *fdSet) closeFd(fd int) {
	s.remove(fd)
	unix.Close(fd)
}

// abort shuts every recorded socket down, waking calls blocked on them,
// and marks the test aborted.
func (s *fdSet) abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted.Store(true)
	for _, e := range s.fds {
		_ = unix.Shutdown(e.fd, unix.SHUT_RDWR)
	}
}

// interrupt shuts the recorded sockets down without marking an abort: the
// test's time is up and a call may still be blocked. UDP sockets are only
// shut for receiving, so netperf's end-of-test datagrams can still go.
func (s *fdSet) interrupt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.fds {
		how := unix.SHUT_RDWR
		if e.dgram {
			how = unix.SHUT_RD
		}
		_ = unix.Shutdown(e.fd, how)
	}
}

// interruptFd shuts down fd alone, if it is still recorded.
func (s *fdSet) interruptFd(fd int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.fds {
		if e.fd == fd {
			_ = unix.Shutdown(fd, unix.SHUT_RDWR)
			return
		}
	}
}

// isTransientSend reports datagram send errors netperf counts as failed
// sends instead of ending the test (send_data's ENOBUFS and ENOMEM).
func isTransientSend(e unix.Errno) bool { return e == unix.ENOBUFS || e == unix.ENOMEM }

func isTemporaryAccept(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ECONNABORTED)
}

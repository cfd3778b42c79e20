package netperf

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// sockBufControl returns a Control function for net.Dialer/ListenConfig
// that sets SO_SNDBUF/SO_RCVBUF (when > 0) before bind/connect, as netperf
// does, so the window scale is negotiated with the requested size.
func sockBufControl(snd, rcv int, extra func(fd int)) func(string, string, syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if snd > 0 {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, snd)
			}
			if rcv > 0 && serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcv)
			}
			if extra != nil {
				extra(int(fd))
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// sockBufs reads SO_SNDBUF and SO_RCVBUF of a connection or listener.
func sockBufs(c any) (snd, rcv int) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, -1
	}
	snd, rcv = -1, -1
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
			snd = v
		}
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
			rcv = v
		}
	})
	return snd, rcv
}

// probeSockBufs reports the buffer sizes a fresh socket of this kind gets
// (after applying the requested sizes), which netperf needs before it sends
// the request. The probe runs in the calling thread's network namespace.
func probeSockBufs(family, sockType int, snd, rcv int) (int, int, error) {
	af := unix.AF_INET
	if family == 6 {
		af = unix.AF_INET6
	}
	fd, err := unix.Socket(af, sockType|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	if snd > 0 {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, snd)
	}
	if rcv > 0 {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcv)
	}
	s, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err != nil {
		return 0, 0, err
	}
	r, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	return s, r, err
}

// tcpInfo returns the MSS, retransmissions and congestion control of a TCP
// connection.
func tcpInfo(c net.Conn) (mss, retrans int, cc string) {
	mss, retrans = -1, -1
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG); err == nil {
			mss = v
		}
		if ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			retrans = int(ti.Total_retrans)
		}
		if s, err := unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION); err == nil {
			cc = s
		}
	})
	return
}

func setNoDelay(fd int)   { _ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) }
func setDontRoute(fd int) { _ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DONTROUTE, 1) }

// isTransientSendErr reports datagram send errors netperf counts as failed
// sends instead of ending the test.
func isTransientSendErr(err error) bool {
	return errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.EAGAIN)
}

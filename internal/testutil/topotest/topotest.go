//go:build linux

// Package topotest sets up the bench topology (sluice/internal/bench/topo)
// for privileged tests and looks at what crosses its wire.
package topotest

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/bench/topo"
	"sluice/internal/testutil"
)

// New builds a bench topology whose names start with prefix (keep it
// distinct per package: packages' tests run in parallel) and tears it
// down when the test ends, failing the test if that leaves anything
// behind. It needs root (testutil.RequireRoot).
func New(t testing.TB, prefix string) *topo.Topo {
	t.Helper()
	testutil.RequireRoot(t)
	tp, err := topo.New(context.Background(), topo.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tp.Close(); err != nil {
			t.Error(err)
		}
	})
	return tp
}

// ConnectTOS opens a TCP connection from the SUT to the peer and returns
// the TOS byte of the first TCP segment the peer received from it, read
// with a raw socket in the peer's namespace. The kernel verifies the IPv4
// checksum before delivering to raw sockets, so a bad checksum update
// shows up as no packet at all (an error after two seconds).
func ConnectTOS(t testing.TB, tp *topo.Topo) (byte, error) {
	t.Helper()
	var raw int
	var ln net.Listener
	if err := tp.Do(topo.Peer, func() (err error) {
		raw, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			return err
		}
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(topo.PeerAddr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(raw)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	if err := unix.SetsockoptTimeval(raw, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	if err := tp.Do(topo.SUT, func() error {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.Dial("tcp4", ln.Addr().String())
		if err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		return 0, err
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	buf := make([]byte, 1500)
	for {
		n, _, err := unix.Recvfrom(raw, buf, 0)
		if err != nil {
			return 0, err
		}
		if n < 24 {
			continue
		}
		ihl := int(buf[0]&0x0f) * 4
		if n >= ihl+4 && uint16(buf[ihl+2])<<8|uint16(buf[ihl+3]) == port {
			return buf[1], nil
		}
	}
}

//go:build linux

package topo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"sluice/internal/testutil"
)

// sendFor sends from the SUT to the peer over TCP for d and returns the
// rate the peer received in bits/s.
func sendFor(t *testing.T, tp *Topo, d time.Duration) float64 {
	t.Helper()
	var ln net.Listener
	if err := tp.Do(Peer, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(PeerAddr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	var conn net.Conn
	if err := tp.Do(SUT, func() (err error) {
		conn, err = net.Dial("tcp", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	start := time.Now()
	for time.Since(start) < d {
		if _, err := conn.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	n := <-got
	// The receiver's count over the sender's time: what was queued
	// when the sender stopped still arrives, at most the queue's worth.
	return float64(n) * 8 / time.Since(start).Seconds()
}

// TestPrivilegedShape shapes the test bed to each link profile and back:
// both veth ends carry the bench's token bucket at the profile's rate,
// the unshaped profile removes it, shaping again is a no-op, and the
// rate a TCP stream gets through a 100BaseT link stays at or under the
// line rate (a shaper caps; a busy machine can only send less, so the
// bound holds whatever the load).
func TestPrivilegedShape(t *testing.T) {
	testutil.RequireRoot(t)
	tp, err := New(context.Background(), Options{Prefix: "slbshape"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	for _, p := range []Profile{Eth100, GigE, TenGigE, GigE, Veth} {
		if err := tp.Shape(p); err != nil {
			t.Fatalf("Shape(%s): %v", p.Name, err)
		}
		for _, r := range []Role{SUT, Peer} {
			bits, foreign, err := tp.Shaping(r)
			if err != nil || foreign != "" || bits != p.BitsPerSec {
				t.Errorf("%s after Shape(%s): %d bit/s, foreign %q, %v; want %d", r, p.Name, bits, foreign, err, p.BitsPerSec)
			}
		}
	}
	if err := tp.Shape(Eth100); err != nil {
		t.Fatal(err)
	}
	if rate := sendFor(t, tp, 1500*time.Millisecond); rate > 1.1*float64(Eth100.BitsPerSec) || rate <= 0 {
		t.Errorf("TCP through a 100BaseT profile: %.1f Mbit/s, want at most the line rate (+10 %% for the queue drained after the timer)", rate/1e6)
	}
	// A configuration's own root qdisc (IPQoS's HTB) is left alone.
	err = tp.Do(SUT, func() error {
		l, err := netlink.LinkByName(tp.Host(SUT).Link)
		if err != nil {
			return err
		}
		return netlink.QdiscReplace(netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(0x5351, 0), Parent: netlink.HANDLE_ROOT}))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Shape(GigE); err != nil {
		t.Fatal(err)
	}
	if bits, foreign, err := tp.Shaping(SUT); err != nil || foreign != "htb" || bits != 0 {
		t.Errorf("SUT with a configuration's HTB: %d bit/s, foreign %q, %v; want the HTB kept", bits, foreign, err)
	}
	if bits, _, _ := tp.Shaping(Peer); bits != GigE.BitsPerSec {
		t.Errorf("peer: %d bit/s, want %d", bits, GigE.BitsPerSec)
	}
}

// TestPrivilegedShapeRemote: a remote test bed refuses shaped profiles
// (the link is a real one) and accepts the unshaped one.
func TestPrivilegedShapeRemote(t *testing.T) {
	testutil.RequireRoot(t)
	tp, err := New(context.Background(), Options{Prefix: "slbshr", Remote: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	if err := tp.Shape(GigE); err == nil {
		t.Error("a remote link was shaped")
	}
	if err := tp.Shape(Veth); err != nil {
		t.Error(err)
	}
}

// TestPrivilegedGateway builds the gateway topology and checks that the
// client reaches the service address through the forwarding gateway,
// that the gateway's Host names its two links, and that Close removes
// the three namespaces.
func TestPrivilegedGateway(t *testing.T) {
	testutil.RequireRoot(t)
	gw, err := NewGateway("slbgwt")
	if err != nil {
		t.Fatal(err)
	}
	names := gw.NetNSNames()
	defer gw.Close()
	if len(names) != 3 {
		t.Fatalf("namespaces %v, want three", names)
	}
	g := gw.Host(GWGateway)
	if g.Link == "" || g.Inside == "" || g.Link == g.Inside || g.Index == 0 || g.Role != SUT {
		t.Errorf("gateway host %+v", g)
	}
	linkHasNoIPv6(t, g, g.Link)
	linkHasNoIPv6(t, g, g.Inside)
	for _, r := range []GWRole{GWClient, GWServer} {
		h := gw.Host(r)
		linkHasNoIPv6(t, h, h.Link)
	}
	var ln net.Listener
	if err := gw.Host(GWServer).Do(func() (err error) {
		ln, err = net.Listen("tcp", "0.0.0.0:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			peer <- err.Error()
			return
		}
		peer <- c.RemoteAddr().String()
		c.Close()
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	err = gw.Host(GWClient).Do(func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", ServiceAddr, port), 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		t.Fatalf("client to %s through the gateway: %v", ServiceAddr, err)
	}
	if got := <-peer; got[:len(ClientAddr.String())] != ClientAddr.String() {
		t.Errorf("server saw %s, want the client's own address (plain forwarding)", got)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(NetNSDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s left", n)
		}
	}
}

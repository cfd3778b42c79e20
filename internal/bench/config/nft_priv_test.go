//go:build linux

package config

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"sluice/internal/bench/topo"
	"sluice/internal/testutil"
)

func newTopo(t *testing.T) *topo.Topo {
	t.Helper()
	testutil.RequireRoot(t)
	tp, err := topo.New(context.Background(), topo.Options{Prefix: "slbcfg"})
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

// tablesIn lists the nftables tables of a host's namespace.
func tablesIn(t *testing.T, tp *topo.Topo, r topo.Role) map[string]int {
	t.Helper()
	fd, err := tp.NSHandle(r)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(fd))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, tb := range ts {
		chains, err := c.ListChainsOfTableFamily(tb.Family)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ch := range chains {
			if ch.Table.Name != tb.Name {
				continue
			}
			rs, err := c.GetRules(tb, ch)
			if err != nil {
				t.Fatal(err)
			}
			n += len(rs)
		}
		out[tb.Name] = n
	}
	return out
}

func TestPrivilegedNFTApply(t *testing.T) {
	tp := newTopo(t)
	for _, tc := range []struct {
		spec  NFTSpec
		rules int
	}{
		{NFTSpec{}, 0},
		{NFTSpec{Stateful: true}, 8},
		{NFTSpec{Stateless: true, NoMatch: 1000}, 1006},
	} {
		n := NewNFT(tc.spec)
		if err := n.Apply(context.Background(), tp.Host(topo.SUT)); err != nil {
			t.Fatalf("%+v: %v", tc.spec, err)
		}
		if got := tablesIn(t, tp, topo.SUT); len(got) != 1 || got[NFTTable] != tc.rules {
			t.Errorf("%+v: tables in SUT %v, want %s with %d rules", tc.spec, got, NFTTable, tc.rules)
		}
		if got := tablesIn(t, tp, topo.Peer); len(got) != 0 {
			t.Errorf("tables in peer: %v, want none", got)
		}
		// Traffic still flows through the accepting rule sets.
		if _, err := connectTOS(t, tp); err != nil {
			t.Errorf("%+v: %v", tc.spec, err)
		}
		if err := n.Remove(); err != nil {
			t.Fatal(err)
		}
		if got := tablesIn(t, tp, topo.SUT); len(got) != 0 {
			t.Errorf("after Remove: tables %v", got)
		}
	}
}

func TestPrivilegedNFTDSCP(t *testing.T) {
	tp := newTopo(t)
	if tos, err := connectTOS(t, tp); err != nil || tos>>2 != 0 {
		t.Fatalf("without marking: TOS %#x, %v; want DSCP 0", tos, err)
	}
	n := NewNFT(NFTSpec{Mark: true, DSCP: 46})
	if err := n.Apply(context.Background(), tp.Host(topo.SUT)); err != nil {
		t.Fatal(err)
	}
	defer n.Remove()
	tos, err := connectTOS(t, tp)
	if err != nil {
		t.Fatal(err)
	}
	if tos>>2 != 46 {
		t.Errorf("DSCP on the wire: got %d, want 46", tos>>2)
	}
}

// connectTOS opens a TCP connection from the SUT to the peer and returns
// the TOS byte of the first TCP segment the peer received, read with a
// raw socket in the peer's namespace. The kernel verifies the IPv4
// checksum before delivering to raw sockets, so a bad checksum update
// shows up as no packet at all.
func connectTOS(t *testing.T, tp *topo.Topo) (byte, error) {
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

package netperf

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCRRPorts: ports go up one by one, skip the server's, wrap at
// netperf's client_port_max back to client_port_min.
func TestCRRPorts(t *testing.T) {
	c := crrPorts{next: crrPortMax - 3, avoid: crrPortMax - 2}
	var got []uint16
	for range 4 {
		got = append(got, c.take())
	}
	want := []uint16{crrPortMax - 3, crrPortMax - 1, crrPortMin, crrPortMin + 1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ports %v, want %v", got, want)
		}
	}
	for range 1000 {
		c := newCRRPorts(0)
		if p := c.take(); p < crrPortMin || p >= crrPortMax {
			t.Fatalf("first port %d outside [%d, %d)", p, crrPortMin, crrPortMax)
		}
	}
}

// TestCRRPortsSkipInUse: a port another socket listens on is skipped.
func TestCRRPortsSkipInUse(t *testing.T) {
	lfd, err := newDataSocket(4, true, sockOpts{reuseAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	if err := bindTo(lfd, netip.AddrPortFrom(loopback, 0)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(lfd, 1); err != nil {
		t.Fatal(err)
	}
	busy := localAddr(lfd).Port()
	if busy < crrPortMin || busy >= crrPortMax-1 {
		t.Skipf("ephemeral port %d outside netperf's client range", busy)
	}
	fd, err := newDataSocket(4, true, sockOpts{reuseAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	c := crrPorts{next: busy}
	sa := toRaw(netip.AddrPortFrom(loopback, 0))
	if e := c.bind(fd, &sa); e != 0 {
		t.Fatal(e)
	}
	// Normally busy+1; a later one if other sockets hold that too.
	if got := localAddr(fd).Port(); got <= busy {
		t.Errorf("bound port %d, want one after the listener's %d", got, busy)
	}
}

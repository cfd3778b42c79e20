//go:build linux

package run

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
	"sluice/internal/testutil/topotest"
)

// sutBytes reads the received and transmitted byte counters of the SUT's
// veth end.
func sutBytes(t *testing.T, tb *topo.Topo) (rx, tx uint64) {
	t.Helper()
	fd, err := tb.NSHandle(topo.SUT)
	if err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(netns.NsHandle(fd))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(tb.Host(topo.SUT).Link)
	if err != nil {
		t.Fatal(err)
	}
	s := l.Attrs().Statistics
	return s.RxBytes, s.TxBytes
}

// TestPrivilegedNetperfRoles runs tests through in-process netservers in
// the two namespaces and checks the papers' roles on the wire: inbound
// streams fill the SUT's receive counter, outbound ones its transmit
// counter, and each test reaches the netserver of the host its role says.
func TestPrivilegedNetperfRoles(t *testing.T) {
	tb := topotest.New(t, "slbnp")
	g, err := NewNetperf(tb, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if g.SUT.Server.Addr() != topo.SUTAddr || g.Peer.Server.Addr() != topo.PeerAddr {
		t.Fatalf("netservers at %v and %v, want the namespaces' addresses", g.SUT.Server, g.Peer.Server)
	}
	ipf := IPFTests()
	for _, tc := range []result.Test{ipf[0], ipf[3], ipf[6], ipf[7], QoSTests([]int{1460})[0]} {
		rx0, tx0 := sutBytes(t, tb)
		sutOK0, _ := g.srvs[0].TestsRun()
		peerOK0, _ := g.srvs[1].TestsRun()
		m, err := g.Run(context.Background(), tc, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.ID, err)
		}
		rx1, tx1 := sutBytes(t, tb)
		sutOK1, _ := g.srvs[0].TestsRun()
		peerOK1, _ := g.srvs[1].TestsRun()
		rx, tx := rx1-rx0, tx1-tx0
		t.Logf("%s: %.0f Mbit/s %.0f Trans/s, SUT rx %d tx %d bytes", tc.ID, m.ThroughputMbps, m.TransPerSec, rx, tx)
		if tc.Stream() && m.ThroughputMbps <= 0 || !tc.Stream() && m.TransPerSec <= 0 || m.LocalSD <= 0 || m.RemoteSD <= 0 {
			t.Errorf("%s: %+v", tc.ID, m)
		}
		wantSUT := tc.ServerHost() == result.SUT
		if got := sutOK1 - sutOK0; got != map[bool]int64{true: 1, false: 0}[wantSUT] {
			t.Errorf("%s: the SUT's netserver ran %d tests, want it to serve: %v", tc.ID, got, wantSUT)
		}
		if got := peerOK1 - peerOK0; got != map[bool]int64{true: 0, false: 1}[wantSUT] {
			t.Errorf("%s: the peer's netserver ran %d tests, want it to serve: %v", tc.ID, got, !wantSUT)
		}
		if !tc.Stream() {
			continue
		}
		// Acknowledgements are a small fraction of the data.
		if tc.Direction() == result.Inbound && rx < 4*tx || tc.Direction() == result.Outbound && tx < 4*rx {
			t.Errorf("%s: SUT received %d and sent %d bytes: data flowed the wrong way", tc.ID, rx, tx)
		}
	}
	addr := g.SUT.Server.String()
	if err := g.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	err = tb.Do(topo.SUT, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil {
		t.Error("the SUT's netserver still accepts after Close")
	}
}

package run

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/testutil/netservertest"
)

// loopbackServer starts a netserver on 127.0.0.1 with a free port.
func loopbackServer(t *testing.T) netip.AddrPort {
	t.Helper()
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(netservertest.Loopback(t)))
}

// TestNetperfLoopback runs the papers' kinds of tests through the adapter
// against netservers on loopback, from both roles, and checks that every
// figure the report uses arrives with the right sign and unit.
func TestNetperfLoopback(t *testing.T) {
	g := &Netperf{SUT: Endpoint{Server: loopbackServer(t)}, Peer: Endpoint{Server: loopbackServer(t)}}
	ipf := IPFTests()
	for _, tc := range []result.Test{ipf[2], ipf[5], ipf[6], ipf[7], QoSTests([]int{512})[0]} {
		m, err := g.Run(context.Background(), tc, 300*time.Millisecond) // rounded up to 1 s
		if err != nil {
			t.Fatalf("%s: %v", tc.ID, err)
		}
		if m.Elapsed < 900*time.Millisecond || m.Elapsed > 3*time.Second {
			t.Errorf("%s: elapsed %v, want about 1 s", tc.ID, m.Elapsed)
		}
		if tc.Stream() && m.ThroughputMbps <= 0 || !tc.Stream() && m.TransPerSec <= 0 {
			t.Errorf("%s: no rate: %+v", tc.ID, m)
		}
		if m.LocalCPU < 0 || m.RemoteCPU < 0 || m.LocalSD <= 0 || m.RemoteSD <= 0 {
			t.Errorf("%s: CPU not measured at both ends: %+v", tc.ID, m)
		}
	}
}

// TestNetperfNoServer: a test whose server host has no netserver (the
// SUT in remote mode) fails with a message naming the host, not a dial
// error against a zero address.
func TestNetperfNoServer(t *testing.T) {
	g := &Netperf{Peer: Endpoint{Server: netip.MustParseAddrPort("127.0.0.1:9")}}
	_, err := g.Run(context.Background(), IPFTests()[0], time.Second)
	if err == nil || !strings.Contains(err.Error(), "netserver on the sut") {
		t.Errorf("got %v, want a missing-netserver error", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("Close of a generator without servers: %v", err)
	}
}

package netperf

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"sluice/internal/testutil"
)

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// TestPrivilegedNetNS runs the server in one namespace and the client in
// another, joined by a veth pair, so the test only passes if both sides
// really open their sockets in their own namespaces.
func TestPrivilegedNetNS(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		testutil.SkipOrFail(t, "iproute2 not installed")
	}
	cli, srv := fmt.Sprintf("npc%d", os.Getpid()), fmt.Sprintf("nps%d", os.Getpid())
	ipCmd(t, "netns", "add", cli)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", cli).Run() })
	ipCmd(t, "netns", "add", srv)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", srv).Run() })
	ipCmd(t, "-n", cli, "link", "add", "np0", "type", "veth", "peer", "name", "np1", "netns", srv)
	ipCmd(t, "-n", cli, "addr", "add", "10.251.0.1/24", "dev", "np0")
	ipCmd(t, "-n", srv, "addr", "add", "10.251.0.2/24", "dev", "np1")
	ipCmd(t, "-n", cli, "link", "set", "np0", "up")
	ipCmd(t, "-n", srv, "link", "set", "np1", "up")

	s, err := NewServerNS("10.251.0.2:0", "/run/netns/"+srv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The address only exists behind the veth in the client namespace, so
	// reaching it proves the client sockets moved.
	p := s.Addr().(*net.TCPAddr).Port

	for _, test := range []string{TCPRR, TCPCRR, UDPRR, TCPStream, UDPStream, TCPMaerts} {
		cfg := Config{Test: test, Host: "10.251.0.2", Port: p, NetNS: "/run/netns/" + cli, Transactions: 300}
		if !kinds[test].rr {
			cfg.Transactions, cfg.Duration = 0, time.Second
		}
		r, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s across namespaces: %v", test, err)
		}
		if kinds[test].rr && r.Transactions != 300 || !kinds[test].rr && r.ThroughputMbps <= 0 {
			t.Errorf("%s: %+v", test, *r)
		}
	}
}

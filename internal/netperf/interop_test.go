package netperf

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The C tools are not installed here (Debian has no netperf package); these
// tests run when NETPERF_C_BIN / NETSERVER_C_BIN point at them.

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestInteropCNetserver drives the C netserver with the Go client.
func TestInteropCNetserver(t *testing.T) {
	bin := os.Getenv("NETSERVER_C_BIN")
	if bin == "" {
		t.Skip("NETSERVER_C_BIN not set: C netserver interop not tested")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "-D", "-L", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 50; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, test := range []string{TCPStream, TCPMaerts, TCPRR, TCPCRR, UDPStream, UDPRR} {
		cfg := Config{Test: test, Host: "127.0.0.1", Port: port, Duration: time.Second, LocalCPU: true, RemoteCPU: true}
		r, err := Run(context.Background(), cfg)
		if err != nil {
			t.Errorf("%s against C netserver: %v", test, err)
			continue
		}
		t.Logf("%s: %.2f Mbit/s %.2f Tr/s cpu %.1f/%.1f", test, r.ThroughputMbps, r.TransPerSec, r.LocalCPU, r.RemoteCPU)
		if test == TCPStream && r.RemoteBytesRecv != r.BytesSent || test == TCPRR && r.RemoteTrans < r.Transactions {
			t.Errorf("%s: counts disagree: %+v", test, *r)
		}
	}
}

// TestInteropCNetperf drives the Go server with the C client and compares
// throughput with a Go-client run (5% parity is reported, not enforced,
// because a shared 2-core box is noisy).
func TestInteropCNetperf(t *testing.T) {
	bin := os.Getenv("NETPERF_C_BIN")
	if bin == "" {
		t.Skip("NETPERF_C_BIN not set: C netperf interop not tested")
	}
	_, port := startServer(t)
	for _, test := range []string{TCPStream, TCPMaerts, TCPRR, TCPCRR, UDPStream, UDPRR} {
		out, err := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "1", "-t", test, "-c", "-C", "-P", "0", "--", "-o", "THROUGHPUT").CombinedOutput()
		if err != nil {
			t.Errorf("C netperf %s: %v\n%s", test, err, out)
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		var c float64
		for sc.Scan() {
			if v, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64); err == nil {
				c = v
			}
		}
		r, err := Run(context.Background(), Config{Test: test, Host: "127.0.0.1", Port: port, Duration: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		g := r.ThroughputMbps
		if kinds[test].rr {
			g = r.TransPerSec
		}
		t.Logf("%s: C client %.2f, Go client %.2f (%.1f%%)", test, c, g, 100*(g-c)/c)
		if c <= 0 {
			t.Errorf("%s: C netperf reported %v", test, c)
		}
	}
}

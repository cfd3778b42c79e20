package netperf

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/internal/testutil/netperfc"
)

// The interop tests run the six tests both ways against the C netperf
// 2.7.1 tools (../shared/netperf-c, NETPERF_C_BIN/NETSERVER_C_BIN); under
// CI=true a missing C tool fails them. They are bounded: 1 s tests, and
// transaction counts for the RR tests (a C netserver pads a timed TCP_CRR
// by 4 s).

var allTests = []string{TCPStream, TCPMaerts, TCPRR, TCPCRR, UDPStream, UDPRR}

// TestInteropGoClientCServer drives the C netserver with the Go client.
func TestInteropGoClientCServer(t *testing.T) {
	_, ns := netperfc.CTools(t)
	port := netperfc.CNetserver(t, ns)
	for _, test := range allTests {
		t.Run(test, func(t *testing.T) {
			cfg := Config{Test: test, Host: "127.0.0.1", Port: port, Duration: time.Second, LocalCPU: true, RemoteCPU: true,
				ResponseTimeout: 20 * time.Second}
			if kinds[test].rr {
				cfg.Transactions = 2000
			}
			if test == UDPStream {
				cfg.SendSize = 1024
			}
			r, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("against the C netserver: %v", err)
			}
			switch {
			case kinds[test].rr:
				if r.Transactions != 2000 || r.RemoteTrans != 2000 {
					t.Errorf("transactions: local %d, C netserver %d, want 2000", r.Transactions, r.RemoteTrans)
				}
			case test == TCPStream:
				if r.BytesSent == 0 || r.RemoteBytesRecv != r.BytesSent {
					t.Errorf("sent %d bytes, C netserver received %d", r.BytesSent, r.RemoteBytesRecv)
				}
			case test == TCPMaerts:
				// The C netserver does not count the send its timer cut
				// short.
				if r.BytesRecv == 0 || r.BytesRecv < r.RemoteBytesSent || r.BytesRecv > r.RemoteBytesSent+int64(r.RemoteSendSize) {
					t.Errorf("received %d bytes, C netserver sent %d", r.BytesRecv, r.RemoteBytesSent)
				}
			case test == UDPStream:
				if r.RemoteBytesRecv <= 0 || r.RemoteBytesRecv > r.BytesSent || r.RemoteRecvCalls*1024 != r.RemoteBytesRecv {
					t.Errorf("sent %d bytes, C netserver received %d in %d datagrams", r.BytesSent, r.RemoteBytesRecv, r.RemoteRecvCalls)
				}
			}
			if r.RemoteCPU < 0 || r.RemoteCPUStats.Method != 'S' || r.RemoteCPUStats.NumCPUs <= 0 {
				t.Errorf("remote CPU %v %+v", r.RemoteCPU, r.RemoteCPUStats)
			}
		})
	}
}

// cNetperf runs the C netperf and returns its -k output.
func cNetperf(t *testing.T, bin string, args ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("C netperf %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// TestInteropCClientGoServer drives the Go netserver with the C client.
func TestInteropCClientGoServer(t *testing.T) {
	np, _ := netperfc.CTools(t)
	_, port := startServer(t)
	for _, test := range allTests {
		t.Run(test, func(t *testing.T) {
			length := "1"
			if kinds[test].rr {
				length = "-2000"
			}
			args := []string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-t", test, "-l", length, "-c", "-C", "-P", "0", "--",
				"-k", "THROUGHPUT,LOCAL_BYTES_SENT,LOCAL_BYTES_RECVD,REMOTE_BYTES_SENT,REMOTE_BYTES_RECVD,REMOTE_RECV_CALLS,TRANSACTION_RATE,REMOTE_CPU_UTIL,REMOTE_CPU_METHOD"}
			if test == UDPStream {
				args = append(args, "-m", "1K")
			}
			kv := cNetperf(t, np, args...)
			n := func(k string) float64 {
				v, err := strconv.ParseFloat(kv[k], 64)
				if err != nil {
					t.Fatalf("%s: %q in %v", k, kv[k], kv)
				}
				return v
			}
			if n("THROUGHPUT") <= 0 {
				t.Errorf("throughput %v", kv["THROUGHPUT"])
			}
			switch {
			case kinds[test].rr:
				if n("LOCAL_BYTES_SENT") != 2000 || n("REMOTE_BYTES_RECVD") != 2000 || n("REMOTE_BYTES_SENT") != 2000 {
					t.Errorf("2000 one-byte transactions, got %v", kv)
				}
			case test == TCPStream:
				// C netperf does not count the send its timer cut short,
				// which netserver still receives.
				if sent, got := n("LOCAL_BYTES_SENT"), n("REMOTE_BYTES_RECVD"); sent == 0 || got < sent || got > sent+16384 {
					t.Errorf("byte counts disagree: %v", kv)
				}
			case test == TCPMaerts:
				// C netperf stops counting at its own timer, netserver
				// sends until its own.
				if got, sent := n("LOCAL_BYTES_RECVD"), n("REMOTE_BYTES_SENT"); got == 0 || got > sent {
					t.Errorf("byte counts disagree: %v", kv)
				}
			case test == UDPStream:
				if n("REMOTE_BYTES_RECVD") <= 0 || n("REMOTE_BYTES_RECVD") != 1024*n("REMOTE_RECV_CALLS") {
					t.Errorf("datagram counts disagree: %v", kv)
				}
			}
			if kv["REMOTE_CPU_METHOD"] != "S" || n("REMOTE_CPU_UTIL") < 0 {
				t.Errorf("remote CPU %v %v", kv["REMOTE_CPU_UTIL"], kv["REMOTE_CPU_METHOD"])
			}
		})
	}
}

// runAndKill runs a 20 s UDP test against port, calls kill 300 ms in and
// requires the test to end with an error within a few seconds.
func runAndKill(t *testing.T, test string, port int, kill func()) error {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), Config{Test: test, Host: "127.0.0.1", Port: port, Duration: 20 * time.Second, SendSize: 1024})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	kill()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("%s: succeeded after its netserver died", test)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: ended %v after its start", test, d)
		}
		t.Logf("%s: %v after %v", test, err, time.Since(start).Round(time.Millisecond))
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running 10 s after its netserver died", test)
	}
	return nil
}

// TestUDPStopsWhenServerDies: a UDP test whose netserver goes away ends at
// once with an error instead of sending into "connection refused" (or
// waiting for lost answers) for the rest of its length. Both the Go
// netserver (closed in-process) and the C one (killed) are tried.
func TestUDPStopsWhenServerDies(t *testing.T) {
	for _, test := range []string{UDPStream, UDPRR} {
		t.Run(test+"/Go netserver", func(t *testing.T) {
			s, port := startServer(t)
			// Whichever comes first: the closed control connection, or
			// the refused datagram (IP_RECVERR).
			err := runAndKill(t, test, port, func() { s.Close() })
			if !errors.Is(err, ErrControlLost) && !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("got %v, want ErrControlLost or ECONNREFUSED", err)
			}
		})
		t.Run(test+"/C netserver", func(t *testing.T) {
			_, ns := netperfc.CTools(t)
			port := netperfc.FreePort(t)
			// -f: the test runs in the process that is killed.
			cmd := exec.Command(ns, "-D", "-f", "-L", "127.0.0.1", "-p", strconv.Itoa(port))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			netperfc.WaitPort(t, port)
			runAndKill(t, test, port, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		})
	}
}

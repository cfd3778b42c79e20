// Package netperfc finds and runs the C netperf 2.7.1 tools (the reference
// peer of the Go netperf) for tests.
package netperfc

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"sluice/internal/testutil"
)

// CTools returns the C netperf 2.7.1 and netserver: NETPERF_C_BIN and
// NETSERVER_C_BIN (which .ci/run sets), else the shared build next to the
// repository (../shared/netperf-c/bin). Without them the test is skipped,
// or fails under CI=true.
func CTools(t testing.TB) (netperf, netserver string) {
	t.Helper()
	netperf, netserver = os.Getenv("NETPERF_C_BIN"), os.Getenv("NETSERVER_C_BIN")
	if netperf == "" || netserver == "" {
		if dir := sharedBin(); dir != "" {
			netperf, netserver = filepath.Join(dir, "netperf"), filepath.Join(dir, "netserver")
		}
	}
	for _, b := range []string{netperf, netserver} {
		if st, err := os.Stat(b); b == "" || err != nil || st.Mode()&0o111 == 0 {
			testutil.SkipOrFail(t, "C netperf tools not found (NETPERF_C_BIN=%q NETSERVER_C_BIN=%q)", netperf, netserver)
		}
	}
	return netperf, netserver
}

// sharedBin finds ../shared/netperf-c/bin beside the module's root.
func sharedBin() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			bin := filepath.Join(filepath.Dir(dir), "shared", "netperf-c", "bin")
			if _, err := os.Stat(filepath.Join(bin, "netperf")); err == nil {
				return bin
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// CNetserver runs the C netserver in the foreground on a free port of
// 127.0.0.1 for the length of the test and returns the port. extra are
// more netserver options (such as -f).
func CNetserver(t testing.TB, bin string, extra ...string) int {
	t.Helper()
	port := FreePort(t)
	args := append([]string{"-D", "-L", "127.0.0.1", "-p", strconv.Itoa(port)}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	WaitPort(t, port)
	return port
}

// WaitPort waits until something listens on port of 127.0.0.1.
func WaitPort(t testing.TB, port int) {
	t.Helper()
	for range 250 {
		if c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on 127.0.0.1:%d", port)
}

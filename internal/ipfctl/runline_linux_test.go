package ipfctl

import (
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TestPrivilegedRunLine: while BPF statistics are on (ebpf.EnableStats,
// not the sysctl), ipfstat prints the filter's in-kernel ns/packet.
func TestPrivilegedRunLine(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("runs.conf", "pass in all\npass out all\n"))
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Skipf("BPF statistics: %v", err)
	}
	defer st.Close()
	if err := tp.tcpEcho(tp.a, addrB, 2*time.Second); err != nil {
		t.Fatalf("TCP: %v", err)
	}
	out := tp.mustRun("ipfstat")
	if !strings.Contains(out, "Datapath run time: ingress ") || !strings.Contains(out, " ns/packet (") {
		t.Errorf("ipfstat prints no run time:\n%s", out)
	}
	tp.mustRun("ipf", "-Fa")
}

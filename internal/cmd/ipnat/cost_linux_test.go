//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"sluice/internal/conformance"
)

// TestNATCost measures what the datapath costs per packet on a NAT
// gateway: C netperf (TCP_RR and TCP_STREAM) from the client to the
// server through the gateway, with the kernel's BPF run-time statistics on
// (ebpf.EnableStats, held for the run), for a trivial program (the floor),
// the filter alone, NAT alone, and the filter and NAT together; it prints
// the nanoseconds per run of every program on the gateway's interfaces.
// It is a measurement, not a check (timings are never asserted), and runs
// only when SLUICE_NAT_COST is set, with the C netperf binaries
// (NETPERF_C_BIN / NETSERVER_C_BIN, or ../shared/netperf-c/bin):
//
//	SLUICE_NAT_COST=1 go test -run TestNATCost -v ./internal/cmd/ipnat
func TestNATCost(t *testing.T) {
	if os.Getenv("SLUICE_NAT_COST") == "" {
		t.Skip("a measurement: set SLUICE_NAT_COST=1 to run it")
	}
	np, ns := netperfBins(t)
	secs := "10"
	if s := os.Getenv("SLUICE_NAT_COST_SECS"); s != "" {
		secs = s
	}
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enabling BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	for _, cfg := range []string{"trivial", "filter", "nat", "filter+nat"} {
		w := newGW(t)
		w.startNetserver(ns)
		switch cfg {
		case "trivial":
			w.trivialOn("gs0")
		case "filter":
			w.routeVia("192.168.77.0/24")
			w.ipf("-Fa", "-f", w.file("cost.ipf", costIPF))
		case "nat":
			w.mustIPNAT("-f", w.file("cost.nat", costNAT))
		case "filter+nat":
			w.ipf("-Fa", "-f", w.file("cost.ipf", costIPF))
			w.mustIPNAT("-f", w.file("cost.nat", costNAT))
		}
		for _, test := range [][]string{{"-t", "TCP_RR", "-l", secs, "--", "-r", "1,1"}, {"-t", "TCP_STREAM", "-l", secs}} {
			before := w.progStats("gc0", "gs0")
			out := w.netperf(np, test...)
			after := w.progStats("gc0", "gs0")
			t.Logf("%s %s: %s", cfg, test[1], strings.TrimSpace(lastLine(out)))
			var keys []string
			for k := range after {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				a, b := after[k], before[k]
				if a.n <= b.n {
					continue
				}
				t.Logf("  %-36s %10d runs %7.1f ns/run", k, a.n-b.n, float64(a.ns-b.ns)/float64(a.n-b.n))
			}
		}
		w.close()
	}
}

const costIPF = `pass in quick on gs0 proto tcp from any to any keep state
pass out quick on gs0 proto tcp from any to any keep state
pass in quick on gc0 proto tcp from any to any keep state
pass out quick on gc0 proto tcp from any to any keep state
`

const costNAT = "map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto\n"

func netperfBins(t *testing.T) (string, string) {
	np, ns := os.Getenv("NETPERF_C_BIN"), os.Getenv("NETSERVER_C_BIN")
	if np == "" || ns == "" {
		root, err := conformance.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "..", "shared", "netperf-c", "bin")
		np, ns = filepath.Join(dir, "netperf"), filepath.Join(dir, "netserver")
	}
	for _, b := range []string{np, ns} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("C netperf: %v", err)
		}
	}
	return np, ns
}

// startNetserver runs the C netserver in the server's namespace.
func (w *gwTopo) startNetserver(bin string) {
	w.t.Helper()
	c := exec.Command(bin, "-D", "-L", gwS4, "-p", "12865")
	var e bytes.Buffer
	c.Stderr = &e
	w.must(w.in(w.s, c.Start))
	w.onClose(func() { c.Process.Kill(); c.Wait() })
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		var conn net.Conn
		if w.in(w.s, func() (err error) { conn, err = net.Dial("tcp4", gwS4+":12865"); return err }) == nil {
			conn.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.t.Fatalf("netserver did not start: %s", e.String())
}

// netperf runs the C netperf from the client to the server.
func (w *gwTopo) netperf(bin string, args ...string) string {
	w.t.Helper()
	c := exec.Command(bin, append([]string{"-H", gwS4, "-p", "12865"}, args...)...)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	w.must(w.in(w.c, c.Start))
	if err := c.Wait(); err != nil {
		w.t.Fatalf("netperf %v: %v\n%s%s", args, err, o.String(), e.String())
	}
	return o.String()
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// trivialOn attaches a program that only returns to ifname's ingress and
// egress (the floor of the statistics), and makes the server route the
// client's network back through the gateway.
func (w *gwTopo) trivialOn(ifname string) {
	w.t.Helper()
	w.routeVia("192.168.77.0/24")
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	w.must(err)
	w.onClose(func() { prog.Close() })
	w.must(w.in(w.g, func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		for _, a := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: prog, Attach: a})
			if err != nil {
				return err
			}
			w.onClose(func() { l.Close() })
		}
		return nil
	}))
}

type progStat struct{ ns, n uint64 }

// progStats reads the run-time statistics of every TCX program on the
// gateway's interfaces, by "ifname hook #position (program name)".
func (w *gwTopo) progStats(ifnames ...string) map[string]progStat {
	w.t.Helper()
	out := map[string]progStat{}
	w.must(w.in(w.g, func() error {
		for _, name := range ifnames {
			ifc, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			for _, h := range []struct {
				hook string
				typ  ebpf.AttachType
			}{{"ingress", ebpf.AttachTCXIngress}, {"egress", ebpf.AttachTCXEgress}} {
				q, err := link.QueryPrograms(link.QueryOptions{Target: ifc.Index, Attach: h.typ})
				if err != nil {
					return err
				}
				for i, p := range q.Programs {
					prog, err := ebpf.NewProgramFromID(p.ID)
					if err != nil {
						return err
					}
					info, err := prog.Info()
					if err != nil {
						prog.Close()
						return err
					}
					st, err := prog.Stats()
					prog.Close()
					if err != nil {
						return err
					}
					out[fmt.Sprintf("%s %s #%d (%s)", name, h.hook, i, info.Name)] = progStat{uint64(st.Runtime.Nanoseconds()), st.RunCount}
				}
			}
		}
		return nil
	}))
	return out
}

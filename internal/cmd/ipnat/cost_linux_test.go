//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"sluice/internal/bench/config"
	"sluice/internal/bench/topo"
	natbpf "sluice/internal/bpf/nat"
	"sluice/internal/conformance"
	"sluice/internal/ipfctl"
)

// TestNATCost measures what the datapath costs per packet on a NAT
// gateway: C netperf (TCP_RR and TCP_STREAM) from the client to the
// server through the gateway, with the kernel's BPF run-time statistics on
// (ebpf.EnableStats, held for the run), in four configurations: nothing,
// the filter alone, NAT alone, and the filter and NAT together. In each, a
// trivial program that only returns runs on the gateway's outside
// interface beside them, on the same packets at the same time: the floor
// (what any program costs, run-time statistics included), so that each
// figure can be given over it from the same run. It prints, per
// configuration, test and hook (in: gs0 ingress, out: gs0 egress), the
// nanoseconds per run of the floor, NAT and the filter, NAT over the
// floor and NAT with the filter, each the median of the repetitions.
//
// It is a measurement, not a check (timings are never asserted), and runs
// only when SLUICE_NAT_COST is set, with the C netperf binaries
// (NETPERF_C_BIN / NETSERVER_C_BIN, or ../shared/netperf-c/bin);
// SLUICE_NAT_COST_SECS sets each test's length (10 s), SLUICE_NAT_COST_REPS
// the repetitions (3). SLUICE_NAT_COST_PROBE=1 adds configurations with
// probes in front of NAT (probeOn), which break its time down by stage;
// SLUICE_NAT_COST_CONFIGS=a,b,... runs only the configurations named
// (besides the four, nat-chained: NAT's programs run by a tail call from
// a program of their hook's, see chainNAT; nat-general: NAT's general
// programs, which read the hot line, instead of the plain ones):
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
	reps := 3
	if s := os.Getenv("SLUICE_NAT_COST_REPS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			reps = n
		}
	}
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enabling BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	type key struct{ cfg, test, hook string }
	type sample struct{ floor, nat, filter, probe float64 }
	samples := map[key][]sample{}
	var order []key
	tests := [][]string{{"-t", "TCP_RR", "-l", secs, "--", "-r", "1,1"}, {"-t", "TCP_STREAM", "-l", secs}}
	cfgs := []string{"floor", "filter", "nat", "filter+nat"}
	if os.Getenv("SLUICE_NAT_COST_PROBE") != "" {
		cfgs = append(cfgs, "nat+probe-entry", "nat+probe-parse", "nat+probe-lookup")
	}
	if s := os.Getenv("SLUICE_NAT_COST_CONFIGS"); s != "" {
		cfgs = strings.Split(s, ",")
	}
	for _, cfg := range cfgs {
		w := newGW(t)
		w.startNetserver(ns)
		switch cfg {
		case "floor":
			w.routeVia("192.168.77.0/24")
		case "filter":
			w.routeVia("192.168.77.0/24")
			w.ipf("-Fa", "-f", w.file("cost.ipf", costIPF))
		case "nat":
			w.mustIPNAT("-f", w.file("cost.nat", costNAT))
		case "filter+nat":
			w.ipf("-Fa", "-f", w.file("cost.ipf", costIPF))
			w.mustIPNAT("-f", w.file("cost.nat", costNAT))
		case "nat-general":
			// NAT's general programs, which read the hot line (as all
			// did before the plain ones): a clock offset of 1 ns
			w.mustIPNAT("-f", w.file("cost.nat", costNAT))
			w.must(w.in(w.g, func() error {
				d, err := natbpf.OpenPinned(ipfctl.NATPinDir(w.pinDir))
				if err != nil {
					return err
				}
				defer d.Close()
				if err := d.AdvanceClock(time.Nanosecond); err != nil {
					return err
				}
				if d.Plain() {
					return fmt.Errorf("NAT's programs are still plain")
				}
				return nil
			}))
		case "nat-chained":
			w.mustIPNAT("-f", w.file("cost.nat", costNAT))
			w.chainNAT("gs0")
		default:
			w.mustIPNAT("-f", w.file("cost.nat", costNAT))
			w.probeOn("gs0", map[string]natbpf.Stage{"nat+probe-entry": natbpf.StageEntry,
				"nat+probe-parse": natbpf.StageParse, "nat+probe-lookup": natbpf.StageLookup}[cfg])
		}
		w.trivialOn("gs0")
		for rep := 0; rep < reps; rep++ {
			for _, test := range tests {
				before := w.progStats("gs0")
				nb := w.natStats()
				out := w.netperf(np, test...)
				after := w.progStats("gs0")
				na := w.natStats()
				t.Logf("%s %s #%d: %s", cfg, test[1], rep+1, strings.TrimSpace(lastLine(out)))
				for side, name := range []string{"in", "out"} {
					tr, fast := na.Side[side].Translated-nb.Side[side].Translated, na.Side[side].Fast-nb.Side[side].Fast
					if tr > 0 {
						t.Logf("  NAT %s: %d translated, %d by the fast path", name, tr, fast)
					}
				}
				per := func(hook, prog string) float64 {
					a, b := after[hook+" "+prog], before[hook+" "+prog]
					if a.n <= b.n {
						return 0
					}
					return float64(a.ns-b.ns) / float64(a.n-b.n)
				}
				for _, hook := range []string{"ingress", "egress"} {
					k := key{cfg, test[1], hook}
					if len(samples[k]) == 0 {
						order = append(order, k)
					}
					samples[k] = append(samples[k], sample{per(hook, "trivial"), per(hook, "nat"), per(hook, "filter"), per(hook, "probe")})
				}
			}
		}
		w.close()
	}
	med := func(v []float64) float64 {
		sort.Float64s(v)
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ns per packet on gs0, medians of %d runs of %s s (BPF run-time statistics):\n", reps, secs)
	fmt.Fprintf(&b, "%-16s %-11s %-8s %7s %7s %7s %10s %11s %7s\n", "config", "test", "hook", "floor", "nat", "filter", "nat-floor", "nat+filter", "probe")
	for _, k := range order {
		var fl, nt, fi, over, pr []float64
		for _, s := range samples[k] {
			fl, nt, fi, pr = append(fl, s.floor), append(nt, s.nat), append(fi, s.filter), append(pr, s.probe)
			if s.nat > 0 {
				over = append(over, s.nat-s.floor)
			}
		}
		f, n, x := med(fl), med(nt), med(fi)
		col := func(v float64) string {
			if v == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", v)
		}
		o := "-"
		if len(over) > 0 {
			o = fmt.Sprintf("%.0f", med(over))
		}
		tot := "-"
		if n > 0 && x > 0 {
			tot = fmt.Sprintf("%.0f", n+x)
		}
		fmt.Fprintf(&b, "%-16s %-11s %-8s %7s %7s %7s %10s %11s %7s\n", k.cfg, k.test, k.hook, col(f), col(n), col(x), o, tot, col(med(pr)))
	}
	t.Log("\n" + b.String())
}

const costIPF = `pass in quick on gs0 proto tcp from any to any keep state
pass out quick on gs0 proto tcp from any to any keep state
pass in quick on gc0 proto tcp from any to any keep state
pass out quick on gc0 proto tcp from any to any keep state
`

// costNAT is the bench's sluice-nat-map (config.NATMasq) on this
// topology: a client's TCP and UDP ports from `auto`'s share of the
// port space, one try each (0/32), and the plain map after it for a
// connection whose port clashes with a session still held, which the
// portmap line alone would leave untranslated for the 240 s the old
// session lives (TestPrivilegedNATPortmapClash, which so checks the
// bench's rules too).
var costNAT = strings.NewReplacer("@OUT@", gwOutIf, topo.GWClientNet.String()+"/", "192.168.77.0/").Replace(config.NATMasq())

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

// netperf runs the C netperf from the client to the server. A run that
// has not ended in a minute fails the test with NAT's counters: runs
// through the gateway no longer stall (they did while costNAT was the
// portmap line alone: a control connection whose port clashed), so one
// that does is a finding, not noise to retry.
func (w *gwTopo) netperf(bin string, args ...string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, append([]string{"-H", gwS4, "-p", "12865"}, args...)...)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	w.must(w.in(w.c, c.Start))
	if err := c.Wait(); err != nil {
		st := w.natStats()
		w.t.Fatalf("netperf %v: %v (timed out: %v; NAT outbound: %d refused, %d searched out, %d over the table's maximum)\n%s%s",
			args, err, ctx.Err() != nil, st.Side[1].BadNAT, st.Side[1].Wrap, st.Side[1].TableMax, o.String(), e.String())
	}
	return o.String()
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// trivialOn attaches a program that only returns to ifname's ingress
// (last) and egress (first), beside whatever is there: the floor.
func (w *gwTopo) trivialOn(ifname string) {
	w.t.Helper()
	// one program per hook, so that each hook's runs are counted apart
	var progs [2]*ebpf.Program
	for i := range progs {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "trivial", Type: ebpf.SchedCLS, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
		w.must(err)
		w.onClose(func() { prog.Close() })
		progs[i] = prog
	}
	w.must(w.in(w.g, func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		for i, h := range []struct {
			typ    ebpf.AttachType
			anchor link.Anchor
		}{{ebpf.AttachTCXIngress, link.Tail()}, {ebpf.AttachTCXEgress, link.Head()}} {
			l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: progs[i], Attach: h.typ, Anchor: h.anchor})
			if err != nil {
				return err
			}
			w.onClose(func() { l.Close() })
		}
		return nil
	}))
}

// chainNAT detaches NAT's own TCX links and attaches to ifname, where
// they were, a program per hook that only tail-calls NAT's program of
// that hook (a program array holding them): NAT as one program would run
// it, inside another's run (the filter's, were it built that way),
// without a TCX program of its own. The stand-in's time, counted as
// NAT's, is then the tail call and NAT's work; the floor beside it is
// what the stand-in itself costs. A measurement of what running NAT in
// the filter's program would save.
func (w *gwTopo) chainNAT(ifname string) {
	w.t.Helper()
	w.must(w.in(w.g, func() error {
		d, err := natbpf.OpenPinned(ipfctl.NATPinDir(w.pinDir))
		if err != nil {
			return err
		}
		defer d.Close()
		arr, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ProgramArray, KeySize: 4, ValueSize: 4, MaxEntries: 2})
		if err != nil {
			return err
		}
		w.onClose(func() { arr.Close() })
		for i, out := range []bool{false, true} {
			if err := arr.Update(uint32(i), d.Program(out), ebpf.UpdateAny); err != nil {
				return fmt.Errorf("chaining NAT: %w", err)
			}
		}
		if err := d.Detach(); err != nil {
			return err
		}
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		for i, h := range []struct {
			name   string
			typ    ebpf.AttachType
			anchor link.Anchor
		}{{"chain_ingress", ebpf.AttachTCXIngress, link.Head()}, {"chain_egress", ebpf.AttachTCXEgress, link.Tail()}} {
			prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: h.name, Type: ebpf.SchedCLS, License: "GPL",
				Instructions: asm.Instructions{
					asm.LoadMapPtr(asm.R2, arr.FD()),
					asm.Mov.Imm(asm.R3, int32(i)),
					asm.FnTailCall.Call(),
					asm.Mov.Imm(asm.R0, -1),
					asm.Return(),
				}})
			if err != nil {
				return fmt.Errorf("loading the chaining program: %w", err)
			}
			w.onClose(func() { prog.Close() })
			l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: prog, Attach: h.typ, Anchor: h.anchor})
			if err != nil {
				return err
			}
			w.onClose(func() { l.Close() })
		}
		return nil
	}))
}

type progStat struct{ ns, n uint64 }

// probes are the ids of the programs probeOn attached.
var probes = map[ebpf.ProgramID]bool{}

// probeOn attaches, in front of NAT's programs on ifname, copies of them
// whose fast path stops after stage (natbpf.LoadProbe): their time is
// what NAT's first stages cost on these packets, NAT's own behind them
// what the rest costs with those stages' cache lines warm.
func (w *gwTopo) probeOn(ifname string, stage natbpf.Stage) {
	w.t.Helper()
	w.must(w.in(w.g, func() error {
		in, out, err := natbpf.LoadProbe(ipfctl.NATPinDir(w.pinDir), stage)
		if err != nil {
			return err
		}
		w.onClose(func() { in.Close(); out.Close() })
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		for _, h := range []struct {
			prog *ebpf.Program
			typ  ebpf.AttachType
		}{{in, ebpf.AttachTCXIngress}, {out, ebpf.AttachTCXEgress}} {
			info, err := h.prog.Info()
			if err != nil {
				return err
			}
			if id, ok := info.ID(); ok {
				probes[id] = true
			}
			l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: h.prog, Attach: h.typ, Anchor: link.Head()})
			if err != nil {
				return err
			}
			w.onClose(func() { l.Close() })
		}
		return nil
	}))
}

// natStats reads the NAT datapath's counters (zero when NAT is not loaded).
func (w *gwTopo) natStats() natbpf.Stats {
	w.t.Helper()
	var st natbpf.Stats
	w.must(w.in(w.g, func() error {
		d, err := natbpf.OpenPinned(ipfctl.NATPinDir(w.pinDir))
		if err != nil {
			return nil
		}
		defer d.Close()
		st, err = d.Stats()
		return err
	}))
	return st
}

// eachProg calls f for every TCX program on the gateway's interface
// ifname, hook by hook in the chain's order, with its kernel name and
// run-time statistics.
func (w *gwTopo) eachProg(ifname string, f func(hook string, id ebpf.ProgramID, name string, st *ebpf.ProgramStats)) {
	w.t.Helper()
	w.must(w.in(w.g, func() error {
		ifc, err := net.InterfaceByName(ifname)
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
			for _, p := range q.Programs {
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
				f(h.hook, p.ID, info.Name, st)
			}
		}
		return nil
	}))
}

// progStats reads the run-time statistics of the TCX programs on the
// gateway's interface ifname, by "hook kind", kind being nat, filter or
// trivial (from the program's name).
func (w *gwTopo) progStats(ifname string) map[string]progStat {
	w.t.Helper()
	out := map[string]progStat{}
	w.eachProg(ifname, func(hook string, id ebpf.ProgramID, kind string, st *ebpf.ProgramStats) {
		switch {
		case probes[id]:
			kind = "probe"
		case strings.HasPrefix(kind, "nat_"), strings.HasPrefix(kind, "chain_"):
			kind = "nat"
		case strings.HasPrefix(kind, "sluice_"):
			kind = "filter"
		}
		out[hook+" "+kind] = progStat{uint64(st.Runtime.Nanoseconds()), st.RunCount}
	})
	return out
}

package bpf

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"sluice/internal/rules/ipf"
	"sluice/internal/testutil"
)

// TestPrivilegedCost measures the filter's in-kernel cost per packet with
// the kernel's own BPF statistics (run_time_ns / run_cnt) under C netperf
// traffic between two namespaces, the filter on the server's veth, beside
// a trivial TCX program in the same place (the floor: its figure is the
// statistics' own cost). It runs only when SLUICE_COST is set (to the
// seconds per run; by hand: the machine must be quiet for figures that
// mean something) and needs the C netperf (NETPERF_C_BIN/NETSERVER_C_BIN
// or ../shared/netperf-c/bin). SLUICE_COST_CONFIGS picks configurations.
func TestPrivilegedCost(t *testing.T) {
	secs := os.Getenv("SLUICE_COST")
	if secs == "" {
		t.Skip("SLUICE_COST=seconds runs the cost measurement")
	}
	testutil.RequireRoot(t)
	netperf, netserver := os.Getenv("NETPERF_C_BIN"), os.Getenv("NETSERVER_C_BIN")
	if netperf == "" {
		netperf, _ = filepath.Abs("../../../shared/netperf-c/bin/netperf")
		netserver, _ = filepath.Abs("../../../shared/netperf-c/bin/netserver")
	}
	for _, p := range []string{netperf, netserver} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("C netperf: %v", err)
		}
	}
	tp := newTopo(t)
	// netserver in b (the filtered host)
	var srv *exec.Cmd
	inNS(t, tp.b, func() {
		srv = exec.Command(netserver, "-D", "-p", "12865")
		srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
		if err := srv.Start(); err != nil {
			t.Fatalf("netserver: %v", err)
		}
	})
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	time.Sleep(300 * time.Millisecond)

	run := func(test string) string {
		var out []byte
		var err error
		inNS(t, tp.a, func() {
			out, err = exec.Command(netperf, "-H", "10.99.0.2", "-t", test, "-l", secs, "-P", "0", "--", "-r", "1,1").CombinedOutput()
		})
		if err != nil {
			t.Fatalf("netperf %s: %v\n%s", test, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	st, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enabling BPF statistics: %v", err)
	}
	defer st.Close()

	measure := func(progs [2]*ebpf.Program) (in, out float64, rate string) {
		var before [2]*ebpf.ProgramStats
		for i, p := range progs {
			before[i], _ = p.Stats()
		}
		res := run("TCP_RR")
		fields := strings.Fields(strings.Split(res, "\n")[0])
		rate = fields[len(fields)-1]
		var ns [2]float64
		for i, p := range progs {
			after, err := p.Stats()
			if err != nil {
				t.Fatal(err)
			}
			n := after.RunCount - before[i].RunCount
			if n > 0 {
				ns[i] = float64(after.Runtime-before[i].Runtime) / float64(n)
			}
		}
		return ns[0], ns[1], rate
	}

	// the floor: return TCX_NEXT
	trivial := func() [2]*ebpf.Program {
		var ps [2]*ebpf.Program
		for i := range ps {
			p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
			if err != nil {
				t.Fatal(err)
			}
			ps[i] = p
		}
		return ps
	}()
	var links []link.Link
	inNS(t, tp.b, func() {
		ifc, err := netInterface(tp.ifB)
		if err != nil {
			t.Fatal(err)
		}
		for i, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			l, err := link.AttachTCX(link.TCXOptions{Interface: ifc, Program: trivial[i], Attach: at})
			if err != nil {
				t.Fatal(err)
			}
			links = append(links, l)
		}
	})
	var rep strings.Builder
	fmt.Fprintf(&rep, "%-28s %10s %10s %12s\n", "configuration", "ingress ns", "egress ns", "TCP_RR tr/s")
	in, out, rate := measure(trivial)
	fmt.Fprintf(&rep, "%-28s %10.0f %10.0f %12s\n", "trivial TCX program", in, out, rate)
	for _, l := range links {
		l.Close()
	}

	d := tp.attach(t)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("../../examples/ipf", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	nomatch := func(n int) string {
		var b strings.Builder
		for i := 0; i < n/2; i++ {
			fmt.Fprintf(&b, "block in from 198.%d.%d.%d/32 to any\nblock out from any to 198.%d.%d.%d/32\n",
				18+i>>16&1, i>>8&255, i&255, 18+i>>16&1, i>>8&255, i&255)
		}
		return b.String() + read("hp-test-nostate.conf")
	}
	configs := []struct{ name, rules string }{
		{"sluice attached, no rules", ""},
		{"HP stateless (6 rules)", read("hp-test-nostate.conf")},
		{"HP stateful, established", read("hp-test-state.conf")},
		{"1 000 non-matching + stateless", nomatch(1000)},
		{"10 000 non-matching + stateless", nomatch(10000)},
		{"1 000 000 non-matching + stateless", ""},
	}
	pick := os.Getenv("SLUICE_COST_CONFIGS")
	for i, c := range configs {
		if pick != "" && !strings.Contains(pick, strconv.Itoa(i)) {
			continue
		}
		var im *Image
		if c.rules == "" && i > 0 {
			c.rules = nomatch(1000000)
		}
		t0 := time.Now()
		var rs []*ipf.Rule
		inNS(t, tp.b, func() {
			if rs, err = ipf.Parse("cost.conf", []byte(c.rules), ipf.ParseOptions{}); err != nil {
				t.Fatal(err)
			}
			t1 := time.Now()
			if im, err = Compile(rs, CompileOptions{}); err != nil {
				t.Fatal(err)
			}
			t2 := time.Now()
			if err := d.LoadRules(im, Active); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if len(rs) > 10000 {
				fmt.Fprintf(&rep, "  %d rules: parse %v, compile %v, load into the kernel %v; %d runs entries; kernel memory %s\n",
					len(rs), t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond),
					time.Since(t2).Round(time.Millisecond), len(im.runs), d.setMemory(im))
			}
		})
		in, out, rate := measure([2]*ebpf.Program{d.objs.SluiceIngress, d.objs.SluiceEgress})
		fmt.Fprintf(&rep, "%-28s %10.0f %10.0f %12s\n", c.name, in, out, rate)
		if os.Getenv("SLUICE_COST_STAGES") != "" {
			// the same traffic through copies of the programs that end
			// after each stage
			for n := uint32(1); n < uint32(len(stageNames)); n++ {
				var progs [2]*ebpf.Program
				for i, name := range []string{"sluice_ingress", "sluice_egress"} {
					p, err := stageVariant(d, name, n, genericSpec)
					if err != nil {
						t.Fatal(err)
					}
					progs[i] = p
				}
				d.swapPrograms(t, progs)
				in, out, _ := measure(progs)
				fmt.Fprintf(&rep, "  %-26s %10.0f %10.0f\n", fmt.Sprintf("%02d %s", n, stageNames[n]), in, out)
				progs[0].Close()
				progs[1].Close()
			}
			d.swapPrograms(t, [2]*ebpf.Program{d.objs.SluiceIngress, d.objs.SluiceEgress})
		}
	}
	t.Log("\n" + rep.String())
}

// setMemory is what a loaded set costs the kernel, by map: the rules
// (with their counters), rate windows, keep-state counts and compact
// matches, texts and runs.
func (d *Datapath) setMemory(im *Image) string {
	n := len(im.rules)
	rules := n * binary.Size(filterRule{})
	other := n*(binary.Size(filterPpsWindow{})+4) + cblockCount(n)*binary.Size(filterCblock{})
	texts := len(textBlob(im.texts)) * textChunk
	// the runs tables' elements (key, value, the hash's 40-byte header)
	// and buckets, and the IPv4 runs' bitmap (TestPrivilegedSetMemory
	// measures them)
	runs := len(im.runBitmap()) * 8
	for i := range im.runs {
		if im.run4(&im.runs[i]) {
			runs += 40 + binary.Size(filterRun4Key{}) + 8 + 16
		} else {
			runs += 40 + 24 + 8 + 16
		}
	}
	return fmt.Sprintf("%d MB (rules %d MB, rate/state/compact %d MB, texts %d MB, runs %d MB)",
		(rules+other+texts+runs)>>20, rules>>20, other>>20, texts>>20, runs>>20)
}

// swapPrograms points the datapath's pinned links at progs.
func (d *Datapath) swapPrograms(t *testing.T, progs [2]*ebpf.Program) {
	t.Helper()
	ents, _ := os.ReadDir(d.dir)
	for _, e := range ents {
		i := -1
		switch {
		case strings.HasPrefix(e.Name(), "link_") && strings.HasSuffix(e.Name(), "_ingress"):
			i = 0
		case strings.HasPrefix(e.Name(), "link_") && strings.HasSuffix(e.Name(), "_egress"):
			i = 1
		}
		if i < 0 {
			continue
		}
		l, err := link.LoadPinnedLink(filepath.Join(d.dir, e.Name()), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Update(progs[i]); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
}

func netInterface(name string) (int, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifc.Index, nil
}

// Package bench ties the bench together: it builds the test bed, starts
// the traffic generator, runs the plan over the configurations and
// streams raw results to a file; the report is made from that file
// afterwards (package report). Data flow: topology → configurations →
// tests → raw results → report.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
	"sluice/internal/bench/run"
	"sluice/internal/bench/topo"
)

// ResultsFile is the name of the raw results in the output directory.
const ResultsFile = "results.jsonl"

// GeneratorFactory starts a traffic generator on a test bed; the closer
// stops it (its server end).
type GeneratorFactory func(tb *topo.Topo) (run.Generator, func() error, error)

// Options describe one bench run.
type Options struct {
	Mode   string // quick, full or custom (recorded)
	OutDir string
	Plan   run.Plan
	Topo   topo.Options
	NewGen GeneratorFactory
	// NewGWGen starts the generator of the gateway topology, built when
	// the plan has NAT tests (default NetperfGateway).
	NewGWGen GatewayFactory
	OnStart  func(tb *topo.Topo) // called once the test bed exists (tests)
	// OnProgress is passed to the runner.
	OnProgress func(run.Progress)
	// Stats, if set, turns the kernel's BPF run-time statistics on for
	// the run and reads those of the programs attached to the SUT's
	// link around every test (config.Datapaths.Stats).
	Stats config.StatsFunc
	// LoadWindow is how long the machine's load is sampled before the
	// run (default 1 s; tests use less).
	LoadWindow time.Duration
}

// ErrNotRoot is returned when the process lacks the privileges to make
// namespaces and load rules.
var ErrNotRoot = errors.New("must run as root: it creates network namespaces, veth links and nftables tables (try sudo)")

// Run measures and returns the path of the results file. The test bed
// is removed before Run returns, whatever happens; on cancellation the
// results written so far are kept and the error is ctx's.
func Run(ctx context.Context, o Options) (path string, err error) {
	if os.Geteuid() != 0 {
		return "", ErrNotRoot
	}
	if err := o.Plan.Validate(); err != nil {
		return "", err
	}
	if o.NewGen == nil {
		return "", errors.New("bench: no traffic generator")
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return "", err
	}
	nat := false
	for _, t := range o.Plan.Tests {
		nat = nat || t.Suite == config.SuiteNAT
		if o.Topo.Remote == "" {
			continue
		}
		if t.Link != "" {
			return "", fmt.Errorf("bench: test %q asks for the %s link profile; with --remote the link is a real one, which the bench does not shape (drop --link)", t.ID, t.Link)
		}
		if t.Suite == config.SuiteNAT {
			return "", fmt.Errorf("bench: test %q needs the gateway topology (three namespaces), which --remote does not build", t.ID)
		}
	}
	// Namespaces of runs killed with SIGKILL; those of live runs stay.
	_, _ = topo.Sweep(o.Topo.Prefix)
	window := o.LoadWindow
	if window <= 0 {
		window = time.Second
	}
	before := SampleLoad(window)

	tb, err := topo.New(ctx, o.Topo)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := tb.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if o.OnStart != nil {
		o.OnStart(tb)
	}
	gen, stop, err := o.NewGen(tb)
	if err != nil {
		return "", err
	}
	defer func() {
		if serr := stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("bench: stopping the generator: %w", serr))
		}
	}()

	path = filepath.Join(o.OutDir, ResultsFile)
	w, err := result.Create(path)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := w.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	info := System()
	hdr := result.Run{
		Kernel: info.Kernel, CPUModel: info.CPUModel, NumCPU: info.NumCPU, Hostname: info.Hostname,
		GoVersion: runtime.Version(), Mode: o.Mode, Topology: describeTopo(o.Topo),
		Notes: notes(gen.Name(), o.Topo), LoadBefore: before, Generator: gen.Name(),
	}
	if d, ok := gen.(interface{ Describe() string }); ok {
		hdr.Generator = d.Describe()
	}
	plan := o.Plan
	if tb.Remote() {
		// The remote machine only runs netserver.
		plan.Tests = run.FromSUT(plan.Tests)
	}
	r := &run.Runner{Plan: plan, Gen: gen, SUT: tb.Host(topo.SUT), Out: w, Header: hdr, OnProgress: o.OnProgress,
		Shape: func(link string) error {
			p, ok := topo.ProfileByName(link)
			if !ok {
				return fmt.Errorf("bench: unknown link profile %q", link)
			}
			return tb.Shape(p)
		}}
	if o.Stats != nil {
		probe, closer, err := o.Stats(tb.Host(topo.SUT))
		if err != nil {
			hdr.Notes = append(hdr.Notes, "In-kernel ns/packet not recorded: "+err.Error())
			r.Header = hdr
		} else {
			r.Probe = probe
			defer func() {
				if cerr := closer.Close(); cerr != nil {
					err = errors.Join(err, fmt.Errorf("bench: BPF statistics: %w", cerr))
				}
			}()
		}
	}
	if nat {
		gw, err := topo.NewGateway(o.Topo.Prefix)
		if err != nil {
			return "", err
		}
		defer func() {
			if cerr := gw.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
		newGW := o.NewGWGen
		if newGW == nil {
			newGW = NetperfGateway()
		}
		g, gstop, err := newGW(gw)
		if err != nil {
			return "", err
		}
		defer func() {
			if cerr := gstop(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
		r.GW, r.GWGen = gw.Host(topo.GWGateway), g
		if o.Stats != nil {
			if probe, closer, serr := o.Stats(r.GW); serr == nil {
				r.GWProbe = probe
				defer closer.Close()
			}
		}
		r.Header.Topology += "; NAT suite: client — gateway (SUT, forwarding) — server namespaces, the client dialling " + topo.ServiceAddr.String()
	}
	mon := startLoadMonitor(5 * time.Second)
	r.OnEnd = func(e *result.EndInfo) { e.LoadDuring = mon.finish() }
	return path, r.Execute(ctx)
}

func notes(gen string, o topo.Options) []string {
	var n []string
	if o.Remote == "" {
		n = append(n,
			"Roles as in the white papers: the configurations are applied to the system under test (SUT). "+
				"In the IPFilter set the netperf client runs on the peer and netserver on the SUT: TCP_STREAM sends data in to the SUT (inbound), "+
				"TCP_MAERTS makes the SUT send it out (outbound), TCP_RR and TCP_CRR bring their connections in to the SUT. "+
				"The IPQoS sweep marks what the SUT sends, so there the client runs on the SUT and TCP_STREAM sends out to the peer.",
			"Both hosts are namespaces of one machine joined by a veth pair: the SUT's and the peer's CPU utilisation are the same system-wide figure, "+
				"and service demand counts the CPU of both ends.")
	} else {
		n = append(n,
			"The peer is a remote machine that only runs netserver, so every netperf client runs on the system under test (SUT), where the configurations are applied: "+
				"inbound streams are TCP_MAERTS, outbound ones TCP_STREAM, and TCP_RR and TCP_CRR open their connections from the SUT (outbound), unlike the papers.")
	}
	if gen != "netperf" {
		n = append(n, "Traffic came from "+gen+", not from the netperf library.")
	}
	return n
}

func describeTopo(o topo.Options) string {
	var b strings.Builder
	if o.Remote != "" {
		fmt.Fprintf(&b, "remote peer %s (netserver there, configurations here)", o.Remote)
	} else {
		b.WriteString("two network namespaces joined by a veth pair")
	}
	mtu := "default"
	if o.MTU > 0 {
		mtu = fmt.Sprint(o.MTU)
	}
	fmt.Fprintf(&b, ", MTU %s, GRO %s, GSO %s, TSO %s", mtu, o.GRO, o.GSO, o.TSO)
	if len(o.CPUs) > 0 {
		fmt.Fprintf(&b, ", pinned to CPUs %v", o.CPUs)
	}
	return b.String()
}

// SystemInfo identifies the machine in the results.
type SystemInfo struct {
	Kernel, CPUModel, Hostname string
	NumCPU                     int
}

// System reads the kernel release and CPU model.
func System() SystemInfo {
	s := SystemInfo{NumCPU: runtime.NumCPU(), CPUModel: "unknown"}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		s.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	s.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		s.CPUModel = cpuModel(b)
	}
	return s
}

func cpuModel(cpuinfo []byte) string {
	for _, line := range bytes.Split(cpuinfo, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch strings.TrimSpace(string(k)) {
		case "model name", "Model", "cpu model", "uarch":
			return strings.TrimSpace(string(v))
		}
	}
	return "unknown"
}

// Costs beyond the measuring itself, as seen on a 2-core machine shared
// with other work: netperf's control exchange around each test, and
// applying and removing a configuration (an eBPF datapath's verifier run,
// 10 000 nftables rules).
const (
	TestOverhead  = 100 * time.Millisecond
	ApplyOverhead = 3 * time.Second
)

// Estimate is the wall-clock time a plan should take: its tests and
// warm-ups plus TestOverhead per test and ApplyOverhead per apply
// (configurations whose datapath is not built in excluded; a
// configuration is applied once per link profile of its tests; making
// the test bed and the report take a few seconds more).
func Estimate(p run.Plan) time.Duration {
	var cs []*config.Config
	applies := 0
	for _, c := range p.Configs {
		if !c.Available() {
			continue
		}
		cs = append(cs, c)
		var ts []result.Test
		for _, t := range p.Tests {
			if c.Runs(t.Suite) {
				ts = append(ts, t)
			}
		}
		applies += len(run.ByLink(ts)) // one apply per link profile
	}
	p.Configs = cs
	return time.Duration(p.Total())*(p.Duration+TestOverhead) + time.Duration(applies*p.Reps)*(p.Warmup+ApplyOverhead)
}

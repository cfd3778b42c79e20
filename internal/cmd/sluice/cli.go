// Package cli is the `sluice` command (bench, report, configs) as a
// library, so cmd/sluice stays a thin main and tests can run the real
// command in a subprocess (the test binary re-executing itself).
//
//	sluice bench [--quick|--full|--paper] [--link LIST] [--out DIR] [--configs LIST]
//	             [--tests LIST] [--duration D] [--reps N] [--warmup D]
//	             [--remote HOST [--port N]] [--netperf PATH --netserver PATH]
//	             [--mtu N] [--gro on|off] [--gso on|off] [--tso on|off] [--cpus 0,1]
//	sluice report [--out DIR] [--ci] [--no-charts] results.jsonl
//	sluice configs
//
// bench measures (as root) and writes DIR/results.jsonl (DIR is ./results
// unless --out says otherwise), then the report; report re-makes the
// report from a results file. The presets: --quick (the default, about 5
// minutes) runs the papers' tests on the papers' four configurations for
// Sluice and nftables and the marking ones, 3 × 1 s; --full (about 40
// minutes on 2 cores) every configuration and test (the IPQoS further
// tests and the NAT gateway suite included), 4 × 2 s; --paper (about 80
// minutes) HP's matrix at HP's link speeds, 4 × 10 s. --link shapes the
// test link to 100BaseT, 1GigE or 10GigE (tests at each, with the
// paper's message sizes for the speed). bench prints its estimate when
// it starts.
package sluice

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/bench"
	"sluice/internal/bench/config"
	"sluice/internal/bench/report"
	"sluice/internal/bench/result"
	"sluice/internal/bench/run"
	"sluice/internal/bench/topo"
)

// DefaultOut is where `sluice bench` writes unless --out says otherwise
// (the repository's .gitignore ignores it).
const DefaultOut = "results"

const usage = `usage: sluice bench [flags]     measure (as root), then write the report
       sluice report [flags] FILE  re-make the report from results.jsonl
       sluice configs              list the configurations
       sluice exporter [flags]     serve the datapaths' counters to Prometheus
       sluice doctor [flags]       check this host's prerequisites
Run "sluice COMMAND -h" for the flags.
`

// Main runs the command with args (without the program name) and returns
// the exit status: 0 success, 1 failure, 2 usage, 130 interrupted. dp are
// the Sluice datapaths to offer the bench (zero: none available).
func Main(args []string, stdout, stderr io.Writer, dp config.Datapaths) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "bench":
		return cmdBench(args[1:], stdout, stderr, dp)
	case "report":
		return cmdReport(args[1:], stdout, stderr)
	case "configs":
		return cmdConfigs(stdout, dp)
	case "exporter":
		return cmdExporter(args[1:], stdout, stderr)
	case "doctor":
		return cmdDoctor(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n%s", args[0], usage)
	return 2
}

func cmdConfigs(stdout io.Writer, dp config.Datapaths) int {
	reg := config.Builtin(dp)
	for _, n := range reg.Names() {
		c, _ := reg.Get(n)
		avail := ""
		if !c.Available() {
			avail = " (datapath not available)"
		}
		fmt.Fprintf(stdout, "%-20s %-9s %s%s\n", c.Name, c.Family, c.Description, avail)
	}
	return 0
}

func cmdBench(args []string, stdout, stderr io.Writer, dp config.Datapaths) int {
	fs := flag.NewFlagSet("sluice bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "the quick preset (default): the papers' tests on their four configurations (Sluice, nftables) and the marking ones, 3 × 1 s, about 5 minutes")
	full := fs.Bool("full", false, "the full preset, about 40 minutes on 2 cores: every configuration and test (IPFilter set, IPQoS sweep\n"+
		"and further tests, NAT gateway suite); 4 × 2 s after a 1 s warm-up per apply")
	paper := fs.Bool("paper", false, "HP's matrix and parameters, about 80 minutes on 2 cores: the IPFilter paper's tests at 10GigE and 1GigE\n"+
		"on its four configurations (Sluice, nftables, the trivial-program floor), the IPQoS sweep at 100BaseT and 1GigE; 4 × 10 s")
	link := fs.String("link", "", "link profiles to shape the test link to, e.g. 1GigE,10GigE (veth, 100BaseT, 1GigE, 10GigE;\n"+
		"default the preset's): each test runs at each, with the paper's message sizes for the speed")
	netperfBin := fs.String("netperf", "", "run the tests with this external netperf binary (e.g. ../shared/netperf-c/bin/netperf); needs --netserver")
	netserverBin := fs.String("netserver", "", "the external netserver binary to start in the test bed's namespaces (with --netperf)")
	out := fs.String("out", DefaultOut, "output directory (results.jsonl, report.md, charts; overwritten)")
	configs := fs.String("configs", "", "configurations: names, families (sluice, nftables), prefixes (nft-*), all, ipf=FILE, ipqos=FILE")
	tests := fs.String("tests", "", "tests: IDs (\"TCP_STREAM 64K\"), names (TCP_RR) or suites (ipf, qos); default the preset's")
	duration := fs.Duration("duration", 0, "length of each test (default the preset's)")
	reps := fs.Int("reps", 0, "repetitions (default the preset's)")
	warmup := fs.String("warmup", "", "warm-up after each apply, e.g. 1s (default the preset's; 0 = none)")
	remote := fs.String("remote", "", "address of a machine running netserver; configurations go on this host")
	port := fs.Int("port", 12865, "netserver control port with --remote")
	mtu := fs.Int("mtu", 0, "veth MTU (default the kernel's)")
	gro := fs.String("gro", "default", "GRO on the veth: on, off or default")
	gso := fs.String("gso", "default", "GSO on the veth: on, off or default")
	tso := fs.String("tso", "default", "TSO on the veth: on, off or default")
	cpus := fs.String("cpus", "", "pin the process to these CPUs (e.g. 0,1)")
	ci := fs.Bool("ci", false, "show 95 % confidence intervals in the report")
	noProgress := fs.Bool("no-progress", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	name := ""
	for _, p := range []struct {
		set  bool
		name string
	}{{*quick, "quick"}, {*full, "full"}, {*paper, "paper"}} {
		if !p.set {
			continue
		}
		if name != "" {
			fmt.Fprintf(stderr, "sluice bench: --%s and --%s exclude each other\n", name, p.name)
			return 2
		}
		name = p.name
	}
	if name == "" {
		name = "quick"
	}
	var profiles []topo.Profile
	if *link != "" {
		for _, f := range strings.Split(*link, ",") {
			p, err := topo.ParseProfile(f)
			if err != nil {
				fmt.Fprintln(stderr, "sluice bench:", err)
				return 2
			}
			profiles = append(profiles, p)
		}
	}
	if (*netperfBin == "") != (*netserverBin == "") {
		fmt.Fprintln(stderr, "sluice bench: --netperf and --netserver go together")
		return 2
	}
	preset, err := run.PresetAt(name, profiles)
	if err != nil {
		fmt.Fprintln(stderr, "sluice bench:", err)
		return 2
	}
	mode := preset.Name
	if len(profiles) > 0 {
		mode += " at " + *link
	}
	// A preset with anything changed is recorded as such.
	custom := "custom (from " + mode + ")"
	reg := config.Builtin(dp)
	cl := preset.Configs
	if *configs != "" {
		cl, mode = *configs, custom
	}
	cs, err := reg.Select(cl)
	if err != nil {
		fmt.Fprintln(stderr, "sluice bench:", err)
		return 2
	}
	all := append(slices.Clip(preset.Tests), run.AllTests()...)
	ts := preset.Tests
	if *tests != "" {
		if ts, err = run.SelectTests(all, *tests); err != nil {
			fmt.Fprintln(stderr, "sluice bench:", err)
			return 2
		}
		// Tests are selected at the link profiles of --link, or else of
		// the preset (quick and full: the unshaped veth; paper: HP's).
		links := map[string]bool{}
		for _, p := range profiles {
			if p.Shaped() {
				links[p.Name] = true
			} else {
				links[""] = true
			}
		}
		if len(profiles) == 0 {
			for _, t := range preset.Tests {
				links[t.Link] = true
			}
		}
		ts = slices.DeleteFunc(ts, func(t result.Test) bool { return !links[t.Link] })
		if len(ts) == 0 {
			fmt.Fprintf(stderr, "sluice bench: no test selected by %q at the link profiles of the run (--link)\n", *tests)
			return 2
		}
		mode = custom
	}
	if *tests == "" {
		// Configurations of a suite the preset has no test of (--configs
		// all under quick: the NAT ones) bring that suite's tests from
		// the full preset, rather than being refused.
		have := map[string]bool{}
		for _, t := range ts {
			have[t.Suite] = true
		}
		for _, c := range cs {
			if c.Suite == "" || have[c.Suite] {
				continue
			}
			have[c.Suite] = true
			for _, t := range run.Full().Tests {
				if t.Suite == c.Suite {
					ts = append(slices.Clip(ts), t)
				}
			}
		}
	}
	plan := run.Plan{Configs: cs, Tests: ts, Reps: preset.Reps, Duration: preset.Duration, Warmup: preset.Warmup}
	if *duration > 0 {
		plan.Duration, mode = *duration, custom
	}
	if *reps > 0 {
		plan.Reps, mode = *reps, custom
	}
	if *warmup != "" {
		w, err := time.ParseDuration(*warmup)
		if err != nil || w < 0 {
			fmt.Fprintf(stderr, "sluice bench: bad --warmup %q\n", *warmup)
			return 2
		}
		plan.Warmup = w
	}
	to := topo.Options{MTU: *mtu, Remote: *remote}
	for _, t := range []struct {
		s   string
		dst *topo.Toggle
	}{{*gro, &to.GRO}, {*gso, &to.GSO}, {*tso, &to.TSO}} {
		if *t.dst, err = topo.ParseToggle(t.s); err != nil {
			fmt.Fprintln(stderr, "sluice bench:", err)
			return 2
		}
	}
	if *cpus != "" {
		for _, f := range strings.Split(*cpus, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				fmt.Fprintf(stderr, "sluice bench: bad CPU %q\n", f)
				return 2
			}
			to.CPUs = append(to.CPUs, n)
		}
	}
	if *port <= 0 || *port > 65535 {
		fmt.Fprintf(stderr, "sluice bench: bad --port %d\n", *port)
		return 2
	}
	if *out == "" {
		fmt.Fprintln(stderr, "sluice bench: empty --out")
		return 2
	}
	if err := plan.Validate(); err != nil {
		fmt.Fprintln(stderr, "sluice bench:", err)
		return 2
	}
	if *remote != "" {
		for _, t := range plan.Tests {
			if t.Link != "" || t.Suite == config.SuiteNAT {
				fmt.Fprintf(stderr, "sluice bench: test %q cannot run with --remote (link profiles shape the local test bed's veth; the NAT suite needs the gateway namespaces)\n", t.ID)
				return 2
			}
		}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "sluice bench:", bench.ErrNotRoot)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	est := bench.Estimate(plan)
	var unavail []string
	for _, c := range cs {
		if !c.Available() {
			unavail = append(unavail, c.Name)
		}
	}
	skipped := ""
	if len(unavail) > 0 {
		skipped = fmt.Sprintf(" (%s skipped: datapath not available)", strings.Join(unavail, ", "))
	}
	fmt.Fprintf(stderr, "sluice bench: %s, %d configurations%s, %d tests, %d × %v; estimated time %v (done about %s). Results in %s\n",
		mode, len(cs), skipped, len(ts), plan.Reps, plan.Duration, est.Round(time.Second),
		time.Now().Add(est).Format("15:04 MST"), *out)
	var bar *progressBar
	if !*noProgress && isTerminal(stderr) {
		bar = &progressBar{w: stderr, start: time.Now(), est: est}
	}
	opts := bench.Options{Mode: mode, OutDir: *out, Plan: plan, Topo: to, NewGen: bench.NetperfGenerator(*port), Stats: dp.Stats}
	if *netperfBin != "" {
		opts.NewGen = bench.ExternalGenerator(*netperfBin, *netserverBin, *port)
		opts.NewGWGen = bench.ExternalGateway(*netperfBin, *netserverBin)
	}
	opts.OnProgress = func(p run.Progress) {
		switch {
		case p.Skipped:
			if bar != nil {
				bar.done()
			}
			fmt.Fprintf(stderr, "sluice bench: %s skipped: %v\n", p.Config, p.Err)
		case bar != nil:
			bar.update(p)
		case p.Err != nil:
			fmt.Fprintf(stderr, "  %s / %s rep %d: %v\n", p.Config, p.Test, p.Rep, p.Err)
		}
	}
	path, err := bench.Run(ctx, opts)
	if bar != nil {
		bar.done()
	}
	interrupted := ctx.Err() != nil
	stop() // a second Ctrl-C while the report is written kills the process
	if err != nil && !(interrupted && errors.Is(err, context.Canceled)) {
		fmt.Fprintln(stderr, "sluice bench:", err)
		if path == "" {
			return 1
		}
	}
	if interrupted {
		fmt.Fprintln(stderr, "sluice bench: interrupted; test bed removed, reporting what was measured")
	}
	if path == "" {
		return 130
	}
	if rc := makeReport(path, *out, report.Options{CI: *ci}, true, stdout, stderr); rc != 0 {
		return rc
	}
	switch {
	case interrupted:
		return 130
	case err != nil:
		return 1
	}
	return 0
}

func cmdReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "output directory (default the results file's)")
	ci := fs.Bool("ci", false, "show 95 % confidence intervals")
	noCharts := fs.Bool("no-charts", false, "skip the PNG and SVG charts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: sluice report [--out DIR] [--ci] [--no-charts] results.jsonl")
		return 2
	}
	dir := *out
	if dir == "" {
		dir = filepath.Dir(fs.Arg(0))
	}
	return makeReport(fs.Arg(0), dir, report.Options{CI: *ci}, !*noCharts, stdout, stderr)
}

// makeReport writes DIR/report.md (and charts) from a results file and
// prints the summary.
func makeReport(path, dir string, o report.Options, withCharts bool, stdout, stderr io.Writer) int {
	set, err := result.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "sluice report:", err)
		return 1
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(stderr, "sluice report:", err)
		return 1
	}
	m := report.Build(set)
	if withCharts {
		names, err := report.WriteCharts(dir, m)
		if err != nil {
			fmt.Fprintln(stderr, "sluice report: charts:", err)
			return 1
		}
		for _, n := range names {
			if strings.HasSuffix(n, ".svg") {
				o.Charts = append(o.Charts, n)
			}
		}
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		fmt.Fprintln(stderr, "sluice report:", err)
		return 1
	}
	err = report.WriteMarkdown(f, m, o)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice report:", err)
		return 1
	}
	if err := report.WriteSummary(stdout, m); err != nil {
		return 1
	}
	fmt.Fprintf(stdout, "\nReport: %s\n", filepath.Join(dir, "report.md"))
	return 0
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressBar draws one line on a terminal, rewritten after every test.
type progressBar struct {
	w     io.Writer
	start time.Time
	est   time.Duration
}

func (b *progressBar) update(p run.Progress) {
	const width = 30
	n := 0
	if p.Total > 0 {
		n = width * p.Done / p.Total
	}
	eta := ""
	if p.Done > 0 && p.Total > p.Done {
		el := time.Since(b.start)
		eta = " ETA " + (el * time.Duration(p.Total-p.Done) / time.Duration(p.Done)).Round(time.Second).String()
	}
	status := ""
	if p.Err != nil {
		status = " (failed)"
	}
	line := fmt.Sprintf("[%s%s] %d/%d rep %d %s %s%s%s", strings.Repeat("#", n), strings.Repeat(".", width-n),
		p.Done, p.Total, p.Rep, p.Config, p.Test, status, eta)
	if len(line) > 100 {
		line = line[:100]
	}
	fmt.Fprintf(b.w, "\r\033[K%s", line)
}

func (b *progressBar) done() { fmt.Fprint(b.w, "\r\033[K") }

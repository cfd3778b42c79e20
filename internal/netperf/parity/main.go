// Command parity measures the Go netperf/netserver side by side with the
// C netperf 2.7.1 tools on loopback and prints a table of CPU cost per unit
// and throughput for every test and every client→server pairing, with a
// verdict per cell on the target "Go costs at most 5 % more than C", and a
// second table of the work per unit that does not depend on how busy the
// machine is (system calls, context switches):
//
//	go run ./internal/netperf/parity                  # quick: 9 × 2 s per cell + 1 counted, ~12.5 min
//	go run ./internal/netperf/parity -mode thorough   # 16 × 3 s per cell + 1 counted, ~31 min
//	go run ./internal/netperf/parity -n 9 -l 2 -tests TCP_RR,TCP_CRR -raw runs.jsonl
//	go run ./internal/netperf/parity -report runs.jsonl   # re-make the table
//
// Runs are short and interleaved (for each repetition and test: Go→Go,
// C→C, Go→C, C→Go, in an order that rotates between repetitions), so a
// busy shared machine slows every pairing alike; compare figures only
// within one run.
//
// The main figure is the combined client + server CPU time per unit (µs per
// KB moved, or per transaction), taken from the kernel's accounting of the
// two processes themselves: the client's rusage from wait4 (all its
// threads, µs), the server's process CPU clock (clock_gettime on the
// PID's CPUCLOCK_SCHED clock: every thread, live or exited, in ns) read
// before and after the run. Other load on the machine is not charged to
// the test. For UDP_STREAM each side is counted per KB it handled (sent,
// or received: datagrams get lost).
//
// Placement: by default (-pin auto) the request/response tests run client
// and server both on CPU 0 and the streams run every client on CPU 0 and
// every server on CPU 1, C and Go alike (taskset on the whole client
// process, sched_setaffinity on every server thread, so every Go runtime
// thread is bound too). Unpinned, the scheduler moves the two ends between
// CPUs, and whether they share one changes the cost of each wake-up, and
// with it the CPU per unit, by far more than 5 %. A request/response
// transaction on two CPUs wakes a halted CPU twice; on this project's
// virtual machine (a nested, paravirtualised guest) that cost 30–50 µs of
// CPU time per transaction charged to the two processes, 5–10 times the
// tools' own work, and it followed the host's load (±250 % between
// repetitions). On one CPU a transaction is a direct switch between the
// two processes: about 10 µs, ±10–25 %. -pin split is the old placement.
//
// Work per unit: the context switches of every timed run (the client's
// rusage; the server's threads' /proc status before and after), and, in
// -count extra repetitions after the timed ones, the system calls of
// each side counted by perf stat (the raw_syscalls:sys_enter tracepoint;
// no ptrace). perf makes every system call a little dearer, so the
// counted runs are left out of the CPU and throughput figures.
//
// On a machine busy with other work, -rt runs every client and server
// SCHED_FIFO so that the other load cannot preempt them (stream senders
// then hold their CPU for the test's length, leaving the kernel's 5 %
// real-time reserve to the rest). Their own threads then share their CPU
// differently too (a waking Go runtime thread waits for the data thread
// to block instead of preempting it), so it is a tool for a noisy
// machine, not the reference: the reference is a quiet machine without
// -rt.
//
// The verdict: per repetition the ratio of a pairing's CPU per unit to
// C→C's in the same repetition (runs minutes apart share little of the
// machine's load); the table gives the median ratio and a 95 %
// percentile-bootstrap confidence interval of it. "shown" means the whole
// interval lies at or below 1.05; "dearer" means it lies above 1.05;
// "not shown" means the repetitions cannot decide. netperf's own service
// demand (-c, machine-wide /proc/stat) is shown beside it. The C
// netserver runs with -f so that its tests are accounted to its own
// process (forked children are reaped with SIGCHLD ignored, which loses
// their times).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sluice/internal/netperf/internal/syscount"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "quick", "defaults for -n and -l: quick (9 × 2 s, ~12.5 min for everything with one counted repetition) or thorough (16 × 3 s, ~31 min)")
	reps := fs.Int("n", 0, "repetitions of every test and pairing (default: the mode's)")
	length := fs.Int("l", 0, "test length in seconds, netperf -l (default: the mode's)")
	testsArg := fs.String("tests", strings.Join(testNames(), ","), "tests to run")
	pairsArg := fs.String("pairs", "GG,CC,GC,CG", "client→server pairings: G = Go, C = C")
	cDir := fs.String("c", "", "directory of the C netperf and netserver (default: $NETPERF_C_BIN's, else ../shared/netperf-c/bin)")
	goDir := fs.String("go", "", "directory of the Go netperf and netserver (default: built from this module)")
	pin := fs.String("pin", "auto", "CPU placement: auto (request/response tests: client and server both on CPU 0; streams: client on CPU 0, server on CPU 1), split (every client on CPU 0, every server on CPU 1), same (both on CPU 0) or none (the scheduler's)")
	count := fs.Int("count", 1, "counted repetitions per cell after the timed ones: the runs under perf stat that count system calls (left out of the CPU and throughput figures); 0 for none")
	rt := fs.Bool("rt", false, "run every client and server SCHED_FIFO (chrt -f 10), so that other load on a busy machine cannot preempt them; it also changes how their threads share a CPU, so compare only runs made alike")
	rawOut := fs.String("raw", "", "also write every run as a JSON line to this file")
	reportIn := fs.String("report", "", "re-make the table from a -raw file instead of measuring")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *reportIn != "" {
		runs, meta, err := readRaw(*reportIn)
		if err != nil {
			fmt.Fprintln(stderr, "parity:", err)
			return 1
		}
		report(stdout, meta, runs)
		return 0
	}
	tests, err := pickTests(*testsArg)
	if err != nil {
		fmt.Fprintln(stderr, "parity:", err)
		return 2
	}
	pairs := strings.Split(*pairsArg, ",")
	for _, p := range pairs {
		if len(p) != 2 || strings.Trim(p, "GC") != "" {
			fmt.Fprintf(stderr, "parity: bad pairing %q (want GG, CC, GC or CG)\n", p)
			return 2
		}
	}
	switch *pin {
	case "auto", "split", "same":
	case "none", "":
		*pin = ""
	default:
		fmt.Fprintf(stderr, "parity: bad -pin %q (want auto, split, same or none)\n", *pin)
		return 2
	}
	switch *mode {
	case "quick":
		*reps, *length = cmp.Or(*reps, 9), cmp.Or(*length, 2)
	case "thorough":
		*reps, *length = cmp.Or(*reps, 16), cmp.Or(*length, 3)
	default:
		fmt.Fprintf(stderr, "parity: bad -mode %q (want quick or thorough)\n", *mode)
		return 2
	}
	if *reps < 1 || *length < 1 || *count < 0 {
		fmt.Fprintln(stderr, "parity: -n and -l must be at least 1, -count at least 0")
		return 2
	}
	m, err := newMeasurer(*cDir, *goDir, *pin, *rt, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "parity:", err)
		return 1
	}
	defer m.close()
	if *count > 0 {
		if err := syscount.Available(); err != nil {
			fmt.Fprintf(stderr, "parity: no system call counts (-count 0 to run without): %v\n", err)
			return 1
		}
	}
	var raw io.Writer = io.Discard
	if *rawOut != "" {
		f, err := os.Create(*rawOut)
		if err != nil {
			fmt.Fprintln(stderr, "parity:", err)
			return 1
		}
		defer f.Close()
		raw = f
	}
	meta := Meta{Start: time.Now(), Reps: *reps, Counted: *count, Length: *length, LoadStart: loadAvg(), Kernel: kernel(), Pin: *pin, RT: *rt}
	total := (*reps + *count) * len(tests) * len(pairs)
	fmt.Fprintf(stderr, "parity: %d runs of %d s (%d timed and %d counted repetitions × %d tests × %d pairings), about %s\n",
		total, *length, *reps, *count, len(tests), len(pairs),
		(time.Duration(total) * (time.Duration(*length)*time.Second + runOverhead)).Round(time.Minute))
	enc := json.NewEncoder(raw)
	_ = enc.Encode(Record{Meta: &meta})
	var runs []Run
	// The counted repetitions come after the timed ones: perf's
	// tracepoint makes every system call a little dearer, so their CPU
	// times are not used.
	for rep := range *reps + *count {
		counted := rep >= *reps
		for ti, t := range tests {
			for k := range pairs {
				// Rotate the order so no pairing always runs first.
				p := pairs[(k+rep+ti)%len(pairs)]
				r, err := m.measure(t, p, rep, *length, counted)
				if err != nil {
					fmt.Fprintf(stderr, "parity: %s %s: %v\n", t.Name, p, err)
					return 1
				}
				runs = append(runs, r)
				_ = enc.Encode(Record{Run: &r})
				if counted {
					c, s := r.perUnit(float64(r.ClientSyscalls), float64(r.ServerSyscalls))
					fmt.Fprintf(stderr, "counted %d %-14s %s  syscalls/unit %.4f + %.4f  %10.2f %s  load %.2f\n",
						rep+1-*reps, t.Name, pairLabel(p), c, s, r.Throughput, r.Units, r.Load)
					continue
				}
				fmt.Fprintf(stderr, "rep %d %-14s %s  cpu/unit %8.3f  sd %8.3f  %10.2f %s  load %.2f\n",
					rep+1, t.Name, pairLabel(p), r.CPUPerUnit(), r.LocalSD, r.Throughput, r.Units, r.Load)
			}
		}
	}
	meta.End, meta.LoadEnd = time.Now(), loadAvg()
	_ = enc.Encode(Record{Meta: &meta})
	report(stdout, meta, runs)
	return 0
}

// runOverhead is roughly what a run costs beyond its -l seconds (process
// starts, control connection, the end-of-test exchange), for the
// estimate printed at the start.
const runOverhead = 330 * time.Millisecond

// Test is one netperf test with its options.
type Test struct {
	Name string   // label in the table
	Args []string // netperf -t and test options
	// Stream tests count KB; which local counter holds them.
	// Request/response tests leave it empty.
	Bytes string
}

// rr reports a request/response test.
func (t Test) rr() bool { return t.Bytes == "" }

var allTests = []Test{
	{"TCP_STREAM 16K", []string{"-t", "TCP_STREAM", "--", "-m", "16K"}, "LOCAL_BYTES_SENT"},
	{"TCP_STREAM 64K", []string{"-t", "TCP_STREAM", "--", "-m", "64K"}, "LOCAL_BYTES_SENT"},
	{"TCP_STREAM 1K", []string{"-t", "TCP_STREAM", "--", "-m", "1K"}, "LOCAL_BYTES_SENT"},
	{"TCP_MAERTS", []string{"-t", "TCP_MAERTS"}, "LOCAL_BYTES_RECVD"},
	{"TCP_RR", []string{"-t", "TCP_RR"}, ""},
	{"TCP_CRR", []string{"-t", "TCP_CRR"}, ""},
	{"UDP_RR", []string{"-t", "UDP_RR"}, ""},
	{"UDP_STREAM 1K", []string{"-t", "UDP_STREAM", "--", "-m", "1K"}, "LOCAL_BYTES_SENT"},
}

func testNames() []string {
	var n []string
	for _, t := range allTests {
		n = append(n, strings.ReplaceAll(t.Name, " ", ":"))
	}
	return n
}

func pickTests(arg string) ([]Test, error) {
	var out []Test
	for _, name := range strings.Split(arg, ",") {
		name = strings.ReplaceAll(name, ":", " ")
		found := false
		for _, t := range allTests {
			if strings.EqualFold(t.Name, name) {
				out = append(out, t)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown test %q (known: %s)", name, strings.Join(testNames(), ","))
		}
	}
	return out, nil
}

// Meta describes a measurement session.
type Meta struct {
	Start, End         time.Time
	Reps, Length       int
	Counted            int // counted repetitions (system calls) after the timed ones
	LoadStart, LoadEnd string
	Kernel             string
	Pin                string // CPU placement (-pin): auto, split, same or ""
	RT                 bool   // clients and servers ran SCHED_FIFO (-rt)
}

// Run is one netperf invocation's figures.
type Run struct {
	Test       string
	Pair       string // client letter, server letter
	Rep        int
	Throughput float64
	Units      string
	Elapsed    float64
	LocalSD    float64 // netperf -c service demand (machine-wide)
	RemoteSD   float64
	// Amount is the number of units moved: KB or transactions.
	Amount float64
	// ServerAmount is what the server handled when it differs from
	// Amount: the KB netserver received in UDP_STREAM (datagrams get
	// lost), 0 otherwise.
	ServerAmount float64
	// ClientCPU and ServerCPU are process CPU seconds (user + system).
	ClientCPU, ServerCPU float64
	Load                 float64 // 1-minute load average when the run ended
	// ClientPin and ServerPin are the CPUs the two ran on ("" = any).
	ClientPin, ServerPin string `json:",omitempty"`
	// Voluntary (blocking) and involuntary (preempted) context switches
	// during the run: the client's from its rusage, the server's from
	// its threads' /proc counts before and after (perf's count of both
	// together, as voluntary, in a counted run).
	ClientVCSW, ClientIVCSW, ServerVCSW, ServerIVCSW int64 `json:",omitempty"`
	// Counted marks a run made under perf stat to count system calls:
	// its CPU times and throughput are left out of the figures.
	Counted bool `json:",omitempty"`
	// ClientSyscalls and ServerSyscalls are the system calls each made
	// (counted runs): the client's from its exec to its exit (start-up
	// and control connection included), the server's from just before
	// the client started to just after it ended.
	ClientSyscalls, ServerSyscalls int64 `json:",omitempty"`
}

// CPUPerUnit is the combined client and server CPU time per unit, in µs.
func (r Run) CPUPerUnit() float64 {
	if r.Amount <= 0 {
		return 0
	}
	if r.ServerAmount > 0 {
		// Each side per unit it handled: a receiver that gets fewer
		// datagrams must not look cheaper for it.
		return (r.ClientCPU/r.Amount + r.ServerCPU/r.ServerAmount) * 1e6
	}
	return (r.ClientCPU + r.ServerCPU) * 1e6 / r.Amount
}

// perUnit divides a client and a server count by the units each
// handled (for UDP_STREAM the server's are the KB it received).
func (r Run) perUnit(client, server float64) (c, s float64) {
	if r.Amount <= 0 {
		return 0, 0
	}
	sa := r.Amount
	if r.ServerAmount > 0 {
		sa = r.ServerAmount
	}
	return client / r.Amount, server / sa
}

// Record is one line of the raw output.
type Record struct {
	Meta *Meta `json:",omitempty"`
	Run  *Run  `json:",omitempty"`
}

func readRaw(path string) ([]Run, Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Meta{}, err
	}
	defer f.Close()
	var runs []Run
	var meta Meta
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var rec Record
		if err := dec.Decode(&rec); err == io.EOF {
			break
		} else if err != nil {
			return nil, meta, fmt.Errorf("%s: %w", path, err)
		}
		if rec.Meta != nil {
			meta = *rec.Meta
		}
		if rec.Run != nil {
			runs = append(runs, *rec.Run)
		}
	}
	return runs, meta, nil
}

type server struct {
	cmd  *exec.Cmd
	port int
	cpu  string // the CPU it is bound to, "" for none
}

type measurer struct {
	bin     map[byte]string // netperf by implementation letter
	servers map[byte]*server
	tmp     string
	pin     string // -pin
	rt      bool   // run under chrt -f
}

// placement returns the CPUs a test's client and server run on ("" for
// any). Request/response tests run both on one CPU under -pin auto: each
// transaction is then a direct switch from one process to the other. On
// separate CPUs every transaction wakes a halted CPU twice, and on a
// virtual machine that costs tens of µs of CPU time per transaction
// (charged to the processes: an interprocessor interrupt and a halt each
// leave the guest), which swamps the tools' own few µs and varies with
// the host's load by several hundred per cent. Streams wake the other
// side rarely, so they keep a CPU each.
func (m *measurer) placement(t Test) (client, server string) {
	switch m.pin {
	case "same":
		return "0", "0"
	case "split":
		return "0", "1"
	case "auto":
		if t.rr() {
			return "0", "0"
		}
		return "0", "1"
	}
	return "", ""
}

// command runs bin on cpu (through taskset) when one is set, SCHED_FIFO
// (through chrt) with -rt.
func (m *measurer) command(cpu, bin string, args ...string) *exec.Cmd {
	argv := append([]string{bin}, args...)
	if cpu != "" {
		argv = append([]string{"taskset", "-c", cpu}, argv...)
	}
	if m.rt {
		argv = append([]string{"chrt", "-f", "10"}, argv...)
	}
	return exec.Command(argv[0], argv[1:]...)
}

func newMeasurer(cDir, goDir, pin string, rt bool, stderr io.Writer) (*measurer, error) {
	m := &measurer{bin: map[byte]string{}, servers: map[byte]*server{}, rt: rt, pin: pin}
	_, serverCPU := m.placement(Test{Bytes: "stream"})
	if cDir == "" {
		if b := os.Getenv("NETPERF_C_BIN"); b != "" {
			cDir = filepath.Dir(b)
		} else {
			cDir = "../shared/netperf-c/bin"
		}
	}
	// The temporary directory holds the Go tools when they are built
	// here, and perf's counts.
	tmp, err := os.MkdirTemp("", "parity")
	if err != nil {
		return nil, err
	}
	m.tmp = tmp
	if goDir == "" {
		// Static, as `make` builds them: a cgo build loads libc at every
		// start, ~4 ms of a client's CPU that C's netperf does not pay.
		build := exec.Command("go", "build", "-o", tmp, "sluice/cmd/netperf", "sluice/cmd/netserver")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			m.close()
			return nil, fmt.Errorf("building the Go tools: %w", err)
		}
		goDir = tmp
	}
	for letter, dir := range map[byte]string{'C': cDir, 'G': goDir} {
		np, ns := filepath.Join(dir, "netperf"), filepath.Join(dir, "netserver")
		for _, b := range []string{np, ns} {
			if _, err := os.Stat(b); err != nil {
				m.close()
				return nil, err
			}
		}
		m.bin[letter] = np
		port, err := freePort()
		if err != nil {
			m.close()
			return nil, err
		}
		args := []string{"-D", "-L", "127.0.0.1", "-p", strconv.Itoa(port)}
		if letter == 'C' {
			args = append(args, "-f")
		}
		cmd := m.command(serverCPU, ns, args...)
		if err := cmd.Start(); err != nil {
			m.close()
			return nil, err
		}
		m.servers[letter] = &server{cmd: cmd, port: port, cpu: serverCPU}
		if err := waitPort(port); err != nil {
			m.close()
			return nil, fmt.Errorf("%s: %w", ns, err)
		}
	}
	return m, nil
}

func (m *measurer) close() {
	for _, s := range m.servers {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	if m.tmp != "" {
		os.RemoveAll(m.tmp)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitPort(port int) error {
	for range 100 {
		if c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("netserver did not start listening")
}

var selectors = []string{"THROUGHPUT", "THROUGHPUT_UNITS", "ELAPSED_TIME", "LOCAL_SD", "REMOTE_SD", "LOCAL_BYTES_SENT", "LOCAL_BYTES_RECVD", "REMOTE_BYTES_RECVD"}

func (m *measurer) measure(t Test, pair string, rep, length int, counted bool) (Run, error) {
	srv := m.servers[pair[1]]
	clientCPU, serverCPU := m.placement(t)
	if serverCPU != srv.cpu {
		cpu, _ := strconv.Atoi(serverCPU)
		if err := setAffinity(srv.cmd.Process.Pid, cpu); err != nil {
			return Run{}, err
		}
		srv.cpu = serverCPU
	}
	args := []string{"-H", "127.0.0.1", "-p", strconv.Itoa(srv.port), "-l", strconv.Itoa(length), "-c", "-C", "-P", "0"}
	args = append(args, t.Args...)
	if !containsDashDash(t.Args) {
		args = append(args, "--")
	}
	args = append(args, "-k", strings.Join(selectors, ","))
	bin := m.bin[pair[0]]
	var perfOut string
	var sc *syscount.Counter
	if counted {
		perfOut = filepath.Join(m.tmp, "perf-client.csv")
		args = append(append(syscount.Prefix(perfOut)[1:], bin), args...)
		bin = "perf"
		var err error
		if sc, err = syscount.Attach(srv.cmd.Process.Pid, m.tmp); err != nil {
			return Run{}, err
		}
		defer sc.Close()
		if err := sc.Start(); err != nil {
			return Run{}, err
		}
	}
	s0, err := procCPU(srv.cmd.Process.Pid)
	if err != nil {
		return Run{}, err
	}
	v0, i0, err := procCtx(srv.cmd.Process.Pid)
	if err != nil {
		return Run{}, err
	}
	cmd := m.command(clientCPU, bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return Run{}, fmt.Errorf("netperf %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	s1, err := procCPU(srv.cmd.Process.Pid)
	if err != nil {
		return Run{}, err
	}
	v1, i1, err := procCtx(srv.cmd.Process.Pid)
	if err != nil {
		return Run{}, err
	}
	var srvCounts syscount.Counts
	if counted {
		if srvCounts, err = sc.Stop(); err != nil {
			return Run{}, err
		}
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	kv := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			kv[k] = v
		}
	}
	num := func(k string) (float64, error) {
		v, err := strconv.ParseFloat(kv[k], 64)
		if err != nil {
			return 0, fmt.Errorf("netperf %s: bad or missing %s in output %q", strings.Join(args, " "), k, out.String())
		}
		return v, nil
	}
	r := Run{Test: t.Name, Pair: pair, Rep: rep, Units: kv["THROUGHPUT_UNITS"]}
	for _, f := range []struct {
		k string
		v *float64
	}{{"THROUGHPUT", &r.Throughput}, {"ELAPSED_TIME", &r.Elapsed}, {"LOCAL_SD", &r.LocalSD}, {"REMOTE_SD", &r.RemoteSD}} {
		if *f.v, err = num(f.k); err != nil {
			return r, err
		}
	}
	if t.Bytes != "" {
		b, err := num(t.Bytes)
		if err != nil {
			return r, err
		}
		r.Amount = b / 1024
		if strings.HasPrefix(t.Name, "UDP_STREAM") {
			rb, err := num("REMOTE_BYTES_RECVD")
			if err != nil {
				return r, err
			}
			r.ServerAmount = rb / 1024
		}
	} else {
		// RR tests use 1-byte requests: bytes sent count transactions.
		if r.Amount, err = num("LOCAL_BYTES_SENT"); err != nil {
			return r, err
		}
	}
	r.ClientCPU = tv(ru.Utime) + tv(ru.Stime)
	r.ServerCPU = s1 - s0
	r.ClientPin, r.ServerPin = clientCPU, serverCPU
	r.ClientVCSW, r.ClientIVCSW = ru.Nvcsw, ru.Nivcsw
	r.ServerVCSW, r.ServerIVCSW = v1-v0, i1-i0
	if counted {
		cli, err := syscount.ReadFile(perfOut)
		if err != nil {
			return r, err
		}
		r.Counted = true
		r.ClientSyscalls, r.ServerSyscalls = cli.Syscalls(), srvCounts.Syscalls()
		// perf counts both kinds of switch as one; rusage here would
		// be perf's own.
		r.ClientVCSW, r.ClientIVCSW = cli.Switches(), 0
		r.ServerVCSW, r.ServerIVCSW = srvCounts.Switches(), 0
	}
	if l, err := strconv.ParseFloat(strings.Fields(loadAvg() + " 0")[0], 64); err == nil {
		r.Load = l
	}
	return r, nil
}

func containsDashDash(a []string) bool {
	for _, s := range a {
		if s == "--" {
			return true
		}
	}
	return false
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

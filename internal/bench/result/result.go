// Package result is the raw-results format of `sluice bench`: a stream of
// JSON lines, one record per line, written as measurements happen so an
// interrupted run keeps what it measured. The first record describes the
// run (kernel, CPU, options, configurations, tests); then one record per
// repetition of a test under a configuration, and one per configuration
// that was skipped. `sluice report` is a pure function of this stream.
package result

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"
)

// Version of the format. Version 2 added Test.Client (before it, the
// netperf client always ran on the system under test); version 3 added
// link profiles (Test.Link, Test.Netperf), the machine's load
// (Run.LoadBefore, EndInfo.LoadDuring), the traffic generator's
// identity (Run.Generator) and the in-kernel cost of eBPF programs
// (Rep.BPF). Read accepts 1 to 3 and rejects others.
const Version = 3

// Hosts a netperf client can run on (Test.Client). Client is the
// client namespace of the gateway topology, whose tests cross the SUT.
const (
	SUT    = "sut"
	Peer   = "peer"
	Client = "client"
)

// Directions of a test relative to the system under test.
const (
	Inbound  = "inbound"
	Outbound = "outbound"
	// Forwarded tests cross the SUT (a gateway) from a client to a
	// server.
	Forwarded = "forwarded"
)

// Kinds of records.
const (
	KindRun  = "run"
	KindRep  = "rep"
	KindSkip = "skip"
	KindEnd  = "end"
)

// Record is one line of the stream. Exactly one of Run, Rep, Skip and End
// is set, as Kind says.
type Record struct {
	Kind string   `json:"kind"`
	Run  *Run     `json:"run,omitempty"`
	Rep  *Rep     `json:"rep,omitempty"`
	Skip *Skip    `json:"skip,omitempty"`
	End  *EndInfo `json:"end,omitempty"`
}

// Run describes the measurement as a whole.
type Run struct {
	Version   int       `json:"version"`
	Start     time.Time `json:"start"`
	Kernel    string    `json:"kernel"`
	CPUModel  string    `json:"cpu_model"`
	NumCPU    int       `json:"num_cpu"`
	Hostname  string    `json:"hostname,omitempty"`
	GoVersion string    `json:"go_version,omitempty"`
	// Runner names the traffic generator ("netperf"; tests use fakes).
	Runner   string        `json:"runner"`
	Mode     string        `json:"mode"` // quick, full or custom
	Duration time.Duration `json:"duration_ns"`
	Reps     int           `json:"reps"`
	Warmup   time.Duration `json:"warmup_ns"`
	// Generator says which netperf measured: the in-process Go netperf
	// library or external binaries (paths and their version line).
	Generator string `json:"generator,omitempty"`
	// Topology options as text (MTU, offloads, CPUs, remote).
	Topology string `json:"topology"`
	// LoadBefore is the machine's load just before the run.
	LoadBefore *Load `json:"load_before,omitempty"`
	// Directions of the test names relative to the system under test.
	Notes   []string `json:"notes,omitempty"`
	Configs []Config `json:"configs"`
	Tests   []Test   `json:"tests"`
}

// Config identifies a configuration in the results.
type Config struct {
	Name        string `json:"name"`
	Family      string `json:"family"`
	Description string `json:"description"`
	Suite       string `json:"suite,omitempty"`
}

// Test is one entry of the test matrix.
type Test struct {
	ID       string `json:"id"`   // unique, e.g. "TCP_STREAM 64K"
	Name     string `json:"name"` // netperf test name
	Suite    string `json:"suite"`
	SendSize int    `json:"send_size,omitempty"`
	ReqSize  int    `json:"req_size,omitempty"`
	RespSize int    `json:"resp_size,omitempty"`
	// Client is the host the netperf client runs on (SUT or Peer); the
	// netserver runs on the other. Empty means SUT (version 1).
	Client string `json:"client,omitempty"`
	// Link is the link profile the test ran over ("100BaseT", "1GigE",
	// "10GigE"); empty for the unshaped veth (version 3).
	Link string `json:"link,omitempty"`
	// Netperf is the netperf test that was run when it differs from
	// Name: a remote peer runs only netserver, so an inbound
	// TCP_STREAM is measured as a TCP_MAERTS from the SUT (version 3).
	Netperf string `json:"netperf,omitempty"`
}

// NetperfTest returns the netperf test to run.
func (t Test) NetperfTest() string {
	if t.Netperf != "" {
		return t.Netperf
	}
	return t.Name
}

// ClientHost returns where the netperf client runs: SUT or Peer.
func (t Test) ClientHost() string {
	if t.Client == "" {
		return SUT
	}
	return t.Client
}

// ServerHost returns where netserver runs: the other host.
func (t Test) ServerHost() string {
	if t.ClientHost() == Client {
		return "server"
	}
	if t.ClientHost() == SUT {
		return Peer
	}
	return SUT
}

// Direction says which way the test loads the system under test: for
// streams, where the data flows (TCP_STREAM sends from client to server,
// TCP_MAERTS from server to client); for request/response tests, where
// the connections and requests come from (Inbound: they arrive at the
// SUT).
func (t Test) Direction() string {
	if t.ClientHost() == Client {
		return Forwarded
	}
	fromClient := !strings.HasSuffix(t.NetperfTest(), "_MAERTS")
	if fromClient == (t.ClientHost() == Peer) {
		return Inbound
	}
	return Outbound
}

// Stream reports whether the test moves bulk data (throughput in
// 10^6bits/s, service demand in us/KB) rather than transactions.
func (t Test) Stream() bool {
	return strings.HasSuffix(t.Name, "_STREAM") || strings.HasSuffix(t.Name, "_MAERTS")
}

// Rep is one repetition of one test under one configuration. Units are
// in the field names.
type Rep struct {
	Config string    `json:"config"`
	Test   string    `json:"test"` // Test.ID
	Rep    int       `json:"rep"`  // 1-based; 0 = warm-up
	Time   time.Time `json:"time"`

	ElapsedSec     float64 `json:"elapsed_s"`
	ThroughputMbps float64 `json:"throughput_mbps,omitempty"` // 10^6bits/s
	TransPerSec    float64 `json:"trans_per_s,omitempty"`
	LocalCPU       float64 `json:"local_cpu_pct"`  // %, -1 = not measured
	RemoteCPU      float64 `json:"remote_cpu_pct"` // %
	LocalSD        float64 `json:"local_sd"`       // us/KB or us/Tr
	RemoteSD       float64 `json:"remote_sd"`
	Error          string  `json:"error,omitempty"`
	// BPF is the kernel's run-time statistics of the eBPF programs
	// attached to the SUT's link, accumulated over this test (kernel
	// BPF statistics are on during the run).
	BPF []ProgStat `json:"bpf,omitempty"`
}

// ProgStat is the in-kernel cost of one eBPF program over one test:
// deltas of the kernel's run_time_ns and run_cnt.
type ProgStat struct {
	Hook   string `json:"hook"`           // "ingress" or "egress" (TCX)
	Link   string `json:"link,omitempty"` // the interface it is attached to
	Name   string `json:"name"`           // the program's name
	ID     uint32 `json:"id"`
	RunNs  uint64 `json:"run_ns"`
	RunCnt uint64 `json:"run_cnt"`
}

// NsPerRun returns the mean in-kernel time per run (per packet), NaN
// when the program did not run.
func (p ProgStat) NsPerRun() float64 {
	if p.RunCnt == 0 {
		return math.NaN()
	}
	return float64(p.RunNs) / float64(p.RunCnt)
}

// Load describes how busy the machine was: the load averages at a
// moment and, over an interval, the share of CPU time the hypervisor
// stole and the share that was not idle (every CPU together, in %).
type Load struct {
	Time     time.Time `json:"time"`
	Load1    float64   `json:"load1"`
	Load5    float64   `json:"load5"`
	Load15   float64   `json:"load15"`
	Interval float64   `json:"interval_s"` // length of the steal/busy window
	StealPct float64   `json:"steal_pct"`
	BusyPct  float64   `json:"busy_pct"`
	// MaxLoad1 is the highest 1-minute load average sampled during a
	// run (LoadDuring only).
	MaxLoad1 float64 `json:"max_load1,omitempty"`
}

// Skip records a configuration that could not run, and why.
type Skip struct {
	Config string `json:"config"`
	Reason string `json:"reason"`
}

// EndInfo closes a run; its absence means the run was interrupted.
type EndInfo struct {
	Time        time.Time `json:"time"`
	Interrupted bool      `json:"interrupted,omitempty"`
	Error       string    `json:"error,omitempty"`
	// LoadDuring is the machine's load over the run (steal and busy
	// shares over the whole run, load averages at the end).
	LoadDuring *Load `json:"load_during,omitempty"`
}

// Writer appends records to a stream; safe for concurrent use.
type Writer struct {
	mu sync.Mutex // guards w and err
	w  *bufio.Writer
	f  io.Writer
	c  io.Closer
}

// Create opens path for writing (truncating it).
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := NewWriter(f)
	w.c = f
	return w, nil
}

// NewWriter writes records to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w), f: w} }

// Write appends one record and flushes it (and syncs, for a file) so a
// crash loses nothing already measured.
func (w *Writer) Write(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w.Write(b)
	w.w.WriteByte('\n')
	if err := w.w.Flush(); err != nil {
		return err
	}
	if f, ok := w.f.(*os.File); ok {
		return f.Sync()
	}
	return nil
}

// Close flushes and closes the underlying file, if Create opened it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.w.Flush()
	if w.c != nil {
		err = errors.Join(err, w.c.Close())
	}
	return err
}

// Set is a parsed results stream.
type Set struct {
	Run   Run
	Reps  []Rep
	Skips []Skip
	End   *EndInfo // nil when the run was cut short
}

// Read parses a results stream. Malformed lines are errors with their
// line number; a truncated last line (a run killed mid-write) is
// ignored.
func Read(r io.Reader) (*Set, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var s Set
	haveRun := false
	var pending error
	for line := 1; sc.Scan(); line++ {
		if pending != nil {
			return nil, pending
		}
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			pending = fmt.Errorf("results:%d: %w", line, err)
			continue
		}
		switch rec.Kind {
		case KindRun:
			if rec.Run == nil || haveRun {
				return nil, fmt.Errorf("results:%d: unexpected run record", line)
			}
			if rec.Run.Version < 1 || rec.Run.Version > Version {
				return nil, fmt.Errorf("results:%d: format version %d, want 1 to %d", line, rec.Run.Version, Version)
			}
			s.Run, haveRun = *rec.Run, true
		case KindRep:
			if rec.Rep == nil || !haveRun {
				return nil, fmt.Errorf("results:%d: repetition before the run record", line)
			}
			s.Reps = append(s.Reps, *rec.Rep)
		case KindSkip:
			if rec.Skip == nil {
				return nil, fmt.Errorf("results:%d: empty skip record", line)
			}
			s.Skips = append(s.Skips, *rec.Skip)
		case KindEnd:
			s.End = rec.End
		default:
			return nil, fmt.Errorf("results:%d: unknown record kind %q", line, rec.Kind)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	if !haveRun {
		return nil, errors.New("results: no run record")
	}
	return &s, nil
}

// ReadFile reads a results file.
func ReadFile(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

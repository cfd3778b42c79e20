package report

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/bench/run"
)

// synthPaper makes a deterministic results set shaped like a --paper
// run: the preset's tests and configurations, reps repetitions, each
// configuration a fixed factor of none's rate and service demand with a
// small alternating wobble, in-kernel statistics for the eBPF ones.
// nft-attach equals none but for the wobble: its Δ must read as noise.
func synthPaper(reps int) *result.Set {
	p := run.Paper()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	set := &result.Set{Run: result.Run{Version: result.Version, Start: start, Kernel: "6.18.0", CPUModel: "Test CPU", NumCPU: 2,
		Runner: "netperf", Generator: "in-process Go netperf", Mode: "paper", Duration: p.Duration, Reps: reps, Warmup: p.Warmup,
		Topology: "two network namespaces joined by a veth pair", Tests: p.Tests,
		LoadBefore: &result.Load{Time: start, Load1: 1.9, Load5: 1.2, Load15: 1.0, Interval: 1, StealPct: 0.5, BusyPct: 45}}}
	factor := map[string][2]float64{ // rate, service demand
		"none": {1, 1}, "tcx-floor": {0.99, 1.01}, "sluice-attach": {0.97, 1.04}, "sluice-stateless": {0.95, 1.07},
		"sluice-stateful": {0.93, 1.09}, "nft-attach": {1, 1}, "nft-stateless": {0.98, 1.02}, "nft-stateful": {0.9, 1.12},
		"sluice-qos": {0.99, 1.03}, "nft-dscp": {0.98, 1.05},
	}
	ns := map[string]float64{"tcx-floor": 70, "sluice-attach": 700, "sluice-stateless": 900, "sluice-stateful": 930}
	for _, name := range strings.Split(p.Configs, ",") {
		suite := "ipf"
		if strings.Contains(name, "qos") || strings.Contains(name, "dscp") {
			suite = "qos"
		}
		if name == "none" {
			suite = ""
		}
		set.Run.Configs = append(set.Run.Configs, result.Config{Name: name, Family: "x", Description: name, Suite: suite})
	}
	for rep := 1; rep <= reps; rep++ {
		wob := 1 + 0.01*float64(rep%3-1)
		for _, c := range set.Run.Configs {
			for ti, t := range p.Tests {
				if c.Suite != "" && c.Suite != t.Suite {
					continue
				}
				f := factor[c.Name]
				base := 1000.0 + 10*float64(ti)
				r := result.Rep{Config: c.Name, Test: t.ID, Rep: rep, Time: start, ElapsedSec: 10,
					LocalCPU: 50 * wob, RemoteCPU: 60 * wob, LocalSD: 2 * f[1] * wob, RemoteSD: 3 * f[1] * wob}
				if t.Stream() {
					r.ThroughputMbps = base * f[0] * wob
				} else {
					r.TransPerSec = 10 * base * f[0] * wob
				}
				if v, ok := ns[c.Name]; ok {
					r.BPF = []result.ProgStat{
						{Hook: "ingress", Name: "prog", ID: 7, RunCnt: 100000, RunNs: uint64(100000 * v * wob)},
						{Hook: "egress", Name: "prog", ID: 8, RunCnt: 90000, RunNs: uint64(90000 * 0.8 * v * wob)},
					}
				}
				set.Reps = append(set.Reps, r)
			}
		}
	}
	set.End = &result.EndInfo{Time: start.Add(time.Hour), LoadDuring: &result.Load{Load1: 2.5, Load5: 2.4, Load15: 2, Interval: 3600, StealPct: 3.5, BusyPct: 98, MaxLoad1: 4.2}}
	return set
}

// TestPaperReport checks the papers' figures beside the run's, the
// confidence intervals and the noise verdicts, the in-kernel cost table
// and the busy-machine warnings, against a golden file.
func TestPaperReport(t *testing.T) {
	m := Build(synthPaper(4))
	var b bytes.Buffer
	if err := WriteMarkdown(&b, m, Options{}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"## The papers beside Sluice and nftables",
		"| Table 3 (p. 8): 10GigE CRR transaction rate (1-byte messages) | TCP_CRR 1/1 inbound @10GigE | rate | No rules | 26991.77 | -1.3 % |",
		"| Table 10 (p. 15): 1GigE CRR CPU utilisation | TCP_CRR 1/1 inbound @1GigE | CPU | Stateless rules | 8.99 | +10.6 % |",
		"Raw data for GIGE-bit interface: Without IPQoS",
		"## In-kernel cost per packet",
		"| TCP_CRR 1/1 inbound @10GigE | tcx-floor | 70.00 [69.30–70.70] |",
		"within noise",
		"**Warning**: the hypervisor stole 3.5 % of CPU time during the run",
		"**Warning**: the 1-minute load reached 4.20 during the run",
		"| Traffic generator (which netperf measured) | in-process Go netperf |",
		"| Link profiles | 10GigE, 1GigE, 100BaseT",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	golden(t, "paper-report.md.golden", b.Bytes())
	// nft-attach is none with the same wobble: every one of its Δs is
	// noise; sluice-stateful's -7 % rate is not.
	ipf := m.suite("ipf")
	for _, tt := range ipf.Tests {
		if c := ipf.Cells[tt.ID]["nft-attach"][Rate]; !c.Noise() {
			t.Errorf("%s nft-attach: Δ %v CI %+v, want within noise", tt.ID, c.Diff, c.DiffCI)
		}
		if c := ipf.Cells[tt.ID]["sluice-stateful"][Rate]; c.Noise() || math.Abs(c.Diff+7) > 1e-6 {
			t.Errorf("%s sluice-stateful: Δ %v CI %+v, want -7 %% and significant", tt.ID, c.Diff, c.DiffCI)
		}
	}
	var s bytes.Buffer
	if err := WriteSummary(&s, m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.String(), "≈+0.0") || !strings.Contains(s.String(), "WARNING") {
		t.Errorf("summary marks no insignificant Δ or no warning:\n%s", s.String())
	}
}

// TestPaperTablesConsistent checks the transcription against the
// differences the papers print themselves.
func TestPaperTablesConsistent(t *testing.T) {
	for _, tc := range []struct {
		table string
		i     int
		want  float64 // the paper's printed % difference (absolute)
	}{
		{"Table 4", 1, 1.17}, {"Table 9", 1, 1.01}, {"Table 10", 1, 1.72}, {"Table 10", 2, 10.58},
	} {
		found := false
		for _, pt := range ipfTables {
			if pt.Table != tc.table {
				continue
			}
			found = true
			if got := math.Abs(pt.paperDiff(tc.i)); math.Abs(got-tc.want) > 0.01 {
				t.Errorf("%s %s: %.2f %%, the paper prints %.2f %%", tc.table, paperConfigs[tc.i], got, tc.want)
			}
		}
		if !found {
			t.Errorf("no %s", tc.table)
		}
	}
	// The derived service demand rows pair a rate table with its CPU table.
	for _, pair := range [][2]int{{4, 5}, {12, 13}} {
		r, c := ipfTables[pair[0]], ipfTables[pair[1]]
		if r.Test != c.Test || r.Metric != Rate || c.Metric != SUTCPU {
			t.Errorf("%s and %s do not pair: %s/%v, %s/%v", r.Table, c.Table, r.Test, r.Metric, c.Test, c.Metric)
		}
	}
	// Every test a table names is one the --paper preset runs.
	ids := map[string]bool{}
	for _, tt := range run.Paper().Tests {
		ids[tt.ID] = true
	}
	for _, pt := range ipfTables {
		if !ids[pt.Test] {
			t.Errorf("%s names %q, which --paper does not run", pt.Table, pt.Test)
		}
	}
	for _, q := range qosTables {
		for _, size := range qosSizes {
			if id := fmt.Sprintf("TCP_STREAM m=%d outbound @%s", size, q.Link); !ids[id] {
				t.Errorf("IPQoS p. %d names %q, which --paper does not run", q.Page, id)
			}
		}
	}
}

// TestPaperCharts renders every chart of a paper-shaped run and checks
// each PNG decodes; with CHARTS_DIR set it keeps them there to look at.
func TestPaperCharts(t *testing.T) {
	dir := os.Getenv("CHARTS_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	names, err := WriteCharts(dir, Build(synthPaper(4)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ipf-rate-diff.png": true, "ipf-sd-diff.png": true, "ipf-bpf-ingress.png": true, "ipf-bpf-egress.png": true,
		"qos-rate-sweep-100baset.png": true, "qos-sd-sweep-1gige.png": true}
	for _, n := range names {
		delete(want, n)
		if !strings.HasSuffix(n, ".png") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", n, err)
		} else if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
			t.Errorf("%s is %v", n, b)
		}
	}
	for n := range want {
		t.Errorf("no chart %s (got %v)", n, names)
	}
}

// TestPartialReport makes the report of runs cut short at every point
// of a --paper run's first repetition — only the header, none's first
// test, none's tests but no configuration's, … — and checks that the
// Markdown, the summary and the charts are made without an error or a
// panic (a log axis with nothing on it used to panic) and say the run
// was interrupted.
func TestPartialReport(t *testing.T) {
	full := synthPaper(1)
	for _, n := range []int{0, 1, 2, 5, 20, 40, 120} {
		set := &result.Set{Run: full.Run, Reps: full.Reps[:min(n, len(full.Reps))]}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := Build(set)
			if !m.Interrupted {
				t.Error("not marked interrupted")
			}
			var b bytes.Buffer
			if err := WriteMarkdown(&b, m, Options{CI: true}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "The run was interrupted") {
				t.Error("the report does not say the run was interrupted")
			}
			if err := WriteSummary(&b, m); err != nil {
				t.Fatal(err)
			}
			if _, err := WriteCharts(t.TempDir(), m); err != nil {
				t.Fatal(err)
			}
		})
	}
}

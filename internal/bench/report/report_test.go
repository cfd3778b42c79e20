package report

import (
	"bytes"
	"flag"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"sluice/internal/bench/result"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func load(t *testing.T) *Model {
	t.Helper()
	set, err := result.ReadFile("testdata/results.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return Build(set)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", name, d)
	}
}

func TestBuild(t *testing.T) {
	m := load(t)
	if len(m.Suites) != 2 || m.Suites[0].Name != "ipf" || m.Suites[1].Name != "qos" {
		t.Fatalf("suites: %+v", m.Suites)
	}
	if got, want := m.Suites[0].Configs, []string{"none", "nft-stateless", "nft-stateful"}; !cmp.Equal(got, want) {
		t.Errorf("ipf configs %v, want %v (skipped ones have no column)", got, want)
	}
	if got, want := m.Suites[1].Configs, []string{"none", "nft-dscp"}; !cmp.Equal(got, want) {
		t.Errorf("qos configs %v, want %v", got, want)
	}
	// TCP_STREAM 64K: none 20000·{1, 1.01, 0.985}, nft-stateful ×0.90.
	c := m.Suites[0].Cells["TCP_STREAM 64K inbound"]
	if got := c["none"][Rate].Median; got != 20000 {
		t.Errorf("none median %v, want 20000", got)
	}
	if got := c["nft-stateful"][Rate]; got.Median != 18000 || got.Min != 17730 || got.Max != 18180 {
		t.Errorf("nft-stateful: %+v", got.Summary)
	}
	if got := c["nft-stateful"][Rate].Diff; math.Abs(got+10) > 1e-9 {
		t.Errorf("nft-stateful Δ %v, want -10", got)
	}
	// The client ran on the peer: the SUT's figures are netperf's remote
	// ones (nft-stateful's CPU 66.67, 66.0, 67.67), the peer's the local
	// ones (0.8 of them in the fixture).
	if got := c["nft-stateful"][SUTCPU]; got.Median != 66.67 || got.Min != 66 || got.Max != 67.67 {
		t.Errorf("inbound, SUT CPU: %+v, want netperf's remote CPU", got.Summary)
	}
	if got := c["nft-stateful"][PeerCPU].Median; math.Abs(got-0.8*66.67) > 1e-3 {
		t.Errorf("inbound, peer CPU: %v, want netperf's local CPU %v", got, 0.8*66.67)
	}
	if got := c["none"][SUTSD].Median; got != 0.4915 {
		t.Errorf("inbound, SUT service demand %v, want netperf's remote 0.4915", got)
	}
	// In the IPQoS sweep the client ran on the SUT: the local figures.
	q := m.Suites[1].Cells["TCP_STREAM m=32 outbound"]
	if got := q["nft-dscp"][SUTCPU].Median; got != 63.16 {
		t.Errorf("outbound from the SUT, SUT CPU %v, want netperf's local 63.16", got)
	}
	if got := q["nft-dscp"][PeerSD].Median; math.Abs(got-0.8*72.6185) > 1e-3 {
		t.Errorf("outbound from the SUT, peer service demand %v, want netperf's remote %v", got, 0.8*72.6185)
	}
	// The failed repetition is excluded and listed.
	rr := m.Suites[0].Cells["TCP_RR 1/1 inbound"]["nft-stateful"][Rate]
	if rr.N != 2 {
		t.Errorf("TCP_RR nft-stateful: %d values, want 2", rr.N)
	}
	if len(m.Failures) != 1 || m.Failures[0].Error != "connection reset by peer" {
		t.Errorf("failures: %+v", m.Failures)
	}
	if len(m.Skips) != 1 || m.Interrupted {
		t.Errorf("skips %+v interrupted %v", m.Skips, m.Interrupted)
	}
}

func TestMarkdownGolden(t *testing.T) {
	m := load(t)
	var b bytes.Buffer
	if err := WriteMarkdown(&b, m, Options{CI: true, Charts: []string{"ipf-rate-diff.svg"}}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.md.golden", b.Bytes())
}

func TestSummaryGolden(t *testing.T) {
	m := load(t)
	var b bytes.Buffer
	if err := WriteSummary(&b, m); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.txt.golden", b.Bytes())
	if n := strings.Count(b.String(), "\n"); n > 24 {
		t.Errorf("summary is %d lines, want one screen (≤ 24)", n)
	}
}

func TestCharts(t *testing.T) {
	m := load(t)
	dir := t.TempDir()
	names, err := WriteCharts(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ipf-rate-diff.svg", "ipf-rate-diff.png", "ipf-sd-diff.svg", "ipf-sd-diff.png",
		"qos-rate-diff.svg", "qos-rate-diff.png", "qos-sd-diff.svg", "qos-sd-diff.png",
		"qos-rate-sweep.svg", "qos-rate-sweep.png", "qos-sd-sweep.svg", "qos-sd-sweep.png",
	}
	if !cmp.Equal(names, want) {
		t.Errorf("charts %v, want %v", names, want)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "ipf-rate-diff.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<svg", "nft-stateful", "TCP_RR 1/1 inbound"} {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("ipf-rate-diff.svg lacks %q", s)
		}
	}
	f, err := os.Open(filepath.Join(dir, "qos-rate-sweep.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
		t.Errorf("PNG is %v", b)
	}
}

// TestInterrupted: a results file cut mid-line still reports, marked as
// interrupted.
func TestInterrupted(t *testing.T) {
	data, err := os.ReadFile("testdata/results.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cut := data[:bytes.LastIndex(data, []byte(`{"kind":"rep"`))+20]
	set, err := result.Read(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	m := Build(set)
	if !m.Interrupted {
		t.Error("not marked interrupted")
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, m, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "interrupted") {
		t.Error("report does not say the run was interrupted")
	}
}

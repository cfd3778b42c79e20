package sluice

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/bench/config"
	"sluice/internal/bench/datapath"
	"sluice/internal/bench/run"
)

// TestMain lets the test binary act as the sluice command when
// SLUICE_CLI_MAIN=1, so the signal test interrupts the real command
// without a separate go build.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_CLI_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr, datapath.Datapaths()))
	}
	os.Exit(m.Run())
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"frobnicate"},
		{"bench", "--quick", "--full"},
		{"bench", "--configs", "bogus"},
		{"bench", "--tests", "UDP_NOPE"},
		{"bench", "--gro", "maybe"},
		{"bench", "--cpus", "x"},
		{"bench", "stray"},
		{"bench", "--port", "0"},
		{"bench", "--out", ""},
		{"bench", "--warmup", "soon"},
		{"report"},
		{"bench", "--paper", "--quick"},
		{"bench", "--link", "2GigE"},
		{"bench", "--netperf", "/bin/true"},
	} {
		var out, errb bytes.Buffer
		if rc := Main(args, &out, &errb, config.Datapaths{}); rc != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, rc, errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("%q: no message", args)
		}
	}
}

// TestRefusals: a combination the bench cannot run is refused with a
// message that says why, before anything is measured (and before the
// root check, so this runs unprivileged too), never dropped silently.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		// sluice-qos marks what the SUT sends; the IPFilter set's
		// inbound TCP_RR is not one of its tests (its own is
		// "TCP_RR 1/1 outbound").
		{[]string{"bench", "--configs", "sluice-qos", "--tests", "TCP_RR 1/1 inbound"}, "configuration sluice-qos takes part in the IPQoS (qos) tests and none is selected"},
		{[]string{"bench", "--configs", "none,nft-stateless", "--tests", "TCP_RR 1/1 inbound,TCP_STREAM m=32"}, `test "TCP_STREAM m=32 outbound" is one of the IPQoS (qos) tests, which none of nft-stateless runs`},
		{[]string{"bench", "--configs", "nft-masq", "--tests", "ipf"}, "configuration nft-masq takes part in the NAT gateway (nat) tests and none is selected"},
		// Without --tests, a suite the preset lacks comes with its
		// configurations, and what is left is the root check.
		{[]string{"bench", "--configs", "all", "--remote", "192.0.2.1"}, `test "TCP_STREAM 64K forwarded" cannot run with --remote`},
		{[]string{"bench", "--remote", "192.0.2.1", "--link", "1GigE", "--configs", "none"}, "cannot run with --remote"},
		{[]string{"bench", "--remote", "192.0.2.1", "--configs", "none", "--tests", "nat"}, "cannot run with --remote"},
		{[]string{"bench", "--link", "1GigE", "--tests", "TCP_STREAM 64K"}, "no test selected"},
	} {
		var out, errb bytes.Buffer
		if rc := Main(tc.args, &out, &errb, config.Datapaths{}); rc != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, rc, errb.String(), tc.want)
		}
	}
}

func TestNotRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root; the not-root message cannot be seen")
	}
	var out, errb bytes.Buffer
	if rc := Main([]string{"bench", "--duration", "1s"}, &out, &errb, config.Datapaths{}); rc != 1 || !strings.Contains(errb.String(), "must run as root") {
		t.Errorf("exit %d, stderr %q", rc, errb.String())
	}
}

// TestReportCommand re-makes the report from the report package's fixed
// results file.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	rc := Main([]string{"report", "--out", dir, "../../bench/report/testdata/results.jsonl"}, &out, &errb, config.Datapaths{})
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## IPFilter white paper", "![ipf-rate-diff.svg](ipf-rate-diff.svg)", "| sluice-stateless | datapath not available |"} {
		if !bytes.Contains(md, []byte(s)) {
			t.Errorf("report.md lacks %q", s)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "qos-rate-sweep.png")); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out.String(), "nft-stateful") || !strings.Contains(out.String(), "Report: ") {
		t.Errorf("summary:\n%s", out.String())
	}
	if rc := Main([]string{"report", filepath.Join(dir, "missing.jsonl")}, &out, &errb, config.Datapaths{}); rc != 1 {
		t.Errorf("missing file: exit %d, want 1", rc)
	}
}

func TestConfigsCommand(t *testing.T) {
	var out bytes.Buffer
	if rc := Main([]string{"configs"}, &out, &out, config.Datapaths{}); rc != 0 {
		t.Fatal(rc)
	}
	if !strings.Contains(out.String(), "sluice-stateless") || !strings.Contains(out.String(), "(datapath not available)") {
		t.Errorf("configs output:\n%s", out.String())
	}
}

func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	bar := &progressBar{w: &b}
	bar.update(run.Progress{Done: 5, Total: 10, Rep: 2, Config: "nft-stateful", Test: "TCP_RR 1/1"})
	got := b.String()
	for _, s := range []string{"\r\033[K[###############...............] 5/10 rep 2 nft-stateful TCP_RR 1/1", " ETA "} {
		if !strings.Contains(got, s) {
			t.Errorf("progress line %q lacks %q", got, s)
		}
	}
	b.Reset()
	bar.update(run.Progress{Done: 10, Total: 10, Config: "none", Test: "x", Err: os.ErrClosed})
	if !strings.Contains(b.String(), "(failed)") || strings.Contains(b.String(), "ETA") {
		t.Errorf("final line %q", b.String())
	}
}

// TestDefaultOutIgnored: the default output directory is the one the
// repository ignores, so the README's first command leaves git clean.
func TestDefaultOutIgnored(t *testing.T) {
	b, err := os.ReadFile("../../../.gitignore")
	if err != nil {
		t.Skip("not in the repository:", err)
	}
	if !strings.Contains("\n"+string(b), "\n/"+DefaultOut+"/\n") {
		t.Errorf(".gitignore does not ignore /%s/:\n%s", DefaultOut, b)
	}
}

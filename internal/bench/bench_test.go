package bench

import (
	"strings"
	"testing"
	"time"

	"sluice/internal/bench/config"
	"sluice/internal/bench/run"
	"sluice/internal/bench/topo"
)

func TestCPUModel(t *testing.T) {
	for in, want := range map[string]string{
		"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n": "AMD EPYC 7B13",
		"processor : 0\nuarch : sifive,u74\n":                                      "sifive,u74",
		"nothing here\n":                                                           "unknown",
	} {
		if got := cpuModel([]byte(in)); got != want {
			t.Errorf("cpuModel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDescribeAndNotes(t *testing.T) {
	d := describeTopo(topo.Options{MTU: 9000, GRO: topo.Off, CPUs: []int{1}})
	for _, s := range []string{"veth", "MTU 9000", "GRO off", "GSO default", "CPUs [1]"} {
		if !strings.Contains(d, s) {
			t.Errorf("%q lacks %q", d, s)
		}
	}
	if d := describeTopo(topo.Options{Remote: "192.0.2.7"}); !strings.Contains(d, "remote peer 192.0.2.7") {
		t.Errorf("remote: %q", d)
	}
	if n := notes("fake", topo.Options{}); len(n) != 3 || !strings.Contains(n[0], "client runs on the peer and netserver on the SUT") {
		t.Errorf("fake, local: %q, want 3 notes (roles, shared CPU, not netperf)", n)
	}
	if n := notes("netperf", topo.Options{Remote: "x"}); len(n) != 1 || !strings.Contains(n[0], "every netperf client runs on the system under test") {
		t.Errorf("netperf, remote: %q, want 1 note (roles)", n)
	}
}

func TestEstimate(t *testing.T) {
	tests := append(run.IPFTests(), run.QoSTests([]int{32})...)
	for _, tc := range []struct {
		name string
		dp   config.Datapaths
		want time.Duration
	}{
		// none runs 8 + 1 tests, nft-stateful 8, nft-dscp 1: 18 per rep,
		// and three warm-ups; sluice-stateless is skipped.
		{"without datapaths", config.Datapaths{}, (36 + 6) * time.Second},
		// sluice-stateless adds 8 tests and a warm-up per rep.
		{"with the IPF datapath", config.Datapaths{IPF: func(string) (config.Applier, error) { return nil, nil }}, (52 + 8) * time.Second},
	} {
		cs, err := config.Builtin(tc.dp).Select("none,nft-stateful,nft-dscp,sluice-stateless")
		if err != nil {
			t.Fatal(err)
		}
		p := run.Plan{Configs: cs, Tests: tests, Reps: 2, Duration: time.Second, Warmup: time.Second}
		if got := Estimate(p); got != tc.want {
			t.Errorf("%s: Estimate = %v, want %v", tc.name, got, tc.want)
		}
	}
}

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
		// and three applies with their warm-ups; sluice-stateless is
		// skipped.
		{"without datapaths", config.Datapaths{}, 36*(time.Second+TestOverhead) + 6*(time.Second+ApplyOverhead)},
		// sluice-stateless adds 8 tests and an apply per rep.
		{"with the IPF datapath", config.Datapaths{IPF: func(string) (config.Applier, error) { return nil, nil }},
			52*(time.Second+TestOverhead) + 8*(time.Second+ApplyOverhead)},
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

// TestPresetsFit: by the overhead model, with every datapath present, the
// quick preset takes under six minutes, the full one at most 45 and the
// paper one at most 85, which leaves a margin to the 90 minutes it may
// take on a busy 2-core machine.
func TestPresetsFit(t *testing.T) {
	nop := func(string) (config.Applier, error) { return nil, nil }
	dp := config.Datapaths{IPF: nop, QoS: nop, NAT: nop, Floor: func() (config.Applier, error) { return nil, nil }}
	for _, tc := range []struct {
		p     run.Preset
		tests int // per repetition
		max   time.Duration
	}{
		// none 8+3, six filter configurations 8 each, two marking 3 each
		{run.Quick(), 11 + 6*8 + 2*3, 6 * time.Minute},
		// none 8 + 8 + 4 + 4; thirteen filter configurations (the floor
		// included) 8 each, seven marking ones 8 + 4 each, eight NAT
		// ones 4 each (the gateway's floor and filter ones included,
		// and the filter with NAT both ways: -nat-map and -nat-two)
		{run.Full(), 24 + 13*8 + 7*12 + 8*4, 45 * time.Minute},
		// none 8 + 14; seven filter configurations (the floor, Sluice's
		// and nftables' three) 8 each: 10GigE 64K in and out and CRR,
		// 1GigE 8K and 1K in and out and CRR; two marking ones the
		// seven sizes at 100BaseT and 1GigE
		{run.Paper(), 22 + 7*8 + 2*14, 85 * time.Minute},
	} {
		cs, err := config.Builtin(dp).Select(tc.p.Configs)
		if err != nil {
			t.Fatal(err)
		}
		p := run.Plan{Configs: cs, Tests: tc.p.Tests, Reps: tc.p.Reps, Duration: tc.p.Duration, Warmup: tc.p.Warmup}
		if got := p.Total(); got != tc.tests*tc.p.Reps {
			t.Errorf("%s: %d tests, want %d × %d", tc.p.Name, got, tc.tests, tc.p.Reps)
		}
		est := Estimate(p)
		if est > tc.max {
			t.Errorf("%s: estimate %v, want at most %v", tc.p.Name, est, tc.max)
		}
		t.Logf("%s: %d tests, estimate %v", tc.p.Name, p.Total(), est)
	}
}

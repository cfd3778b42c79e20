package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

// fakeGen records the order of tests and returns throughput derived from
// the active configuration, so the test can check attribution.
type fakeGen struct {
	log      *[]string
	active   *string
	cancelAt int // cancel after this many calls (0 = never)
	cancel   context.CancelFunc
	calls    int
	failTest string
}

func (g *fakeGen) Name() string { return "fake" }

func (g *fakeGen) Run(ctx context.Context, t result.Test, d time.Duration) (Measurement, error) {
	g.calls++
	*g.log = append(*g.log, fmt.Sprintf("run %s %s %v", *g.active, t.ID, d))
	if g.cancelAt > 0 && g.calls == g.cancelAt {
		g.cancel()
		return Measurement{}, ctx.Err()
	}
	if t.ID == g.failTest {
		return Measurement{}, errors.New("boom")
	}
	return Measurement{Elapsed: d, ThroughputMbps: float64(len(*g.active)), LocalCPU: 10, RemoteCPU: 20}, nil
}

type fakeApplier struct {
	name   string
	log    *[]string
	active *string
	fail   bool
}

func (a *fakeApplier) Apply(context.Context, *topo.Host) error {
	if a.fail {
		return errors.New("no such hook")
	}
	*a.log = append(*a.log, "apply "+a.name)
	*a.active = a.name
	return nil
}

func (a *fakeApplier) Remove() error {
	*a.log = append(*a.log, "remove "+a.name)
	*a.active = "none"
	return nil
}

func fakeConfigs(log *[]string, active *string) []*config.Config {
	mk := func(name string, suite string, fail bool) *config.Config {
		return &config.Config{Name: name, Family: config.NFTables, Suite: suite, New: func() (config.Applier, error) {
			return &fakeApplier{name: name, log: log, active: active, fail: fail}, nil
		}}
	}
	return []*config.Config{
		{Name: "none", Family: config.Baseline},
		mk("bb", config.SuiteIPF, false),
		{Name: "sl", Family: config.Sluice, Suite: config.SuiteIPF, New: func() (config.Applier, error) { return nil, config.ErrUnavailable }},
		mk("broken", config.SuiteIPF, true),
		mk("qqq", config.SuiteQoS, false),
	}
}

var fakeTests = []result.Test{
	{ID: "S", Name: TCPStream, Suite: config.SuiteIPF},
	{ID: "Q", Name: TCPStream, Suite: config.SuiteQoS},
}

func TestExecuteInterleaves(t *testing.T) {
	var log []string
	active := "none"
	var out bytes.Buffer
	gen := &fakeGen{log: &log, active: &active, failTest: "Q"}
	var prog []Progress
	r := &Runner{
		Plan: Plan{Configs: fakeConfigs(&log, &active), Tests: fakeTests, Reps: 2, Duration: time.Second, Warmup: time.Millisecond},
		Gen:  gen, SUT: &topo.Host{}, Out: result.NewWriter(&out),
		OnProgress: func(p Progress) { prog = append(prog, p) },
	}
	if err := r.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		// rep 1: none runs both suites, bb only ipf, qqq only qos
		"run none S 1ms", "run none S 1s", "run none Q 1s",
		"apply bb", "run bb S 1ms", "run bb S 1s", "remove bb",
		"apply qqq", "run qqq Q 1ms", "run qqq Q 1s", "remove qqq",
		// rep 2: unavailable and broken configurations are not retried
		"run none S 1ms", "run none S 1s", "run none Q 1s",
		"apply bb", "run bb S 1ms", "run bb S 1s", "remove bb",
		"apply qqq", "run qqq Q 1ms", "run qqq Q 1s", "remove qqq",
	}
	if got := strings.Join(log, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("sequence:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	set, err := result.Read(&out)
	if err != nil {
		t.Fatal(err)
	}
	if set.Run.Runner != "fake" || set.Run.Reps != 2 || len(set.Run.Configs) != 5 || len(set.Run.Tests) != 2 {
		t.Errorf("header: %+v", set.Run)
	}
	if len(set.Reps) != 8 {
		t.Fatalf("got %d repetitions, want 8", len(set.Reps))
	}
	for _, rp := range set.Reps {
		if rp.Test == "Q" {
			if rp.Error != "boom" {
				t.Errorf("%s/%s: error %q, want boom", rp.Config, rp.Test, rp.Error)
			}
			continue
		}
		if want := float64(len(rp.Config)); rp.ThroughputMbps != want {
			t.Errorf("%s rep %d: throughput %v, want %v (measured under the wrong configuration?)", rp.Config, rp.Rep, rp.ThroughputMbps, want)
		}
	}
	if len(set.Skips) != 2 || set.Skips[0].Config != "sl" || !strings.Contains(set.Skips[0].Reason, "datapath not available") ||
		set.Skips[1].Config != "broken" || !strings.Contains(set.Skips[1].Reason, "no such hook") {
		t.Errorf("skips: %+v", set.Skips)
	}
	if set.End == nil || set.End.Interrupted {
		t.Errorf("end: %+v", set.End)
	}
	// Every test reports progress, and so does every skip (so the
	// command can say at once why a configuration is left out).
	var tests, skips []Progress
	for _, p := range prog {
		if p.Skipped {
			skips = append(skips, p)
		} else {
			tests = append(tests, p)
		}
	}
	if len(tests) != 8 || tests[7].Done != 8 || tests[7].Total != 8 {
		t.Errorf("progress: %d test calls, last %+v", len(tests), tests[len(tests)-1])
	}
	if len(skips) != 2 || skips[0].Config != "sl" || skips[1].Config != "broken" || skips[1].Err == nil {
		t.Errorf("skip progress: %+v", skips)
	}
}

func TestExecuteCancelRemoves(t *testing.T) {
	var log []string
	active := "none"
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Call 3 is bb's first measured test (after none's S, Q): cancel there.
	gen := &fakeGen{log: &log, active: &active, cancelAt: 3, cancel: cancel}
	r := &Runner{
		Plan: Plan{Configs: fakeConfigs(&log, &active), Tests: fakeTests, Reps: 3, Duration: time.Second},
		Gen:  gen, SUT: &topo.Host{}, Out: result.NewWriter(&out),
	}
	err := r.Execute(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if got := log[len(log)-1]; got != "remove bb" {
		t.Errorf("last action %q, want remove bb; log %v", got, log)
	}
	set, err := result.Read(&out)
	if err != nil {
		t.Fatal(err)
	}
	if set.End == nil || !set.End.Interrupted {
		t.Errorf("end record %+v, want interrupted", set.End)
	}
	if len(set.Reps) != 2 {
		t.Errorf("got %d repetitions, want 2 (the cut-short test is not recorded)", len(set.Reps))
	}
}

func TestPlanValidate(t *testing.T) {
	c := []*config.Config{{Name: "none"}}
	for _, p := range []Plan{
		{Tests: fakeTests, Reps: 1, Duration: time.Second},
		{Configs: c, Reps: 1, Duration: time.Second},
		{Configs: c, Tests: fakeTests, Duration: time.Second},
		{Configs: c, Tests: fakeTests, Reps: 1},
		{Configs: c, Tests: append(fakeTests, fakeTests[0]), Reps: 1, Duration: time.Second},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("plan %+v accepted", p)
		}
	}
}

func TestMatrices(t *testing.T) {
	if n := len(IPFTests()); n != 8 {
		t.Errorf("IPF set has %d tests, want 8", n)
	}
	all := append(IPFTests(), QoSTests(SweepSizes)...)
	got, err := SelectTests(all, "TCP_RR,qos,TCP_MAERTS 8K")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, t := range got {
		ids = append(ids, t.ID)
	}
	want := "TCP_RR 1/1 inbound,TCP_STREAM m=32 outbound,TCP_STREAM m=64 outbound,TCP_STREAM m=128 outbound,TCP_STREAM m=256 outbound," +
		"TCP_STREAM m=512 outbound,TCP_STREAM m=1024 outbound,TCP_STREAM m=1460 outbound,TCP_STREAM m=2920 outbound,TCP_MAERTS 8K outbound"
	if strings.Join(ids, ",") != want {
		t.Errorf("got %s\nwant %s", strings.Join(ids, ","), want)
	}
	in, err := SelectTests(all, "inbound")
	if err != nil {
		t.Fatal(err)
	}
	var inIDs []string
	for _, t := range in {
		inIDs = append(inIDs, t.ID)
	}
	if want := "TCP_STREAM 64K inbound,TCP_STREAM 8K inbound,TCP_STREAM 1K inbound,TCP_RR 1/1 inbound,TCP_CRR 1/1 inbound"; strings.Join(inIDs, ",") != want {
		t.Errorf("inbound: got %s\nwant %s", strings.Join(inIDs, ","), want)
	}
	if _, err := SelectTests(all, "UDP_FOO"); err == nil {
		t.Error("unknown test accepted")
	}
	// The quick preset's measuring (warm-ups included, overheads not,
	// bench.TestPresetsFit checks those) must stay near three minutes.
	q := Quick()
	reg := config.Builtin(config.Datapaths{})
	cs, err := reg.Select(q.Configs)
	if err != nil {
		t.Fatal(err)
	}
	p := Plan{Configs: cs, Tests: q.Tests, Reps: q.Reps, Duration: q.Duration}
	secs := float64(p.Total())*q.Duration.Seconds() + float64(len(cs)*q.Reps)*q.Warmup.Seconds()
	if secs > 240 {
		t.Errorf("quick preset measures for %.0f s, want at most 240", secs)
	}
}

// TestRoles: the papers' roles. The IPFilter set runs every client on the
// peer (the filter sits on the SUT and sees its server side); the IPQoS
// sweep runs it on the SUT, whose outgoing packets are marked.
func TestRoles(t *testing.T) {
	for _, tc := range IPFTests() {
		if tc.Client != result.Peer {
			t.Errorf("%s: client on %q, want the peer", tc.ID, tc.Client)
		}
		want := result.Inbound
		if tc.Name == TCPMaerts {
			want = result.Outbound
		}
		if tc.Direction() != want || !strings.HasSuffix(tc.ID, " "+want) {
			t.Errorf("%s: direction %s, want %s in the ID too", tc.ID, tc.Direction(), want)
		}
	}
	for _, tc := range QoSTests(SweepSizes) {
		if tc.Client != result.SUT || tc.Direction() != result.Outbound {
			t.Errorf("%s: client on %q, direction %s; want the SUT sending", tc.ID, tc.Client, tc.Direction())
		}
	}
}

// TestFromSUT: with a remote peer every client moves to the SUT; streams
// keep their direction, and their ID, by running the other netperf test
// (STREAM and MAERTS swap, Netperf says which ran), RR tests turn
// outbound and say so.
func TestFromSUT(t *testing.T) {
	all := append(IPFTests(), QoSTests([]int{32})...)
	got := FromSUT(all)
	var ids []string
	for i, tc := range got {
		ids = append(ids, tc.ID)
		if tc.ClientHost() != result.SUT {
			t.Errorf("%s: client on %s", tc.ID, tc.ClientHost())
		}
		if tc.Stream() && tc.Direction() != all[i].Direction() {
			t.Errorf("%s: direction %s, was %s", tc.ID, tc.Direction(), all[i].Direction())
		}
		if tc.SendSize != all[i].SendSize || tc.ReqSize != all[i].ReqSize || tc.Suite != all[i].Suite {
			t.Errorf("%s: sizes or suite changed: %+v from %+v", tc.ID, tc, all[i])
		}
	}
	want := "TCP_STREAM 64K inbound,TCP_STREAM 8K inbound,TCP_STREAM 1K inbound,TCP_MAERTS 64K outbound,TCP_MAERTS 8K outbound," +
		"TCP_MAERTS 1K outbound,TCP_RR 1/1 outbound,TCP_CRR 1/1 outbound,TCP_STREAM m=32 outbound"
	if strings.Join(ids, ",") != want {
		t.Errorf("got %s\nwant %s", strings.Join(ids, ","), want)
	}
	var runs []string
	for _, tc := range got {
		runs = append(runs, tc.NetperfTest())
	}
	if want := "TCP_MAERTS,TCP_MAERTS,TCP_MAERTS,TCP_STREAM,TCP_STREAM,TCP_STREAM,TCP_RR,TCP_CRR,TCP_STREAM"; strings.Join(runs, ",") != want {
		t.Errorf("netperf tests run: %s, want %s", strings.Join(runs, ","), want)
	}
	// A shaped test keeps its profile.
	if g := FromSUT([]result.Test{At(IPFTests()[0], topo.GigE)}); g[0].ID != "TCP_STREAM 64K inbound @1GigE" || g[0].Link != "1GigE" {
		t.Errorf("shaped: %+v", g[0])
	}
}

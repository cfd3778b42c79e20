//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"sluice/internal/bench/config"
	"sluice/internal/bench/datapath"
	"sluice/internal/bench/result"
	"sluice/internal/bench/run"
	"sluice/internal/bench/topo"
	"sluice/internal/testutil"
	"sluice/internal/testutil/netservertest"
)

// leftovers lists what of a test bed still exists: namespace mount
// points, veth links in the root namespace, a bench table in the root
// namespace, the eBPF programs progs that the Sluice configurations
// attached, and the private bpffs mounts that held their pins.
func leftovers(t *testing.T, names []string, links [2]string, progs []ebpf.ProgramID) []string {
	t.Helper()
	var left []string
	// The kernel frees a program a moment after its last reference.
	deadline := time.Now().Add(3 * time.Second)
	for len(datapath.LivePrograms(progs)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range datapath.LivePrograms(progs) {
		left = append(left, fmt.Sprintf("eBPF program %d", id))
	}
	if m, err := datapath.Mounts(os.Getpid()); err != nil {
		t.Fatal(err)
	} else {
		for _, d := range m {
			left = append(left, "bpffs mount "+d)
		}
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(topo.NetNSDir, n)); !errors.Is(err, os.ErrNotExist) {
			left = append(left, "namespace "+n)
		}
	}
	for _, l := range links {
		if l == "" {
			continue
		}
		if _, err := netlink.LinkByName(l); err == nil {
			left = append(left, "link "+l)
		}
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range ts {
		if tb.Name == config.NFTTable {
			left = append(left, "nftables table "+tb.Name+" in the root namespace")
		}
	}
	return left
}

func selectTests(t *testing.T, list string) []result.Test {
	t.Helper()
	ts, err := run.SelectTests(append(run.IPFTests(), run.QoSTests(run.SweepSizes)...), list)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// progWatch records, after every test, the eBPF programs attached in
// the SUT's namespace: a Sluice configuration must have its programs
// there while it is measured, and every other one none (so the previous
// Remove detached them).
type progWatch struct {
	t      *testing.T
	ns     string
	seen   []ebpf.ProgramID
	failed []string
}

func (w *progWatch) check(p run.Progress) {
	ids, err := datapath.AttachedPrograms(w.ns)
	if err != nil {
		w.failed = append(w.failed, err.Error())
		return
	}
	sluice := strings.HasPrefix(p.Config, "sluice-")
	if sluice && len(ids) == 0 {
		w.failed = append(w.failed, p.Config+": no eBPF program attached to the SUT")
	}
	if !sluice && len(ids) > 0 {
		w.failed = append(w.failed, fmt.Sprintf("%s: eBPF programs %v attached to the SUT", p.Config, ids))
	}
	w.seen = append(w.seen, ids...)
}

// TestPrivilegedBenchEndToEnd runs a tiny matrix for real, with the
// eBPF datapaths, and checks that every configuration produced numbers
// for each of its tests, that the Sluice programs were attached exactly
// while their configurations were measured, and that nothing is left.
func TestPrivilegedBenchEndToEnd(t *testing.T) {
	testutil.RequireRoot(t)
	reg := config.Builtin(datapath.Datapaths())
	cs, err := reg.Select("none,nft-stateless,sluice-stateless,nft-stateful,sluice-stateful,sluice-nomatch-100,nft-dscp,sluice-qos")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var links [2]string
	w := &progWatch{t: t}
	out := t.TempDir()
	path, err := Run(context.Background(), Options{
		Mode: "test", OutDir: out,
		Plan:   run.Plan{Configs: cs, Tests: selectTests(t, "TCP_STREAM 64K inbound,TCP_RR 1/1 inbound,TCP_STREAM m=512 outbound"), Reps: 1, Duration: time.Second},
		Topo:   topo.Options{Prefix: "slbe2e"},
		NewGen: NetperfGenerator(0),
		OnStart: func(tb *topo.Topo) {
			names, links = tb.NetNSNames(), tb.Links()
			w.ns = tb.NetNSPath(topo.SUT)
		},
		OnProgress: w.check,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Fatalf("OnStart saw namespaces %v", names)
	}
	for _, f := range w.failed {
		t.Error(f)
	}
	if len(w.seen) == 0 {
		t.Error("no eBPF program seen during the run")
	}
	if left := leftovers(t, names, links, w.seen); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	set, err := result.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if set.End == nil || set.End.Interrupted || set.Run.Kernel == "" || set.Run.NumCPU < 1 {
		t.Errorf("run %+v end %+v", set.Run, set.End)
	}
	got := map[string]int{}
	for _, r := range set.Reps {
		if r.Error != "" {
			t.Errorf("%s / %s: %s", r.Config, r.Test, r.Error)
			continue
		}
		rate := r.ThroughputMbps + r.TransPerSec
		if rate <= 0 || r.LocalCPU <= 0 || r.LocalSD <= 0 || r.ElapsedSec < 0.9 {
			t.Errorf("%s / %s: no numbers: %+v", r.Config, r.Test, r)
		}
		got[r.Config]++
	}
	want := map[string]int{"none": 3, "nft-stateless": 2, "sluice-stateless": 2, "nft-stateful": 2, "sluice-stateful": 2,
		"sluice-nomatch-100": 2, "nft-dscp": 1, "sluice-qos": 1}
	for c, n := range want {
		if got[c] != n {
			t.Errorf("%s: %d measurements, want %d", c, got[c], n)
		}
	}
	for _, s := range set.Skips {
		t.Errorf("%s skipped: %s", s.Config, s.Reason)
	}
}

// TestPrivilegedBenchUnavailable checks that without datapaths the
// Sluice configurations are recorded as skipped and the others run.
func TestPrivilegedBenchUnavailable(t *testing.T) {
	testutil.RequireRoot(t)
	cs, err := config.Builtin(config.Datapaths{}).Select("none,sluice-stateless,sluice-qos")
	if err != nil {
		t.Fatal(err)
	}
	path, err := Run(context.Background(), Options{
		Mode: "test", OutDir: t.TempDir(),
		Plan:   run.Plan{Configs: cs, Tests: selectTests(t, "TCP_RR 1/1 inbound,TCP_STREAM m=32 outbound"), Reps: 1, Duration: time.Second},
		Topo:   topo.Options{Prefix: "slbuna"},
		NewGen: NetperfGenerator(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	set, err := result.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Reps) != 2 || set.Reps[0].Config != "none" || set.Reps[1].Config != "none" {
		t.Errorf("repetitions %+v, want only none's", set.Reps)
	}
	skipped := map[string]string{}
	for _, s := range set.Skips {
		skipped[s.Config] = s.Reason
	}
	for _, c := range []string{"sluice-stateless", "sluice-qos"} {
		if !strings.Contains(skipped[c], "datapath not available") {
			t.Errorf("%s: skip reason %q", c, skipped[c])
		}
	}
}

// countingGen wraps a generator and counts the tests started after ctx
// was cancelled.
type countingGen struct {
	run.Generator
	ctx   context.Context
	after atomic.Int32
}

func (g *countingGen) Run(ctx context.Context, t result.Test, d time.Duration) (run.Measurement, error) {
	if g.ctx.Err() != nil {
		g.after.Add(1)
	}
	return g.Generator.Run(ctx, t, d)
}

// TestPrivilegedBenchCancel cancels the context while a test runs under
// an nftables configuration and under each Sluice datapath, and checks
// the behaviour, not the machine's speed: the run stops within the
// current repetition (no test starts after the cancel, the two other
// repetitions never run), says it was interrupted, keeps none's
// measurement, and leaves nothing behind: no namespace, veth, table,
// eBPF program or bpffs mount.
func TestPrivilegedBenchCancel(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct{ config, test string }{
		{"nft-stateful", "TCP_STREAM 64K inbound"},
		{"sluice-stateful", "TCP_STREAM 64K inbound"},
		{"sluice-qos", "TCP_STREAM m=512 outbound"},
	} {
		t.Run(tc.config, func(t *testing.T) {
			cs, err := config.Builtin(datapath.Datapaths()).Select("none," + tc.config)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var names []string
			var links [2]string
			var sut string
			var progs []ebpf.ProgramID
			var progErr error
			var gen *countingGen
			path, err := Run(ctx, Options{
				Mode: "test", OutDir: t.TempDir(),
				Plan: run.Plan{Configs: cs, Tests: selectTests(t, tc.test), Reps: 3, Duration: time.Second},
				Topo: topo.Options{Prefix: "slbcan"},
				NewGen: func(tb *topo.Topo) (run.Generator, func() error, error) {
					g, stop, err := NetperfGenerator(0)(tb)
					gen = &countingGen{Generator: g, ctx: ctx}
					return gen, stop, err
				},
				OnStart: func(tb *topo.Topo) {
					names, links, sut = tb.NetNSNames(), tb.Links(), tb.NetNSPath(topo.SUT)
				},
				OnProgress: func(p run.Progress) {
					if p.Config == "none" && p.Rep == 1 {
						// The configuration is applied next: cut its
						// test short, noting what it attached.
						go func() {
							progs, progErr = cutShort(sut, tc.config != "nft-stateful")
							cancel()
						}()
					}
				},
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			if n := gen.after.Load(); n > 0 {
				t.Errorf("%d tests started after the cancel", n)
			}
			if progErr != nil {
				t.Fatal(progErr)
			}
			if sluice := strings.HasPrefix(tc.config, "sluice-"); sluice != (len(progs) > 0) {
				t.Errorf("programs attached to the SUT during the test: %v", progs)
			}
			if left := leftovers(t, names, links, progs); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			set, err := result.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if set.End == nil || !set.End.Interrupted {
				t.Errorf("end record %+v, want interrupted", set.End)
			}
			if len(set.Reps) != 1 || set.Reps[0].Config != "none" {
				t.Errorf("repetitions %+v, want only none's", set.Reps)
			}
		})
	}
}

// cutShort waits until a test is well under way in the configuration
// after none: when it attaches programs, until they are in the SUT's
// namespace (a load may take a while: up to a minute on a busy machine
// before the test gives up), then 400 ms more. It returns the programs
// attached then.
func cutShort(sutNS string, attaches bool) ([]ebpf.ProgramID, error) {
	deadline := time.Now().Add(time.Minute)
	for attaches && time.Now().Before(deadline) {
		ids, err := datapath.AttachedPrograms(sutNS)
		if err != nil || len(ids) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond)
	return datapath.AttachedPrograms(sutNS)
}

// TestPrivilegedBenchRemote exercises --remote against a netserver on
// loopback: no namespaces, the netperf library as generator. Only the
// "none" configuration runs, so the root namespace's rules are not
// touched.
func TestPrivilegedBenchRemote(t *testing.T) {
	testutil.RequireRoot(t)
	port := netservertest.Loopback(t)
	reg := config.Builtin(datapath.Datapaths())
	cs, _ := reg.Select("none")
	var remote bool
	path, err := Run(context.Background(), Options{
		Mode: "test", OutDir: t.TempDir(),
		Plan: run.Plan{Configs: cs, Tests: selectTests(t, "TCP_RR 1/1,TCP_STREAM 8K"), Reps: 1, Duration: time.Second},
		Topo: topo.Options{Prefix: "slbrem", Remote: "127.0.0.1"},
		NewGen: func(tb *topo.Topo) (run.Generator, func() error, error) {
			remote = tb.Remote() && len(tb.NetNSNames()) == 0
			return NetperfGenerator(port)(tb)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !remote {
		t.Error("test bed was not in remote mode")
	}
	set, err := result.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Reps) != 2 || set.Run.Runner != "netperf" {
		t.Fatalf("reps %+v runner %q", set.Reps, set.Run.Runner)
	}
	// The remote peer runs no client: the inbound stream is the same
	// test measured as a TCP_MAERTS from the SUT, the RR test became an
	// outbound one.
	want := []string{"TCP_RR 1/1 outbound", "TCP_STREAM 8K inbound"}
	ran := []string{"TCP_RR", "TCP_MAERTS"}
	for i, r := range set.Reps {
		if r.Test != want[i] || r.Error != "" || r.ThroughputMbps+r.TransPerSec <= 0 {
			t.Errorf("rep %d: %+v, want a measurement of %s", i, r, want[i])
		}
		if tc := set.Run.Tests[i]; tc.ID != want[i] || tc.ClientHost() != result.SUT || tc.NetperfTest() != ran[i] || tc.Direction() != want[i][len(want[i])-len(tc.Direction()):] {
			t.Errorf("header test %d: %+v, want %s run as %s", i, tc, want[i], ran[i])
		}
	}
	if !strings.Contains(set.Run.Topology, "remote peer 127.0.0.1") {
		t.Errorf("topology %q", set.Run.Topology)
	}
}

//go:build linux

package bench

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
	"sluice/internal/bench/run"
	"sluice/internal/bench/topo"
	"sluice/internal/netperf"
	"sluice/internal/testutil"
)

// leftovers lists what of a test bed still exists: namespace mount
// points, veth links in the root namespace, and a bench table in the
// root namespace.
func leftovers(t *testing.T, names []string, links [2]string) []string {
	t.Helper()
	var left []string
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

// TestPrivilegedBenchEndToEnd runs a tiny matrix for real and checks that
// every configuration produced numbers for each of its tests, that the
// unavailable ones were recorded as skipped, and that nothing is left.
func TestPrivilegedBenchEndToEnd(t *testing.T) {
	testutil.RequireRoot(t)
	reg := config.Builtin(config.Datapaths{})
	cs, err := reg.Select("none,nft-stateless,nft-stateful,nft-dscp,sluice-stateless,sluice-qos")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var links [2]string
	out := t.TempDir()
	path, err := Run(context.Background(), Options{
		Mode: "test", OutDir: out,
		Plan:   run.Plan{Configs: cs, Tests: selectTests(t, "TCP_STREAM 64K inbound,TCP_RR 1/1 inbound,TCP_STREAM m=512 outbound"), Reps: 1, Duration: time.Second},
		Topo:   topo.Options{Prefix: "slbe2e"},
		NewGen: NetperfGenerator(0),
		OnStart: func(tb *topo.Topo) {
			names, links = tb.NetNSNames(), tb.Links()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Fatalf("OnStart saw namespaces %v", names)
	}
	if left := leftovers(t, names, links); len(left) > 0 {
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
	want := map[string]int{"none": 3, "nft-stateless": 2, "nft-stateful": 2, "nft-dscp": 1}
	for c, n := range want {
		if got[c] != n {
			t.Errorf("%s: %d measurements, want %d", c, got[c], n)
		}
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

// TestPrivilegedBenchCancel cancels the context while a test runs under
// an nftables configuration and checks the run stops promptly, says it
// was interrupted, and leaves nothing behind.
func TestPrivilegedBenchCancel(t *testing.T) {
	testutil.RequireRoot(t)
	reg := config.Builtin(config.Datapaths{})
	cs, err := reg.Select("none,nft-stateful")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var names []string
	var links [2]string
	start := time.Now()
	path, err := Run(ctx, Options{
		Mode: "test", OutDir: t.TempDir(),
		Plan:   run.Plan{Configs: cs, Tests: selectTests(t, "TCP_STREAM 64K inbound"), Reps: 3, Duration: time.Second},
		Topo:   topo.Options{Prefix: "slbcan"},
		NewGen: NetperfGenerator(0),
		OnStart: func(tb *topo.Topo) {
			names, links = tb.NetNSNames(), tb.Links()
		},
		OnProgress: func(p run.Progress) {
			if p.Config == "none" {
				// nft-stateful is applied next: cut its test short.
				time.AfterFunc(400*time.Millisecond, cancel)
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("cancelled run took %v", el)
	}
	if left := leftovers(t, names, links); len(left) > 0 {
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
}

// TestPrivilegedBenchRemote exercises --remote against a netserver on
// loopback: no namespaces, the netperf library as generator. Only the
// "none" configuration runs, so the root namespace's rules are not
// touched.
func TestPrivilegedBenchRemote(t *testing.T) {
	testutil.RequireRoot(t)
	srv, err := netperf.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	port := srv.Addr().(*net.TCPAddr).Port
	reg := config.Builtin(config.Datapaths{})
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
	// The remote peer runs no client: the inbound stream became a
	// TCP_MAERTS from the SUT, the RR test an outbound one.
	want := []string{"TCP_RR 1/1 outbound", "TCP_MAERTS 8K inbound"}
	for i, r := range set.Reps {
		if r.Test != want[i] || r.Error != "" || r.ThroughputMbps+r.TransPerSec <= 0 {
			t.Errorf("rep %d: %+v, want a measurement of %s", i, r, want[i])
		}
		if tc := set.Run.Tests[i]; tc.ID != want[i] || tc.ClientHost() != result.SUT {
			t.Errorf("header test %d: %+v", i, tc)
		}
	}
	if !strings.Contains(set.Run.Topology, "remote peer 127.0.0.1") {
		t.Errorf("topology %q", set.Run.Topology)
	}
}

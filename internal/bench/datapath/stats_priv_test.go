//go:build linux

package datapath

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
	"sluice/internal/testutil"
	"sluice/internal/testutil/topotest"
)

// TestPrivilegedFloorStats attaches the trivial program, turns the
// kernel's statistics on through Stats, makes traffic and checks that
// each hook's program counted runs and time of its own, that the
// statistics fd closes, and that Remove detaches and frees everything.
func TestPrivilegedFloorStats(t *testing.T) {
	tp := topotest.New(t, "slbfl")
	port := listen(t, tp)
	probe, closer, err := Stats(tp.Host(topo.SUT))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	a, err := NewFloor()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), tp.Host(topo.SUT)); err != nil {
		t.Fatal(err)
	}
	ids := attached(t, tp)
	before, err := probe()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := dial(tp, port); err != nil {
			t.Fatal(err)
		}
	}
	after, err := probe()
	if err != nil {
		t.Fatal(err)
	}
	hooks := map[string]result.ProgStat{}
	for _, d := range deltas(before, after) {
		hooks[d.Hook] = d
	}
	for _, h := range []string{"ingress", "egress"} {
		d, ok := hooks[h]
		// 20 connections are at least a SYN in and a SYN-ACK out each.
		if !ok || d.RunCnt < 20 || d.RunNs == 0 || !strings.HasPrefix(d.Name, "floor_") {
			t.Errorf("%s: %+v, want runs of a floor program", h, d)
		}
	}
	if hooks["ingress"].ID == hooks["egress"].ID {
		t.Error("one program on both hooks: the hooks' statistics would mix")
	}
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, tp, ids)
	if err := closer.Close(); err != nil {
		t.Errorf("closing the statistics fd: %v", err)
	}
}

// TestPrivilegedFloorKinds attaches each opt-in variant of the trivial
// program (at14's tcx-floor-KIND) under traffic: every one loads, runs on
// both hooks and passes the packets (the dials succeed), "compact" counts
// each IPv4 TCP packet once in its CPU's block, and Remove detaches
// everything and frees the compact program's map. An unknown kind fails.
func TestPrivilegedFloorKinds(t *testing.T) {
	tp := topotest.New(t, "slbfk")
	port := listen(t, tp)
	for _, kind := range config.FloorKinds {
		a, err := NewFloorKind(kind)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Apply(context.Background(), tp.Host(topo.SUT)); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		ids := attached(t, tp)
		const dials = 20
		for range dials {
			if err := dial(tp, port); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
		}
		if f := a.(*floor); f.compact {
			var sum uint64
			for cpu := 0; cpu < int(f.m.MaxEntries()); cpu++ {
				var v []byte
				if err := f.m.Lookup(uint32(cpu), &v); err != nil {
					t.Fatal(err)
				}
				sum += binary.LittleEndian.Uint64(v[17*8:])
			}
			// each connection is at least a SYN and an ACK in and a
			// SYN-ACK out: TCP over IPv4 both ways
			if sum < 3*dials {
				t.Errorf("compact counted %d packets of %d connections", sum, dials)
			}
		}
		m := a.(*floor).m
		if err := a.Remove(); err != nil {
			t.Fatal(err)
		}
		checkGone(t, tp, ids)
		if m != nil && m.FD() >= 0 {
			t.Errorf("%s: the counters' map is still open", kind)
		}
	}
	if _, err := NewFloorKind("code-0"); err == nil {
		t.Error("code-0: no error")
	}
	if _, err := NewFloorKind("nothing"); err == nil {
		t.Error("an unknown kind: no error")
	}
}

func deltas(before, after []result.ProgStat) []result.ProgStat {
	var out []result.ProgStat
	for _, a := range after {
		for _, b := range before {
			if a.ID == b.ID && a.Hook == b.Hook {
				a.RunCnt -= b.RunCnt
				a.RunNs -= b.RunNs
			}
		}
		out = append(out, a)
	}
	return out
}

// TestPrivilegedNATUnsupported loads a NAT configuration on a gateway:
// until kernel NAT is part of the build the load must fail with an error
// wrapping errors.ErrUnsupported and leave nothing mounted; once it is,
// it must load and be removable.
func TestPrivilegedNATUnsupported(t *testing.T) {
	testutil.RequireRoot(t)
	gw, err := topo.NewGateway("slbnatdp")
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	h := gw.Host(topo.GWGateway)
	a, err := LoadNAT("map " + h.Link + " 10.232.1.0/24 -> 0/32 portmap tcp/udp auto\n")
	if err != nil {
		t.Fatal(err)
	}
	err = a.Apply(context.Background(), h)
	switch {
	case err == nil:
		if err := a.Remove(); err != nil {
			t.Errorf("Remove: %v", err)
		}
	case !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "kernel NAT is not available"):
		t.Errorf("got %v, want a clear error wrapping errors.ErrUnsupported", err)
	}
	if m, err := Mounts(os.Getpid()); err != nil || len(m) > 0 {
		t.Errorf("private bpffs mounts left: %v (%v)", m, err)
	}
}

func TestUnsupportedClassifier(t *testing.T) {
	for msg, want := range map[string]bool{
		"ipnat: /dev/ipnat: no kernel NAT device (use -n to check rules offline)": true,
		"ipnat: loading: operation not supported":                                 true,
		"ipnat: kernel NAT: unsupported proxy rcmd":                               true,
		"ipnat: x.conf:1:5: expected an interface name":                           false,
		"ipnat: loading: permission denied":                                       false,
	} {
		if got := unsupported(msg); got != want {
			t.Errorf("unsupported(%q) = %v, want %v", msg, got, want)
		}
	}
}

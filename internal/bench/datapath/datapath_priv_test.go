//go:build linux

package datapath

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"sluice/internal/bench/config"
	"sluice/internal/bench/topo"
	"sluice/internal/testutil"
	"sluice/internal/testutil/bpffs"
	"sluice/internal/testutil/topotest"
)

// listen opens a TCP listener on the SUT that accepts and closes.
func listen(t *testing.T, tp *topo.Topo) int {
	t.Helper()
	var ln net.Listener
	if err := tp.Do(topo.SUT, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(topo.SUTAddr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// dial connects from the peer to the SUT's port.
func dial(tp *topo.Topo, port int) error {
	return tp.Do(topo.Peer, func() error {
		d := net.Dialer{Timeout: 300 * time.Millisecond}
		c, err := d.Dial("tcp4", netip.AddrPortFrom(topo.SUTAddr, uint16(port)).String())
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// attached lists the TCX programs in the SUT's namespace.
func attached(t *testing.T, tp *topo.Topo) []ebpf.ProgramID {
	t.Helper()
	ids, err := AttachedPrograms(tp.NetNSPath(topo.SUT))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkGone checks that Remove left no program attached, none alive, and
// no private bpffs mounted.
func checkGone(t *testing.T, tp *topo.Topo, ids []ebpf.ProgramID) {
	t.Helper()
	if left := attached(t, tp); len(left) > 0 {
		t.Errorf("programs still attached after Remove: %v", left)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(LivePrograms(ids)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if live := LivePrograms(ids); len(live) > 0 {
		t.Errorf("programs %v still exist after Remove", live)
	}
	if m, err := Mounts(os.Getpid()); err != nil || len(m) > 0 {
		t.Errorf("private bpffs mounts left: %v (%v)", m, err)
	}
}

// TestPrivilegedIPF applies a rule set that blocks one port and passes
// the rest, checks that the kernel enforces it on the SUT's link, and
// that Remove takes everything away.
func TestPrivilegedIPF(t *testing.T) {
	tp := topotest.New(t, "slbdp")
	blocked, open := listen(t, tp), listen(t, tp)
	a, err := LoadIPF("block in quick proto tcp from any to any port = " + itoa(blocked) + "\n" + config.IPFStateful())
	if err != nil {
		t.Fatal(err)
	}
	sut := tp.Host(topo.SUT)
	if err := a.Apply(context.Background(), sut); err != nil {
		t.Fatal(err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = a.Remove()
		}
	})
	if got := a.(*ipfApplier).dp.StateMax(); got != StateMax {
		t.Errorf("state_max %d, want %d", got, StateMax)
	}
	if c, _ := config.Builtin(Datapaths()).Get("sluice-stateful"); !strings.Contains(c.Description, "state_max "+strconv.Itoa(StateMax)) {
		t.Errorf("sluice-stateful's description %q does not give state_max %d", c.Description, StateMax)
	}
	ids := attached(t, tp)
	if len(ids) != 2 {
		t.Errorf("programs attached in the SUT: %v, want ingress and egress", ids)
	}
	if peer, err := AttachedPrograms(tp.NetNSPath(topo.Peer)); err != nil || len(peer) > 0 {
		t.Errorf("programs attached in the peer: %v (%v)", peer, err)
	}
	if err := dial(tp, open); err != nil {
		t.Errorf("port %d, passed by the rules: %v", open, err)
	}
	if err := dial(tp, blocked); err == nil {
		t.Errorf("port %d, blocked by the rules: connected", blocked)
	}
	removed = true
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, tp, ids)
	if err := dial(tp, blocked); err != nil {
		t.Errorf("port %d after Remove: %v", blocked, err)
	}
	if err := a.Remove(); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

// TestPrivilegedIPFNoMatch loads the largest rule-scan set the bench uses.
func TestPrivilegedIPFNoMatch(t *testing.T) {
	tp := topotest.New(t, "slbdp")
	port := listen(t, tp)
	n := config.NoMatchCounts[len(config.NoMatchCounts)-1]
	a, err := LoadIPF(config.IPFNoMatch(n))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), tp.Host(topo.SUT)); err != nil {
		t.Fatal(err)
	}
	ids := attached(t, tp)
	if err := dial(tp, port); err != nil {
		t.Errorf("through %d non-matching rules: %v", n, err)
	}
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, tp, ids)
}

// TestPrivilegedQoS applies the marking configuration and checks the
// DSCP of what the SUT sends, before and after Remove.
func TestPrivilegedQoS(t *testing.T) {
	tp := topotest.New(t, "slbdp")
	c, _ := config.Builtin(Datapaths()).Get("sluice-qos")
	a, err := c.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(context.Background(), tp.Host(topo.SUT)); err != nil {
		t.Fatal(err)
	}
	ids := attached(t, tp)
	if len(ids) != 1 {
		t.Errorf("programs attached in the SUT: %v, want the egress marker", ids)
	}
	tos, err := topotest.ConnectTOS(t, tp)
	if err != nil {
		t.Fatal(err)
	}
	if tos>>2 != config.DSCPMark {
		t.Errorf("DSCP %d, want %d", tos>>2, config.DSCPMark)
	}
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, tp, ids)
	if tos, err := topotest.ConnectTOS(t, tp); err != nil || tos != 0 {
		t.Errorf("after Remove: TOS %#x (%v), want 0", tos, err)
	}
}

func TestBadRules(t *testing.T) {
	if _, err := LoadIPF("pass in frobnicate\n"); err == nil || !strings.Contains(err.Error(), "ipf.conf:1:") {
		t.Errorf("bad ipf.conf: got %v, want a positioned error", err)
	}
	if _, err := LoadQoS("filter {\n"); err == nil || !strings.Contains(err.Error(), "IPQoS") {
		t.Errorf("bad ipqos.conf: got %v", err)
	}
}

func TestSweepMounts(t *testing.T) {
	testutil.RequireRoot(t)
	// A dead process's mount: PID 0x7fffffff cannot exist (pid_max is
	// at most 2^22).
	dir, err := os.MkdirTemp("", mountPrefix+"2147483647-")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bpffs.MountAt(dir); err != nil {
		os.Remove(dir)
		testutil.SkipOrFail(t, "%v", err)
	}
	mine, err := mountPrivate()
	if err != nil {
		t.Fatal(err)
	}
	defer mine.unmount()
	swept, err := SweepMounts()
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0] != dir {
		t.Errorf("swept %v, want [%s]", swept, dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there: %v", dir, err)
	}
	if m, _ := Mounts(os.Getpid()); len(m) != 1 || m[0] != mine.dir {
		t.Errorf("our mounts %v, want [%s] kept", m, mine.dir)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

//go:build linux

package sluice

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/google/nftables"

	"sluice/internal/bench"
	"sluice/internal/bench/config"
	"sluice/internal/bench/datapath"
	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
	"sluice/internal/testutil"
)

// TestPrivilegedBenchSIGINT interrupts `sluice bench` (this test binary
// acting as the command, with the eBPF datapaths) during a test under an
// nftables configuration and under each Sluice datapath, and checks that
// it exits 130, removes its namespaces (hence its veth and table), its
// eBPF programs and their bpffs mounts, and still writes a report of
// what it measured.
func TestPrivilegedBenchSIGINT(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct{ config, test string }{
		{"nft-stateful", "TCP_STREAM 64K inbound"},
		{"sluice-stateful", "TCP_STREAM 64K inbound"},
		{"sluice-qos", "TCP_STREAM m=512 outbound"},
	} {
		t.Run(tc.config, func(t *testing.T) { testSIGINT(t, tc.config, tc.test) })
	}
}

func testSIGINT(t *testing.T, configName, test string) {
	out := t.TempDir()
	cmd := exec.Command(os.Args[0], "bench", "--configs", "none,"+configName, "--tests", test,
		"--duration", "1s", "--reps", "20", "--warmup", "0", "--no-progress", "--out", out)
	mark := fmt.Sprintf("SLUICE_TEST_MARK=%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd.Env = append(os.Environ(), "SLUICE_CLI_MAIN=1", mark)
	var output lockedBuffer // read while the command writes it
	cmd.Stderr = &output
	cmd.Stdout = &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// The waits below end on events of the run (a measurement recorded,
	// programs attached, a configuration skipped, the process gone), not
	// on timing: under a loaded machine applying a configuration (the
	// verifier) can take many seconds. Each has a bound only so that a
	// hung run fails instead of hanging the test.
	results := filepath.Join(out, bench.ResultsFile)
	poll := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
			select {
			case <-exited:
				t.Fatalf("sluice exited (%v) before %s; output:\n%s", waitErr, what, output.String())
			default:
			}
			if skip := skipped(results, configName); skip != "" {
				t.Fatalf("%s was skipped: %s; output:\n%s", configName, skip, output.String())
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s after %v; output:\n%s", what, limit, output.String())
			}
		}
	}
	// Wait for none's measurement: the configuration is applied next.
	poll("measurement", 2*time.Minute, func() bool {
		b, _ := os.ReadFile(results)
		return bytes.Contains(b, []byte(`"kind":"rep"`))
	})
	ours := namespacesOf(t, pid)
	if len(ours) != 2 {
		t.Fatalf("namespaces of pid %d: %v", pid, ours)
	}
	if pids := processesWith(mark); len(pids) != 1 || pids[0] != pid {
		t.Errorf("processes with the mark: %v, want only sluice %d (its netservers run in-process)", pids, pid)
	}
	var sutNS string
	for _, n := range ours {
		if strings.HasSuffix(n, "-sut") {
			sutNS = filepath.Join(topo.NetNSDir, n)
		}
	}
	sluice := strings.HasPrefix(configName, "sluice-")
	// Inside the configuration's test: once its programs are attached,
	// 400 ms more. With 20 repetitions a window missed between two polls
	// comes back at the next one.
	var progs []ebpf.ProgramID
	if sluice {
		poll("eBPF program attached in "+sutNS, 3*time.Minute, func() bool {
			progs, _ = datapath.AttachedPrograms(sutNS)
			return len(progs) > 0
		})
		if m, err := datapath.Mounts(pid); err != nil || len(m) != 1 {
			t.Errorf("private bpffs mounts of sluice: %v (%v), want one", m, err)
		}
	}
	time.Sleep(400 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) || ee.ExitCode() != 130 {
			t.Errorf("exit: %v, want status 130; output:\n%s", waitErr, output.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("sluice did not exit a minute after SIGINT; output:\n%s", output.String())
	}
	if left := namespacesOf(t, pid); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
	// Nothing it started may outlive it.
	if pids := processesWith(mark); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
	// the kernel frees a program a moment after its last reference (an
	// RCU grace period, longer on a busy machine)
	for deadline := time.Now().Add(30 * time.Second); len(datapath.LivePrograms(progs)) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if live := datapath.LivePrograms(progs); len(live) > 0 {
		t.Errorf("eBPF programs left: %v", live)
	}
	if m, err := datapath.Mounts(pid); err != nil || len(m) > 0 {
		t.Errorf("bpffs mounts left: %v (%v)", m, err)
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Errorf("no report after the interrupt: %v", err)
	}
	if !strings.Contains(output.String(), "interrupted") {
		t.Errorf("output does not mention the interrupt:\n%s", output.String())
	}
	// The table lived in the SUT namespace; none may appear in ours.
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
			t.Errorf("table %s in the root namespace", tb.Name)
		}
	}
}

// lockedBuffer is a bytes.Buffer that may be read while written.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// skipped returns the reason the run recorded for skipping config in its
// results file so far ("" if it did not).
func skipped(results, config string) string {
	b, _ := os.ReadFile(results)
	for _, l := range bytes.Split(b, []byte("\n")) {
		var r result.Record
		if json.Unmarshal(l, &r) == nil && r.Kind == result.KindSkip && r.Skip != nil && r.Skip.Config == config {
			return r.Skip.Reason
		}
	}
	return ""
}

// namespacesOf lists the bench namespaces a process made (their names
// carry its PID).
func namespacesOf(t *testing.T, pid int) []string {
	t.Helper()
	ents, err := os.ReadDir(topo.NetNSDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("slb-%d-", pid)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// processesWith lists the processes whose environment holds kv.
func processesWith(kv string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(b, []byte{0}) {
			if string(v) == kv {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestPrivilegedBenchEarlyInterrupt interrupts `sluice bench --paper` in
// its first seconds, as soon as the results file exists (before or
// during the first test: nothing or almost nothing measured), and checks
// that it exits 130 with a partial report and its charts, never a panic
// (a log axis with no data used to panic), and that `sluice report` of
// the same file works the same. About 10 s.
func TestPrivilegedBenchEarlyInterrupt(t *testing.T) {
	testutil.RequireRoot(t)
	out := t.TempDir()
	cmd := exec.Command(os.Args[0], "bench", "--paper", "--no-progress", "--out", out)
	cmd.Env = append(os.Environ(), "SLUICE_CLI_MAIN=1")
	var output bytes.Buffer
	cmd.Stderr = &output
	cmd.Stdout = &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	results := filepath.Join(out, bench.ResultsFile)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(results); err == nil && bytes.Contains(b, []byte(`"kind":"run"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no results header after 30 s; output:\n%s", output.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("exit: %v, want status 130; output:\n%s", err, output.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice did not exit 60 s after SIGINT; output:\n%s", output.String())
	}
	if strings.Contains(output.String(), "panic") {
		t.Errorf("output:\n%s", output.String())
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !bytes.Contains(md, []byte("The run was interrupted")) {
		t.Errorf("partial report: %v\n%s", err, md)
	}
	again := t.TempDir()
	var rout, rerr bytes.Buffer
	if rc := Main([]string{"report", "--out", again, results}, &rout, &rerr, config.Datapaths{}); rc != 0 {
		t.Errorf("sluice report of the partial results: exit %d: %s", rc, rerr.String())
	}
	if b, err := os.ReadFile(filepath.Join(again, "report.md")); err != nil || !bytes.Equal(b, md) {
		t.Errorf("sluice report made a different report (%v)", err)
	}
}

//go:build linux

package sluice

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/bench/topo"
	ipfcli "sluice/internal/cmd/ipf"
	"sluice/internal/cmd/ipqosadmin"
	"sluice/internal/ipfctl"
	"sluice/internal/testutil/bpffs"
	"sluice/internal/testutil/promtest"
	"sluice/internal/testutil/topotest"
)

// TestPrivilegedExporterPrometheus loads rules and an IPQoS configuration
// into the kernel datapaths of a test namespace (private bpffs), sends
// packets through them, runs `sluice exporter` (this test binary acting as
// the command) and a real Prometheus server in that namespace, and checks
// what Prometheus scraped against the packets sent. About 10 s.
func TestPrivilegedExporterPrometheus(t *testing.T) {
	tp := topotest.New(t, "slexp")
	mnt := bpffs.Mount(t)
	pin, qdir := filepath.Join(mnt, "sluice"), filepath.Join(mnt, "qos")
	sut := func(fn func() error) error { return tp.Do(topo.SUT, fn) }
	link := tp.Links()[0]

	dir := t.TempDir()
	rules := filepath.Join(dir, "ipf.conf")
	os.WriteFile(rules, []byte("block in quick proto udp from any to any port = 9\n"+
		"pass out quick proto udp from any to any port = 7777 keep state\n"+
		"pass in quick proto udp from any to any port = 4000 keep state keep frags\n"+
		"count in proto udp from any to any\n"), 0o644)
	qconf := filepath.Join(dir, "ipqos.conf")
	os.WriteFile(qconf, []byte(fmt.Sprintf("filter f7777 {\n    udp\n    dstport 7777\n}\npolicy mark {\n    uses f7777\n    dscp 46\n}\nadapter %s {\n    uses mark\n}\n", link)), 0o644)

	var out, errb bytes.Buffer
	if err := sut(func() error {
		c := &ipfcli.Command{Stdout: &out, Stderr: &errb, Backend: ipfctl.FilterBackend(pin)}
		if rc := c.Run([]string{"-Fa", "-f", rules}); rc != 0 {
			return fmt.Errorf("ipf -Fa -f: exit %d: %s", rc, errb.String())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sut(func() error { return ipfctl.Remove(pin) }) })
	if err := sut(func() error {
		if rc := ipqosadmin.Main([]string{"-load", "-f", qconf, "-pindir", qdir}, nil, &out, &errb); rc != 0 {
			return fmt.Errorf("ipqosadmin -load: exit %d: %s", rc, errb.String())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sut(func() error { ipqosadmin.Main([]string{"-unload", "-pindir", qdir}, nil, &out, &errb); return nil })
	})

	addr := startExporter(t, sut, "--pindir", pin, "--qos-pindir", qdir, "--bpf-stats", "--rule-text")
	prom := promtest.Start(t, sut, addr)

	// 5 datagrams to the blocked port in, 3 out through the IPQoS filter
	sendUDP(t, func(fn func() error) error { return tp.Do(topo.Peer, fn) }, topo.SUTAddr, 9, 5)
	sendUDP(t, sut, topo.PeerAddr, 7777, 3)
	// one datagram of 3000 bytes: 3 fragments on a 1500-byte link
	sendSized(t, func(fn func() error) error { return tp.Do(topo.Peer, fn) }, topo.SUTAddr, 4000, 3000)

	const wait = 30 * time.Second
	prom.WaitFor(t, `up{job="sluice"}`, wait, promtest.One(1))
	prom.WaitFor(t, `sluice_rule_packets_total{direction="in",list="filter",group="main",number="1",rule="block in quick proto udp from any to any port = 9"}`, wait, promtest.One(5))
	// keep state: the rule sees the first packet, the state entry the rest
	prom.WaitFor(t, `sluice_rule_packets_total{direction="out",number="1"}`, wait, promtest.One(1))
	prom.WaitFor(t, `sluice_state_hits_total`, wait, func(r []promtest.Sample) bool { return len(r) == 1 && r[0].Value >= 2 })
	prom.WaitFor(t, `sluice_rule_packets_total{list="accounting"}`, wait, func(r []promtest.Sample) bool { return len(r) == 1 && r[0].Value >= 6 })
	prom.WaitFor(t, `sluice_fragments_total{direction="in"}`, wait, func(r []promtest.Sample) bool { return len(r) == 1 && r[0].Value >= 3 })
	prom.WaitFor(t, `sluice_fragment_entries`, wait, promtest.One(1))
	prom.WaitFor(t, `sluice_rule_bytes_total{direction="in",number="1",list="filter"}`, wait, promtest.One(5*(20+8+16)))
	prom.WaitFor(t, `sluice_ipqos_filter_packets_total{adapter="`+link+`",policy="mark",filter="f7777"}`, wait, promtest.One(3))
	prom.WaitFor(t, `sluice_ipqos_state`, wait, promtest.One(3))
	prom.WaitFor(t, `sluice_drops_total{reason="filter-rule"}`, wait, func(r []promtest.Sample) bool { return len(r) == 1 && r[0].Value >= 5 })
	prom.WaitFor(t, `sluice_state_inserts_total{proto="udp"}`, wait, promtest.One(2))
	prom.WaitFor(t, `sluice_state_entries`, wait, promtest.One(2))
	prom.WaitFor(t, `sluice_filter_attached{interface="`+link+`"}`, wait, promtest.One(1))
	prom.WaitFor(t, `sluice_bpf_stats_enabled`, wait, promtest.One(1))
	// run time per packet: the exporter held BPF_ENABLE_STATS while the
	// packets went through
	prom.WaitFor(t, `sluice_bpf_run_seconds_total{hook="ingress"} / sluice_bpf_run_count_total{hook="ingress"}`, wait,
		func(r []promtest.Sample) bool { return len(r) == 1 && r[0].Value > 0 && r[0].Value < 1e-3 })
}

// startExporter starts `sluice exporter` on a free loopback port through
// do and returns the address it listens on.
func startExporter(t *testing.T, do func(func() error) error, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"exporter", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "SLUICE_CLI_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := do(cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("exporter: %v (%q)", err, line)
	}
	const mark = "listening on http://"
	i := strings.Index(line, mark)
	if i < 0 {
		t.Fatalf("exporter said %q", line)
	}
	go func() { // keep draining, so a chatty exporter never blocks
		b := make([]byte, 4096)
		for {
			if _, err := stderr.Read(b); err != nil {
				return
			}
		}
	}()
	return strings.TrimSuffix(strings.TrimSpace(line[i+len(mark):]), "/metrics")
}

// sendSized sends one datagram of size bytes (fragmented by the sender
// when it is larger than the link's MTU).
func sendSized(t *testing.T, do func(func() error) error, dst netip.Addr, port, size int) {
	t.Helper()
	if err := do(func() error {
		c, err := net.ListenUDP("udp4", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteToUDP(make([]byte, size), net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, uint16(port))))
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// sendUDP sends n datagrams of 16 bytes to dst:port from a socket made
// through do.
func sendUDP(t *testing.T, do func(func() error) error, dst netip.Addr, port, n int) {
	t.Helper()
	if err := do(func() error {
		// unconnected, so the peer's port unreachable does not fail
		// the next write
		c, err := net.ListenUDP("udp4", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, uint16(port)))
		for i := 0; i < n; i++ {
			if _, err := c.WriteToUDP(make([]byte, 16), to); err != nil {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

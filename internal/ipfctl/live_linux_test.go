package ipfctl

// Live tests: the built ipf, ipfstat and ipmon binaries drive the eBPF
// datapath on a veth pair between two network namespaces that the test
// creates ("a", the client side, and "b", the host that runs the filter).
//
// Namespace entry without nsenter: a command is started from a goroutine
// locked to an OS thread that has joined namespace b (setns); fork/exec
// happens on that thread, so the child starts inside b. The test's own
// sockets are made the same way. The pins go to a private bpffs mount
// passed to the commands through SLUICE_BPF_DIR.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
	"sluice/internal/mountinfo"
	"sluice/internal/rules/ipf"
	"sluice/internal/testutil"
	"sluice/internal/testutil/bpffs"
)

const (
	addrA   = "10.231.0.1"
	addrB   = "10.231.0.2"
	tcpPort = 5001
	udpPort = 5002
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildTools builds the commands once per test binary run.
func buildTools(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ipfctl-bin")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		gobin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("building the commands: %w", err)
			return
		}
		out, err := exec.Command(gobin, "build", "-o", dir+"/", "sluice/cmd/ipf", "sluice/cmd/ipfstat", "sluice/cmd/ipmon", "sluice/cmd/ippool", "sluice/cmd/ipnat", "sluice/cmd/ipqosadmin").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// topo is the two namespaces, the veth between them and the pin directory.
type topo struct {
	t      *testing.T
	a, b   netns.NsHandle
	orig   netns.NsHandle
	pinDir string
	bin    string
	tmp    string
	// cleanups run in reverse order by close
	cleanups []func()
}

func (tp *topo) onClose(f func()) { tp.cleanups = append(tp.cleanups, f) }

// close tears the topology down: processes and sockets, the datapath,
// the veth, the namespaces, the bpffs mount and the files.
func (tp *topo) close() {
	for i := len(tp.cleanups) - 1; i >= 0; i-- {
		tp.cleanups[i]()
	}
	tp.cleanups = nil
}

var (
	sharedMu sync.Mutex
	shared   *topo
)

// sharedTopo returns the topology the rule-set tests share (one datapath
// load for all of them, the verifier being the slow part); TestMain tears
// it down. Each test starts by resetting the rules.
func sharedTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireRoot(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		shared = newTopo(t)
		return shared
	}
	shared.t = t
	if _, err := os.Stat(shared.pinDir); err == nil {
		shared.mustRun("ipf", "-l", "none", "-FS", "-Fa", "-I", "-Fa")
	}
	return shared
}

// ownTopo returns a topology for this test alone.
func ownTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireRoot(t)
	// nothing is shared, so these overlap with each other (after the
	// shared-topology tests, which run one by one)
	t.Parallel()
	tp := newTopo(t)
	t.Cleanup(tp.close)
	return tp
}

func TestMain(m *testing.M) {
	if os.Getenv(mountHelperEnv) == "1" {
		os.Exit(mountHelper())
	}
	code := m.Run()
	if shared != nil {
		shared.close()
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// inNS runs f on an OS thread that has joined ns. If the thread cannot go
// back to the original namespace it is left locked, so Go retires it.
func (tp *topo) inNS(ns netns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		err := f()
		if netns.Set(tp.orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireRoot(t)
	tmp, err := os.MkdirTemp("", "ipfctl-live")
	if err != nil {
		t.Fatal(err)
	}
	tp := &topo{t: t, bin: buildTools(t), tmp: tmp}
	tp.onClose(func() { os.RemoveAll(tmp) })
	complete := false
	defer func() {
		if !complete { // a Fatal or Skip on the way: undo what was made
			tp.close()
		}
	}()
	mnt := filepath.Join(tp.tmp, "bpffs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	unmount, err := bpffs.MountAt(mnt)
	if err != nil {
		testutil.SkipOrFail(t, "%v", err)
	}
	tp.onClose(func() { unmount() })
	tp.pinDir = filepath.Join(mnt, "sluice")

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	tp.orig = orig
	tp.onClose(func() { orig.Close() })
	for _, p := range []*netns.NsHandle{&tp.a, &tp.b} {
		ns, err := netns.New() // also switches this thread into it
		if err != nil {
			netns.Set(orig)
			testutil.SkipOrFail(t, "creating a network namespace: %v", err)
		}
		*p = ns
		// closing the last handle destroys the namespace and its veth end
		tp.onClose(func() { ns.Close() })
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	// no IPv6 on the test links: router solicitations and MLD reports
	// would add packets the counters are not expecting
	for _, ns := range []netns.NsHandle{tp.a, tp.b} {
		if err := tp.inNS(ns, func() error {
			for _, k := range []string{"all", "default"} {
				if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Logf("disabling IPv6: %v", err)
		}
	}
	ha, err := netlink.NewHandleAt(tp.a)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	hb, err := netlink.NewHandleAt(tp.b)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sla"}, PeerName: "slb", PeerNamespace: netlink.NsFd(tp.b)}
	if err := ha.LinkAdd(veth); err != nil {
		t.Fatalf("adding veth: %v", err)
	}
	tp.onClose(func() {
		// also removes the filter from slb; the namespaces go right after
		if h, err := netlink.NewHandleAt(tp.a); err == nil {
			if l, err := h.LinkByName("sla"); err == nil {
				h.LinkDel(l)
			}
			h.Close()
		}
	})
	for _, s := range []struct {
		h          *netlink.Handle
		name, addr string
	}{{ha, "sla", addrA}, {hb, "slb", addrB}} {
		l, err := s.h.LinkByName(s.name)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := netlink.ParseAddr(s.addr + "/24")
		if err := s.h.AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
		if err := s.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		lo, err := s.h.LinkByName("lo")
		if err == nil {
			s.h.LinkSetUp(lo)
		}
	}
	tp.onClose(func() {
		tp.inNS(tp.b, func() error { return Remove(tp.pinDir) })
	})
	tp.startServers()
	complete = true
	return tp
}

// cmd prepares one of the built commands to run in namespace b.
func (tp *topo) cmd(name string, args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(tp.bin, name), args...)
	c.Env = append(os.Environ(), PinDirEnv+"="+tp.pinDir, PoolDirEnv+"="+filepath.Join(tp.tmp, "pools"))
	return c
}

// start starts c inside namespace b.
func (tp *topo) start(c *exec.Cmd) error {
	return tp.inNS(tp.b, c.Start)
}

// run runs a command in namespace b and returns its exit code and output.
func (tp *topo) run(name string, args ...string) (code int, stdout, stderr string) {
	tp.t.Helper()
	return tp.runIn(tp.b, name, args...)
}

// runIn runs one of the built commands in namespace ns.
func (tp *topo) runIn(ns netns.NsHandle, name string, args ...string) (code int, stdout, stderr string) {
	tp.t.Helper()
	t0 := time.Now()
	defer func() { tp.t.Logf("%s %v: %v", name, args, time.Since(t0)) }()
	c := tp.cmd(name, args...)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	if err := tp.inNS(ns, c.Start); err != nil {
		tp.t.Fatalf("%s %v: %v", name, args, err)
	}
	err := c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), o.String(), e.String()
	}
	if err != nil {
		tp.t.Fatalf("%s %v: %v", name, args, err)
	}
	return 0, o.String(), e.String()
}

// mustRun runs a command that must succeed and returns its stdout.
func (tp *topo) mustRun(name string, args ...string) string {
	tp.t.Helper()
	code, o, e := tp.run(name, args...)
	if code != 0 {
		tp.t.Fatalf("%s %s: exit %d\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), code, o, e)
	}
	return o
}

// file writes a rule file and returns its path.
func (tp *topo) file(name, text string) string {
	tp.t.Helper()
	p := filepath.Join(tp.tmp, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		tp.t.Fatal(err)
	}
	return p
}

// startServers runs TCP and UDP echo servers in both namespaces.
func (tp *topo) startServers() {
	for _, s := range []struct {
		ns   netns.NsHandle
		addr string
	}{{tp.a, addrA}, {tp.b, addrB}} {
		var ln net.Listener
		var pc net.PacketConn
		err := tp.inNS(s.ns, func() error {
			var err error
			if ln, err = net.Listen("tcp4", net.JoinHostPort(s.addr, strconv.Itoa(tcpPort))); err != nil {
				return err
			}
			pc, err = net.ListenPacket("udp4", net.JoinHostPort(s.addr, strconv.Itoa(udpPort)))
			return err
		})
		if err != nil {
			tp.t.Fatalf("listening in namespace: %v", err)
		}
		tp.onClose(func() { ln.Close(); pc.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				pc.WriteTo(buf[:n], from)
			}
		}()
	}
}

// dialTCP connects from ns to addr:tcpPort.
func (tp *topo) dialTCP(ns netns.NsHandle, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := tp.inNS(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(addr, strconv.Itoa(tcpPort)), timeout)
		return err
	})
	return c, err
}

// tcpEcho opens a connection from ns to addr, exchanges a message and
// closes it.
func (tp *topo) tcpEcho(ns netns.NsHandle, addr string, timeout time.Duration) error {
	c, err := tp.dialTCP(ns, addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	return echo(c, []byte("ping"), timeout)
}

func echo(c net.Conn, msg []byte, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if !bytes.Equal(buf, msg) {
		return fmt.Errorf("echo: got %q, want %q", buf, msg)
	}
	return nil
}

// udpEcho sends a datagram from ns to addr:port and waits for the echo.
func (tp *topo) udpEcho(ns netns.NsHandle, addr string, timeout time.Duration) error {
	var c net.Conn
	if err := tp.inNS(ns, func() error {
		var err error
		c, err = net.Dial("udp4", net.JoinHostPort(addr, strconv.Itoa(udpPort)))
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	return echo(c, []byte("hello"), timeout)
}

// sendUDP sends n datagrams from ns to addr:port without waiting for
// anything back (an unconnected socket, so ICMP errors are ignored).
func (tp *topo) sendUDP(ns netns.NsHandle, addr string, port, n int) {
	tp.t.Helper()
	var pc net.PacketConn
	if err := tp.inNS(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", ":0")
		return err
	}); err != nil {
		tp.t.Fatal(err)
	}
	defer pc.Close()
	to := &net.UDPAddr{IP: net.ParseIP(addr), Port: port}
	for i := 0; i < n; i++ {
		if _, err := pc.WriteTo([]byte("count me"), to); err != nil {
			tp.t.Fatal(err)
		}
	}
}

// flows checks that TCP and UDP from a to b and from b to a work.
func (tp *topo) flows() {
	tp.t.Helper()
	for _, d := range []struct {
		name string
		ns   netns.NsHandle
		addr string
	}{{"a->b", tp.a, addrB}, {"b->a", tp.b, addrA}} {
		if err := tp.tcpEcho(d.ns, d.addr, 2*time.Second); err != nil {
			tp.t.Errorf("TCP %s: %v", d.name, err)
		}
		if err := tp.udpEcho(d.ns, d.addr, 2*time.Second); err != nil {
			tp.t.Errorf("UDP %s: %v", d.name, err)
		}
	}
}

// settle waits until every TCP connection of the test's namespaces has
// finished closing: the flows' teardown (the servers' FINs and the last
// ACKs) crosses slb after the exchange that flows waits for, and a loaded
// machine can delay it past the next counter read. A connection that has
// left LAST_ACK has had its last ACK through the filter; TIME_WAIT sends
// nothing unprompted.
func (tp *topo) settle() {
	tp.t.Helper()
	var busy []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		busy = busy[:0]
		for _, ns := range []netns.NsHandle{tp.a, tp.b} {
			var b []byte
			if err := tp.inNS(ns, func() (err error) {
				// thread-self: /proc/self/net is the main thread's namespace
				b, err = os.ReadFile("/proc/thread-self/net/tcp")
				return err
			}); err != nil {
				tp.t.Fatal(err)
			}
			for _, line := range strings.Split(string(b), "\n")[1:] {
				f := strings.Fields(line)
				// 06 TIME_WAIT, 07 CLOSE, 0A LISTEN
				if len(f) > 3 && f[3] != "06" && f[3] != "07" && f[3] != "0A" {
					busy = append(busy, f[1]+" "+f[2]+" state "+f[3])
				}
			}
		}
		if len(busy) == 0 {
			return
		}
	}
	tp.t.Fatalf("TCP connections still open or closing after 20 s: %v", busy)
}

// inputPackets returns blocked and passed+nomatch from ipfstat's input
// packets line.
func (tp *topo) inputPackets() (blocked, passed uint64) {
	tp.t.Helper()
	out := tp.mustRun("ipfstat")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, " input packets:") {
			var nm, ct, sh uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, " input packets:")),
				"blocked %d passed %d nomatch %d counted %d short %d", &blocked, &passed, &nm, &ct, &sh); err != nil {
				tp.t.Fatalf("ipfstat line %q: %v", line, err)
			}
			return blocked, passed + nm
		}
	}
	tp.t.Fatalf("ipfstat printed no input packets line:\n%s", out)
	return 0, 0
}

const stateless6 = `pass in proto tcp from any to any
pass in proto udp from any to any
pass in proto icmp from any to any
pass out proto tcp from any to any
pass out proto udp from any to any
pass out proto icmp from any to any
`

const stateful6 = `pass in proto tcp from any to any keep state
pass in proto udp from any to any keep state
pass in proto icmp from any to any keep state
pass out proto tcp from any to any keep state
pass out proto udp from any to any keep state
pass out proto icmp from any to any keep state
`

// bigSet is 9 994 rules that never match the test's traffic (other
// sources, other ports) followed by the six stateless pass rules.
func bigSet() string {
	var b strings.Builder
	for i := 0; i < 9994; i++ {
		proto := "tcp"
		if i%2 == 1 {
			proto = "udp"
		}
		fmt.Fprintf(&b, "block in quick proto %s from 198.18.%d.%d to any port = %d\n", proto, i/250, i%250+1, 10000+i)
	}
	b.WriteString(stateless6)
	return b.String()
}

func TestPrivilegedRuleSets(t *testing.T) {
	tp := sharedTopo(t)
	for _, c := range []struct {
		name, rules string
	}{
		{"none", ""},
		{"stateless", stateless6},
		{"keep-state", stateful6},
		{"10000", bigSet()},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp.t = t
			// each set replaces the previous one, as on a running host
			f := tp.file(c.name+".conf", c.rules)
			tp.mustRun("ipf", "-Fa", "-f", f)
			rules := strings.Count(tp.mustRun("ipfstat", "-io"), "\n")
			if want := strings.Count(c.rules, "\n"); rules != want {
				t.Fatalf("ipfstat -io lists %d rules, want %d", rules, want)
			}
			blocked0, before := tp.inputPackets()
			tp.flows()
			blocked, after := tp.inputPackets()
			if after <= before {
				t.Errorf("filter saw no passed input packets (%d before, %d after): not attached?", before, after)
			}
			if blocked != blocked0 {
				t.Errorf("%d input packets blocked, want 0", blocked-blocked0)
			}
		})
	}
}

func TestPrivilegedKeepState(t *testing.T) {
	tp := sharedTopo(t)
	f := tp.file("ks.conf", `block in all
pass out proto tcp from any to any flags S keep state
pass out proto udp from any to any keep state
`)
	tp.mustRun("ipf", "-Fa", "-f", f)
	if err := tp.tcpEcho(tp.b, addrA, 2*time.Second); err != nil {
		t.Errorf("TCP from b (replies through state): %v", err)
	}
	if err := tp.udpEcho(tp.b, addrA, 2*time.Second); err != nil {
		t.Errorf("UDP from b (replies through state): %v", err)
	}
	blocked0, _ := tp.inputPackets()
	if err := tp.tcpEcho(tp.a, addrB, 300*time.Millisecond); err == nil {
		t.Errorf("unsolicited TCP connection from a to b succeeded, want blocked")
	}
	if err := tp.udpEcho(tp.a, addrB, 300*time.Millisecond); err == nil {
		t.Errorf("unsolicited UDP from a to b was answered, want blocked")
	}
	blocked1, _ := tp.inputPackets()
	if blocked1 <= blocked0 {
		t.Errorf("input blocked counter went from %d to %d, want it to grow", blocked0, blocked1)
	}
	states := tp.mustRun("ipfstat", "-sl")
	if !strings.Contains(states, addrB+" -> "+addrA) {
		t.Errorf("ipfstat -sl shows no state from b to a:\n%s", states)
	}
	var n int
	out := tp.mustRun("ipf", "-v", "-FS")
	if _, err := fmt.Sscanf(out, "%d state entries removed", &n); err != nil || n < 2 {
		t.Errorf("ipf -v -FS printed %q, want at least 2 state entries removed", out)
	}
	if got := tp.mustRun("ipfstat", "-sl"); got != "" {
		t.Errorf("ipfstat -sl after ipf -FS:\n%s\nwant nothing", got)
	}
}

func TestPrivilegedKernelFlags(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("p.conf", "pass in all\npass out all\n"))
	t.Cleanup(func() {
		// the topology is shared: put the defaults back
		tp.run("ipf", "-l", "none", "-T", "state_max=4013,udp_timeout=240")
	})
	if got := tp.mustRun("ipf", "-T", "state_max"); got != "state_max\tmin 1\tmax 2147483647\tcurrent 4013\n" {
		t.Errorf("ipf -T state_max: %q", got)
	}
	tp.mustRun("ipf", "-T", "state_max=5000,udp_timeout=100")
	if got := tp.mustRun("ipf", "-T", "list"); !strings.Contains(got, "state_max\tmin 1\tmax 2147483647\tcurrent 5000\n") ||
		!strings.Contains(got, "udp_timeout\tmin 1\tmax 2147483647\tcurrent 100\n") {
		t.Errorf("ipf -T list after setting:\n%s", got)
	}
	if code, _, e := tp.run("ipf", "-T", "nosuch=1"); code == 0 || !strings.Contains(e, "nosuch") {
		t.Errorf("ipf -T nosuch=1: exit %d, stderr %q", code, e)
	}
	tp.mustRun("ipf", "-l", "block")
	v := tp.mustRun("ipf", "-V")
	for _, line := range []string{"ipf: IP Filter: v5.1.2 (Sluice)\n", "Running: yes\n", "Log Flags: 0x1 = block\n", "Default: pass all, Logging: available\n"} {
		if !strings.Contains(v, line) {
			t.Errorf("ipf -V:\n%s\nlacks %q", v, line)
		}
	}
	tp.flows()
	// what -Z zeroes must be all there is: no teardown packet after it
	tp.settle()
	z := tp.mustRun("ipf", "-Z")
	var blocked, passed, nomatch, counted uint64
	for _, line := range strings.Split(z, "\n") {
		if strings.HasPrefix(line, " input packets:") {
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, " input packets:")), "blocked %d passed %d nomatch %d counted %d", &blocked, &passed, &nomatch, &counted)
		}
	}
	if passed == 0 {
		t.Errorf("ipf -Z after traffic reports no passed input packets:\n%s", z)
	}
	if _, p := tp.inputPackets(); p != 0 {
		t.Errorf("after ipf -Z ipfstat reports %d passed input packets, want 0", p)
	}
	activeList := func() int {
		v := tp.mustRun("ipf", "-V")
		_, rest, _ := strings.Cut(v, "Active list: ")
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
		if err != nil {
			t.Fatalf("ipf -V has no active list number:\n%s", v)
		}
		return n
	}
	before := activeList()
	if got, want := tp.mustRun("ipf", "-s"), fmt.Sprintf("Set %d now inactive\n", before); got != want {
		t.Errorf("ipf -s printed %q, want %q", got, want)
	}
	if after := activeList(); after != 1-before {
		t.Errorf("ipf -V after -s: active list %d, want %d", after, 1-before)
	}
	// the inactive set was empty: everything passes by default now
	if got := tp.mustRun("ipfstat", "-i"); got != "" {
		t.Errorf("ipfstat -i after swapping in the empty set: %q", got)
	}
}

func TestPrivilegedSwapUnderLoad(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("old.conf", stateless6))
	newRules := tp.file("new.conf", fmt.Sprintf(`pass in quick proto tcp from any to any port = %d
block in all
pass out all
`, tcpPort))

	// a few long connections exchanging data all the time
	const long = 3
	var (
		stop               atomic.Bool
		wg                 sync.WaitGroup
		crrOK, crrFail     atomic.Int64
		longFail           atomic.Int64
		longAfter          [long]atomic.Int64
		swapped            atomic.Bool
		firstErr           atomic.Value
		conns              []net.Conn
		bigMsg             = bytes.Repeat([]byte("0123456789abcdef"), 256)
		recordErr          = func(err error) { firstErr.CompareAndSwap(nil, err.Error()) }
		newConnWhileSwitch = 4
	)
	for i := 0; i < long; i++ {
		c, err := tp.dialTCP(tp.a, addrB, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		defer c.Close()
	}
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := echo(c, bigMsg, 3*time.Second); err != nil {
					longFail.Add(1)
					recordErr(err)
					return
				}
				if swapped.Load() {
					longAfter[i].Add(1)
				}
			}
		}()
	}
	// many short connections (TCP_CRR-like: connect, request, response, close)
	for g := 0; g < newConnWhileSwitch; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := tp.tcpEcho(tp.a, addrB, 3*time.Second); err != nil {
					crrFail.Add(1)
					recordErr(err)
					continue
				}
				crrOK.Add(1)
			}
		}()
	}
	// The load runs on each side of the swap for 700 ms and until it has
	// shown itself there (the time alone would do on a quiet machine
	// only; the bound is so that a hung load fails instead of hanging):
	// some short connections, and after the swap an exchange on each long
	// one.
	waitFor := func(cond func() bool) {
		time.Sleep(700 * time.Millisecond)
		for deadline := time.Now().Add(20 * time.Second); !cond() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(func() bool { return crrOK.Load() >= 20 })
	before := crrOK.Load()
	out := tp.mustRun("ipf", "-I", "-Fa", "-f", newRules, "-s")
	swapped.Store(true)
	waitFor(func() bool {
		for i := range longAfter {
			if longAfter[i].Load() == 0 {
				return false
			}
		}
		return crrOK.Load() >= before+20
	})
	stop.Store(true)
	wg.Wait()

	if !strings.Contains(out, "now inactive") {
		t.Errorf("ipf -s printed %q, want \"Set N now inactive\"", out)
	}
	if n := crrFail.Load(); n != 0 {
		t.Errorf("%d short connections failed (%d succeeded); first error: %v", n, crrOK.Load(), firstErr.Load())
	}
	if n := longFail.Load(); n != 0 {
		t.Errorf("%d long connections broke; first error: %v", n, firstErr.Load())
	}
	if before == 0 || crrOK.Load() == before {
		t.Errorf("short connections before swap %d, total %d: the load did not run on both sides of the swap", before, crrOK.Load())
	}
	for i := range longAfter {
		if longAfter[i].Load() == 0 {
			t.Errorf("long connection %d exchanged nothing after the swap", i)
		}
	}
	// the new rules are really in force: UDP is no longer let in
	if err := tp.udpEcho(tp.a, addrB, 300*time.Millisecond); err == nil {
		t.Errorf("UDP passed after swapping to rules that block it")
	}
	if got := tp.mustRun("ipfstat", "-i"); !strings.Contains(got, fmt.Sprintf("port = %d", tcpPort)) {
		t.Errorf("ipfstat -i after swap:\n%s\nwant the new rules", got)
	}
	t.Logf("short connections: %d, swap at %d", crrOK.Load(), before)
}

// ruleHits returns the hit count ipfstat -h prints for the rule whose
// text contains sub.
func ruleHits(t *testing.T, listing, sub string) uint64 {
	t.Helper()
	for _, line := range strings.Split(listing, "\n") {
		if strings.Contains(line, sub) {
			n, _, _ := strings.Cut(line, " ")
			v, err := strconv.ParseUint(n, 10, 64)
			if err != nil {
				t.Fatalf("ipfstat -h line %q: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no rule with %q in:\n%s", sub, listing)
	return 0
}

func TestPrivilegedHitCounters(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("count.conf", fmt.Sprintf(`pass in quick proto udp from %s to %s port = 5003
pass in all
pass out quick proto udp from %s to %s port = 5004
pass out all
`, addrA, addrB, addrB, addrA)))
	const nIn, nOut = 37, 23
	tp.sendUDP(tp.a, addrB, 5003, nIn)
	tp.sendUDP(tp.b, addrA, 5004, nOut)
	var in, out uint64
	// until every datagram was counted; the bound is a hang detector (a
	// loaded machine can take seconds to run the ipfstat in the loop)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		in = ruleHits(t, tp.mustRun("ipfstat", "-ih"), "port = 5003")
		out = ruleHits(t, tp.mustRun("ipfstat", "-oh"), "port = 5004")
		if in >= nIn && out >= nOut {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if in != nIn {
		t.Errorf("ipfstat -ih: %d hits on the in rule, want %d", in, nIn)
	}
	if out != nOut {
		t.Errorf("ipfstat -oh: %d hits on the out rule, want %d", out, nOut)
	}
	// ipf -z reports a rule's counters and zeroes them
	z := tp.file("z.conf", fmt.Sprintf("pass in quick proto udp from %s to %s port = 5003\n", addrA, addrB))
	if got, want := tp.mustRun("ipf", "-z", "-f", z), fmt.Sprintf("hits %d bytes", nIn); !strings.HasPrefix(got, want) {
		t.Errorf("ipf -z printed %q, want it to start with %q", got, want)
	}
	if in := ruleHits(t, tp.mustRun("ipfstat", "-ih"), "port = 5003"); in != 0 {
		t.Errorf("after ipf -z the rule has %d hits, want 0", in)
	}
	// the other rules keep theirs (IPFilter zeroes the one rule)
	if out := ruleHits(t, tp.mustRun("ipfstat", "-oh"), "port = 5004"); out != nOut {
		t.Errorf("after ipf -z on another rule the out rule has %d hits, want %d", out, nOut)
	}
}

// unsupportedRule returns a rule the parser accepts and the compilers
// (ruleset for the engine, bpf for the kernel) refuse as not supported.
// Both gain features, so it tries several.
func unsupportedRule(t *testing.T) string {
	for _, r := range []string{
		`pass in exp { "ip.src != 192.0.2.1;" }`,
		`pass in bpf-v4 { "0 1 2 3" }`,
		"pass in quick inet6 proto tcp from any to any with v6hdr frag",
	} {
		rs, err := ipf.Parse("u.conf", []byte(r), ipf.ParseOptions{})
		if err != nil {
			continue
		}
		if _, err := bpf.Compile(rs, bpf.CompileOptions{}); err != nil && strings.Contains(err.Error(), "not supported") {
			return r
		}
	}
	t.Fatal("every candidate rule is supported now: add one that is not")
	return ""
}

func TestPrivilegedBadLoadChangesNothing(t *testing.T) {
	tp := sharedTopo(t)
	good := fmt.Sprintf("pass in quick proto tcp from any to any port = %d\npass in quick proto udp from any to any port = %d\nblock in all\npass out all\n", tcpPort, udpPort)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("good.conf", good))
	tp.mustRun("ipf", "-I", "-f", tp.file("inactive.conf", "block in all\n"))
	snapshot := func() string {
		return tp.mustRun("ipfstat", "-io") + "--\n" + tp.mustRun("ipfstat", "-Iio")
	}
	before := snapshot()
	for _, c := range []struct {
		name, rules, why string
		args             []string
	}{
		{"syntax", "pass in all\npass in quik all\n", "bad.conf:2", nil},
		{"syntax-inactive", "pass in all\nblock in from to\n", "bad.conf:2", []string{"-I"}},
		{"unsupported", "pass in all\n" + unsupportedRule(t) + "\n", "not supported", nil},
		{"remove-missing", "pass in proto gre from any to any\n", "not loaded", []string{"-r"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp.t = t
			f := tp.file("bad.conf", c.rules)
			code, _, stderr := tp.run("ipf", append(c.args, "-f", f)...)
			if code == 0 {
				t.Errorf("ipf exited 0 on a bad rule set")
			}
			if !strings.Contains(stderr, c.why) {
				t.Errorf("ipf stderr %q does not say why (want %q)", stderr, c.why)
			}
			if after := snapshot(); after != before {
				t.Errorf("rules changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if err := tp.tcpEcho(tp.a, addrB, 2*time.Second); err != nil {
				t.Errorf("TCP after the failed load: %v", err)
			}
		})
	}
	tp.t = t
	// and a good removal: ipf -r takes out exactly that rule
	tp.mustRun("ipf", "-r", "-f", tp.file("rm.conf", fmt.Sprintf("pass in quick proto udp from any to any port = %d\n", udpPort)))
	want := fmt.Sprintf("pass in quick proto tcp from any to any port = %d\nblock in all\n", tcpPort)
	if got := tp.mustRun("ipfstat", "-i"); got != want {
		t.Errorf("ipfstat -i after ipf -r:\n%s\nwant:\n%s", got, want)
	}
	if err := tp.udpEcho(tp.a, addrB, 300*time.Millisecond); err == nil {
		t.Errorf("UDP still passes after its rule was removed")
	}
}

func TestPrivilegedIpmonLive(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("log.conf", "pass in log quick proto udp from any to any port = 5005\n"+
		"pass in quick proto udp from any to any port = 5006 head g2\n"+
		"pass in log quick proto udp from any to any port = 5006 group g2\n"+
		"pass in all\npass out all\n"))
	// records wait in the ring until read; ipmon -F discards them. The
	// first flush must come after all three packets went through the
	// filter (their rule's hits say so), or a late one's record is left
	// for the second flush, which must find nothing.
	tp.sendUDP(tp.a, addrB, 5005, 3)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := ruleHits(t, tp.mustRun("ipfstat", "-ih"), "port = 5005")
		if n == 3 {
			break
		}
		if n > 3 || time.Now().After(deadline) {
			t.Fatalf("the logging rule has %d hits after 3 packets", n)
		}
	}
	var flushed int
	out := tp.mustRun("ipmon", "-F")
	if _, err := fmt.Sscanf(out, "%d bytes flushed from log buffer", &flushed); err != nil {
		t.Fatalf("ipmon -F printed %q: %v", out, err)
	}
	if flushed == 0 {
		t.Errorf("ipmon -F flushed nothing after 3 logged packets")
	}
	if out := tp.mustRun("ipmon", "-F"); out != "0 bytes flushed from log buffer\n" {
		t.Errorf("second ipmon -F printed %q, want 0 bytes", out)
	}

	logFile := filepath.Join(tp.tmp, "ipmon.out")
	mon := tp.cmd("ipmon", "-o", "I", logFile)
	var stderr bytes.Buffer
	mon.Stderr = &stderr
	if err := tp.start(mon); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { mon.Wait(); close(done) }()
	t.Cleanup(func() {
		mon.Process.Kill()
		<-done
	})
	// ipmon needs a moment to open the ring; resend until it logs
	want := fmt.Sprintf("slb @0:1 p %s,", addrA)
	deadline := time.Now().Add(20 * time.Second) // generous: ipmon starts slowly on a loaded machine
	var got string
	for time.Now().Before(deadline) {
		tp.sendUDP(tp.a, addrB, 5005, 1)
		time.Sleep(100 * time.Millisecond)
		b, _ := os.ReadFile(logFile)
		got = string(b)
		if strings.Contains(got, want) {
			break
		}
		select {
		case <-done:
			t.Fatalf("ipmon exited: %s", stderr.String())
		default:
		}
	}
	sc := bufio.NewScanner(strings.NewReader(got))
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, want) {
			found = true
			for _, part := range []string{"-> " + addrB + ",5005 PR udp len 20 ", " IN"} {
				if !strings.Contains(line, part) {
					t.Errorf("ipmon line %q lacks %q", line, part)
				}
			}
		}
	}
	if !found {
		t.Fatalf("ipmon logged no line with %q; output:\n%s\nstderr: %s", want, got, stderr.String())
	}
	// a rule of a group is logged under the group's name
	want = fmt.Sprintf("slb @g2:1 p %s,", addrA)
	deadline = time.Now().Add(20 * time.Second) // generous, for a loaded machine
	for !strings.Contains(got, want) && time.Now().Before(deadline) {
		tp.sendUDP(tp.a, addrB, 5006, 1)
		time.Sleep(100 * time.Millisecond)
		b, _ := os.ReadFile(logFile)
		got = string(b)
	}
	if !strings.Contains(got, want) {
		t.Errorf("ipmon logged no line with %q; output:\n%s", want, got)
	}
}

// tcxPrograms counts the TCX programs on an interface of namespace b.
func (tp *topo) tcxPrograms(name string) int {
	n := 0
	err := tp.inNS(tp.b, func() error {
		l, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: l.Index, Attach: at})
			if err != nil {
				return err
			}
			n += len(res.Programs)
		}
		return nil
	})
	if err != nil {
		tp.t.Fatalf("querying TCX programs on %s: %v", name, err)
	}
	return n
}

func TestPrivilegedAttachNamedOrAll(t *testing.T) {
	tp := ownTopo(t)
	hb, err := netlink.NewHandleAt(tp.b)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	// a second interface in b: a veth pair with both ends there (the
	// dummy driver may be missing)
	if err := hb.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sld"}, PeerName: "sle"}); err != nil {
		t.Fatalf("adding veth: %v", err)
	}
	// rules naming slb (and an interface that does not exist) attach to slb only
	tp.mustRun("ipf", "-f", tp.file("on.conf", "pass in on slb all\npass out on nosuch0 all\n"))
	if a, d := tp.tcxPrograms("slb"), tp.tcxPrograms("sld"); a != 2 || d != 0 {
		t.Errorf("rules on slb: %d programs on slb, %d on sld; want 2 and 0", a, d)
	}
	tp.mustRun("ipf", "-D")
	// rules naming no interface attach to every non-loopback one
	tp.mustRun("ipf", "-f", tp.file("all.conf", "pass in all\n"))
	if a, d, lo := tp.tcxPrograms("slb"), tp.tcxPrograms("sld"), tp.tcxPrograms("lo"); a != 2 || d != 2 || lo != 0 {
		t.Errorf("rules on no interface: %d programs on slb, %d on sld, %d on lo; want 2, 2, 0", a, d, lo)
	}
}

func TestPrivilegedRemove(t *testing.T) {
	tp := ownTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("r.conf", stateless6))
	attached := func() int { return tp.tcxPrograms("slb") }
	if n := attached(); n != 2 {
		t.Fatalf("%d TCX programs on slb after ipf -f, want 2", n)
	}
	if v := tp.mustRun("ipf", "-V"); !strings.Contains(v, "Running: yes") {
		t.Errorf("ipf -V:\n%s\nwant Running: yes", v)
	}
	tp.mustRun("ipf", "-D")
	if n := attached(); n != 0 {
		t.Errorf("%d TCX programs on slb after ipf -D, want 0", n)
	}
	if _, err := os.Stat(tp.pinDir); !os.IsNotExist(err) {
		t.Errorf("pin directory after ipf -D: %v, want it gone", err)
	}
	if v := tp.mustRun("ipf", "-V"); !strings.Contains(v, "Running: no") {
		t.Errorf("ipf -V after -D:\n%s\nwant Running: no", v)
	}
	tp.flows()
	// -E brings the datapath back (enabled, empty, not attached yet)
	tp.mustRun("ipf", "-E")
	if v := tp.mustRun("ipf", "-V"); !strings.Contains(v, "Running: yes") {
		t.Errorf("ipf -V after -E:\n%s\nwant Running: yes", v)
	}
	tp.mustRun("ipf", "-D")
	if _, err := os.Stat(tp.pinDir); !os.IsNotExist(err) {
		t.Errorf("pin directory after the second ipf -D: %v, want it gone", err)
	}
}

// mountHelperEnv makes the test binary run mountHelper instead of the
// tests (see TestPrivilegedMountsBPFFS).
const mountHelperEnv = "IPFCTL_TEST_MOUNT_HELPER"

// mountHelper runs in a private mount namespace and plays the host's: it
// hides /sys/fs/bpf under a tmpfs and checks that prepareBPFFS mounts a
// bpffs there (and only once).
func mountHelper() int {
	initMountNS = func() (bool, bool) { return true, true }
	// the host's own bpffs (systemd's, or one an earlier ipf mounted)
	// stays in the table under the tmpfs: only new ones count
	before, err := bpfOnSys()
	if err != nil {
		fmt.Println("mount table:", err)
		return 1
	}
	if err := unix.Mount("none", "/sys/fs/bpf", "tmpfs", 0, ""); err != nil {
		fmt.Println("tmpfs:", err)
		return 1
	}
	for i := 0; i < 2; i++ {
		if err := prepareBPFFS("/sys/fs/bpf/sluice"); err != nil {
			fmt.Println("prepareBPFFS:", err)
			return 1
		}
		var st unix.Statfs_t
		if err := unix.Statfs("/sys/fs/bpf", &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
			fmt.Printf("/sys/fs/bpf after prepareBPFFS: %v, type %#x\n", err, st.Type)
			return 1
		}
	}
	// one bpffs on /sys/fs/bpf, not two stacked
	after, err := bpfOnSys()
	if err != nil {
		fmt.Println("mount table:", err)
		return 1
	}
	fmt.Printf("bpf mounts on /sys/fs/bpf: %d\n", after-before)
	return 0
}

// bpfOnSys counts the bpffs mounts on /sys/fs/bpf in the mount table,
// hidden ones included.
func bpfOnSys() (int, error) {
	mps, err := mountinfo.BPF()
	n := 0
	for _, mp := range mps {
		if mp == "/sys/fs/bpf" {
			n++
		}
	}
	return n, err
}

// TestPrivilegedMountsBPFFS checks that, in the host's mount namespace
// with no bpffs on /sys/fs/bpf, ipf mounts one (as systemd does at boot).
// It runs in a helper process in a private mount namespace that pretends
// to be the host's, so the host's /sys/fs/bpf is never touched; a real
// private namespace is refused (TestPrivilegedPrivateSys).
func TestPrivilegedMountsBPFFS(t *testing.T) {
	testutil.RequireRoot(t)
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), mountHelperEnv+"=1")
	c.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWNS}
	out, err := c.CombinedOutput()
	if err != nil || string(out) != "bpf mounts on /sys/fs/bpf: 1\n" {
		t.Errorf("helper: %v\n%s", err, out)
	}
}

// TestPrivilegedRemoveStalePins checks that Remove (ipf -D) clears a pin
// directory whose maps do not match this build's, as another version
// would leave it.
func TestPrivilegedRemoveStalePins(t *testing.T) {
	mnt := bpffs.Mount(t)
	dir := filepath.Join(mnt, "sluice")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config", "rules"} {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 2, ValueSize: 2, MaxEntries: 1})
		if err != nil {
			testutil.SkipOrFail(t, "creating a map: %v", err)
		}
		if err := m.Pin(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	if err := Remove(dir); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("pin directory after Remove: %v, want it gone", err)
	}
	if err := Remove(dir); err != nil {
		t.Errorf("Remove of nothing: %v, want nil", err)
	}
}

// TestPrivilegedIncrementalLoad adds rules to a loaded set in a second
// ipf -f, including a group rule whose head is already loaded.
func TestPrivilegedIncrementalLoad(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("a.conf", fmt.Sprintf(`pass in quick proto tcp from any to any port = %d
pass in proto udp from any to any head 10
pass out all
`, tcpPort)))
	if err := tp.udpEcho(tp.a, addrB, 2*time.Second); err != nil {
		t.Fatalf("UDP before the group rule: %v", err)
	}
	tp.mustRun("ipf", "-f", tp.file("b.conf", fmt.Sprintf("block in proto udp from any to any port = %d group 10\n", udpPort)))
	want := fmt.Sprintf(`pass in quick proto tcp from any to any port = %d
pass in proto udp from any to any head 10
# Group 10
block in proto udp from any to any port = %d group 10
`, tcpPort, udpPort)
	if got := tp.mustRun("ipfstat", "-i"); got != want {
		t.Errorf("ipfstat -i:\n%s\nwant:\n%s", got, want)
	}
	if err := tp.udpEcho(tp.a, addrB, 300*time.Millisecond); err == nil {
		t.Errorf("UDP passed after adding a group rule that blocks it")
	}
	if err := tp.tcpEcho(tp.a, addrB, 2*time.Second); err != nil {
		t.Errorf("TCP after adding the group rule: %v", err)
	}
}

// TestPrivilegedFailedFirstLoadLeavesNoPins makes the verifier reject the
// first load (ipf -E) and checks that nothing is left pinned, so the next
// ipf does not find a half-made datapath; a later load then works.
func TestPrivilegedFailedFirstLoadLeavesNoPins(t *testing.T) {
	mnt := bpffs.Mount(t)
	dir := filepath.Join(mnt, "sluice")
	b := NewKernel(dir)
	defer b.Close()
	b.failVerifier = true
	enable := []Op{{Kind: OpEnable}}
	_, err := b.Apply(enable, ApplyOptions{})
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		t.Fatalf("ipf -E with a rejected program: got %v, want a verifier error", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		ents, _ := os.ReadDir(dir)
		t.Fatalf("pin directory after the failed load: %v, %d entries", err, len(ents))
	}
	if _, err := bpf.OpenPinned(dir); !errors.Is(err, bpf.ErrNotLoaded) {
		t.Errorf("OpenPinned after the failed load: %v, want ErrNotLoaded", err)
	}
	b.failVerifier = false
	if _, err := b.Apply(enable, ApplyOptions{}); err != nil {
		t.Fatalf("ipf -E: %v", err)
	}
	if _, err := b.Apply([]Op{{Kind: OpDisable}}, ApplyOptions{}); err != nil {
		t.Fatalf("ipf -D: %v", err)
	}
}

// TestPrivilegedFlushAllCount checks the count ipf -v -Fa prints, which
// it takes from the loaded lists without reading the rules back: every
// rule of the set counts (groups, heads, accounting), in the active set,
// the inactive one (-I) and the set a -s before it made active.
func TestPrivilegedFlushAllCount(t *testing.T) {
	tp := sharedTopo(t)
	active := `pass in all
block in quick proto tcp from any to any port = 1 head 10
pass in from 192.0.2.4 to any group 10
block in from 192.0.2.5 to any group 10
count in from any to any
count out from any to any
pass out all
block out from 192.0.2.6 to any head 20
pass out from any to any group 20
`
	inactive := "pass in all\npass out all\ncount in from any to any\n"
	load := func() {
		tp.mustRun("ipf", "-Fa", "-f", tp.file("fa-active.conf", active))
		tp.mustRun("ipf", "-I", "-Fa", "-f", tp.file("fa-inactive.conf", inactive))
	}
	removed := func(out string) int {
		t.Helper()
		var n int
		i := strings.Index(out, "filter rules removed")
		if i < 0 {
			t.Fatalf("no count in %q", out)
		}
		line := out[strings.LastIndex(out[:i], "\n")+1:]
		if _, err := fmt.Sscanf(line, "%d filter rules removed", &n); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		return n
	}
	nActive, nInactive := strings.Count(active, "\n"), strings.Count(inactive, "\n")
	load()
	if n := removed(tp.mustRun("ipf", "-v", "-Fa")); n != nActive {
		t.Errorf("ipf -v -Fa removed %d rules, want %d", n, nActive)
	}
	if n := removed(tp.mustRun("ipf", "-v", "-Fa")); n != 0 {
		t.Errorf("ipf -v -Fa of an empty set removed %d rules, want 0", n)
	}
	if n := removed(tp.mustRun("ipf", "-I", "-v", "-Fa")); n != nInactive {
		t.Errorf("ipf -I -v -Fa removed %d rules, want %d", n, nInactive)
	}
	load()
	if n := removed(tp.mustRun("ipf", "-v", "-s", "-Fa")); n != nInactive {
		t.Errorf("ipf -v -s -Fa removed %d rules, want %d (the set -s made active)", n, nInactive)
	}
	if got := tp.mustRun("ipfstat", "-io"); got != "" {
		t.Errorf("ipfstat -io after ipf -s -Fa:\n%s\nwant nothing", got)
	}
	if got := strings.Count(tp.mustRun("ipfstat", "-Iio"), "\n"); got != nActive {
		t.Errorf("ipfstat -Iio lists %d rules after ipf -s -Fa, want the %d of the set -s made inactive", got, nActive)
	}
	// a flush of one direction still reads the rules and keeps the rest
	load()
	if n := removed(tp.mustRun("ipf", "-v", "-Fi")); n != 5 {
		t.Errorf("ipf -v -Fi removed %d rules, want 5", n)
	}
	if n := removed(tp.mustRun("ipf", "-v", "-Fa")); n != nActive-5 {
		t.Errorf("ipf -v -Fa after -Fi removed %d rules, want %d", n, nActive-5)
	}
}

// TestPrivilegedBigBlocklist loads a blocklist past the size from which
// ipf parses a file in pieces and compiles it on every core (120 000
// rules, 4.6 MB): the rules listed are the file's, a source in the
// middle of the list is blocked (the run's table), a reload without it
// passes it again, and a reload with an error in the middle of the file
// reports it at its line and leaves the loaded set in force. About 10 s
// on a quiet machine.
func TestPrivilegedBigBlocklist(t *testing.T) {
	tp := sharedTopo(t)
	const n = 120000
	list := func(withA bool) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			if i == n/2 && withA {
				fmt.Fprintf(&b, "block in quick from %s/32 to any\n", addrA)
				continue
			}
			fmt.Fprintf(&b, "block in quick from 198.%d.%d.%d/32 to any\n", 18+i>>16&1, i>>8&255, i&255)
		}
		b.WriteString("pass in all\npass out all\n")
		return b.String()
	}
	count := func() int { return strings.Count(tp.mustRun("ipfstat", "-i"), "\n") }
	tp.mustRun("ipf", "-Fa", "-f", tp.file("big.conf", list(true)))
	if got := count(); got != n+1 {
		t.Fatalf("ipfstat -i lists %d rules, want %d", got, n+1)
	}
	if err := tp.tcpEcho(tp.a, addrB, 300*time.Millisecond); err == nil {
		t.Errorf("TCP from %s passed, want it blocked by rule %d of the blocklist", addrA, n/2+1)
	}
	tp.mustRun("ipf", "-Fa", "-f", tp.file("big.conf", list(false)))
	if err := tp.tcpEcho(tp.a, addrB, 2*time.Second); err != nil {
		t.Errorf("TCP from %s after a reload without its rule: %v", addrA, err)
	}
	before := tp.mustRun("ipfstat", "-io")
	src := list(true)
	mid := strings.Index(src[len(src)/2:], "\n") + len(src)/2 + 1
	bad := src[:mid] + "block in quick frm 192.0.2.1/32 to any\n" + src[mid:]
	line := strings.Count(src[:mid], "\n") + 1
	code, _, stderr := tp.run("ipf", "-Fa", "-f", tp.file("big-bad.conf", bad))
	if want := fmt.Sprintf("big-bad.conf:%d:16: ", line); code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("ipf exit %d, stderr %q: want an error at %s", code, stderr, want)
	}
	if after := tp.mustRun("ipfstat", "-io"); after != before {
		t.Errorf("a failed load changed the rules (%d lines before, %d after)", strings.Count(before, "\n"), strings.Count(after, "\n"))
	}
}

package packaging

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"sluice/internal/bench/topo"
	"sluice/internal/testutil/bpffs"
	"sluice/internal/testutil/topotest"
)

// bootEnv is a test namespace pair, a private bpffs and a configuration
// directory for running the installed boot script.
type bootEnv struct {
	t      *testing.T
	tp     *topo.Topo
	link   string // the SUT's end of the veth
	tmp    string
	pin    string
	qos    string
	script string // ipfboot
	sbin   string // the commands
	env    []string
}

// newBootEnv prepares the namespaces and the environment; sbin and script
// are the installed commands and ipfboot.
func newBootEnv(t *testing.T, prefix, sbin, script string) *bootEnv {
	tp := topotest.New(t, prefix)
	mnt := bpffs.Mount(t)
	e := &bootEnv{t: t, tp: tp, link: tp.Links()[0], tmp: t.TempDir(), pin: filepath.Join(mnt, "sluice"),
		qos: filepath.Join(mnt, "qos"), script: script, sbin: sbin}
	for _, kv := range os.Environ() {
		// outside systemd: ipfboot then starts ipmon -D itself
		if !strings.HasPrefix(kv, "INVOCATION_ID=") {
			e.env = append(e.env, kv)
		}
	}
	e.env = append(e.env, "SLUICE_BPF_DIR="+e.pin, "SLUICE_QOS_DIR="+e.qos, "SLUICE_POOL_DIR="+filepath.Join(e.tmp, "pools"),
		"SLUICE_CONF="+filepath.Join(e.tmp, "sluice.conf"), "SLUICE_RUN_DIR="+filepath.Join(e.tmp, "run"), "SLUICE_SBIN="+sbin)
	t.Cleanup(func() {
		// whatever the test did: ipmon stopped, the filter detached and
		// unpinned, IPQoS unloaded (then the namespaces go)
		e.killIpmon()
		if _, err := os.Stat(e.script); err == nil { // (the package may be purged)
			e.run(e.script, "qos-stop")
			e.run(filepath.Join(sbin, "ipf"), "-D")
		}
	})
	return e
}

// write puts a file in the configuration directory and returns its path.
func (e *bootEnv) write(name, text string) string {
	p := filepath.Join(e.tmp, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// run runs a command in the SUT namespace with the environment.
func (e *bootEnv) run(name string, args ...string) (int, string, string) {
	c := exec.Command(name, args...)
	c.Env = e.env
	var o, er bytes.Buffer
	c.Stdout, c.Stderr = &o, &er
	if err := e.tp.Do(topo.SUT, c.Start); err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	err := c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), o.String(), er.String()
	}
	if err != nil {
		e.t.Fatalf("%s %v: %v", name, args, err)
	}
	return 0, o.String(), er.String()
}

// boot runs ipfboot VERB and checks its exit status.
func (e *bootEnv) boot(want int, verb string) string {
	e.t.Helper()
	t0 := time.Now()
	code, o, er := e.run(e.script, verb)
	e.t.Logf("ipfboot %s: exit %d in %v\n%s%s", verb, code, time.Since(t0).Round(time.Millisecond), o, er)
	if code != want {
		e.t.Fatalf("ipfboot %s: exit %d, want %d", verb, code, want)
	}
	return o + er
}

// resync adds interfaces to the SUT's namespace after the load (a veth
// pair, both ends there), as a NIC or VLAN appearing would, and checks
// that they are reported unfiltered until ipfboot resync (what
// sluice-resync@.service runs when udev sees one) attaches the filter.
func (e *bootEnv) resync() {
	e.t.Helper()
	names := []string{"slnew0", "slnew1"}
	if err := e.tp.Do(topo.SUT, func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: names[0]}, PeerName: names[1]}
		if err := netlink.LinkAdd(v); err != nil {
			return err
		}
		for _, n := range names {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		e.t.Fatalf("adding a veth pair: %v", err)
	}
	defer e.tp.Do(topo.SUT, func() error {
		l, err := netlink.LinkByName(names[0])
		if err == nil {
			err = netlink.LinkDel(l)
		}
		return err
	})
	_, o, er := e.run(e.script, "status")
	if !strings.Contains(o, "Unfiltered: "+names[0]+" "+names[1]+" ") || !strings.Contains(er, names[0]+", "+names[1]+" are up and not filtered") {
		e.t.Errorf("status with %v unfiltered:\n%s%s", names, o, er)
	}
	e.boot(0, "resync")
	_, o, er = e.run(e.script, "status")
	if strings.Contains(o, "Unfiltered:") || er != "" || !strings.Contains(o, " "+names[0]+" "+names[1]+" ") {
		e.t.Errorf("status after resync:\n%s%s", o, er)
	}
}

func (e *bootEnv) ipmonPid() int {
	b, err := os.ReadFile(filepath.Join(e.tmp, "run", "ipmon.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// killIpmon kills the ipmon that ipfboot started (by its pid file) with
// SIGKILL, as a crash would, and waits until it is gone.
func (e *bootEnv) killIpmon() bool {
	pid := e.ipmonPid()
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// listener counts the UDP datagrams that reach the SUT, by port.
type listener struct {
	conns []*net.UDPConn
	n     map[int]*atomic.Int64
	wg    sync.WaitGroup
}

func (e *bootEnv) listen(ports ...int) *listener {
	l := &listener{n: map[int]*atomic.Int64{}}
	for _, p := range ports {
		var c *net.UDPConn
		if err := e.tp.Do(topo.SUT, func() (err error) {
			c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(topo.SUTAddr, uint16(p))))
			return err
		}); err != nil {
			e.t.Fatal(err)
		}
		cnt := &atomic.Int64{}
		l.conns, l.n[p] = append(l.conns, c), cnt
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			b := make([]byte, 2048)
			for {
				if _, _, err := c.ReadFromUDP(b); err != nil {
					return
				}
				cnt.Add(1)
			}
		}()
	}
	e.t.Cleanup(func() {
		for _, c := range l.conns {
			c.Close()
		}
		l.wg.Wait()
	})
	return l
}

// count returns what port p received, after letting packets in flight
// arrive. It is for ports that should have received nothing more: an
// absence cannot be waited for, so it gives the packets a moment.
func (l *listener) count(p int) int64 {
	time.Sleep(100 * time.Millisecond)
	return l.n[p].Load()
}

// reach waits until port p has received want packets (a generous bound:
// on a loaded machine the listener's goroutine can be slow to read) and
// returns what it received, a moment after, so extra packets show.
func (l *listener) reach(p int, want int64) int64 {
	for deadline := time.Now().Add(20 * time.Second); l.n[p].Load() < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return l.count(p)
}

// send sends n datagrams from the peer to the SUT's port.
func (e *bootEnv) send(port, n int) {
	if err := e.tp.Do(topo.Peer, func() error {
		c, err := net.ListenUDP("udp4", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(topo.SUTAddr, uint16(port)))
		for i := 0; i < n; i++ {
			if _, err := c.WriteToUDP([]byte("sluice"), to); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// stream sends to port every millisecond until stop is closed and
// returns how many it sent.
func (e *bootEnv) stream(port int, stop chan struct{}) <-chan int {
	res := make(chan int, 1)
	var c *net.UDPConn
	if err := e.tp.Do(topo.Peer, func() (err error) { c, err = net.ListenUDP("udp4", nil); return err }); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer c.Close()
		to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(topo.SUTAddr, uint16(port)))
		n := 0
		for {
			select {
			case <-stop:
				res <- n
				return
			default:
			}
			if _, err := c.WriteToUDP([]byte("stream"), to); err == nil {
				n++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return res
}

const bootRules = `# test rules: 9 blocked (and logged), 10 only from pool 100 (the peer)
block in log quick proto udp from any to any port = 9
pass in quick proto udp from pool/100 to any port = 10
block in quick proto udp from any to any port = 10
pass in all
pass out all
`

// TestPrivilegedBootScript runs the installed ipfboot as the units do,
// in a test namespace with a private bpffs: start loads ippool.conf and
// ipf.conf and starts ipmon -D; killing ipmon leaves filtering in force;
// reloads under a stream of packets never let a blocked one through; a
// reload of a broken file changes nothing; ipnat.conf is loaded or its
// absence reported; IPQoS loads and unloads; stop detaches. About 10 s
// after the build.
func TestPrivilegedBootScript(t *testing.T) {
	dest := t.TempDir()
	install(t, "install", "DESTDIR="+dest)
	sbin := filepath.Join(dest, "usr/local/sbin")
	e := newBootEnv(t, "slboot", sbin, filepath.Join(dest, "usr/local/libexec/sluice/ipfboot"))
	runBootScript(t, e)
}

func runBootScript(t *testing.T, e *bootEnv) {
	ipmonLog := filepath.Join(e.tmp, "ipmon.log")
	e.write("sluice.conf", fmt.Sprintf("IPF_START=1\nIPF_CONF=%s\nIPPOOL_CONF=%s\nIPNAT_CONF=%s\nIPMON_START=1\nIPMON_FLAGS=%q\nIPQOS_CONF=%s\n",
		filepath.Join(e.tmp, "ipf.conf"), filepath.Join(e.tmp, "ippool.conf"), filepath.Join(e.tmp, "ipnat.conf"),
		ipmonLog, filepath.Join(e.tmp, "ipqos.conf")))
	e.write("ipf.conf", bootRules)
	e.write("ippool.conf", "table role = ipf type = tree number = 100 { "+topo.PeerAddr.String()+"/32; };\n")
	e.write("ipnat.conf", "# no NAT yet\n")
	l := e.listen(9, 10)

	// a broken file at boot with IPF_FAILCLOSED=0: nothing is loaded at
	// all, and the message says the host is not filtered
	sconf := e.write("sluice.conf", fmt.Sprintf("IPF_START=1\nIPF_FAILCLOSED=0\nIPF_CONF=%s\nIPPOOL_CONF=%s\nIPNAT_CONF=%s\nIPMON_START=1\nIPMON_FLAGS=%q\nIPQOS_CONF=%s\n",
		filepath.Join(e.tmp, "ipf.conf"), filepath.Join(e.tmp, "ippool.conf"), filepath.Join(e.tmp, "ipnat.conf"),
		ipmonLog, filepath.Join(e.tmp, "ipqos.conf")))
	e.write("ipf.conf", "block in quick proto udp from any to any port = nine\n")
	out := e.boot(1, "start")
	if !strings.Contains(out, "ipf.conf:1:") || !strings.Contains(out, "nothing loaded") || !strings.Contains(out, "NO FILTER IS LOADED") {
		t.Errorf("broken start, IPF_FAILCLOSED=0: no file:line message or no verdict:\n%s", out)
	}
	if _, err := os.Stat(e.pin); err == nil {
		t.Fatal("a failed check loaded a datapath with IPF_FAILCLOSED=0")
	}
	// an interface appearing (udev starts sluice-resync@.service) while
	// no filter is loaded: nothing to do, and no failure
	if out := e.boot(0, "resync"); out != "" {
		t.Errorf("resync with no filter loaded said:\n%s", out)
	}
	b, err := os.ReadFile(sconf)
	if err != nil {
		t.Fatal(err)
	}
	e.write("sluice.conf", strings.Replace(string(b), "IPF_FAILCLOSED=0\n", "", 1))

	// the same at boot by default: the host is kept closed (ops17: it
	// was left unfiltered), loudly, and nothing from the peer gets in
	out = e.boot(1, "start")
	if !strings.Contains(out, "ipf.conf:1:") || !strings.Contains(out, "FAIL-CLOSED") {
		t.Errorf("broken start: no file:line message or no fail-closed verdict:\n%s", out)
	}
	if _, err := os.Stat(e.pin); err != nil {
		t.Fatalf("a broken ipf.conf at boot left the host unfiltered: %v", err)
	}
	e.send(9, 5)
	e.send(10, 5)
	if n9, n10 := l.count(9), l.count(10); n9 != 0 || n10 != 0 {
		t.Errorf("fail-closed: %d datagrams to port 9 and %d to port 10 got in, want none", n9, n10)
	}
	// ...but new SSH connections do (IPF_FAILCLOSED_SSH, 22 by default):
	// a remote host's administrator is not locked out
	if _, o, _ := e.run(filepath.Join(e.sbin, "ipfstat"), "-i"); !regexp.MustCompile(`pass in quick proto tcp from any to any port = (22|ssh) flags S/FSRPAU keep state`).MatchString(o) ||
		!strings.Contains(out, "new SSH connections to port 22") {
		t.Errorf("fail-closed set without SSH:\n%s\n%s", o, out)
	}
	e.write("ipf.conf", bootRules)

	// over the fail-closed set, a start whose ipf.conf names a table that
	// only ippool.conf has (pool/100): the check took the loaded filter's
	// tables and refused it, so no reload could add a table (ops17)
	out = e.boot(0, "start")
	if !strings.Contains(out, "loaded "+filepath.Join(e.tmp, "ipf.conf")) {
		t.Errorf("start said:\n%s", out)
	}
	if _, o, _ := e.run(e.script, "status"); !strings.Contains(o, "Running: yes") {
		t.Errorf("status:\n%s", o)
	}
	e.resync()
	e.send(9, 5)
	e.send(10, 5)
	// port 10's datagrams went after port 9's: once they are in, port
	// 9's would be too
	if n := l.reach(10, 5); n != 5 {
		t.Errorf("port 10 (peer in pool 100): %d of 5", n)
	}
	if n := l.count(9); n != 0 {
		t.Errorf("port 9: %d datagrams got through", n)
	}

	// ipmon logs the blocked packets
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(ipmonLog)
		if bytes.Count(b, []byte("\n")) >= 5 {
			if !bytes.Contains(b, []byte(" b ")) || !bytes.Contains(b, []byte(",9 PR udp")) {
				t.Errorf("ipmon log:\n%s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipmon logged %d lines in 10 s:\n%s", bytes.Count(b, []byte("\n")), b)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// a crashed logger: filtering goes on exactly as before
	if !e.killIpmon() {
		t.Fatal("no ipmon running")
	}
	e.send(9, 5)
	e.send(10, 5)
	if n := l.reach(10, 10); n != 10 {
		t.Errorf("after killing ipmon: port 10 got %d of 10", n)
	}
	if n := l.count(9); n != 0 {
		t.Errorf("after killing ipmon: %d datagrams to port 9 got through", n)
	}
	_, o, _ := e.run(filepath.Join(e.sbin, "ipfstat"), "-ih")
	if !strings.Contains(o, "10 block in log quick proto udp from any to any port = 9") {
		t.Errorf("ipfstat -ih after killing ipmon:\n%s", o)
	}

	// reloads under a stream to the blocked port: not one gets through
	stop := make(chan struct{})
	sent := e.stream(9, stop)
	for i := 0; i < 3; i++ {
		e.boot(0, "reload")
	}
	close(stop)
	if n := <-sent; n < 10 {
		t.Errorf("only %d packets streamed during the reloads", n)
	}
	if n := l.count(9); n != 0 {
		t.Errorf("during reloads %d datagrams to port 9 got through", n)
	}

	// a broken reload changes nothing
	e.write("ipf.conf", "pass in all\nblock in quick proto udp from any to any port = nine\n")
	out = e.boot(1, "reload")
	if !strings.Contains(out, "ipf.conf:2:") || !strings.Contains(out, "stay in force") {
		t.Errorf("broken reload said:\n%s", out)
	}
	e.send(9, 5)
	if n := l.count(9); n != 0 {
		t.Errorf("after a broken reload %d datagrams to port 9 got through", n)
	}
	e.write("ipf.conf", bootRules)

	// ipnat.conf with rules: loaded, or reported as unavailable with the
	// filter in force
	e.write("ipnat.conf", "map "+e.link+" 10.231.0.0/30 -> 0/32\n")
	code, o, er := e.run(e.script, "reload")
	switch code {
	case 0:
		if !strings.Contains(er, "loaded "+filepath.Join(e.tmp, "ipnat.conf")) {
			t.Errorf("NAT reload: exit 0 but:\n%s", er)
		}
	case 2:
		if !strings.Contains(er, "NAT is not available") || !strings.Contains(er, "are in force") {
			t.Errorf("NAT reload: exit 2 but:\n%s", er)
		}
	default:
		t.Errorf("NAT reload: exit %d\n%s%s", code, o, er)
	}
	e.send(9, 5)
	if n := l.count(9); n != 0 {
		t.Errorf("after the NAT reload %d datagrams to port 9 got through", n)
	}
	e.write("ipnat.conf", "# none\n")

	// IPQoS from ipqos.conf
	e.write("ipqos.conf", "filter f {\n    udp\n    dstport 7\n}\npolicy p {\n    uses f\n    dscp 10\n}\nadapter "+e.link+" {\n    uses p\n}\n")
	e.boot(0, "qos-start")
	if code, _, _ := e.run(filepath.Join(e.sbin, "ipqosadmin"), "-state", "-s", "-pindir", e.qos); code != 3 {
		t.Errorf("ipqosadmin -state after qos-start: %d, want 3 (filtering)", code)
	}
	// an adapter ipqos.conf names that appears after the load (loaded
	// with -continue) gets the marker from ipfboot resync, as udev runs it
	conf := e.write("ipqos-late.conf", "filter f {\n    udp\n}\npolicy p {\n    uses f\n    dscp 10\n}\nadapter "+e.link+" {\n    uses p\n}\nadapter slq0 {\n    uses p\n}\n")
	if code, _, er := e.run(filepath.Join(e.sbin, "ipqosadmin"), "-load", "-continue", "-f", conf, "-pindir", e.qos); code != 1 || !strings.Contains(er, "slq0") {
		t.Errorf("ipqosadmin -load -continue with slq0 missing: exit %d, stderr %q", code, er)
	}
	if code, _, _ := e.run(filepath.Join(e.sbin, "ipqosadmin"), "-state", "-s", "-pindir", e.qos); code != 2 {
		t.Errorf("ipqosadmin -state with slq0 missing: %d, want 2 (not filtering)", code)
	}
	if err := e.tp.Do(topo.SUT, func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "slq0"}, PeerName: "slq1"})
	}); err != nil {
		t.Fatal(err)
	}
	defer e.tp.Do(topo.SUT, func() error {
		l, err := netlink.LinkByName("slq0")
		if err == nil {
			err = netlink.LinkDel(l)
		}
		return err
	})
	e.boot(0, "resync")
	if code, o, _ := e.run(filepath.Join(e.sbin, "ipqosadmin"), "-state", "-pindir", e.qos); code != 3 {
		t.Errorf("ipqosadmin -state after ipfboot resync: exit %d, want 3 (filtering)\n%s", code, o)
	}
	e.boot(0, "qos-stop")
	if code, _, _ := e.run(filepath.Join(e.sbin, "ipqosadmin"), "-state", "-s", "-pindir", e.qos); code == 3 {
		t.Error("IPQoS still filtering after qos-stop")
	}

	// stop: detached and unpinned; port 9 is open again
	e.boot(0, "stop")
	if _, err := os.Stat(e.pin); err == nil {
		t.Error("pins left after stop")
	}
	e.send(9, 3)
	if n := l.reach(9, 3); n != 3 {
		t.Errorf("after stop port 9 got %d of 3", n)
	}
}

package bpf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"sluice/internal/testutil"
	"sluice/internal/testutil/bpffs"
)

// topo is two network namespaces joined by a veth pair: the client side
// (a, 10.99.0.1, and fd00:99::1 from newTopo6) and the filtered host (b,
// 10.99.0.2, fd00:99::2) whose veth end carries the filter.
type topo struct {
	a, b   netns.NsHandle
	ifB    string
	pinDir string
}

// inNS runs f on a thread switched into ns; sockets f creates belong to ns.
func inNS(t testing.TB, ns netns.NsHandle, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		// the thread is left locked (and so discarded) if restoring fails
		orig, err := netns.Get()
		if err != nil {
			t.Errorf("netns.Get: %v", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			t.Errorf("netns.Set: %v", err)
			return
		}
		f()
		if err := netns.Set(orig); err == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

// attach loads a datapath pinned in the topology's pin directory and
// attaches it to the interface of namespace b (and to b's devices more);
// it is removed when the test ends.
func (tp *topo) attach(t *testing.T, more ...string) *Datapath {
	t.Helper()
	var d *Datapath
	var err error
	inNS(t, tp.b, func() {
		d, err = Load(Options{PinDir: tp.pinDir})
		if err == nil {
			err = d.Attach(append([]string{tp.ifB}, more...))
		}
	})
	if err != nil {
		t.Fatalf("load/attach: %+v", err)
	}
	t.Cleanup(func() { d.Remove() })
	return d
}

// newTopo makes a topology whose link carries IPv4 only. Its filtered
// interface sees nothing but the test's own packets (and ARP, which never
// runs the filter): with IPv6 on the link, the kernel sends router
// solicitations, MLD reports and neighbour solicitations at times of its
// own after the link comes up, and each of those runs the filter's
// pipeline and moves its counters; one once failed
// TestPrivilegedEstablishedLive in CI.
func newTopo(t *testing.T) *topo { return makeTopo(t, false) }

// newTopo6 is newTopo with IPv6 (fd00:99::/64) on the link as well, for
// the tests that send IPv6. The link still makes no router solicitations
// (accept_ra 0); its MLD reports and neighbour discovery remain, so what
// such a test counts must be its own flow's packets.
func newTopo6(t *testing.T) *topo { return makeTopo(t, true) }

func makeTopo(t *testing.T, v6 bool) *topo {
	t.Helper()
	testutil.RequireRoot(t)
	tp := &topo{}
	var err error
	newNS := func() netns.NsHandle {
		var h netns.NsHandle
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			orig, _ := netns.Get()
			h, err = netns.New()
			if err == nil {
				// the veth end moved in later takes the namespace's
				// defaults (the thread is in it now)
				err = ipv6Defaults(v6)
			}
			netns.Set(orig)
			orig.Close()
		}()
		<-done
		if err != nil {
			t.Fatalf("creating netns: %v", err)
		}
		return h
	}
	tp.a, tp.b = newNS(), newNS()
	t.Cleanup(func() { tp.a.Close(); tp.b.Close() })

	suffix := fmt.Sprintf("%d", os.Getpid()%100000)
	nameA, nameB := "slva"+suffix, "slvb"+suffix
	tp.ifB = nameB
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: nameA}, PeerName: nameB}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("adding veth: %v", err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(nameA); err == nil {
			netlink.LinkDel(l)
		}
	})
	for _, x := range []struct {
		name string
		ns   netns.NsHandle
		v4   string
		v6   string
	}{{nameA, tp.a, "10.99.0.1/24", "fd00:99::1/64"}, {nameB, tp.b, "10.99.0.2/24", "fd00:99::2/64"}} {
		l, err := netlink.LinkByName(x.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetNsFd(l, int(x.ns)); err != nil {
			t.Fatalf("moving %s: %v", x.name, err)
		}
		h, err := netlink.NewHandleAt(x.ns)
		if err != nil {
			t.Fatal(err)
		}
		l, err = h.LinkByName(x.name)
		if err != nil {
			t.Fatal(err)
		}
		addrs := []string{x.v4}
		if v6 {
			addrs = append(addrs, x.v6)
		}
		for _, a := range addrs {
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = unix.IFA_F_NODAD
			if err := h.AddrAdd(l, addr); err != nil {
				t.Fatalf("address %s: %v", a, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		if lo, err := h.LinkByName("lo"); err == nil {
			h.LinkSetUp(lo)
		}
		h.Close()
		// the premise of what the tests count: the link took the
		// namespace's IPv6 defaults
		key, want := "disable_ipv6", "1"
		if v6 {
			key, want = "accept_ra", "0"
		}
		var got []byte
		inNS(t, x.ns, func() { got, err = os.ReadFile("/proc/sys/net/ipv6/conf/" + x.name + "/" + key) })
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Fatalf("%s: %s is %q (%v), want %s", x.name, key, got, err, want)
		}
	}
	// a private bpffs so the test never touches the host's pins
	tp.pinDir = filepath.Join(bpffs.Mount(t), "sluice")
	return tp
}

// ipv6Defaults sets the IPv6 defaults of the calling thread's namespace
// for links made or moved into it later: IPv6 off, or (v6) on without
// router solicitations.
func ipv6Defaults(v6 bool) error {
	set := map[string]string{"disable_ipv6": "1"}
	if v6 {
		set = map[string]string{"accept_ra": "0", "router_solicitations": "0"}
	}
	for k, v := range set {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/default/"+k, []byte(v), 0); err != nil {
			return fmt.Errorf("IPv6 defaults: %w", err)
		}
	}
	return nil
}

// listen starts a TCP echo-once server in ns on addr.
func listenTCP(t *testing.T, ns netns.NsHandle, addr string) {
	t.Helper()
	var ln net.Listener
	var err error
	inNS(t, ns, func() { ln, err = net.Listen("tcp", addr) })
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(3 * time.Second))
				b := make([]byte, 16)
				n, _ := c.Read(b)
				c.Write(b[:n])
			}()
		}
	}()
}

// dialWait is how long a connection that should fail is given: blocked
// SYNs are dropped silently, so failure is a timeout.
const dialWait = 700 * time.Millisecond

// tcpWorks dials addr from ns and reports whether a byte round-trips.
func tcpWorks(t *testing.T, ns netns.NsHandle, addr string) bool {
	t.Helper()
	var c net.Conn
	var err error
	// a SYN lost to load would be retransmitted after 1 s: allow for one
	inNS(t, ns, func() { c, err = net.DialTimeout("tcp", addr, dialWait+1500*time.Millisecond) })
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("x")); err != nil {
		return false
	}
	b := make([]byte, 1)
	_, err = io.ReadFull(c, b)
	return err == nil && b[0] == 'x'
}

// udpWorks sends a datagram from ns to addr, where a responder in peerNS
// echoes it, and reports whether the echo came back.
func udpWorks(t *testing.T, ns, peerNS netns.NsHandle, addr string) bool {
	t.Helper()
	var srv net.PacketConn
	var err error
	inNS(t, peerNS, func() { srv, err = net.ListenPacket("udp", addr) })
	if err != nil {
		t.Fatalf("udp listen: %v", err)
	}
	defer srv.Close()
	go func() {
		b := make([]byte, 64)
		srv.SetDeadline(time.Now().Add(2 * time.Second))
		n, from, err := srv.ReadFrom(b)
		if err == nil {
			srv.WriteTo(b[:n], from)
		}
	}()
	var c net.Conn
	inNS(t, ns, func() { c, err = net.Dial("udp", addr) })
	if err != nil {
		t.Fatalf("udp dial: %v", err)
	}
	defer c.Close()
	c.Write([]byte("ping"))
	c.SetReadDeadline(time.Now().Add(dialWait))
	b := make([]byte, 8)
	n, err := c.Read(b)
	return err == nil && string(b[:n]) == "ping"
}

const liveRules = `
block in all
block out all
pass in quick proto ipv6-icmp all
pass out quick proto ipv6-icmp all
pass in quick proto tcp from any to any port = 8080 flags S/SA keep state
pass out quick proto tcp from any to any port = 9090 flags S/SA keep state
pass out quick proto udp from any to any port = 5353 keep state
block return-rst in quick proto tcp from any to any port = 8082
`

func TestPrivilegedLiveFilter(t *testing.T) {
	tp := newTopo6(t)
	d := tp.attach(t)
	var im *Image
	inNS(t, tp.b, func() { im = compileText(t, liveRules) })
	if err := d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}

	listenTCP(t, tp.b, "10.99.0.2:8080")
	listenTCP(t, tp.b, "[fd00:99::2]:8080")
	listenTCP(t, tp.b, "10.99.0.2:8081")
	listenTCP(t, tp.b, "10.99.0.2:9090")
	listenTCP(t, tp.a, "10.99.0.1:9090")

	check := func(name string, got, want bool) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got works=%v, want %v", name, got, want)
		}
	}
	check("tcp a->b:8080 (pass in, keep state)", tcpWorks(t, tp.a, "10.99.0.2:8080"), true)
	check("tcp6 a->b:8080 (pass in, keep state)", tcpWorks(t, tp.a, "[fd00:99::2]:8080"), true)
	check("tcp a->b:8081 (blocked)", tcpWorks(t, tp.a, "10.99.0.2:8081"), false)
	check("tcp b->a:9090 (pass out, keep state lets replies in)", tcpWorks(t, tp.b, "10.99.0.1:9090"), true)
	check("tcp a->b:9090 (unsolicited SYN)", tcpWorks(t, tp.a, "10.99.0.2:9090"), false)
	check("udp b->a:5353 (keep state lets the reply in)", udpWorks(t, tp.b, tp.a, "10.99.0.1:5353"), true)
	check("udp a->b:5354 (blocked)", udpWorks(t, tp.a, tp.b, "10.99.0.2:5354"), false)

	// return-rst: the client gets a reset at once instead of a timeout
	var derr error
	start := time.Now()
	inNS(t, tp.a, func() {
		var c net.Conn
		c, derr = net.DialTimeout("tcp", "10.99.0.2:8082", 2*time.Second)
		if c != nil {
			c.Close()
		}
	})
	if !errors.Is(derr, unix.ECONNREFUSED) || time.Since(start) > time.Second {
		t.Errorf("return-rst: got %v after %v, want connection refused at once", derr, time.Since(start))
	}

	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.In.Block == 0 || st.In.Pass == 0 || st.StateAdded[0] == 0 || st.RSTSent == 0 {
		t.Errorf("stats: got in pass %d block %d, tcp states %d, rsts %d; want all > 0", st.In.Pass, st.In.Block, st.StateAdded[0], st.RSTSent)
	}

	// another process's view: the pins alone
	d2, err := OpenPinned(tp.pinDir)
	if err != nil {
		t.Fatalf("OpenPinned: %+v", err)
	}
	rules, err := d2.Rules(Active)
	d2.Close()
	if err != nil || len(rules) != 8 {
		t.Errorf("Rules via pins: got %d rules, %v; want 8", len(rules), err)
	}

	// a failed load (verifier rejection) leaves the running rules in force
	_, err = load(Options{PinDir: tp.pinDir}, func(spec *ebpf.CollectionSpec) {
		spec.Programs["sluice_ingress"].Instructions = asm.Instructions{
			asm.Mov.Reg(asm.R0, asm.R5), // R5 is not initialised
			asm.Return(),
		}
	})
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		t.Fatalf("broken program: got %v, want a verifier error", err)
	}
	if s := fmt.Sprintf("%+v", err); len(s) <= len(err.Error()) {
		t.Errorf("%%+v does not add the verifier log: %q", s)
	}
	// an oversized rule set is refused before anything is written
	if err := d.LoadRules(&Image{rules: make([]filterRule, MaxRules+1)}, Active); err == nil {
		t.Error("oversized image: got nil error")
	}
	check("after failed loads: tcp a->b:8081 still blocked", tcpWorks(t, tp.a, "10.99.0.2:8081"), false)
	check("after failed loads: tcp a->b:8080 still passes", tcpWorks(t, tp.a, "10.99.0.2:8080"), true)

	// Remove detaches and deletes every pin
	if err := d.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := os.Stat(tp.pinDir); !os.IsNotExist(err) {
		t.Errorf("pin dir after Remove: %v", err)
	}
	check("after Remove: tcp a->b:8081 unfiltered", tcpWorks(t, tp.a, "10.99.0.2:8081"), true)
}

// TestPrivilegedClsactFallback attaches the way kernels without TCX get it
// (clsact qdisc, direct-action filters) and checks that it filters and that
// Detach removes the filters.
func TestPrivilegedClsactFallback(t *testing.T) {
	tp := newTopo(t)
	var d *Datapath
	var err error
	inNS(t, tp.b, func() {
		d, err = Load(Options{PinDir: tp.pinDir})
		if err == nil {
			d.forceTC = true
			err = d.Attach([]string{tp.ifB})
		}
	})
	if err != nil {
		t.Fatalf("load/attach: %+v", err)
	}
	t.Cleanup(func() { d.Remove() })
	var im *Image
	inNS(t, tp.b, func() { im = compileText(t, "block in quick proto tcp from any to any port = 8081\n") })
	if err := d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	listenTCP(t, tp.b, "10.99.0.2:8080")
	listenTCP(t, tp.b, "10.99.0.2:8081")
	if !tcpWorks(t, tp.a, "10.99.0.2:8080") {
		t.Error("tcp a->b:8080: blocked, want pass")
	}
	if tcpWorks(t, tp.a, "10.99.0.2:8081") {
		t.Error("tcp a->b:8081: passed, want block")
	}
	inNS(t, tp.b, func() { err = d.Detach() })
	if err != nil {
		t.Fatal(err)
	}
	if !tcpWorks(t, tp.a, "10.99.0.2:8081") {
		t.Error("after Detach: tcp a->b:8081 still blocked")
	}
}

// TestPrivilegedFailedFirstLoadLeavesNoPins makes the verifier reject the
// program on a first load and checks that the maps it pinned before the
// rejection are gone, with the directory it created.
func TestPrivilegedFailedFirstLoadLeavesNoPins(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	_, err := Load(Options{PinDir: dir, ForceVerifierError: true})
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a verifier error", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		ents, _ := os.ReadDir(dir)
		t.Fatalf("pin dir after a failed first load: %v, %d entries left", err, len(ents))
	}
	// a later good load works in the same place and a failed reload keeps its pins
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("Load: %+v", err)
	}
	defer d.Remove()
	n0, _ := os.ReadDir(dir)
	if _, err := Load(Options{PinDir: dir, ForceVerifierError: true}); err == nil {
		t.Fatal("forced verifier error: got nil")
	}
	n1, _ := os.ReadDir(dir)
	if len(n0) == 0 || len(n1) != len(n0) {
		t.Errorf("pins of the running datapath: %d before the failed reload, %d after", len(n0), len(n1))
	}
}

package bpf

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"sluice/internal/engine"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
	"sluice/internal/state"
	"sluice/internal/testutil/netnstest"
)

// ifnet is a network namespace of the test's own with an interface (one
// end of a veth pair) for every name a case uses (its packets', its rules' on and to names),
// made on demand: BPF_PROG_TEST_RUN gives a tc program the device the
// context's ifindex names in the calling thread's namespace, so a packet
// can arrive on any of them, and the route a program takes can be
// compared by name with the engine's.
type ifnet struct {
	t     testing.TB
	ns    netns.NsHandle
	nl    *netlink.Handle
	mu    sync.Mutex
	index map[string]int
	names map[int]string
}

func newIfnet(t testing.TB) *ifnet {
	t.Helper()
	ns := netnstest.New(t)
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatalf("netlink handle: %v", err)
	}
	t.Cleanup(nl.Close)
	return &ifnet{t: t, ns: ns, nl: nl, index: map[string]int{"lo": 1}, names: map[int]string{1: "lo"}}
}

// ifindex returns the index of the interface name in the namespace,
// making the interface (up) the first time; false for a name Linux
// cannot give a link (IPFilter's "-" or "*", a name too long).
func (n *ifnet) ifindex(name string) (int, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i, ok := n.index[name]; ok {
		return i, i > 0
	}
	n.index[name] = 0
	if name == "" || name == "-" || name == "*" || len(name) > unix.IFNAMSIZ-1 {
		return 0, false
	}
	// a veth pair (this kernel may have no dummy driver); the peer is
	// named by number, out of the cases' way
	peer := fmt.Sprintf("dp9p%d", len(n.index))
	if err := n.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		n.t.Logf("interface %q: %v", name, err)
		return 0, false
	}
	l, err := n.nl.LinkByName(name)
	if err == nil {
		err = n.nl.LinkSetUp(l)
	}
	if err == nil {
		var pl netlink.Link
		if pl, err = n.nl.LinkByName(peer); err == nil {
			err = n.nl.LinkSetUp(pl)
		}
	}
	// a copy sent out of a veth whose carrier is not up yet is lost
	// (clone_redirect fails): wait for it
	for deadline := time.Now().Add(5 * time.Second); err == nil; time.Sleep(5 * time.Millisecond) {
		if l, err = n.nl.LinkByName(name); err != nil || l.Attrs().OperState == netlink.OperUp {
			break
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("still %v after 5s", l.Attrs().OperState)
		}
	}
	if err != nil {
		n.t.Fatalf("interface %q: %v", name, err)
	}
	i := l.Attrs().Index
	n.index[name], n.names[i] = i, name
	return i, true
}

func (n *ifnet) name(i uint32) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.names[int(i)]; ok {
		return s
	}
	return fmt.Sprintf("if%d", i)
}

// do runs fn on a thread in the namespace, bound to one CPU so that what
// the program leaves in its per-CPU scratch can be read back (ifrun).
func (n *ifnet) do(fn func(r *ifrun) error) error {
	return netnstest.Do(n.ns, func() error {
		var cur unix.CPUSet
		if err := unix.SchedGetaffinity(0, &cur); err != nil {
			return err
		}
		cpu := -1
		for c := 0; c < runtime.NumCPU()*4 && cpu < 0; c++ {
			if cur.IsSet(c) {
				cpu = c
			}
		}
		if cpu < 0 {
			return fmt.Errorf("no CPU in the thread's affinity mask")
		}
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		return fn(&ifrun{n: n, cpu: cpu})
	})
}

// ifrun runs frames through the programs from a thread of do.
type ifrun struct {
	n   *ifnet
	cpu int
}

// run sends frame through the ingress (out=false) or egress program of d
// as arriving on (leaving by) the interface ifn, and returns the verdict
// and where the program sent it: "to:IF" (to, reply-to, or fastroute,
// whose route in the test's namespace is the interface the packet is on,
// as the engine's router is told), "dup:IF" for a copy. A redirect the
// route made is a pass (the packet goes on, elsewhere).
func (r *ifrun) run(d *Datapath, out bool, ifn string, frame []byte) (Verdict, []string, error) {
	return r.runMarked(d, out, ifn, frame, 0)
}

// fastrtMark is the skb mark sl_route gives a packet an inbound rule sent
// out of another interface (c/lib/common.h FASTRT_MARK).
const fastrtMark = 0x51c3e7f2

// runMarked is run for a frame that carries skb mark mark.
func (r *ifrun) runMarked(d *Datapath, out bool, ifn string, frame []byte, mark uint32) (Verdict, []string, error) {
	prog := d.objs.SluiceIngress
	if out {
		prog = d.objs.SluiceEgress
	}
	idx, ok := r.n.ifindex(ifn)
	if !ok {
		return 0, nil, fmt.Errorf("interface %q cannot be made", ifn)
	}
	seq, err := r.trace(d)
	if err != nil {
		return 0, nil, err
	}
	// struct __sk_buff up to ifindex: ingress_ifindex and ifindex
	var ctx [11]uint32
	ctx[9], ctx[10] = uint32(idx), uint32(idx)
	ctx[2] = mark
	if out {
		ctx[9] = 0
	}
	var cb [44]byte
	for i, v := range ctx {
		binary.LittleEndian.PutUint32(cb[4*i:], v)
	}
	buf := make([]byte, len(frame)+256)
	ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: buf, Context: cb[:]})
	if err != nil {
		return 0, nil, fmt.Errorf("running filter on %s: %w", ifn, err)
	}
	after, err := r.trace(d)
	if err != nil {
		return 0, nil, err
	}
	var routes []string
	if after.RtSeq != seq.RtSeq {
		if after.RtDup != 0 {
			routes = append(routes, "dup:"+r.n.name(after.RtDup))
		}
		switch {
		case after.RtTo != 0:
			routes = append(routes, "to:"+r.n.name(after.RtTo))
		case after.RtFast != 0:
			routes = append(routes, "to:"+ifn)
		}
	}
	switch int32(ret) {
	case -1, 0:
		return VerdictPass, routes, nil
	case 2:
		return VerdictBlock, routes, nil
	case 7:
		if after.RtSeq != seq.RtSeq && after.RtTo != 0 {
			return VerdictPass, routes, nil
		}
		return VerdictReply, routes, nil
	}
	return Verdict(ret), routes, fmt.Errorf("unexpected program return %d", int32(ret))
}

// trace reads this CPU's scratch: what sl_route did last.
func (r *ifrun) trace(d *Datapath) (filterWork, error) {
	var ws []filterWork
	if err := d.objs.Scratch.Lookup(uint32(0), &ws); err != nil {
		return filterWork{}, fmt.Errorf("reading scratch: %w", err)
	}
	if r.cpu >= len(ws) {
		return filterWork{}, fmt.Errorf("scratch has %d CPUs, the thread runs on %d", len(ws), r.cpu)
	}
	return ws[r.cpu], nil
}

// routeLog is an engine.Router that writes down where the engine sent
// each packet, in ifrun.run's words.
type routeLog struct{ routes []string }

func (l *routeLog) Route(_ *engine.Packet, iface string, _ netip.Addr, dup bool) {
	if dup {
		l.routes = append(l.routes, "dup:"+iface)
		return
	}
	l.routes = append(l.routes, "to:"+iface)
}

func (l *routeLog) take() []string {
	r := l.routes
	l.routes = nil
	return r
}

// TestRouteTargets follows packets through the kernel program and the
// engine on several interfaces and checks where each is sent: a reply of
// a keep-state flow by the rule's reply-to, an ICMP error about a forward
// packet by reply-to and one about a reply by to, the rest of a datagram
// whose first fragment a plain keep frags rule routed as that fragment
// (but not one a keep-state flow's fragment entry passed), a blocked
// packet's dup-to copy, and fastroute before to.
func TestRouteTargets(t *testing.T) {
	h := newHarness(t)
	n := newIfnet(t)
	const rules = `pass in on nic0 to nic1 reply-to nic2 proto udp from 10.0.0.0/8 to any keep state
pass in on nic0 to nic1 proto udp from 11.0.0.0/8 to any keep frags
pass in on nic0 to nic1 proto udp from 12.0.0.0/8 to any keep state
block in on nic0 dup-to nic3 proto tcp from any to any port = 23
pass in on nic0 fastroute to nic1 proto udp from 172.16.0.0/12 to any
`
	rs, err := ipf.Parse("routes.conf", []byte(rules), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := ruleset.Compile(rs)
	if err != nil {
		t.Fatal(err)
	}
	im, err := CompileSet(set, CompileOptions{Ifindex: n.ifindex})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	rl := &routeLog{}
	eng := engine.New(engine.Config{Clock: &state.ManualClock{}, Router: rl})
	defer eng.Close()
	eng.Sets().Store(0, set)

	fwd := testPkt{src: "10.0.0.1", dst: "192.168.0.1", proto: 17, sport: 1000, dport: 53, payload: 8}
	// an error about the forward packet (a router on the way: the
	// error goes back to its source) and one about the reply
	errFwd := icmpError(t, "192.168.9.9", "10.0.0.1", fwd.build()[14:])
	errRev := icmpError(t, "10.9.9.9", "192.168.0.1", fwd.reply(0).build()[14:])
	first := testPkt{src: "11.0.0.1", dst: "192.168.0.1", proto: 17, sport: 1000, dport: 53, payload: 16, id: 7, moreFrags: true}
	body := testPkt{src: "11.0.0.1", dst: "192.168.0.1", proto: 17, payload: 8, id: 7, fragOff: 3}
	sfirst, sbody := first, body
	sfirst.src, sbody.src = "12.0.0.1", "12.0.0.1"
	steps := []struct {
		what    string
		out     bool
		ifn     string
		frame   []byte
		verdict Verdict
		routes  []string
	}{
		{"forward packet", false, "nic0", fwd.build(), VerdictPass, []string{"to:nic1"}},
		{"its reply", true, "nic0", fwd.reply(0).build(), VerdictPass, []string{"to:nic2"}},
		{"error about the forward packet", true, "nic0", errFwd, VerdictPass, []string{"to:nic2"}},
		{"error about the reply", false, "nic0", errRev, VerdictPass, []string{"to:nic1"}},
		{"keep frags: first fragment", false, "nic0", first.build(), VerdictPass, []string{"to:nic1"}},
		{"keep frags: the rest", false, "nic0", body.build(), VerdictPass, []string{"to:nic1"}},
		{"keep state: first fragment", false, "nic0", sfirst.build(), VerdictPass, []string{"to:nic1"}},
		{"keep state: the rest", false, "nic0", sbody.build(), VerdictPass, nil},
		{"blocked, dup-to", false, "nic0", tcp4("10.5.5.5", "192.168.0.1", 999, 23, synF).build(), VerdictBlock, []string{"dup:nic3"}},
		{"fastroute before to", false, "nic0", testPkt{src: "172.16.0.1", dst: "192.168.0.1", proto: 17, sport: 1, dport: 2}.build(), VerdictPass, []string{"to:nic0"}},
	}
	err = n.do(func(r *ifrun) error {
		for _, s := range steps {
			var p engine.Packet
			p.Load(append([]byte(nil), s.frame[14:]...), s.ifn, s.out, 0)
			ev := eng.Check(&p).Verdict
			ert := rl.take()
			got, rt, err := r.run(h.d, s.out, s.ifn, s.frame)
			if err != nil {
				return err
			}
			if got != s.verdict || fmt.Sprint(rt) != fmt.Sprint(s.routes) {
				t.Errorf("%s: bpf %s %v, want %s %v", s.what, got, rt, s.verdict, s.routes)
			}
			if ev.Passed() != (s.verdict == VerdictPass) || fmt.Sprint(ert) != fmt.Sprint(s.routes) {
				t.Errorf("%s: engine %s %v, want %s %v", s.what, ev, ert, s.verdict, s.routes)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// icmpError returns an Ethernet frame with an ICMP destination
// unreachable from src to dst quoting the IPv4 packet quoted (its header
// and 8 bytes).
func icmpError(t *testing.T, src, dst string, quoted []byte) []byte {
	t.Helper()
	q := quoted[:20+8]
	p := testPkt{src: src, dst: dst, proto: 1, icmpType: 3, icmpCode: 1, payload: len(q)}
	f := p.build()
	icmp := f[14+20:]
	copy(icmp[8:], q)
	binary.BigEndian.PutUint16(icmp[2:], 0)
	binary.BigEndian.PutUint16(icmp[2:], ^csum(icmp, 0))
	return f
}

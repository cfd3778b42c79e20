package bpf

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TestPrivilegedRouteTo checks `to IF:nexthop` with real traffic: a
// second veth pair joins the namespaces (a 10.98.0.1, b 10.98.0.2), and a
// rule on b's outbound path sends datagrams for a's first address out of
// the second link. Listeners in a bound to the second link's device prove
// which way each datagram came: the routed port arrives there, an
// unrouted one does not.
func TestPrivilegedRouteTo(t *testing.T) {
	tp := newTopo(t)
	nameC, nameD := secondLink(t, tp)
	d := tp.attach(t, nameD)
	var im *Image
	inNS(t, tp.b, func() {
		im = compileText(t, fmt.Sprintf("pass out quick to %s:10.98.0.1 proto udp from any to 10.99.0.1 port = 7000\n", nameD))
	})
	if err := d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	arrives := func(port, tries int) bool {
		var pc net.PacketConn
		var err error
		inNS(t, tp.a, func() {
			lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
				var serr error
				if err := c.Control(func(fd uintptr) { serr = unix.BindToDevice(int(fd), nameC) }); err != nil {
					return err
				}
				return serr
			}}
			pc, err = lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("10.99.0.1:%d", port))
		})
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		defer pc.Close()
		var c net.Conn
		inNS(t, tp.b, func() { c, err = net.Dial("udp4", fmt.Sprintf("10.99.0.1:%d", port)) })
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		buf := make([]byte, 16)
		// the first datagram may wait for ARP on the new link: send a few
		for i := 0; i < tries; i++ {
			c.Write([]byte("hop"))
			pc.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
			if n, _, err := pc.ReadFrom(buf); err == nil && string(buf[:n]) == "hop" {
				return true
			}
		}
		return false
	}
	if arrives(7001, 2) {
		t.Fatal("a datagram no rule routes arrived on the second link: the check cannot tell the paths apart")
	}
	if !arrives(7000, 10) {
		t.Error("to IF:nexthop: the datagram did not arrive over the second link")
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Routed == 0 || st.RouteFail != 0 {
		t.Errorf("stats: routed %d, failed %d; want > 0 and 0", st.Routed, st.RouteFail)
	}
}

// secondLink joins tp's namespaces by a second veth pair (a's end
// 10.98.0.1, b's 10.98.0.2) and returns the names of its ends in a and b.
// a's reverse-path filter is off: packets from b's first link's address
// may arrive over it.
func secondLink(t *testing.T, tp *topo) (nameC, nameD string) {
	t.Helper()
	suffix := fmt.Sprintf("%d", os.Getpid()%100000)
	nameC, nameD = "slvc"+suffix, "slvd"+suffix
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: nameC}, PeerName: nameD}); err != nil {
		t.Fatalf("adding veth: %v", err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(nameC); err == nil {
			netlink.LinkDel(l)
		}
		// once moved, deleting the namespace's end removes the pair
		if h, err := netlink.NewHandleAt(tp.a); err == nil {
			if l, err := h.LinkByName(nameC); err == nil {
				h.LinkDel(l)
			}
			h.Close()
		}
	})
	for _, x := range []struct {
		name string
		ns   netns.NsHandle
		v4   string
	}{{nameC, tp.a, "10.98.0.1/24"}, {nameD, tp.b, "10.98.0.2/24"}} {
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
		if err == nil {
			addr, _ := netlink.ParseAddr(x.v4)
			err = h.AddrAdd(l, addr)
		}
		if err == nil {
			err = h.LinkSetUp(l)
		}
		h.Close()
		if err != nil {
			t.Fatalf("setting up %s: %v", x.name, err)
		}
	}
	// a's reply path to 10.99.0.2 is the first link: strict reverse-path
	// filtering would drop what the rule sends over the second
	inNS(t, tp.a, func() {
		for _, f := range []string{"all", "default", nameC} {
			os.WriteFile("/proc/sys/net/ipv4/conf/"+f+"/rp_filter", []byte("0"), 0o644)
		}
	})
	return nameC, nameD
}

// TestPrivilegedDupToCopyLeaves checks with real traffic what a dup-to
// copy of an inbound packet meets on its way out: IPFilter's
// ipf_fastroute counts it by the outbound accounting and its flow's state
// entry and sends it, never filtering it outbound. Datagrams from a to b
// are copied out of the second link, whose outbound rule blocks all: the
// copies must arrive in a (the link's receive count), those of a flow a
// rule keeps state for counted by its entry as packets out: a pass rule's
// flow, a rule without state, and a block rule's flow (whose entry, a
// block, refuses its packets). Before faith12 the egress program filtered
// a copy as any outbound packet: the block rule dropped the copies of the
// flow without state (those of the two others went through on main too).
func TestPrivilegedDupToCopyLeaves(t *testing.T) {
	tp := newTopo(t)
	nameC, nameD := secondLink(t, tp)
	d := tp.attach(t, nameD)
	var im *Image
	inNS(t, tp.b, func() {
		im = compileText(t, fmt.Sprintf(""+
			"pass in quick on %[1]s dup-to %[2]s proto udp from any to any port = 7000 keep state\n"+
			"pass in quick on %[1]s dup-to %[2]s proto udp from any to any port = 7001\n"+
			"block in quick on %[1]s dup-to %[2]s proto udp from any to any port = 7002 keep state\n"+
			"block return-icmp(port-unr) in quick on %[1]s dup-to %[2]s proto udp from any to any port = 7003 keep state\n"+
			"block out quick on %[2]s all\n", tp.ifB, nameD))
	})
	if err := d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	// the link's own IPv6 traffic (neighbour discovery, MLD) would be
	// counted as copies received: none on it
	inNS(t, tp.a, func() {
		os.WriteFile("/proc/sys/net/ipv6/conf/"+nameC+"/disable_ipv6", []byte("1"), 0o644)
	})
	inNS(t, tp.b, func() {
		os.WriteFile("/proc/sys/net/ipv6/conf/"+nameD+"/disable_ipv6", []byte("1"), 0o644)
	})
	rx := func() uint64 {
		var n uint64
		inNS(t, tp.a, func() {
			h, err := netlink.NewHandleAt(tp.a)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			l, err := h.LinkByName(nameC)
			if err != nil {
				t.Fatal(err)
			}
			n = l.Attrs().Statistics.RxPackets
		})
		return n
	}
	// b takes the datagrams: a port unreachable would be a packet of
	// the flow too (a reply, copied as well)
	for _, port := range []int{7000, 7001} {
		inNS(t, tp.b, func() {
			pc, err := net.ListenPacket("udp4", fmt.Sprintf("10.99.0.2:%d", port))
			if err != nil {
				t.Fatalf("listen: %v", err)
			}
			t.Cleanup(func() { pc.Close() })
		})
	}
	const sent = 3
	// what the link carried while it came up has passed when its count
	// stands still
	for last, deadline := rx(), time.Now().Add(3*time.Second); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		n := rx()
		if n == last {
			break
		}
		last = n
	}
	for _, port := range []int{7000, 7001, 7002, 7003} {
		rx0 := rx()
		inNS(t, tp.a, func() {
			// unconnected: b's port unreachable must not fail the
			// next write, as it would a connected socket's
			c, err := net.ListenPacket("udp4", "10.99.0.1:0")
			if err != nil {
				t.Fatalf("listen: %v", err)
			}
			defer c.Close()
			to := &net.UDPAddr{IP: net.IPv4(10, 99, 0, 2), Port: port}
			for i := 0; i < sent; i++ {
				if _, err := c.WriteTo([]byte("copy me"), to); err != nil {
					t.Fatalf("send: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		// the copies are sent at once; the counters may trail a little
		var got uint64
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if got = rx() - rx0; got >= sent || time.Now().After(deadline) {
				break
			}
		}
		if got != sent {
			t.Errorf("port %d: copies received over the second link: %d, want %d (the egress program dropped them?)", port, got, sent)
		}
	}
	sts, err := d.States()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[uint16][4]uint64{}
	for _, s := range sts {
		if s.Proto == 17 {
			counted[s.DstPort] = s.Pkts
		}
	}
	// [rev*2+out]: the datagrams in, their copies out
	for _, port := range []uint16{7000, 7002} {
		if p, ok := counted[port]; !ok || p[0] != sent || p[1] != sent {
			t.Errorf("port %d: the flow's entry counts %v (in, out, ...), want %d in and %d out (a copy is a packet out)",
				port, p, sent, sent)
		}
	}
	if _, ok := counted[7001]; ok {
		t.Errorf("port 7001: an entry for a flow no rule keeps state for")
	}
	// a rule that returns an error: ipf_fastroute skips the state check
	// for its copy (FASTRT_NOSTATE_MARK), which still leaves unfiltered
	// (received above): the entry counts the datagrams in, no copy out.
	// With the copy marked FASTRT_MARK it would count them; unmarked, the
	// outbound rule would drop them
	if p, ok := counted[7003]; !ok || p[0] != sent || p[1] != 0 {
		t.Errorf("port 7003 (return-icmp): the flow's entry counts %v (in, out, ...), want %d in and none out", p, sent)
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Duplicated < 4*sent {
		t.Errorf("stats: %d copies made, want %d", st.Duplicated, 4*sent)
	}
}

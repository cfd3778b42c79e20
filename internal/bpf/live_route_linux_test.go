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
	suffix := fmt.Sprintf("%d", os.Getpid()%100000)
	nameC, nameD := "slvc"+suffix, "slvd"+suffix
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
	var d *Datapath
	var err error
	inNS(t, tp.b, func() {
		d, err = Load(Options{PinDir: tp.pinDir})
		if err == nil {
			err = d.Attach([]string{tp.ifB, nameD})
		}
	})
	if err != nil {
		t.Fatalf("load/attach: %+v", err)
	}
	t.Cleanup(func() { d.Remove() })
	var im *Image
	inNS(t, tp.b, func() {
		im = compileText(t, fmt.Sprintf("pass out quick to %s:10.98.0.1 proto udp from any to 10.99.0.1 port = 7000\n", nameD))
	})
	if err := d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	arrives := func(port, tries int) bool {
		var pc net.PacketConn
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

package ipfctl

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// addLink adds a veth pair between the test's namespaces, a<n> in a and
// b<n> in b, on 10.<n>.0.0/24 (a is .1, b is .2), with a UDP echo server
// on b's address, and returns b's end and address. The pair goes when
// the returned function runs, or when the test ends.
func (tp *topo) addLink(n int) (name, addr string, del func()) {
	tp.t.Helper()
	an, bn := fmt.Sprintf("sla%d", n), fmt.Sprintf("slb%d", n)
	aAddr, bAddr := fmt.Sprintf("10.%d.0.1", n), fmt.Sprintf("10.%d.0.2", n)
	ha, err := netlink.NewHandleAt(tp.a)
	if err != nil {
		tp.t.Fatal(err)
	}
	defer ha.Close()
	hb, err := netlink.NewHandleAt(tp.b)
	if err != nil {
		tp.t.Fatal(err)
	}
	defer hb.Close()
	if err := ha.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: an}, PeerName: bn, PeerNamespace: netlink.NsFd(tp.b)}); err != nil {
		tp.t.Fatalf("adding veth %s: %v", an, err)
	}
	gone := false
	del = func() {
		if gone {
			return
		}
		gone = true
		if h, err := netlink.NewHandleAt(tp.a); err == nil {
			if l, err := h.LinkByName(an); err == nil {
				h.LinkDel(l)
			}
			h.Close()
		}
	}
	tp.t.Cleanup(del)
	for _, s := range []struct {
		h          *netlink.Handle
		name, addr string
	}{{ha, an, aAddr}, {hb, bn, bAddr}} {
		l, err := s.h.LinkByName(s.name)
		if err != nil {
			tp.t.Fatal(err)
		}
		a, _ := netlink.ParseAddr(s.addr + "/24")
		if err := s.h.AddrAdd(l, a); err != nil {
			tp.t.Fatal(err)
		}
		if err := s.h.LinkSetUp(l); err != nil {
			tp.t.Fatal(err)
		}
	}
	// a veth carries traffic once both ends are operationally up, a
	// moment after they are set up (the kernel's link watch)
	for _, s := range []struct {
		h    *netlink.Handle
		name string
	}{{ha, an}, {hb, bn}} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			l, err := s.h.LinkByName(s.name)
			if err == nil && l.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(deadline) {
				tp.t.Fatalf("%s not operationally up after 10 s: %v", s.name, err)
			}
		}
	}
	var pc net.PacketConn
	if err := tp.inNS(tp.b, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", net.JoinHostPort(bAddr, strconv.Itoa(udpPort)))
		return err
	}); err != nil {
		tp.t.Fatalf("listening on %s: %v", bAddr, err)
	}
	tp.t.Cleanup(func() { pc.Close() })
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
	return bn, bAddr, del
}

// ifindex returns the index of an interface of namespace b.
func (tp *topo) ifindex(name string) int {
	tp.t.Helper()
	return tp.linkIn(tp.b, name).Attrs().Index
}

// linkIn returns interface name of namespace ns, as netlink reads it now.
func (tp *topo) linkIn(ns netns.NsHandle, name string) netlink.Link {
	tp.t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		tp.t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		tp.t.Fatal(err)
	}
	return l
}

// coverageOf runs ipf -V and returns its Interfaces/Unfiltered lines and
// its warnings.
func (tp *topo) coverageOf() (lines, warnings string) {
	tp.t.Helper()
	code, o, e := tp.run("ipf", "-V")
	if code != 0 {
		tp.t.Fatalf("ipf -V: exit %d: %s", code, e)
	}
	for _, l := range strings.SplitAfter(o, "\n") {
		if strings.HasPrefix(l, "Interfaces:") || strings.HasPrefix(l, "Unfiltered:") {
			lines += l
		}
	}
	return lines, e
}

// udpBlocked reports whether a datagram from a to addr gets no echo; it
// requires the answer to be certain both ways (an echo, or silence for the
// whole timeout).
func (tp *topo) udpBlocked(addr string) bool {
	return tp.udpEcho(tp.a, addr, time.Second) != nil
}

// TestPrivilegedNewInterfaces: with rules that apply on every interface,
// an interface that appears after the load (a veth here; a NIC, VLAN or
// container link on a host) is unfiltered until ipf -y or a reload, which
// attach the filter to it; until then ipf -V and ipfstat say so. An
// interface that goes away is forgotten by the next ipf -y (its pins
// go). About 10 s.
func TestPrivilegedNewInterfaces(t *testing.T) {
	tp := ownTopo(t)
	rules := tp.file("everywhere.conf", fmt.Sprintf("block in quick proto udp from any to any port = %d\npass in all\npass out all\n", udpPort))
	tp.mustRun("ipf", "-Fa", "-f", rules)
	if !tp.udpBlocked(addrB) {
		t.Fatal("the rules do not block UDP on slb")
	}
	if l, w := tp.coverageOf(); l != "Interfaces: slb (every non-loopback interface)\n" || w != "" {
		t.Errorf("after the load, ipf -V: %q, warnings %q", l, w)
	}

	// a link that appears after the load is not filtered, and says so
	b2, addr2, del2 := tp.addLink(232)
	if tp.udpBlocked(addr2) {
		t.Fatalf("UDP over %s blocked before ipf -y: the test would not see the difference", b2)
	}
	l, w := tp.coverageOf()
	if l != "Interfaces: slb (every non-loopback interface)\nUnfiltered: "+b2+" (up, not attached: run ipf -y)\n" ||
		!strings.Contains(w, "ipf: warning: "+b2+" is up and not filtered") {
		t.Errorf("with %s unfiltered, ipf -V: %q, warnings %q", b2, l, w)
	}
	if code, _, e := tp.run("ipfstat", "-io"); code != 0 || !strings.Contains(e, "ipfstat: warning: "+b2+" is up and not filtered") {
		t.Errorf("ipfstat -io with %s unfiltered: exit %d, stderr %q", b2, code, e)
	}

	// ipf -y attaches the filter to it
	tp.mustRun("ipf", "-y")
	if !tp.udpBlocked(addr2) {
		t.Errorf("UDP over %s not blocked after ipf -y", b2)
	}
	if !tp.udpBlocked(addrB) {
		t.Error("UDP over slb no longer blocked after ipf -y")
	}
	if l, w := tp.coverageOf(); l != "Interfaces: slb "+b2+" (every non-loopback interface)\n" || w != "" {
		t.Errorf("after ipf -y, ipf -V: %q, warnings %q", l, w)
	}
	if code, _, e := tp.run("ipfstat", "-io"); code != 0 || strings.Contains(e, "warning") {
		t.Errorf("ipfstat -io after ipf -y: exit %d, stderr %q", code, e)
	}

	// so does any reload
	b3, addr3, _ := tp.addLink(233)
	tp.mustRun("ipf", "-I", "-Fa", "-f", rules, "-s")
	if !tp.udpBlocked(addr3) {
		t.Errorf("UDP over %s not blocked after a reload", b3)
	}
	if l, _ := tp.coverageOf(); l != "Interfaces: slb "+b2+" "+b3+" (every non-loopback interface)\n" {
		t.Errorf("after the reload, ipf -V: %q", l)
	}

	// a link that went away is forgotten: its pins go, nothing fails
	idx2 := tp.ifindex(b2)
	del2()
	tp.mustRun("ipf", "-y")
	if pins, _ := filepath.Glob(filepath.Join(tp.pinDir, fmt.Sprintf("link_%d_*", idx2))); len(pins) != 0 {
		t.Errorf("pins of the deleted %s left: %v", b2, pins)
	}
	if l, w := tp.coverageOf(); l != "Interfaces: slb "+b3+" (every non-loopback interface)\n" || w != "" {
		t.Errorf("after %s went, ipf -V: %q, warnings %q", b2, l, w)
	}
	if !tp.udpBlocked(addr3) || !tp.udpBlocked(addrB) {
		t.Error("UDP no longer blocked on the links that remain")
	}
}

// TestPrivilegedNamedInterfaces: rules that all name their interfaces
// keep the filter on those (a packet elsewhere could only meet the
// default pass), with no warning for the others; blocking unmatched
// packets (default_pass) puts the filter on every interface, and so does
// a rule without `on` loaded later. About 15 s.
func TestPrivilegedNamedInterfaces(t *testing.T) {
	tp := ownTopo(t)
	named := tp.file("named.conf", fmt.Sprintf("block in quick on slb proto udp from any to any port = %d\npass in on slb all\n", udpPort))
	tp.mustRun("ipf", "-Fa", "-f", named)
	b2, addr2, _ := tp.addLink(234)
	tp.mustRun("ipf", "-y")
	if l, w := tp.coverageOf(); l != "Interfaces: slb (those the rules name)\n" || w != "" {
		t.Errorf("named rules, ipf -V: %q, warnings %q", l, w)
	}
	if !tp.udpBlocked(addrB) || tp.udpBlocked(addr2) {
		t.Errorf("named rules: slb blocked %v (want true), %s blocked %v (want false)", tp.udpBlocked(addrB), b2, tp.udpBlocked(addr2))
	}
	// unmatched packets blocked: an interface without the filter would
	// pass them, so the filter goes on every interface
	tp.mustRun("ipf", "-T", "default_pass=1")
	if !tp.udpBlocked(addr2) {
		t.Errorf("default block: UDP over %s not blocked", b2)
	}
	if l, w := tp.coverageOf(); l != "Interfaces: slb "+b2+" (every non-loopback interface)\n" || w != "" {
		t.Errorf("default block, ipf -V: %q, warnings %q", l, w)
	}
	tp.mustRun("ipf", "-T", "default_pass=2")

	// a rule without `on`: the filter belongs everywhere from now on
	// (the mode was entered above already; a new link shows it is kept)
	b3, addr3, _ := tp.addLink(235)
	c := tp.cmd("ipf", "-f", "-")
	c.Stdin = strings.NewReader(fmt.Sprintf("block in quick proto udp from any to any port = %d\n", udpPort))
	var e strings.Builder
	c.Stderr = &e
	if err := tp.start(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("ipf -f -: %v: %s", err, e.String())
	}
	if !tp.udpBlocked(addr3) {
		t.Errorf("UDP over %s not blocked once a rule applies on every interface", b3)
	}
	if l, w := tp.coverageOf(); l != "Interfaces: slb "+b2+" "+b3+" (every non-loopback interface)\n" || w != "" {
		t.Errorf("after the rule without on, ipf -V: %q, warnings %q", l, w)
	}
	// and ipf -D ends it with everything
	tp.mustRun("ipf", "-D")
	if _, err := os.Stat(tp.pinDir); !os.IsNotExist(err) {
		t.Errorf("pins left after ipf -D: %v", err)
	}
}

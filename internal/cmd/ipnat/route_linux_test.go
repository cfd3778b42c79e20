//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestPrivilegedNATRouteTo is kit case ni21 on a live gateway: an
// outbound filter rule with `to IF:NEXTHOP` sends the packet out of
// another interface than the routing table chose, and a map rule for that
// pair of interfaces (`map in,out`) translates it as it leaves the
// interface it was sent to, as IPFilter's NAT takes the `to` interface
// for the packet's own. The routing table sends the client's datagrams
// for 198.51.100.77 out of gx0; the filter sends them to the server out
// of gs0, where NAT gives them the gateway's outside address. About 3 s.
func TestPrivilegedNATRouteTo(t *testing.T) {
	w := newGW(t)
	const dst = "198.51.100.77"
	// the server also answers to dst and reports who sent to it
	w.must(w.in(w.s, func() error {
		l, err := netlink.LinkByName("vs0")
		if err != nil {
			return err
		}
		a, err := netlink.ParseAddr(dst + "/32")
		if err != nil {
			return err
		}
		a.Flags = unix.IFA_F_NODAD
		return netlink.AddrAdd(l, a)
	}))
	var pc net.PacketConn
	w.must(w.in(w.s, func() (err error) {
		pc, err = net.ListenPacket("udp4", net.JoinHostPort(dst, strconv.Itoa(gwUDP)))
		return err
	}))
	w.onClose(func() { pc.Close() })
	from := make(chan string, 8)
	go func() {
		buf := make([]byte, 2048)
		for {
			_, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			from <- a.(*net.UDPAddr).IP.String()
		}
	}()
	// the gateway routes dst out of gx0, a veth of its own with a
	// permanent neighbour (the packet reaches gx0's egress hook at once)
	w.must(w.in(w.g, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "gx0"}, PeerName: "gx1"}); err != nil {
			return err
		}
		gx, err := netlink.LinkByName("gx0")
		if err != nil {
			return err
		}
		for _, n := range []string{"gx0", "gx1"} {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		a, err := netlink.ParseAddr("10.99.0.1/24")
		if err != nil {
			return err
		}
		a.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(gx, a); err != nil {
			return err
		}
		nh := net.ParseIP("10.99.0.2")
		if err := netlink.NeighAdd(&netlink.Neigh{LinkIndex: gx.Attrs().Index, IP: nh, State: netlink.NUD_PERMANENT,
			HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0x99, 2}}); err != nil {
			return err
		}
		_, d, _ := net.ParseCIDR(dst + "/32")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: gx.Attrs().Index, Dst: d, Gw: nh})
	}))
	w.ipf("-Fa", "-f", w.file("rt.ipf", "pass out quick on gx0 to gs0:"+gwS4+" from "+gwC4+" to any\n"+
		"pass in all\npass out all\n"))
	w.mustIPNAT("-f", w.file("rt.nat", "map gx0,gs0 192.168.77.0/24 -> "+gwGS4+"/32\n"))
	var c net.Conn
	w.must(w.in(w.c, func() (err error) {
		c, err = net.Dial("udp4", net.JoinHostPort(dst, strconv.Itoa(gwUDP)))
		return err
	}))
	defer c.Close()
	// resent until it arrives (the first may wait for ARP); the bound is a
	// hang detector (three tries of 700 ms, as before, can run out on a loaded
	// machine)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if _, err := c.Write([]byte("routed")); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-from:
			if got != gwGS4 {
				t.Errorf("the server got the datagram from %s, want %s (translated on gs0, where `to` sent it)", got, gwGS4)
			}
			return
		case <-time.After(700 * time.Millisecond):
		}
	}
	t.Error("the datagram never reached the server by way of the `to` rule")
}

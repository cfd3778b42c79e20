//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	natbpf "sluice/internal/bpf/nat"
	"sluice/internal/ipfctl"
)

// TestPrivilegedNATResync: a masquerade's 0/32 target is the outside
// interface's address as ipnat read it; after the address changes, new
// sessions still get the old one until ipf -y (here with no filter
// loaded, NAT alone) reads it again, after which they get the new one;
// ipf -y also attaches NAT to an interface a rule names that appeared
// after the rules were loaded. About 5 s.
func TestPrivilegedNATResync(t *testing.T) {
	w := newGW(t)
	peers := w.serve(w.s, gwS4, gwTCP, gwUDP)
	w.mustIPNAT("-f", w.file("r.nat", "map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto\n"+
		"map gx0 192.168.77.0/24 -> 0/32\n"))
	peer := func() string {
		t.Helper()
		c, err := w.dial(w.c, gwS4, gwTCP)
		if err != nil {
			return "no connection: " + err.Error()
		}
		defer c.Close()
		select {
		case p := <-peers:
			a, _ := hostPort(p)
			return a.String()
		case <-time.After(20 * time.Second): // a hang detector: the connection is up, the server's accept reports it
			return "no peer seen"
		}
	}
	if got := peer(); got != gwGS4 {
		t.Fatalf("before the change the server sees %s, want %s", got, gwGS4)
	}
	// the gateway's outside address changes
	const newAddr = "198.51.100.9"
	w.must(w.in(w.g, func() error {
		// the new address stays when the old one, primary in the
		// subnet, goes
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+gwOutIf+"/promote_secondaries", []byte("1"), 0); err != nil {
			return err
		}
		l, err := netlink.LinkByName(gwOutIf)
		if err != nil {
			return err
		}
		add, err := netlink.ParseAddr(newAddr + "/24")
		if err != nil {
			return err
		}
		add.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(l, add); err != nil {
			return err
		}
		old, err := netlink.ParseAddr(gwGS4 + "/24")
		if err != nil {
			return err
		}
		return netlink.AddrDel(l, old)
	}))
	// until ipf -y, new sessions take the address read at load, which
	// the gateway no longer has: the server's answers go nowhere
	if got := peer(); got == newAddr {
		t.Errorf("the new address was used before ipf -y re-read it")
	}
	// a veth named by a rule appears
	w.must(w.in(w.g, func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "gx0"}, PeerName: "gx1"})
	}))
	w.ipf("-y")
	if got := peer(); got != newAddr {
		t.Errorf("after ipf -y the server sees %s, want the new address %s", got, newAddr)
	}
	sessions := strings.Join(w.sessions(), "\n")
	if !strings.Contains(sessions, newAddr) {
		t.Errorf("ipnat -l after ipf -y shows no session with %s:\n%s", newAddr, sessions)
	}
	w.must(w.in(w.g, func() error {
		ifc, err := net.InterfaceByName("gx0")
		if err != nil {
			return err
		}
		d, err := natbpf.OpenPinned(ipfctl.NATPinDir(w.pinDir))
		if err != nil {
			return err
		}
		defer d.Close()
		for _, out := range []bool{false, true} {
			ids, err := natbpf.TCXOrder(ifc.Index, out)
			if err != nil {
				return err
			}
			id, err := natbpf.ProgramID(d.Program(out))
			if err != nil {
				return err
			}
			if !slices.Contains(ids, id) {
				return fmt.Errorf("gx0 (out=%v): programs %v, NAT's (%d) not among them after ipf -y", out, ids, id)
			}
		}
		return nil
	}))
}

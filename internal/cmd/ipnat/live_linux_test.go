//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

// Live NAT tests: three namespaces, a client (c) and a server (s) on
// either side of a gateway (g) that forwards between them and runs ipnat
// (and ipf) in process, with the pins on a private bpffs. The server has
// no route back to the client's network, so replies only come back when
// the gateway translates.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	natbpf "sluice/internal/bpf/nat"
	cli "sluice/internal/cmd/ipf"
	"sluice/internal/ipfctl"
	"sluice/internal/testutil"
	"sluice/internal/testutil/ftptest"
)

const (
	gwC4    = "192.168.77.2" // client
	gwGC4   = "192.168.77.1" // gateway, inside
	gwGS4   = "198.51.100.1" // gateway, outside
	gwS4    = "198.51.100.2" // server
	gwC6    = "fd77::2"
	gwGC6   = "fd77::1"
	gwGS6   = "2001:db8:100::1"
	gwS6    = "2001:db8:100::2"
	gwTCP   = 5001
	gwUDP   = 5002
	gwOutIf = "gs0" // the gateway's outside interface
)

type gwTopo struct {
	t        *testing.T
	c, g, s  netns.NsHandle
	orig     netns.NsHandle
	pinDir   string
	tmp      string
	cleanups []func()
}

func (w *gwTopo) onClose(f func()) { w.cleanups = append(w.cleanups, f) }

func (w *gwTopo) close() {
	for i := len(w.cleanups) - 1; i >= 0; i-- {
		w.cleanups[i]()
	}
	w.cleanups = nil
}

// in runs f on an OS thread that joined ns.
func (w *gwTopo) in(ns netns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		err := f()
		if netns.Set(w.orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func (w *gwTopo) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// newGW builds the three namespaces. The NAT and filter pins go to a
// private bpffs; SLUICE_BPF_DIR points the in-process commands at it.
func newGW(t *testing.T) *gwTopo {
	t.Helper()
	testutil.RequireRoot(t)
	w := &gwTopo{t: t, tmp: t.TempDir()}
	t.Cleanup(w.close)
	mnt := filepath.Join(w.tmp, "bpffs")
	w.must(os.Mkdir(mnt, 0o700))
	if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
		testutil.SkipOrFail(t, "mounting bpffs: %v", err)
	}
	w.onClose(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	w.pinDir = filepath.Join(mnt, "sluice")
	t.Setenv(ipfctl.PinDirEnv, w.pinDir)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	w.must(err)
	w.orig = orig
	w.onClose(func() { orig.Close() })
	for _, p := range []*netns.NsHandle{&w.c, &w.g, &w.s} {
		ns, err := netns.New()
		if err != nil {
			netns.Set(orig)
			testutil.SkipOrFail(t, "creating a network namespace: %v", err)
		}
		*p = ns
		w.onClose(func() { ns.Close() })
	}
	w.must(netns.Set(orig))
	// no duplicate address detection: a tentative link-local address
	// would hold up neighbour discovery for a second or two after the
	// links come up, and with it the first IPv6 packets
	for _, ns := range []netns.NsHandle{w.c, w.g, w.s} {
		w.must(w.in(ns, func() error {
			for _, k := range []string{"all", "default"} {
				for _, f := range []string{"accept_dad", "dad_transmits"} {
					if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/"+f, []byte("0"), 0); err != nil {
						return err
					}
				}
			}
			return nil
		}))
	}
	hc, err := netlink.NewHandleAt(w.c)
	w.must(err)
	defer hc.Close()
	hg, err := netlink.NewHandleAt(w.g)
	w.must(err)
	defer hg.Close()
	hs, err := netlink.NewHandleAt(w.s)
	w.must(err)
	defer hs.Close()
	w.must(hc.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vc0"}, PeerName: "gc0", PeerNamespace: netlink.NsFd(w.g)}))
	w.must(hs.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vs0"}, PeerName: "gs0", PeerNamespace: netlink.NsFd(w.g)}))
	for _, x := range []struct {
		h    *netlink.Handle
		link string
		a    []string
	}{
		{hc, "vc0", []string{gwC4 + "/24", gwC6 + "/64"}},
		{hg, "gc0", []string{gwGC4 + "/24", gwGC6 + "/64"}},
		{hg, "gs0", []string{gwGS4 + "/24", gwGS6 + "/64"}},
		{hs, "vs0", []string{gwS4 + "/24", gwS6 + "/64"}},
	} {
		l, err := x.h.LinkByName(x.link)
		w.must(err)
		for _, a := range x.a {
			ad, err := netlink.ParseAddr(a)
			w.must(err)
			ad.Flags = unix.IFA_F_NODAD
			w.must(x.h.AddrAdd(l, ad))
		}
		w.must(x.h.LinkSetUp(l))
		if lo, err := x.h.LinkByName("lo"); err == nil {
			x.h.LinkSetUp(lo)
		}
	}
	// the client routes everything through the gateway; the server knows
	// only its own network
	vc, err := hc.LinkByName("vc0")
	w.must(err)
	for _, gw := range []string{gwGC4, gwGC6} {
		w.must(hc.RouteAdd(&netlink.Route{LinkIndex: vc.Attrs().Index, Gw: net.ParseIP(gw)}))
	}
	w.must(w.in(w.g, func() error {
		for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
			if err := os.WriteFile(f, []byte("1"), 0); err != nil {
				return err
			}
		}
		return nil
	}))
	w.onClose(func() { w.in(w.g, func() error { return ipfctl.Remove(w.pinDir) }) })
	return w
}

// routeVia makes the server send traffic for prefix to the gateway.
func (w *gwTopo) routeVia(prefix string) {
	w.t.Helper()
	hs, err := netlink.NewHandleAt(w.s)
	w.must(err)
	defer hs.Close()
	l, err := hs.LinkByName("vs0")
	w.must(err)
	_, dst, err := net.ParseCIDR(prefix)
	w.must(err)
	gw := gwGS4
	if dst.IP.To4() == nil {
		gw = gwGS6
	}
	w.must(hs.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP(gw)}))
}

// ipnat runs the ipnat command in process inside the gateway, as the
// bench does.
func (w *gwTopo) ipnat(args ...string) (int, string, string) {
	w.t.Helper()
	var o, e bytes.Buffer
	var code int
	w.must(w.in(w.g, func() error {
		code = Main(args, strings.NewReader(""), &o, &e)
		return nil
	}))
	return code, o.String(), e.String()
}

func (w *gwTopo) mustIPNAT(args ...string) string {
	w.t.Helper()
	code, o, e := w.ipnat(args...)
	if code != 0 {
		w.t.Fatalf("ipnat %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, o, e)
	}
	return o
}

// ipf runs ipf in process inside the gateway.
func (w *gwTopo) ipf(args ...string) string {
	w.t.Helper()
	var o, e bytes.Buffer
	var code int
	w.must(w.in(w.g, func() error {
		b := ipfctl.NewKernel(w.pinDir)
		defer b.Close()
		c := &cli.Command{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Backend: b}
		code = c.Run(args)
		return nil
	}))
	if code != 0 {
		w.t.Fatalf("ipf %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, o.String(), e.String())
	}
	return o.String()
}

func (w *gwTopo) file(name, text string) string {
	w.t.Helper()
	p := filepath.Join(w.tmp, name)
	w.must(os.WriteFile(p, []byte(text), 0o644))
	return p
}

// serve runs TCP and UDP echo servers at addr in ns; the TCP one also
// reports the peer address it saw on conns.
func (w *gwTopo) serve(ns netns.NsHandle, addr string, tcpPort, udpPort int) (peers chan string) {
	w.t.Helper()
	peers = make(chan string, 64)
	var ln net.Listener
	var pc net.PacketConn
	fam := "4"
	if strings.Contains(addr, ":") {
		fam = "6"
	}
	w.must(w.in(ns, func() error {
		var err error
		if ln, err = net.Listen("tcp"+fam, net.JoinHostPort(addr, strconv.Itoa(tcpPort))); err != nil {
			return err
		}
		if udpPort != 0 {
			pc, err = net.ListenPacket("udp"+fam, net.JoinHostPort(addr, strconv.Itoa(udpPort)))
		}
		return err
	}))
	w.onClose(func() {
		ln.Close()
		if pc != nil {
			pc.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case peers <- c.RemoteAddr().String():
			default:
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	if pc != nil {
		go func() {
			buf := make([]byte, 65536)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				pc.WriteTo(buf[:n], from)
			}
		}()
	}
	return peers
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

// dial connects from ns to addr:port over TCP and exchanges a message;
// the connection is returned open.
func (w *gwTopo) dial(ns netns.NsHandle, addr string, port int) (net.Conn, error) {
	var c net.Conn
	err := w.in(ns, func() error {
		var err error
		// No keepalives: a probe from an idle connection (Go's default
		// is one after 15 s, which a loaded machine can reach mid-test)
		// would go through the map rules again and make a session where
		// a test wants none, after ipnat -F.
		d := net.Dialer{Timeout: 2 * time.Second, KeepAlive: -1}
		c, err = d.Dial("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := echo(c, []byte("through the gateway"), 2*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// udp sends a datagram from ns on a connected socket and waits for the
// echo; with a closed port the ICMP error that comes back surfaces as
// ECONNREFUSED, but only if its embedded header matches the socket's
// addresses and ports (the gateway translated it back).
func (w *gwTopo) udp(ns netns.NsHandle, addr string, port int) error {
	var c net.Conn
	if err := w.in(ns, func() error {
		var err error
		c, err = net.Dial("udp", net.JoinHostPort(addr, strconv.Itoa(port)))
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	var last error
	for try := 0; try < 3; try++ {
		if last = echo(c, []byte("hello"), 700*time.Millisecond); last == nil || errors.Is(last, syscall.ECONNREFUSED) {
			return last
		}
	}
	return last
}

// ping sends an ICMP echo request from ns and waits for the reply.
func (w *gwTopo) ping(ns netns.NsHandle, addr string) error {
	v6 := strings.Contains(addr, ":")
	return w.in(ns, func() error {
		network, typ := "ip4:icmp", byte(8)
		if v6 {
			network, typ = "ip6:ipv6-icmp", 128
		}
		pc, err := net.ListenPacket(network, "")
		if err != nil {
			return err
		}
		defer pc.Close()
		msg := []byte{typ, 0, 0, 0, 0x12, 0x34, 0, 1, 'n', 'a', 't'}
		if !v6 {
			var s uint32
			for i := 0; i+1 < len(msg); i += 2 {
				s += uint32(msg[i])<<8 | uint32(msg[i+1])
			}
			s += uint32(msg[len(msg)-1]) << 8
			for s>>16 != 0 {
				s = s&0xffff + s>>16
			}
			msg[2], msg[3] = byte(^s>>8), byte(^s)
		}
		dst, err := net.ResolveIPAddr("ip", addr)
		if err != nil {
			return err
		}
		if _, err := pc.WriteTo(msg, dst); err != nil {
			return err
		}
		pc.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return fmt.Errorf("ping %s: %w", addr, err)
			}
			// the reply to this request: type 0 / 129, our id and data
			if n >= 11 && from.String() == dst.String() && (buf[0] == 0 || buf[0] == 129) &&
				buf[4] == 0x12 && buf[5] == 0x34 && string(buf[8:n]) == "nat" {
				return nil
			}
		}
	})
}

// sessions returns ipnat -l's session lines.
func (w *gwTopo) sessions() []string {
	w.t.Helper()
	out := w.mustIPNAT("-l")
	_, s, ok := strings.Cut(out, "List of active sessions:\n")
	if !ok {
		w.t.Fatalf("ipnat -l: no session list in\n%s", out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func hostPort(s string) (netip.Addr, int) {
	ap := netip.MustParseAddrPort(s)
	return ap.Addr().Unmap(), int(ap.Port())
}

// TestPrivilegedNATMasquerade: a client behind the gateway reaches the
// server over TCP, UDP and ICMP echo, IPv4 and IPv6, with its address
// (and, TCP/UDP, its ports: portmap auto) replaced by the gateway's; an
// ICMP port unreachable comes back with its embedded header translated;
// ipnat -l lists the sessions, -s counts them, -F ends them.
func TestPrivilegedNATMasquerade(t *testing.T) {
	w := newGW(t)
	peers4 := w.serve(w.s, gwS4, gwTCP, gwUDP)
	peers6 := w.serve(w.s, gwS6, gwTCP, gwUDP)
	w.mustIPNAT("-f", w.file("masq.nat", `map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto
map gs0 192.168.77.0/24 -> 0/32
map gs0 inet6 fd77::/64 -> 2001:db8:100::1/128 portmap tcp/udp auto
map gs0 inet6 fd77::/64 -> 2001:db8:100::1/128
`))
	c4, err := w.dial(w.c, gwS4, gwTCP)
	if err != nil {
		t.Fatalf("TCP through the masquerade: %v", err)
	}
	defer c4.Close()
	from, port := hostPort(<-peers4)
	if from.String() != gwGS4 || port < 1024 {
		t.Errorf("the server saw the connection from %s:%d, want the gateway %s and a mapped port", from, port, gwGS4)
	}
	c6, err := w.dial(w.c, gwS6, gwTCP)
	if err != nil {
		t.Fatalf("TCP over IPv6 through the masquerade: %v", err)
	}
	defer c6.Close()
	if from, _ := hostPort(<-peers6); from.String() != gwGS6 {
		t.Errorf("the server saw the IPv6 connection from %s, want %s", from, gwGS6)
	}
	for _, a := range []string{gwS4, gwS6} {
		if err := w.udp(w.c, a, gwUDP); err != nil {
			t.Errorf("UDP to %s through the masquerade: %v", a, err)
		}
		if err := w.ping(w.c, a); err != nil {
			t.Errorf("ICMP echo to %s through the masquerade: %v", a, err)
		}
		// nothing listens on gwUDP+1: the port unreachable must come
		// back translated for the socket to see it
		if err := w.udp(w.c, a, gwUDP+1); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("UDP to a closed port of %s: got %v, want the ICMP error as ECONNREFUSED", a, err)
		}
	}
	ss := w.sessions()
	re := regexp.MustCompile(`^MAP 192\.168\.77\.2 +(\d+) +<- -> 198\.51\.100\.1 +(\d+) +\[198\.51\.100\.2 5001\]$`)
	found := false
	for _, l := range ss {
		if m := re.FindStringSubmatch(l); m != nil {
			found = true
			if m[2] != strconv.Itoa(port) {
				t.Errorf("ipnat -l maps to port %s, the server saw %d: %q", m[2], port, l)
			}
		}
	}
	if !found {
		t.Errorf("ipnat -l has no TCP session of the client:\n%s", strings.Join(ss, "\n"))
	}
	// TCP, UDP (2 ports), ICMP, each on IPv4 and IPv6
	if len(ss) < 8 {
		t.Errorf("ipnat -l lists %d sessions, want at least 8:\n%s", len(ss), strings.Join(ss, "\n"))
	}
	t.Logf("ipnat -lv:\n%s", w.mustIPNAT("-lv"))
	st := w.mustIPNAT("-s")
	t.Logf("ipnat -s:\n%s", st)
	for _, want := range []*regexp.Regexp{regexp.MustCompile(`(?m)^([1-9]\d*)\tpackets translated out$`),
		regexp.MustCompile(`(?m)^([1-9]\d*)\tpackets translated in$`), regexp.MustCompile(`(?m)^([1-9]\d*)\tactive$`)} {
		if !want.MatchString(st) {
			t.Errorf("ipnat -s has no %s:\n%s", want, st)
		}
	}
	if out := w.mustIPNAT("-F"); !regexp.MustCompile(`^(\d+) entries flushed from NAT table\n$`).MatchString(out) || strings.HasPrefix(out, "0 ") {
		t.Errorf("ipnat -F: %q", out)
	}
	if ss := w.sessions(); len(ss) != 0 {
		t.Errorf("sessions after ipnat -F:\n%s", strings.Join(ss, "\n"))
	}
	// a new connection still goes through (the rules are still loaded)
	if c, err := w.dial(w.c, gwS4, gwTCP); err != nil {
		t.Errorf("TCP after ipnat -F: %v", err)
	} else {
		c.Close()
	}
	// ipnat -CF takes it all away: the programs are detached
	w.mustIPNAT("-CF")
	w.must(w.in(w.g, func() error {
		d, err := natbpf.OpenPinned(ipfctl.NATPinDir(w.pinDir))
		if err != nil {
			return err
		}
		defer d.Close()
		if a := d.Attached(); len(a) != 0 {
			return fmt.Errorf("NAT still attached to %v with no rules and no sessions", a)
		}
		return nil
	}))
	if c, err := net.DialTimeout("tcp", "127.0.0.1:1", 10*time.Millisecond); err == nil {
		c.Close()
	}
	if err := w.udp(w.c, gwS4, gwUDP); err == nil {
		t.Errorf("UDP went through with NAT removed (the server has no route back)")
	}
}

// TestPrivilegedNATRdr forwards ports of the gateway's outside address to
// the client's servers (rdr), TCP and UDP, IPv4 and IPv6: the outside
// host reaches them and its address is kept.
func TestPrivilegedNATRdr(t *testing.T) {
	w := newGW(t)
	peers4 := w.serve(w.c, gwC4, 80, 53)
	peers6 := w.serve(w.c, gwC6, 80, 53)
	w.mustIPNAT("-f", w.file("rdr.nat", `rdr gs0 198.51.100.1/32 port 8080 -> 192.168.77.2 port 80 tcp
rdr gs0 198.51.100.1/32 port 8053 -> 192.168.77.2 port 53 udp
rdr gs0 inet6 2001:db8:100::1/128 port 8080 -> fd77::2 port 80 tcp
rdr gs0 inet6 2001:db8:100::1/128 port 8053 -> fd77::2 port 53 udp
`))
	for _, x := range []struct {
		addr  string
		peers chan string
		want  string
	}{{gwGS4, peers4, gwS4}, {gwGS6, peers6, gwS6}} {
		c, err := w.dial(w.s, x.addr, 8080)
		if err != nil {
			t.Fatalf("TCP to %s port 8080 (rdr): %v", x.addr, err)
		}
		c.Close()
		if from, _ := hostPort(<-x.peers); from.String() != x.want {
			t.Errorf("the client's server saw %s, want the outside host %s", from, x.want)
		}
		if err := w.udp(w.s, x.addr, 8053); err != nil {
			t.Errorf("UDP to %s port 8053 (rdr): %v", x.addr, err)
		}
		// a port no rule redirects is the gateway's own: refused
		if c, err := w.dial(w.s, x.addr, 8081); err == nil {
			c.Close()
			t.Errorf("TCP to %s port 8081 reached something", x.addr)
		}
	}
	ss := strings.Join(w.sessions(), "\n")
	for _, want := range []string{"RDR 192.168.77.2    80    <- -> 198.51.100.1    8080  [198.51.100.2 ",
		"RDR 192.168.77.2    53    <- -> 198.51.100.1    8053  [198.51.100.2 ", "RDR fd77::2 80    <- -> 2001:db8:100::1 8080  [2001:db8:100::2 "} {
		if !strings.Contains(ss, want) {
			t.Errorf("ipnat -l has no %q:\n%s", want, ss)
		}
	}
}

// TestPrivilegedNATBimap maps the client 1:1 to an outside address, both
// ways.
func TestPrivilegedNATBimap(t *testing.T) {
	w := newGW(t)
	peersS := w.serve(w.s, gwS4, gwTCP, gwUDP)
	peersC := w.serve(w.c, gwC4, gwTCP, gwUDP)
	w.routeVia("198.51.100.77/32")
	w.mustIPNAT("-f", w.file("bimap.nat", "bimap gs0 192.168.77.2/32 -> 198.51.100.77/32\n"))
	c, err := w.dial(w.c, gwS4, gwTCP)
	if err != nil {
		t.Fatalf("TCP out through bimap: %v", err)
	}
	local := c.LocalAddr().String()
	c.Close()
	from, port := hostPort(<-peersS)
	_, lport := hostPort(local)
	if from.String() != "198.51.100.77" || port != lport {
		t.Errorf("the server saw %s:%d, want 198.51.100.77:%d", from, port, lport)
	}
	c, err = w.dial(w.s, "198.51.100.77", gwTCP)
	if err != nil {
		t.Fatalf("TCP in through bimap: %v", err)
	}
	c.Close()
	if from, _ := hostPort(<-peersC); from.String() != gwS4 {
		t.Errorf("the client saw %s, want %s", from, gwS4)
	}
	if err := w.udp(w.s, "198.51.100.77", gwUDP); err != nil {
		t.Errorf("UDP in through bimap: %v", err)
	}
	ss := strings.Join(w.sessions(), "\n")
	if !strings.Contains(ss, "BIMAP 192.168.77.2 ") {
		t.Errorf("ipnat -l has no BIMAP session:\n%s", ss)
	}
}

// TestPrivilegedNATMapBlock gives the client a block of ports of an
// outside address (map-block ... ports 256): the port the server sees is
// the one IPFilter's formula gives.
func TestPrivilegedNATMapBlock(t *testing.T) {
	w := newGW(t)
	peers := w.serve(w.s, gwS4, gwTCP, gwUDP)
	w.routeVia("198.51.100.64/30")
	w.mustIPNAT("-f", w.file("block.nat", "map-block gs0 192.168.77.0/24 -> 198.51.100.64/30 ports 256\n"))
	for i := 0; i < 3; i++ {
		c, err := w.dial(w.c, gwS4, gwTCP)
		if err != nil {
			t.Fatalf("TCP through map-block: %v", err)
		}
		_, lport := hostPort(c.LocalAddr().String())
		c.Close()
		from, port := hostPort(<-peers)
		// h = 2 (the client's host part), 252 addresses per new address:
		// address .64 + 2/252, port 1024 + sport%256 + 256*(2%252)
		if want := 1024 + lport%256 + 512; from.String() != "198.51.100.64" || port != want {
			t.Errorf("the server saw %s:%d, want 198.51.100.64:%d (client port %d)", from, port, want, lport)
		}
	}
	if err := w.udp(w.c, gwS4, gwUDP); err != nil {
		t.Errorf("UDP through map-block: %v", err)
	}
	ss := strings.Join(w.sessions(), "\n")
	if !strings.Contains(ss, "MAP-BLOCK 192.168.77.2 ") {
		t.Errorf("ipnat -l has no MAP-BLOCK session:\n%s", ss)
	}
}

// TestPrivilegedNATHost translates the gateway's own traffic: a map on
// its outgoing connections and a rdr of an outside port to a local one.
func TestPrivilegedNATHost(t *testing.T) {
	w := newGW(t)
	peersS := w.serve(w.s, gwS4, gwTCP, gwUDP)
	peersG := w.serve(w.g, gwGS4, 7022, 0)
	w.routeVia("198.51.100.50/32")
	w.mustIPNAT("-f", w.file("host.nat", `map gs0 198.51.100.1/32 -> 198.51.100.50/32
rdr gs0 198.51.100.1/32 port 2222 -> 198.51.100.1 port 7022 tcp
`))
	c, err := w.dial(w.g, gwS4, gwTCP)
	if err != nil {
		t.Fatalf("the gateway's own TCP through map: %v", err)
	}
	c.Close()
	if from, _ := hostPort(<-peersS); from.String() != "198.51.100.50" {
		t.Errorf("the server saw the gateway's connection from %s, want 198.51.100.50", from)
	}
	if err := w.udp(w.g, gwS4, gwUDP); err != nil {
		t.Errorf("the gateway's own UDP through map: %v", err)
	}
	c, err = w.dial(w.s, gwGS4, 2222)
	if err != nil {
		t.Fatalf("TCP to the gateway's port 2222 (rdr to a local port): %v", err)
	}
	c.Close()
	if from, _ := hostPort(<-peersG); from.String() != gwS4 {
		t.Errorf("the local server saw %s, want %s", from, gwS4)
	}
}

// TestPrivilegedNATWithFilter runs the filter and NAT together: rules
// see untranslated packets outbound (the filter runs before NAT) and
// translated ones inbound (NAT runs before the filter), keep state works
// across the translation, and the programs stay in that order whichever
// of ipf and ipnat was loaded first. ipf -D removes NAT too.
func TestPrivilegedNATWithFilter(t *testing.T) {
	for _, natFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("natFirst=%v", natFirst), func(t *testing.T) {
			w := newGW(t)
			w.serve(w.s, gwS4, gwTCP, gwUDP)
			w.serve(w.c, gwC4, 80, 53)
			ipfRules := w.file("gw.ipf", `block out quick on gs0 proto udp from 192.168.77.2 to any port = 5002
pass out quick on gs0 proto tcp from any to any keep state
pass out quick on gs0 proto udp from any to any keep state
block in quick on gs0 proto tcp from any to 192.168.77.2 port = 80
pass in quick on gs0 proto tcp from any to 192.168.77.2 port = 81 keep state
block in quick on gs0 all
`)
			natRules := w.file("gw.nat", `map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto
rdr gs0 198.51.100.1/32 port 8080 -> 192.168.77.2 port 80 tcp
rdr gs0 198.51.100.1/32 port 8081 -> 192.168.77.2 port 81 tcp
`)
			w.serve(w.c, gwC4, 81, 0)
			if natFirst {
				w.mustIPNAT("-f", natRules)
				w.ipf("-Fa", "-f", ipfRules)
			} else {
				w.ipf("-Fa", "-f", ipfRules)
				w.mustIPNAT("-f", natRules)
			}
			w.checkOrder("gs0")
			c, err := w.dial(w.c, gwS4, gwTCP)
			if err != nil {
				t.Fatalf("TCP out (filter keep state, then NAT): %v", err)
			}
			c.Close()
			// the filter blocks by the client's own address, which NAT
			// replaces only after the filter
			if err := w.udp(w.c, gwS4, gwUDP); err == nil {
				t.Errorf("UDP from 192.168.77.2 to port 5002 passed a rule that blocks it")
			}
			if err := w.udp(w.c, gwS4, gwUDP+1); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("UDP to a closed port with the filter: got %v, want ECONNREFUSED", err)
			}
			// inbound the filter sees the redirected destination
			if c, err := w.dial(w.s, gwGS4, 8080); err == nil {
				c.Close()
				t.Errorf("TCP to port 8080 passed; the filter blocks its target 192.168.77.2 port 80")
			}
			if c, err := w.dial(w.s, gwGS4, 8081); err != nil {
				t.Errorf("TCP to port 8081, redirected to a port the filter passes: %v", err)
			} else {
				c.Close()
			}
			w.ipf("-D")
			w.must(w.in(w.g, func() error {
				if _, err := os.Stat(ipfctl.NATPinDir(w.pinDir)); !os.IsNotExist(err) {
					return fmt.Errorf("NAT pins after ipf -D: %v", err)
				}
				return nil
			}))
			if c, err := w.dial(w.c, gwS4, gwTCP); err == nil {
				c.Close()
				t.Errorf("TCP went through after ipf -D removed NAT (the server has no route back)")
			}
		})
	}
}

// checkOrder checks that on ifname NAT runs first inbound and last
// outbound, with the filter between, its programs plain.
func (w *gwTopo) checkOrder(ifname string) {
	w.t.Helper()
	w.must(w.in(w.g, func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		d, err := natbpf.OpenPinned(ipfctl.NATPinDir(w.pinDir))
		if err != nil {
			return err
		}
		defer d.Close()
		// a move behind the filter makes them general for its time,
		// plain again after (what is attached is what is pinned: below)
		if !d.Plain() {
			return fmt.Errorf("%s: NAT's programs are not plain", ifname)
		}
		for _, out := range []bool{false, true} {
			ids, err := natbpf.TCXOrder(ifc.Index, out)
			if err != nil {
				return err
			}
			id, err := natbpf.ProgramID(d.Program(out))
			if err != nil {
				return err
			}
			pos := 0
			if out {
				pos = len(ids) - 1
			} else if len(ids) > 0 && isPrefix(ids[0]) {
				// NAT inside the filter (natw): its prefix runs first
				pos = 1
			}
			if len(ids) < 2 || ids[pos] != id {
				return fmt.Errorf("%s (out=%v): programs %v %v, want NAT (%d) %s with the filter", ifname, out, ids, progNames(ids), id,
					map[bool]string{false: "first", true: "last"}[out])
			}
		}
		return nil
	}))
}

func progNames(ids []ebpf.ProgramID) []string {
	var out []string
	for _, id := range ids {
		name := "?"
		if p, err := ebpf.NewProgramFromID(id); err == nil {
			if info, err := p.Info(); err == nil {
				name = info.Name
			}
			p.Close()
		}
		out = append(out, name)
	}
	return out
}

// isPrefix reports whether id is the filter's inline NAT prefix program.
func isPrefix(id ebpf.ProgramID) bool {
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return false
	}
	defer p.Close()
	info, err := p.Info()
	return err == nil && strings.HasPrefix(info.Name, "sluice_ingress_")
}

// ftpAddr is a second address of the client (and of the inside FTP
// server), chosen so that the PORT and 227 lines change length when the
// proxy puts the gateway's address in: the sequence numbers of the rest of
// the control connection must then be shifted right.
const ftpAddr = "10.9.9.2"

// addClientAddr gives the client ftpAddr, routed by the gateway.
func (w *gwTopo) addClientAddr() {
	w.t.Helper()
	hc, err := netlink.NewHandleAt(w.c)
	w.must(err)
	defer hc.Close()
	l, err := hc.LinkByName("vc0")
	w.must(err)
	a, err := netlink.ParseAddr(ftpAddr + "/32")
	w.must(err)
	w.must(hc.AddrAdd(l, a))
	hg, err := netlink.NewHandleAt(w.g)
	w.must(err)
	defer hg.Close()
	gl, err := hg.LinkByName("gc0")
	w.must(err)
	_, dst, _ := net.ParseCIDR(ftpAddr + "/32")
	w.must(hg.RouteAdd(&netlink.Route{LinkIndex: gl.Attrs().Index, Dst: dst, Gw: net.ParseIP(gwC4)}))
}

// ftpServer runs the test FTP server at addr:21 in ns.
func (w *gwTopo) ftpServer(ns netns.NsHandle, addr string, files map[string][]byte) {
	w.t.Helper()
	var ln net.Listener
	w.must(w.in(ns, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(addr, "21"))
		return err
	}))
	s := ftptest.Serve(ln, files, func(network, a string) (l net.Listener, err error) {
		err = w.in(ns, func() error {
			l, err = net.Listen(network, a)
			return err
		})
		return l, err
	}, func(network, local, a string) (c net.Conn, err error) {
		err = w.in(ns, func() error {
			c, err = ftptest.Dial(network, local, a)
			return err
		})
		return c, err
	})
	w.onClose(func() {
		if err := s.Close(); err != nil {
			w.t.Errorf("FTP server: %v", err)
		}
	})
}

// ftpSession logs in from local (in ns) to server:21 and fetches the file
// four ways: PORT, EPRT, PASV, EPSV.
func (w *gwTopo) ftpSession(ns netns.NsHandle, local, server string, want []byte) {
	w.t.Helper()
	var cc net.Conn
	w.must(w.in(ns, func() (err error) {
		d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		cc, err = d.Dial("tcp4", net.JoinHostPort(server, "21"))
		return err
	}))
	cl, err := ftptest.NewClient(cc)
	if err != nil {
		w.t.Fatalf("FTP greeting through the gateway: %v", err)
	}
	defer cl.Close()
	if err := cl.Login("anonymous", "nat@sluice"); err != nil {
		w.t.Fatalf("FTP login: %v", err)
	}
	for round := 0; round < 2; round++ {
		for _, eprt := range []bool{false, true} {
			var dl net.Listener
			w.must(w.in(ns, func() (err error) {
				dl, err = net.Listen("tcp4", net.JoinHostPort(local, "0"))
				return err
			}))
			got, err := cl.RetrActive("file", dl, eprt)
			dl.Close()
			if err != nil || !bytes.Equal(got, want) {
				w.t.Errorf("active FTP (EPRT %v, round %d): %d bytes, %v", eprt, round, len(got), err)
			}
		}
		for _, epsv := range []bool{false, true} {
			got, announced, err := cl.RetrPassive("file", epsv, func(a string) (c net.Conn, err error) {
				err = w.in(ns, func() error {
					d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
					c, err = d.Dial("tcp4", a)
					return err
				})
				return c, err
			})
			if err != nil || !bytes.Equal(got, want) {
				w.t.Errorf("passive FTP (EPSV %v, round %d, data at %s): %d bytes, %v", epsv, round, announced, len(got), err)
			}
		}
	}
}

// TestPrivilegedNATFTP runs FTP through the ftp proxy, active and
// passive, PORT/EPRT/PASV/EPSV: with the client behind a masquerade (the
// proxy rewrites PORT and EPRT, and opens the server's connections back),
// and with the server behind a rdr (it rewrites the 227 reply and opens
// the client's connections in). The rewritten lines change length, so the
// control connection only survives its later commands if the sequence
// numbers are shifted right.
func TestPrivilegedNATFTP(t *testing.T) {
	file := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	t.Run("map", func(t *testing.T) {
		w := newGW(t)
		w.addClientAddr()
		w.ftpServer(w.s, gwS4, map[string][]byte{"file": file})
		w.mustIPNAT("-f", w.file("ftp.nat", `map gs0 10.9.9.0/24 -> 0/32 proxy port ftp ftp/tcp
map gs0 10.9.9.0/24 -> 0/32 portmap tcp/udp auto
`))
		w.ftpSession(w.c, ftpAddr, gwS4, file)
		ss := strings.Join(w.sessions(), "\n")
		if !regexp.MustCompile(`MAP 10\.9\.9\.2 +\d+ +<- -> 198\.51\.100\.1 +\d+ +\[198\.51\.100\.2 21\]\n\tproxy active`).MatchString(ss) {
			t.Errorf("ipnat -l has no proxied control session:\n%s", ss)
		}
		if st := w.mustIPNAT("-s"); !regexp.MustCompile(`(?m)^0\tproxy create fail (in|out)$`).MatchString(st) {
			t.Errorf("ipnat -s:\n%s", st)
		}
	})
	// with a filter that passes only the control connection: the data
	// connections pass by what the proxy opened, as with IPFilter's
	// proxy state entries
	t.Run("map+filter", func(t *testing.T) {
		w := newGW(t)
		w.addClientAddr()
		w.ftpServer(w.s, gwS4, map[string][]byte{"file": file})
		w.mustIPNAT("-f", w.file("ftp.nat", `map gs0 10.9.9.0/24 -> 0/32 proxy port ftp ftp/tcp
map gs0 10.9.9.0/24 -> 0/32 portmap tcp/udp auto
`))
		w.ipf("-Fa", "-f", w.file("ftp.ipf", `pass out quick on gs0 proto tcp from any to any port = ftp flags S keep state
block out quick on gs0 all
block in quick on gs0 all
`))
		w.checkOrder("gs0")
		w.ftpSession(w.c, ftpAddr, gwS4, file)
		// anything else is blocked
		if c, err := w.dial(w.c, gwS4, gwTCP); err == nil {
			c.Close()
			t.Errorf("TCP to port %d passed a filter that blocks it", gwTCP)
		}
	})
	t.Run("rdr", func(t *testing.T) {
		w := newGW(t)
		w.addClientAddr()
		w.ftpServer(w.c, ftpAddr, map[string][]byte{"file": file})
		w.mustIPNAT("-f", w.file("ftp.nat", "rdr gs0 198.51.100.1/32 port 21 -> 10.9.9.2 port 21 tcp proxy ftp\n"))
		w.ftpSession(w.s, gwS4, gwGS4, file)
		ss := strings.Join(w.sessions(), "\n")
		if !strings.Contains(ss, "RDR 10.9.9.2        21    <- -> 198.51.100.1    21    [198.51.100.2 ") {
			t.Errorf("ipnat -l has no redirected control session:\n%s", ss)
		}
	})
}

// TestPrivilegedNATFragmentsAndMSS sends a UDP datagram bigger than the
// links' MTU through the masquerade: its fragments are translated by the
// session of the first one, both ways. And a rule's mssclamp lowers the
// MSS the server is offered (the SYN's checksum must stay right for the
// connection to open at all).
func TestPrivilegedNATFragmentsAndMSS(t *testing.T) {
	w := newGW(t)
	peers := w.serve(w.s, gwS4, gwTCP, gwUDP)
	w.mustIPNAT("-f", w.file("frag.nat", `map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto mssclamp 500
`))
	var c net.Conn
	w.must(w.in(w.c, func() (err error) {
		c, err = net.Dial("udp4", net.JoinHostPort(gwS4, strconv.Itoa(gwUDP)))
		return err
	}))
	defer c.Close()
	big := bytes.Repeat([]byte("fragment "), 400) // 3600 bytes: three fragments each way
	if err := echo(c, big, 2*time.Second); err != nil {
		t.Errorf("a fragmented UDP datagram through the masquerade: %v", err)
	}
	st := w.mustIPNAT("-s")
	for _, side := range []string{"in", "out"} {
		if m := regexp.MustCompile(`(?m)^(\d+)\tpackets translated ` + side + `$`).FindStringSubmatch(st); m == nil || m[1] == "0" || m[1] == "1" {
			t.Errorf("packets translated %s: %v, want the fragments counted", side, m)
		}
	}
	// the server's side of the connection learns the MSS the SYN offered
	var ln net.Listener
	w.must(w.in(w.s, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(gwS4, "5011"))
		return err
	}))
	defer ln.Close()
	mss := make(chan int, 1)
	go func() {
		sc, err := ln.Accept()
		if err != nil {
			mss <- -1
			return
		}
		defer sc.Close()
		raw, _ := sc.(*net.TCPConn).SyscallConn()
		v := -1
		raw.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) })
		mss <- v
	}()
	cc, err := w.dial(w.c, gwS4, 5011)
	if err == nil {
		cc.Close()
	}
	_ = peers
	if v := <-mss; v <= 0 || v > 500 {
		t.Errorf("the server's MSS toward the client: %d, want at most the clamp, 500", v)
	}
}

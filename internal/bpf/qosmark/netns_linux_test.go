//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"sluice/internal/qos"
	"sluice/internal/qos/engine"
	"sluice/internal/qos/tc"
	"sluice/internal/testutil"
	"sluice/internal/testutil/bpffs"
	"sluice/internal/testutil/netnstest"
)

// testPinDir returns a fresh pin directory on a private bpffs mounted for
// the test (never the host's /sys/fs/bpf).
func testPinDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(bpffs.Mount(t), "sluice-qos")
}

// topo is two namespaces joined by a veth pair qa0 (in a) — qb0 (in b),
// plus VLAN 10 devices qv10 on both ends.
type topo struct {
	a, b   netns.NsHandle
	pindir string
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireRoot(t)
	tp := &topo{a: netnstest.New(t), b: netnstest.New(t)}
	tp.pindir = testPinDir(t)
	t.Cleanup(func() {
		if err := netnstest.Do(tp.a, func() error { return Disable(tp.pindir) }); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	err := netnstest.Do(tp.a, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "qa0"}, PeerName: "qb0", PeerNamespace: netlink.NsFd(tp.b)}); err != nil {
			return fmt.Errorf("adding veth: %w", err)
		}
		return setup("qa0", "10.99.0.1/24", "fd00:99::1/64")
	})
	if err != nil {
		if os.IsNotExist(err) {
			testutil.SkipOrFail(t, "no veth support: %v", err)
		}
		t.Fatal(err)
	}
	if err := netnstest.Do(tp.b, func() error { return setup("qb0", "10.99.0.2/24", "fd00:99::2/64") }); err != nil {
		t.Fatal(err)
	}
	return tp
}

func setup(dev, v4, v6 string) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	for _, a := range []string{v4, v6} {
		addr, _ := netlink.ParseAddr(a)
		addr.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("%s: adding %s: %w", dev, a, err)
		}
	}
	return netlink.LinkSetUp(l)
}

// addVLAN adds VLAN 10 device qv10 on dev; errors.Is(err,
// unix.EOPNOTSUPP) means the kernel has no 802.1Q support.
func addVLAN(dev, vlan4 string) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	v := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "qv10", ParentIndex: l.Attrs().Index}, VlanId: 10}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("adding vlan: %w", err)
	}
	vl, err := netlink.LinkByName("qv10")
	if err != nil {
		return err
	}
	addr, _ := netlink.ParseAddr(vlan4)
	if err := netlink.AddrAdd(vl, addr); err != nil {
		return err
	}
	return netlink.LinkSetUp(vl)
}

func (tp *topo) load(t *testing.T, conf string, opts Options) *Report {
	t.Helper()
	rs := compile(t, conf)
	opts.PinDir = tp.pindir
	var rep *Report
	err := netnstest.Do(tp.a, func() error {
		var err error
		rep, err = Load(rs, opts)
		return err
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return rep
}

// capture is an AF_PACKET socket on a device in some namespace.
type capture struct{ fd int }

func (tp *topo) capture(t *testing.T, ns netns.NsHandle, dev string) *capture {
	t.Helper()
	c := &capture{}
	err := netnstest.Do(ns, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		c.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index})
	})
	if err != nil {
		t.Fatalf("capture on %s: %v", dev, err)
	}
	t.Cleanup(func() { unix.Close(c.fd) })
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// frameInfo is what the tests look at in a captured frame.
type frameInfo struct {
	vlan bool
	pcp  uint8
	l3   []byte
}

// next returns the next frame, or ok=false after the socket timeout.
func (c *capture) next() (frameInfo, bool) {
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	for {
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, 0)
		if err != nil {
			return frameInfo{}, false
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		var fi frameInfo
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
				aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
				if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
					fi.vlan, fi.pcp = true, uint8(aux.Vlan_tci>>13)
				}
			}
		}
		f := buf[:n]
		if len(f) < 14 {
			continue
		}
		et, off := binary.BigEndian.Uint16(f[12:]), 14
		if et == 0x8100 && len(f) >= 18 { // tag left in the frame
			fi.vlan, fi.pcp = true, f[14]>>5
			et, off = binary.BigEndian.Uint16(f[16:]), 18
		}
		if et != 0x0800 && et != 0x86DD {
			continue
		}
		fi.l3 = append([]byte(nil), f[off:]...)
		return fi, true
	}
}

// udpSend sends n datagrams carrying tag from namespace ns. The socket
// is unconnected so ICMP port-unreachable answers do not fail the writes.
func udpSend(t *testing.T, ns netns.NsHandle, network, addr, tag string, n int) {
	t.Helper()
	err := netnstest.Do(ns, func() error {
		dst, err := net.ResolveUDPAddr(network, addr)
		if err != nil {
			return err
		}
		c, err := net.ListenUDP(network, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		for i := 0; i < n; i++ {
			if _, err := c.WriteToUDP([]byte("sluice ipqos "+tag), dst); err != nil {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending to %s: %v", addr, err)
	}
}

// tagged reports whether a captured UDP packet to port carries tag.
func tagged(fi frameInfo, port int, tag string) bool {
	return udpDport(fi.l3) == port && bytes.HasSuffix(fi.l3, []byte("sluice ipqos "+tag))
}

// waitFor reads frames until match accepts one or the deadline passes.
func (c *capture) waitFor(d time.Duration, match func(frameInfo) bool) (frameInfo, bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		fi, ok := c.next()
		if ok && match(fi) {
			return fi, true
		}
	}
	return frameInfo{}, false
}

func udpDport(l3 []byte) int {
	switch l3[0] >> 4 {
	case 4:
		ihl := int(l3[0]&15) * 4
		if len(l3) >= ihl+4 && l3[9] == 17 {
			return int(binary.BigEndian.Uint16(l3[ihl+2:]))
		}
	case 6:
		if len(l3) >= 44 && l3[6] == 17 {
			return int(binary.BigEndian.Uint16(l3[42:]))
		}
	}
	return -1
}

const markConf = `
filter voice {
    udp
    dstport 9999
    net 0x800
}
filter voice6 {
    net 0x86DD
    dstport 9999
    protocol 17
}
policy ef {
    uses voice
    uses voice6
    dscp 46
}
adapter qa0 {
    uses ef
}
`

func TestPrivilegedMarkOnTheWire(t *testing.T) {
	tp := newTopo(t)
	rep := tp.load(t, markConf, Options{LinkRate: func(string) uint64 { return 10e9 }})
	if len(rep.Attached) != 1 {
		t.Fatalf("attached %v, want [qa0]", rep.Attached)
	}
	capB := tp.capture(t, tp.b, "qb0")
	for _, tc := range []struct {
		network, addr string
		port          int
		wantDSCP      uint8
	}{
		{"udp4", "10.99.0.2:9999", 9999, 46},
		{"udp4", "10.99.0.2:9998", 9998, 0},
		{"udp6", "[fd00:99::2]:9999", 9999, 46},
	} {
		tag := tc.network + tc.addr
		udpSend(t, tp.a, tc.network, tc.addr, tag, 5)
		fi, ok := capB.waitFor(2*time.Second, func(fi frameInfo) bool { return tagged(fi, tc.port, tag) })
		if !ok {
			t.Fatalf("%s %s: no packet captured on qb0", tc.network, tc.addr)
		}
		tcl, _ := engine.TrafficClass(fi.l3)
		if got := tcl >> 2; got != tc.wantDSCP {
			t.Errorf("%s %s: DSCP on the wire %d, want %d", tc.network, tc.addr, got, tc.wantDSCP)
		}
		if fi.l3[0]>>4 == 4 && engine.Checksum(fi.l3[:20]) != 0 {
			t.Errorf("%s %s: IPv4 header checksum on the wire does not verify", tc.network, tc.addr)
		}
	}
	var stats []qos.Stats
	if err := netnstest.Do(tp.a, func() (err error) { stats, err = ReadStats(tp.pindir); return }); err != nil {
		t.Fatal(err)
	}
	// Exactly the ten datagrams to port 9999 (five per family); the
	// unmatched ones and neighbour discovery are not counted.
	if p := stats[0].Policies[0]; p.Packets != 10 || p.Filters[0].Packets != 5 || p.Filters[1].Packets != 5 {
		t.Errorf("counters: policy %d pkts, filters %d/%d, want 10, 5, 5", p.Packets, p.Filters[0].Packets, p.Filters[1].Packets)
	}
	want := uint64(5 * (20 + 8 + len("sluice ipqos udp410.99.0.2:9999")))
	if p := stats[0].Policies[0]; p.Filters[0].Bytes != want {
		t.Errorf("voice filter bytes: got %d, want %d", p.Filters[0].Bytes, want)
	}
	if err := netnstest.Do(tp.a, func() (err error) {
		if err = ResetStats(tp.pindir); err == nil {
			stats, err = ReadStats(tp.pindir)
		}
		return
	}); err != nil {
		t.Fatal(err)
	}
	if p := stats[0].Policies[0]; p.Packets != 0 || p.Bytes != 0 || p.Filters[0].Packets != 0 || p.Filters[1].Bytes != 0 {
		t.Errorf("after reset: %+v, want zero counters", p)
	}
	var si StateInfo
	if err := netnstest.Do(tp.a, func() (err error) { si, err = GetState(tp.pindir); return }); err != nil {
		t.Fatal(err)
	}
	if si.State != Filtering {
		t.Errorf("state: got %v, want %v", si.State, Filtering)
	}
}

func TestPrivilegedVLANPriority(t *testing.T) {
	tp := newTopo(t)
	if err := netnstest.Do(tp.a, func() error { return addVLAN("qa0", "10.98.0.1/24") }); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			// Not a missing privilege: this kernel is built without
			// CONFIG_VLAN_8021Q, so there is no VLAN device to test.
			t.Skipf("kernel lacks 802.1Q VLAN support: %v", err)
		}
		t.Fatal(err)
	}
	if err := netnstest.Do(tp.b, func() error { return addVLAN("qb0", "10.98.0.2/24") }); err != nil {
		t.Fatal(err)
	}
	conf := `
filter voice {
    udp
    dstport 9999
}
policy ef {
    uses voice
    dscp 46
    vpr 5
}
adapter qv10 {
    uses ef
}
`
	tp.load(t, conf, Options{LinkRate: func(string) uint64 { return 10e9 }})
	capB := tp.capture(t, tp.b, "qb0")
	for _, tc := range []struct {
		addr    string
		port    int
		wantPCP uint8
	}{
		{"10.98.0.2:9999", 9999, 5},
		{"10.98.0.2:9998", 9998, 0},
	} {
		udpSend(t, tp.a, "udp4", tc.addr, tc.addr, 5)
		fi, ok := capB.waitFor(2*time.Second, func(fi frameInfo) bool { return fi.vlan && tagged(fi, tc.port, tc.addr) })
		if !ok {
			t.Fatalf("%s: no tagged packet captured on qb0", tc.addr)
		}
		if fi.pcp != tc.wantPCP {
			t.Errorf("%s: PCP %d, want %d", tc.addr, fi.pcp, tc.wantPCP)
		}
	}
}

// tcpStreams runs one TCP sender per port from a to b for d and returns
// the bits/s each receiver counted after the first `warm` of the run.
func (tp *topo) tcpStreams(t *testing.T, ports []int, warm, d time.Duration) []float64 {
	t.Helper()
	var counted = make([]atomic.Int64, len(ports))
	var measuring atomic.Bool
	lns := make([]net.Listener, len(ports))
	for i, p := range ports {
		err := netnstest.Do(tp.b, func() (err error) {
			lns[i], err = net.Listen("tcp4", fmt.Sprintf("10.99.0.2:%d", p))
			return
		})
		if err != nil {
			t.Fatal(err)
		}
		defer lns[i].Close()
		go func(i int) {
			c, err := lns[i].Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 128*1024)
			for {
				n, err := c.Read(buf)
				if measuring.Load() {
					counted[i].Add(int64(n))
				}
				if err != nil {
					return
				}
			}
		}(i)
	}
	conns := make([]net.Conn, len(ports))
	for i, p := range ports {
		err := netnstest.Do(tp.a, func() (err error) {
			conns[i], err = net.Dial("tcp4", fmt.Sprintf("10.99.0.2:%d", p))
			return
		})
		if err != nil {
			t.Fatal(err)
		}
		go func(c net.Conn) {
			buf := make([]byte, 64*1024)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}(conns[i])
	}
	time.Sleep(warm)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(d)
	measuring.Store(false)
	el := time.Since(start).Seconds()
	for _, c := range conns {
		c.Close()
	}
	out := make([]float64, len(ports))
	for i := range ports {
		out[i] = float64(counted[i].Load()) * 8 / el
	}
	return out
}

func TestPrivilegedMaxCapsTCP(t *testing.T) {
	tp := newTopo(t)
	conf := `
filter bulk {
    tcp
    dstport 5201
}
policy capped {
    uses bulk
    max 20m
    dscp 8
}
adapter qa0 {
    uses capped
}
`
	tp.load(t, conf, Options{LinkRate: func(string) uint64 { return 10e9 }})
	rates := tp.tcpStreams(t, []int{5201}, 500*time.Millisecond, 2*time.Second)
	// HTB meters frames: 1514 bytes on the wire carry 1448 bytes of TCP
	// payload (MSS with timestamps on a 1500-byte MTU).
	const want, wire = 20e6, 1514.0 / 1448.0
	t.Logf("capped stream: %.2f Mbit/s goodput, %.2f Mbit/s on the wire (max 20m)", rates[0]/1e6, rates[0]*wire/1e6)
	if r := rates[0] * wire; r < want*0.9 || r > want*1.1 {
		t.Errorf("capped TCP stream ran at %.2f Mbit/s on the wire, want 20 Mbit/s ±10%%", r/1e6)
	}
}

func TestPrivilegedResKeepsShare(t *testing.T) {
	tp := newTopo(t)
	conf := `
filter a_f {
    tcp
    dstport 5201
}
filter b_f {
    tcp
    dstport 5202
}
policy gold {
    uses a_f
    res 75%
}
policy bronze {
    uses b_f
    res 10%
}
adapter qa0 {
    uses gold
    uses bronze
}
`
	// A 40 Mbit/s "link" makes the two streams compete for it.
	tp.load(t, conf, Options{LinkRate: func(string) uint64 { return 40e6 }})
	rates := tp.tcpStreams(t, []int{5201, 5202}, 500*time.Millisecond, 2*time.Second)
	t.Logf("gold (res 30 Mbit/s): %.2f Mbit/s, bronze (res 4 Mbit/s): %.2f Mbit/s", rates[0]/1e6, rates[1]/1e6)
	if rates[0] < 30e6*0.9 {
		t.Errorf("gold got %.2f Mbit/s under competing load, want at least its 30 Mbit/s reservation -10%%", rates[0]/1e6)
	}
	if rates[1] < 4e6*0.9 {
		t.Errorf("bronze got %.2f Mbit/s, want at least its 4 Mbit/s reservation -10%%", rates[1]/1e6)
	}
	if sum := rates[0] + rates[1]; sum > 40e6*1.1 {
		t.Errorf("total %.2f Mbit/s exceeds the 40 Mbit/s link", sum/1e6)
	}
}

func TestPrivilegedReplaceAndFailedLoad(t *testing.T) {
	tp := newTopo(t)
	rate := Options{LinkRate: func(string) uint64 { return 10e9 }}
	tp.load(t, markConf, rate)
	var before string
	if err := netnstest.Do(tp.a, func() (err error) { before, err = ActiveConfig(tp.pindir); return }); err != nil {
		t.Fatal(err)
	}
	bad := `
filter f {
    udp
}
policy p {
    uses f
    dscp 10
    max 5m
}
adapter qa0 {
    uses p
}
adapter nosuch0 {
    uses p
}
`
	rs := compile(t, bad)
	err := netnstest.Do(tp.a, func() error { _, err := Load(rs, Options{PinDir: tp.pindir, LinkRate: rate.LinkRate}); return err })
	if err == nil {
		t.Fatal("loading a configuration with a missing adapter succeeded with abort")
	}
	var after string
	if err := netnstest.Do(tp.a, func() (err error) { after, err = ActiveConfig(tp.pindir); return }); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("failed load changed the active configuration:\n%s", after)
	}
	capB := tp.capture(t, tp.b, "qb0")
	udpSend(t, tp.a, "udp4", "10.99.0.2:9999", "after-failed-load", 3)
	if fi, ok := capB.waitFor(2*time.Second, func(fi frameInfo) bool { return tagged(fi, 9999, "after-failed-load") }); !ok || fi.l3[1]>>2 != 46 {
		t.Errorf("after a failed load the old policy should still mark DSCP 46 (captured %v)", ok)
	}

	// A failure while switching the second adapter puts the first back:
	// old program (DSCP 46) and no HTB on qa0, qa1 not attached.
	if err := netnstest.Do(tp.a, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "qa1"}, PeerName: "qb1"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("qa1")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		t.Fatal(err)
	}
	two := compile(t, strings.Replace(bad, "nosuch0", "qa1", 1))
	err = netnstest.Do(tp.a, func() error {
		_, err := Load(two, Options{PinDir: tp.pindir, LinkRate: rate.LinkRate, failAt: func(name string) error {
			if name == "qa1" {
				return errors.New("injected failure")
			}
			return nil
		}})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Load with an injected failure: got %v", err)
	}
	var htb bool
	var si0 StateInfo
	if err := netnstest.Do(tp.a, func() (err error) {
		if htb, err = tc.Installed("qa0"); err != nil {
			return err
		}
		si0, err = GetState(tp.pindir)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if htb {
		t.Error("rollback left the new HTB qdisc on qa0")
	}
	if si0.State != Filtering || len(si0.Attached) != 1 || si0.Attached[0] != "qa0" {
		t.Errorf("after rollback: state %v attached %v, want filtering on qa0", si0.State, si0.Attached)
	}
	if _, err := os.Stat(filepath.Join(tp.pindir, "links", "qa1")); err == nil {
		t.Error("rollback left a link pinned for qa1")
	}
	udpSend(t, tp.a, "udp4", "10.99.0.2:9999", "after-rollback", 3)
	if fi, ok := capB.waitFor(2*time.Second, func(fi frameInfo) bool { return tagged(fi, 9999, "after-rollback") }); !ok || fi.l3[1]>>2 != 46 {
		t.Errorf("after a rolled-back load the old policy should still mark DSCP 46 (captured %v)", ok)
	}

	// With -continue the good adapter is loaded and the bad one skipped;
	// the program on qa0 is replaced in place.
	var rep *Report
	if err := netnstest.Do(tp.a, func() (err error) {
		rep, err = Load(rs, Options{PinDir: tp.pindir, Continue: true, LinkRate: rate.LinkRate, Log: io.Discard})
		return
	}); err != nil {
		t.Fatalf("Load with Continue: %v", err)
	}
	if len(rep.Skipped) != 1 || len(rep.Attached) != 1 {
		t.Errorf("report: attached %v skipped %v, want qa0 attached, nosuch0 skipped", rep.Attached, rep.Skipped)
	}
	udpSend(t, tp.a, "udp4", "10.99.0.2:9999", "after-replace", 3)
	if fi, ok := capB.waitFor(2*time.Second, func(fi frameInfo) bool { return tagged(fi, 9999, "after-replace") }); !ok || fi.l3[1]>>2 != 10 {
		t.Errorf("after the replace, want DSCP 10 (captured %v)", ok)
	}
	var installed bool
	if err := netnstest.Do(tp.a, func() error { return Unload(tp.pindir, nil) }); err != nil {
		t.Fatal(err)
	}
	var si StateInfo
	if err := netnstest.Do(tp.a, func() (err error) {
		si, err = GetState(tp.pindir)
		if err == nil {
			installed, err = tc.Installed("qa0")
		}
		return
	}); err != nil {
		t.Fatal(err)
	}
	if si.State != Enabled {
		t.Errorf("state after unload: got %v, want %v", si.State, Enabled)
	}
	if installed {
		t.Error("HTB qdisc still installed after unload")
	}
	udpSend(t, tp.a, "udp4", "10.99.0.2:9999", "after-unload", 3)
	if fi, ok := capB.waitFor(2*time.Second, func(fi frameInfo) bool { return tagged(fi, 9999, "after-unload") }); !ok || fi.l3[1] != 0 {
		t.Errorf("after unload traffic must be untouched (captured %v, frame %x)", ok, fi.l3)
	}
}

func TestPrivilegedShaperDrops(t *testing.T) {
	tp := newTopo(t)
	tp.load(t, `
filter f {
    udp
}
policy p {
    uses f
    max 5m
}
adapter qa0 {
    uses p
}
`, Options{LinkRate: func(string) uint64 { return 10e9 }})
	// The 5 Mbit/s cap of p cannot drain a burst from many sockets: the
	// class queue overflows and the drops show in the policy's stats.
	if err := netnstest.Do(tp.a, func() error {
		dst := &unix.SockaddrInet4{Port: 9999, Addr: [4]byte{10, 99, 0, 2}}
		payload := make([]byte, 1400)
		for s := 0; s < 20; s++ {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
			if err != nil {
				return err
			}
			for i := 0; i < 200; i++ {
				_ = unix.Sendto(fd, payload, 0, dst) // EAGAIN once the socket buffer is full
			}
			unix.Close(fd)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var stats []qos.Stats
	if err := netnstest.Do(tp.a, func() (err error) { stats, err = ReadStats(tp.pindir); return }); err != nil {
		t.Fatal(err)
	}
	if d := stats[0].Policies[0].DroppedPackets; d == 0 {
		t.Errorf("policy p dropped no packets after a burst into its 5 Mbit/s cap (stats %+v)", stats[0].Policies[0])
	} else {
		t.Logf("policy p: %d packets counted, %d dropped by the shaper", stats[0].Policies[0].Packets, d)
	}

}

func TestPrivilegedStaleLinkAfterDeviceRecreated(t *testing.T) {
	tp := newTopo(t)
	mk := func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "qs0"}, PeerName: "qs1"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("qs0")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}
	conf := "filter f {\n}\npolicy p {\n    uses f\n    dscp 1\n}\nadapter qs0 {\n    uses p\n}\n"
	if err := netnstest.Do(tp.a, mk); err != nil {
		t.Fatal(err)
	}
	tp.load(t, conf, Options{})
	if err := netnstest.Do(tp.a, func() error {
		l, err := netlink.LinkByName("qs0")
		if err != nil {
			return err
		}
		if err := netlink.LinkDel(l); err != nil {
			return err
		}
		return mk()
	}); err != nil {
		t.Fatal(err)
	}
	var si StateInfo
	if err := netnstest.Do(tp.a, func() (err error) { si, err = GetState(tp.pindir); return }); err != nil {
		t.Fatal(err)
	}
	if si.State != Enabled || len(si.Missing) != 1 {
		t.Errorf("after the device was recreated: state %v missing %v, want enabled-not-filtering, qs0 missing", si.State, si.Missing)
	}
	tp.load(t, conf, Options{}) // must replace the stale link, not fail on it
	if err := netnstest.Do(tp.a, func() (err error) { si, err = GetState(tp.pindir); return }); err != nil {
		t.Fatal(err)
	}
	if si.State != Filtering {
		t.Errorf("after reloading: state %v (missing %v), want filtering", si.State, si.Missing)
	}
}

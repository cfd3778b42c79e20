package ipfstat

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/bpf"
	"sluice/internal/ipfctl"
	"sluice/internal/packet/packettest"
	"sluice/internal/rules/ipf"
	"sluice/internal/testutil"
	"sluice/internal/testutil/bpffs"
)

// frame4 is an Ethernet frame of an IPv4 packet from src to dst: a TCP SYN
// (proto 6) or a UDP datagram (17), no payload.
func frame4(src, dst netip.Addr, proto uint8, sport, dport uint16) []byte {
	l4 := packettest.UDP(sport, dport, nil, false)
	if proto == 6 {
		l4 = packettest.TCP{SrcPort: sport, DstPort: dport, Seq: 1000, Flags: 0x02, Win: 65535}.Bytes()
	}
	eth := make([]byte, 14)
	binary.BigEndian.PutUint16(eth[12:], 0x0800)
	return packettest.Cat(eth, packettest.V4{Src: src.String(), Dst: dst.String(), Proto: proto, Payload: l4}.Bytes())
}

// TestPrivilegedTablesFull: floods fill the kernel's source table (a
// max-srcs rule, more sources than it holds) and keep limit's connection
// table (more connections than it holds); ipfstat -s and the exporter's
// status show the refusals the datapath counted, which the floods made
// (without these lines they were counted and shown nowhere).
func TestPrivilegedTablesFull(t *testing.T) {
	testutil.RequireRoot(t)
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := bpf.Load(bpf.Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer d.Close()
	// the state table holds every entry: only the tables under test fill
	if err := d.SetTunable("state_max", 200000); err != nil {
		t.Fatal(err)
	}
	rs, err := ipf.Parse("test.conf", []byte("pass in quick proto udp from any to any port = 53 keep state (max-srcs 200000)\n"+
		"pass in quick proto tcp from any to any port = 25 flags S keep limit 2\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := bpf.Compile(rs, bpf.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadRules(im, bpf.Active); err != nil {
		t.Fatal(err)
	}
	// 65536 entries each (SRC_CAP, DCA_CAP), and some more
	const n = 65536 + 200
	dst := netip.MustParseAddr("10.200.0.1")
	for i := 0; i < n; i++ {
		src := netip.AddrFrom4([4]byte{10, byte(1 + i>>16), byte(i >> 8), byte(i)})
		for _, f := range [][]byte{frame4(src, dst, 17, 1000, 53), frame4(src, dst, 6, 1000, 25)} {
			if _, _, err := d.Run(false, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.SrcFull < 100 || st.DCAFull < 100 {
		t.Fatalf("after floods of %d sources: %d refused for a full source table, %d for a full connection table; want at least 100 each",
			n, st.SrcFull, st.DCAFull)
	}
	var o, e bytes.Buffer
	if rc := run([]string{"-s"}, &o, &e, func() (ipfctl.Reader, error) { return ipfctl.OpenReader(dir) }); rc != 0 {
		t.Fatalf("ipfstat -s: exit %d: %s", rc, e.String())
	}
	if !strings.Contains(o.String(), fmt.Sprintf("\t%d max-srcs table full\n\t%d keep limit table full\n", st.SrcFull, st.DCAFull)) {
		t.Errorf("ipfstat -s after the floods (%d and %d refused):\n%s\nwant the two counts", st.SrcFull, st.DCAFull, o.String())
	}
	s, err := ipfctl.ReadStatus(dir, filepath.Join(filepath.Dir(dir), "noqos"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Filter == nil || s.Filter.State.SrcsFull != st.SrcFull || s.Filter.State.DCAFull != st.DCAFull {
		t.Errorf("the exporter's status after the floods: %+v, want %d and %d", s.Filter, st.SrcFull, st.DCAFull)
	}
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"sluice/internal/qos"
	"sluice/internal/qos/engine"
	"sluice/internal/rules/ipqos"
	"sluice/internal/testutil"
)

// skBuff mirrors struct __sk_buff (192 bytes in the UAPI) up to the
// fields the tests use; the kernel insists on a full-size ctx_out.
type skBuff struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto uint32
	Priority, IngressIfindex, Ifindex                                           uint32
	_                                                                           [192 - 44]byte
}

const testConf = `
filter ftp_f {
    srcportlo 20
    srcporthi 21
    priority 1
}
filter web {
    http
    addr 10.1.0.0/16
    priority 2
}
filter any_udp {
    udp
}
filter v6 {
    dstaddrlo 2001:db8::1
    dstaddrhi 2001:db8::ff
    dscplo 8
}
filter ef_only {
    dscp 46
    priority 0
}
filter to_gw {
    dstphysaddr 02:00:00:00:00:01
    protocol 1
}
policy ftp_p {
    uses ftp_f
    dscp 10
}
policy web_p {
    uses web
    dscp 34
    vpr 5
}
policy bulk {
    uses any_udp
    uses v6
    dscp 8
    max 10m
}
policy keep_ef {
    uses ef_only
}
policy gw {
    uses to_gw
    dscp 63
}
adapter eth0 {
    uses ftp_p
    uses web_p
    uses bulk
    uses keep_ef
    uses gw
}
`

func compile(t testing.TB, src string) *qos.Ruleset {
	t.Helper()
	cfg, err := ipqos.Parse("test.conf", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := qos.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// loadTest loads the program with the ruleset's first adapter bound to
// the loopback device (ifindex 1), which BPF_PROG_TEST_RUN runs on.
func loadTest(t testing.TB, rs *qos.Ruleset) *qosObjects {
	t.Helper()
	testutil.RequireRoot(t)
	objs, err := newObjects(rs, map[string]port{rs.Adapters[0].Name: {ifindex: 1, l2len: 14}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	return objs
}

var gwMAC = []byte{2, 0, 0, 0, 0, 1}

// frame wraps an IP packet in an Ethernet header.
func frame(dst []byte, l3 []byte) []byte {
	f := make([]byte, 14, 14+len(l3))
	copy(f, dst)
	copy(f[6:], []byte{2, 0, 0, 0, 0, 2})
	et := uint16(0x0800)
	if l3[0]>>4 == 6 {
		et = 0x86DD
	}
	binary.BigEndian.PutUint16(f[12:], et)
	return append(f, l3...)
}

func ipPacket(src, dst string, proto uint8, sport, dport uint16, tc uint8) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	l4 := make([]byte, 20)
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if s.Is4() {
		h := make([]byte, 20, 40)
		h[0], h[1] = 0x45, tc
		binary.BigEndian.PutUint16(h[2:], 40)
		h[8], h[9] = 64, proto
		s4, d4 := s.As4(), d.As4()
		copy(h[12:], s4[:])
		copy(h[16:], d4[:])
		binary.BigEndian.PutUint16(h[10:], engine.IPv4HeaderChecksum(h))
		return append(h, l4...)
	}
	h := make([]byte, 40, 60)
	h[0], h[1] = 0x60|tc>>4, tc<<4|0x0c
	binary.BigEndian.PutUint16(h[4:], 20)
	h[6], h[7] = proto, 64
	s16, d16 := s.As16(), d.As16()
	copy(h[8:], s16[:])
	copy(h[24:], d16[:])
	return append(h, l4...)
}

// mutate sometimes adds IPv4 options or a fragment offset, IPv6
// extension headers (hop-by-hop, destination options, fragments), or cuts
// the packet short, so both datapaths walk the same odd headers.
func mutate(r *rand.Rand, l3 []byte) []byte {
	switch l3[0] >> 4 {
	case 4:
		switch r.IntN(5) {
		case 0: // four NOP options
			n := append(append(append([]byte(nil), l3[:20]...), 1, 1, 1, 1), l3[20:]...)
			n[0] = 0x46
			binary.BigEndian.PutUint16(n[2:], uint16(len(n)))
			binary.BigEndian.PutUint16(n[10:], engine.IPv4HeaderChecksum(n))
			return n
		case 1: // a later fragment: no ports
			binary.BigEndian.PutUint16(l3[6:], uint16(1+r.IntN(100)))
			binary.BigEndian.PutUint16(l3[10:], engine.IPv4HeaderChecksum(l3))
		case 2:
			return l3[:20+r.IntN(4)]
		}
	case 6:
		for k := r.IntN(6); k > 0; k-- {
			ext := make([]byte, 8)
			ext[0] = l3[6]
			switch r.IntN(3) {
			case 0:
				l3[6] = 0
			case 1:
				l3[6] = 60
			case 2:
				l3[6] = 44
				if r.IntN(2) == 0 {
					binary.BigEndian.PutUint16(ext[2:], uint16(r.IntN(4))<<3)
				}
			}
			l3 = append(append(append([]byte(nil), l3[:40]...), ext...), l3[40:]...)
			binary.BigEndian.PutUint16(l3[4:], uint16(len(l3)-40))
		}
		if r.IntN(6) == 0 {
			return l3[:40+r.IntN(len(l3)-40)]
		}
	}
	return l3
}

func runProg(t testing.TB, prog *ebpf.Program, data []byte) (out []byte, prio uint32) {
	t.Helper()
	out = make([]byte, len(data)+256)
	ctx := skBuff{Ifindex: 1}
	var ctxOut skBuff
	ret, err := prog.Run(&ebpf.RunOptions{Data: data, DataOut: out, Context: ctx, ContextOut: &ctxOut})
	if err != nil {
		t.Fatalf("running program: %v", err)
	}
	if int32(ret) != -1 {
		t.Fatalf("program returned %d, want -1 (TC_ACT_UNSPEC/TCX_NEXT)", int32(ret))
	}
	return out[:len(data)], ctxOut.Priority
}

func TestLayoutMatchesC(t *testing.T) {
	// The generated Go types come from the object's BTF; the sizes here
	// are what qos.c's comments and the map value sizes promise.
	for name, got := range map[string]uintptr{
		"qos_rule":    unsafe.Sizeof(qosQosRule{}),
		"qos_adapter": unsafe.Sizeof(qosQosAdapter{}),
		"qos_policy":  unsafe.Sizeof(qosQosPolicy{}),
		"qos_counter": unsafe.Sizeof(qosQosCounter{}),
	} {
		want := map[string]uintptr{"qos_rule": 96, "qos_adapter": 16, "qos_policy": 8, "qos_counter": 16}[name]
		if got != want {
			t.Errorf("sizeof %s: got %d, want %d", name, got, want)
		}
	}
	spec, err := loadQos()
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Maps["rules"].ValueSize; got != uint32(unsafe.Sizeof(qosQosRule{})) {
		t.Errorf("rules value size: got %d, want %d", got, unsafe.Sizeof(qosQosRule{}))
	}
	if got := spec.Maps["rules"].MaxEntries; got != maxRules {
		t.Errorf("rules max entries: got %d, want %d", got, maxRules)
	}
	if got := spec.Maps["policies"].MaxEntries; got != maxPolicies {
		t.Errorf("policies max entries: got %d, want %d", got, maxPolicies)
	}
}

// TestDifferential runs random packets through the Go engine and the BPF
// program and requires identical rewrites, priorities and counters.
func TestDifferential(t *testing.T) {
	rs := compile(t, testConf)
	objs := loadTest(t, rs)
	e := engine.NewEngine(rs)
	addrs := []string{"10.1.0.1", "10.1.255.255", "10.2.0.1", "192.168.0.1", "1.2.3.4",
		"2001:db8::1", "2001:db8::20", "2001:db8::100", "fe80::1"}
	ports := []uint16{0, 20, 21, 53, 80, 443, 5000}
	r := rand.New(rand.NewPCG(3, 4))
	matched := 0
	const n = 3000
	for i := 0; i < n; i++ {
		v6 := r.IntN(2) == 0
		pick := func() string {
			for {
				a := addrs[r.IntN(len(addrs))]
				if strings.Contains(a, ":") == v6 {
					return a
				}
			}
		}
		protos := []uint8{6, 17, 1, 132}
		l3 := ipPacket(pick(), pick(), protos[r.IntN(len(protos))], ports[r.IntN(len(ports))], ports[r.IntN(len(ports))], uint8(r.Uint32()))
		l3 = mutate(r, l3)
		dst := []byte{2, 0, 0, 0, 0, byte(r.IntN(2))}
		f := frame(dst, l3)
		out, prio := runProg(t, objs.QosEgress, f)
		goL3 := append([]byte(nil), l3...)
		res := e.Process(0, goL3, dst)
		if !bytes.Equal(out[14:], goL3) {
			t.Fatalf("packet %d (%x): BPF wrote\n%x\nGo wrote\n%x", i, l3, out[14:], goL3)
		}
		if prio != res.Priority {
			t.Fatalf("packet %d: BPF priority %#x, Go %#x", i, prio, res.Priority)
		}
		if res.Action != engine.Unmatched {
			matched++
		}
		if l3[0]>>4 == 4 && engine.Checksum(out[14:14+int(l3[0]&15)*4]) != 0 {
			t.Fatalf("packet %d: IPv4 checksum does not verify after BPF marking", i)
		}
	}
	if matched < n/10 {
		t.Errorf("only %d/%d packets matched; test not exercising the classifier", matched, n)
	}
	st := e.Stats()[0]
	var slot uint32
	for _, p := range st.Policies {
		pk, by, err := sumCounter(objs.PolicyStats, slot)
		if err != nil {
			t.Fatal(err)
		}
		if pk != p.Packets || by != p.Bytes {
			t.Errorf("policy %s: BPF %d pkts %d bytes, Go %d pkts %d bytes", p.Name, pk, by, p.Packets, p.Bytes)
		}
		slot++
	}
	var fslot uint32
	for _, p := range st.Policies {
		for _, f := range p.Filters {
			pk, by, err := sumCounter(objs.FilterStats, fslot)
			if err != nil {
				t.Fatal(err)
			}
			if pk != f.Packets || by != f.Bytes {
				t.Errorf("filter %s/%s: BPF %d pkts %d bytes, Go %d/%d", p.Name, f.Name, pk, by, f.Packets, f.Bytes)
			}
			fslot++
		}
	}
}

func TestMarkCases(t *testing.T) {
	rs := compile(t, testConf)
	objs := loadTest(t, rs)
	other := []byte{2, 0, 0, 0, 0, 9}
	for _, tc := range []struct {
		name  string
		mac   []byte
		l3    []byte
		newTC uint8
		prio  uint32
	}{
		{"v4 ftp with ECN", other, ipPacket("192.168.0.1", "192.168.0.2", 6, 20, 3000, 0x02), 10<<2 | 2, 0},
		{"v4 web vpr", other, ipPacket("192.168.0.1", "10.1.2.3", 6, 5000, 80, 0), 34 << 2, qos.HTBMajor<<16 | qos.FirstClass + 1},
		{"v6 range", other, ipPacket("2001:db8::9", "2001:db8::20", 17, 1, 2, 9<<2|3), 8<<2 | 3, qos.HTBMajor<<16 | qos.FirstClass + 2},
		{"mac match", gwMAC, ipPacket("192.168.0.1", "192.168.0.2", 1, 0, 0, 0), 63 << 2, 0},
		{"mac mismatch", other, ipPacket("192.168.0.1", "192.168.0.2", 1, 0, 0, 0), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, prio := runProg(t, objs.QosEgress, frame(tc.mac, tc.l3))
			got, _ := engine.TrafficClass(out[14:])
			if got != tc.newTC {
				t.Errorf("traffic class: got %#x, want %#x", got, tc.newTC)
			}
			if prio != tc.prio {
				t.Errorf("priority: got %#x, want %#x", prio, tc.prio)
			}
			if out[14]>>4 == 4 {
				if g, w := binary.BigEndian.Uint16(out[24:]), engine.IPv4HeaderChecksum(out[14:]); g != w {
					t.Errorf("checksum: got %#04x, want %#04x", g, w)
				}
			} else if out[15]&0x0f != tc.l3[1]&0x0f {
				t.Errorf("flow label bits changed")
			}
		})
	}
}

func TestConfRoundTrip(t *testing.T) {
	rs := compile(t, testConf)
	objs := loadTest(t, rs)
	text, err := readConf(objs.Conf)
	if err != nil {
		t.Fatal(err)
	}
	if want := ipqos.Format(rs.Config); text != want {
		t.Errorf("stored configuration differs:\n%s\nwant\n%s", text, want)
	}
}

// BenchmarkMarkBPF measures the marker through BPF_PROG_TEST_RUN: the
// kernel repeats the program Repeat times and reports the mean duration.
func BenchmarkMarkBPF(b *testing.B) {
	rs := compile(b, testConf)
	objs := loadTest(b, rs)
	// An empty SchedCLS program shows what BPF_PROG_TEST_RUN itself
	// costs (skb setup per repetition); subtract it to get the marker's.
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	for _, bc := range []struct {
		name string
		l3   []byte
		prog *ebpf.Program
	}{
		{"baseline-empty-program", ipPacket("192.168.0.1", "10.1.2.3", 6, 5000, 80, 0), empty},
		{"v4-web-match", ipPacket("192.168.0.1", "10.1.2.3", 6, 5000, 80, 0), objs.QosEgress},
		{"v6-range-match", ipPacket("2001:db8::9", "2001:db8::20", 17, 1, 2, 9<<2), objs.QosEgress},
		{"v4-unmatched", ipPacket("192.168.0.1", "192.168.0.2", 1, 0, 0, 0), objs.QosEgress},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data := frame([]byte{2, 0, 0, 0, 0, 9}, bc.l3)
			b.ReportAllocs()
			const repeat = 1000
			var total float64
			var runs int
			for b.Loop() {
				_, d, err := bc.prog.Benchmark(data, repeat, nil)
				if err != nil {
					b.Fatal(err)
				}
				total += float64(d.Nanoseconds())
				runs++
			}
			b.ReportMetric(total/float64(runs), "ns/packet")
		})
	}
}

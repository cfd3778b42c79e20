package nat

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"sluice/internal/packet"
	"sluice/internal/pool"
	"sluice/internal/rules/ipnat"
	"sluice/internal/rules/ippool"
)

// build makes an IPv4 or IPv6 packet with correct checksums. For ICMP
// sp is the query id (type echo) and dp unused.
func build(proto uint8, src, dst netip.Addr, sp, dp uint16, payload int) []byte {
	l4len := map[uint8]int{6: 20, 17: 8, 1: 8, 58: 8}[proto] + payload
	var b []byte
	if src.Is4() {
		b = make([]byte, 20+l4len)
		b[0] = 0x45
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		binary.BigEndian.PutUint16(b[4:], 0x1234)
		b[8], b[9] = 64, proto
		s, d := src.As4(), dst.As4()
		copy(b[12:], s[:])
		copy(b[16:], d[:])
		binary.BigEndian.PutUint16(b[10:], ^packet.Checksum(b[:20], 0))
	} else {
		b = make([]byte, 40+l4len)
		b[0] = 0x60
		binary.BigEndian.PutUint16(b[4:], uint16(l4len))
		b[6], b[7] = proto, 64
		s, d := src.As16(), dst.As16()
		copy(b[8:], s[:])
		copy(b[24:], d[:])
	}
	l4 := b[len(b)-l4len:]
	for i := len(l4) - payload; i < len(l4); i++ {
		l4[i] = byte(i * 7)
	}
	switch proto {
	case 6, 17:
		binary.BigEndian.PutUint16(l4, sp)
		binary.BigEndian.PutUint16(l4[2:], dp)
		if proto == 6 {
			l4[12] = 5 << 4
			l4[13] = packet.TCPFlagAck
		} else {
			binary.BigEndian.PutUint16(l4[4:], uint16(l4len))
		}
	case 1:
		l4[0] = 8
		binary.BigEndian.PutUint16(l4[4:], sp)
	case 58:
		l4[0] = 128
		binary.BigEndian.PutUint16(l4[4:], sp)
	}
	fixL4(b)
	return b
}

// fixL4 recomputes the L4 checksum from scratch.
func fixL4(b []byte) {
	var v view
	if !parse(&v, b) || v.l4 < 0 {
		return
	}
	l4 := b[v.l4 : v.l4+v.l4len]
	off, ok := map[uint8]int{6: 16, 17: 6, 1: 2, 58: 2}[v.proto]
	if !ok {
		fixIP(b)
		return
	}
	l4[off], l4[off+1] = 0, 0
	var sum uint16
	if v.proto == 1 {
		sum = ^packet.Checksum(l4, 0)
	} else {
		sum = ^packet.Checksum(l4, packet.PseudoHeaderChecksum(v.proto, v.src, v.dst, len(l4)))
		if sum == 0 && v.proto == 17 {
			sum = 0xffff
		}
	}
	binary.BigEndian.PutUint16(l4[off:], sum)
	fixIP(b)
}

func fixIP(b []byte) {
	if b[0]>>4 == 4 {
		b[10], b[11] = 0, 0
		binary.BigEndian.PutUint16(b[10:], ^packet.Checksum(b[:(b[0]&15)*4], 0))
	}
}

// reply turns a packet around: addresses and ports swapped.
func reply(b []byte) []byte {
	r := bytes.Clone(b)
	var v view
	parse(&v, r)
	v6 := v.v6
	if v6 {
		var t [16]byte
		copy(t[:], r[8:24])
		copy(r[8:24], r[24:40])
		copy(r[24:40], t[:])
	} else {
		var t [4]byte
		copy(t[:], r[12:16])
		copy(r[12:16], r[16:20])
		copy(r[16:20], t[:])
	}
	if v.proto == 6 || v.proto == 17 {
		l4 := r[v.l4:]
		sp := binary.BigEndian.Uint16(l4)
		copy(l4[0:2], l4[2:4])
		binary.BigEndian.PutUint16(l4[2:], sp)
	}
	if v.proto == 1 || v.proto == 58 {
		r[v.l4] = map[bool]byte{false: 0, true: 129}[v6]
	}
	fixL4(r)
	return r
}

func mustNAT(t testing.TB, rules string) *NAT {
	t.Helper()
	f, err := ipnat.Parse("t", rules, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(f, Config{IfAddr: func(string, bool) (netip.Addr, bool) { return netip.MustParseAddr("192.0.2.1"), true }})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checksumsValid compares the packet with a copy whose checksums were
// computed from scratch.
func checksumsValid(t *testing.T, b []byte) {
	t.Helper()
	c := bytes.Clone(b)
	fixL4(c)
	if !bytes.Equal(c, b) {
		t.Fatalf("incremental checksums differ from recomputed ones:\n got %x\nwant %x", b, c)
	}
}

// TestNATThenReverse sends random flows out through map rules and their
// replies back in: each reply must come out exactly as the reverse of
// the original packet, checksums included.
func TestNATThenReverse(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	rules := map[bool]string{
		false: "map le0 10.0.0.0/8 -> 198.51.100.0/28 portmap tcp/udp 20000:20100\nmap le0 10.0.0.0/8 -> 198.51.100.0/28\nmap le0 10.0.0.0/8 -> 198.51.100.7/32 icmpidmap icmp 100:200\n",
		true:  "map le0 inet6 fd00::/16 -> 2001:db8::/120 portmap tcp/udp 20000:20100\nmap le0 inet6 fd00::/16 -> 2001:db8::/120\n",
	}
	for _, v6 := range []bool{false, true} {
		n := mustNAT(t, rules[v6])
		for i := 0; i < 300; i++ {
			proto := []uint8{6, 17, 1, 47}[r.IntN(4)]
			var src, dst netip.Addr
			if v6 {
				proto = []uint8{6, 17, 58, 47}[r.IntN(4)]
				src = netip.AddrFrom16([16]byte{0xfd, 0, 15: byte(r.IntN(8))})
				dst = netip.AddrFrom16([16]byte{0x20, 0x01, 15: byte(r.IntN(200))})
			} else {
				src = netip.AddrFrom4([4]byte{10, 1, 0, byte(r.IntN(8))})
				dst = netip.AddrFrom4([4]byte{203, 0, 113, byte(r.IntN(200))})
			}
			orig := build(proto, src, dst, uint16(1024+r.IntN(50)), uint16(r.IntN(3)+80), r.IntN(5))
			p := bytes.Clone(orig)
			res := n.Out(p, "le0", "")
			if res != Translated {
				t.Fatalf("v6=%v proto %d %v->%v: got %v, want translated", v6, proto, src, dst, res)
			}
			checksumsValid(t, p)
			var v view
			parse(&v, p)
			if v.src == src {
				t.Fatalf("source not rewritten: %x", p)
			}
			back := reply(p)
			if res := n.In(back, "le0"); res != Translated {
				t.Fatalf("reply: got %v, want translated", res)
			}
			checksumsValid(t, back)
			if want := reply(orig); !bytes.Equal(back, want) {
				t.Fatalf("reply of %x\n got %x\nwant %x", orig, back, want)
			}
		}
	}
}

func TestEstablishedAllocs(t *testing.T) {
	n := mustNAT(t, "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp/udp 20000:30000\nrdr le0 198.51.100.1/32 port 80 -> 10.9.9.9 port 8080 tcp\n")
	out := build(6, netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("203.0.113.5"), 1234, 80, 0)
	in := build(6, netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("198.51.100.1"), 5555, 80, 0)
	p, q := bytes.Clone(out), bytes.Clone(in)
	if n.Out(p, "le0", "") != Translated || n.In(q, "le0") != Translated {
		t.Fatal("first packets not translated")
	}
	allocs := testing.AllocsPerRun(500, func() {
		copy(p, out)
		copy(q, in)
		n.Out(p, "le0", "")
		n.In(q, "le0")
	})
	if allocs != 0 {
		t.Errorf("got %v allocs per established packet pair, want 0", allocs)
	}
}

func TestAllocation(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name, rules string
		pkts        []string // "proto src sport dst dport"
		want        []string // "src:sport" after translation, or "fail"
	}{
		{"portmap sequential wraps", "map le0 10.0.0.0/8 -> 1.1.1.1/32 portmap tcp 5:6 sequential",
			[]string{"6 10.0.0.1 100 2.2.2.2 80", "6 10.0.0.2 100 2.2.2.2 80", "6 10.0.0.3 100 2.2.2.2 80", "6 10.0.0.3 100 2.2.2.2 80"},
			[]string{"1.1.1.1:5", "1.1.1.1:6", "fail", "fail"}},
		{"portmap random uses ipf_random", "map le0 10.0.0.0/8 -> 1.1.1.1/32 portmap tcp 10000:20000",
			[]string{"6 10.0.0.1 100 2.2.2.2 80", "6 10.0.0.2 100 2.2.2.2 80", "6 10.0.0.3 100 2.2.2.2 80"},
			// 10000 + r % 10001 for r = 0, 4, 3999
			[]string{"1.1.1.1:10000", "1.1.1.1:10004", "1.1.1.1:13999"}},
		{"map-block ports 256", "map-block le0 10.0.0.0/24 -> 203.1.1.0/24 ports 256",
			[]string{"6 10.0.0.1 100 2.2.2.2 80", "17 10.0.0.5 7 2.2.2.2 53"},
			// Equal masks: IPFilter's map-block fails for every new
			// session (its ipftest prints block reason 15 for these)
			[]string{"fail", "fail"}},
		{"map-block ports 256 into a smaller block", "map-block le0 10.0.0.0/16 -> 203.1.1.0/24 ports 256",
			[]string{"6 10.0.1.2 100 2.2.2.2 80"},
			// ippip = 64512/256 = 252; h = 258: addr + 258/252 = +1; port = 1024 + 100 + 256*(258%252)
			[]string{"203.1.1.1:2660"}},
		{"map-block auto", "map-block le0 10.0.0.0/16 -> 203.1.1.0/24 ports auto",
			[]string{"6 10.0.1.2 100 2.2.2.2 80"},
			// ippip = 65535/256+1 = 256, ppip = 252; h = 258: addr +1, port 1024+100+252*2
			[]string{"203.1.1.1:1628"}},
		{"bimap 1:1", "bimap le0 10.0.0.0/24 -> 203.1.1.0/24",
			[]string{"255 10.0.0.77 0 2.2.2.2 0"}, []string{"203.1.1.77:0"}},
		{"0/32 is the interface address", "map le0 10.0.0.0/8 -> 0/32",
			[]string{"17 10.0.0.1 53 2.2.2.2 53"}, []string{"192.0.2.1:53"}},
		{"no rule stops", "no map le0 10.0.0.1/32;\nmap le0 10.0.0.0/8 -> 1.1.1.1/32",
			[]string{"255 10.0.0.1 0 2.2.2.2 0", "255 10.0.0.2 0 2.2.2.2 0"}, []string{"10.0.0.1:0", "1.1.1.1:0"}},
		{"range walks on collision", "map le0 10.0.0.0/8 -> range 1.1.1.1-1.1.1.2",
			[]string{"255 10.0.0.1 0 2.2.2.2 0", "255 10.0.0.2 0 2.2.2.2 0", "255 10.0.0.3 0 2.2.2.2 0", "255 10.0.0.3 0 3.3.3.3 0"},
			[]string{"1.1.1.1:0", "1.1.1.2:0", "fail", "1.1.1.1:0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := mustNAT(t, tc.rules)
			for i, spec := range tc.pkts {
				var proto int
				var s, d string
				var sp, dp uint16
				fmt.Sscanf(spec, "%d %s %d %s %d", &proto, &s, &sp, &d, &dp)
				b := build(uint8(proto), a(s), a(d), sp, dp, 0)
				res := n.Out(b, "le0", "")
				got := "fail"
				if res != Failed {
					var v view
					parse(&v, b)
					got = fmt.Sprintf("%v:%d", v.src, v.sport)
					checksumsValid(t, b)
				}
				if got != tc.want[i] {
					t.Errorf("packet %d (%s): got %s, want %s", i, spec, got, tc.want[i])
				}
			}
		})
	}
}

func TestRdrPorts(t *testing.T) {
	tests := []struct {
		rule  string
		dport uint16
		want  string
	}{
		{"rdr le0 1.2.3.4/32 port 23-79 -> 10.2.2.1 port 10023 tcp", 25, "10.2.2.1:10025"},
		{"rdr le0 1.2.3.4/32 port 23-79 -> 10.2.2.1 port = 10023 tcp", 25, "10.2.2.1:10023"},
		{"rdr le0 1.2.3.4/32 port 80 -> 10.2.2.1 port 8080 tcp", 80, "10.2.2.1:8080"},
		{"rdr le0 1.2.3.4/32 port 80 -> 10.2.2.1 port 8080 tcp", 81, "1.2.3.4:81"},
		{"rdr le0 0/0 port 80 -> 0/32 port 3128 tcp", 80, "192.0.2.1:3128"},
	}
	for _, tc := range tests {
		n := mustNAT(t, tc.rule)
		b := build(6, netip.MustParseAddr("9.9.9.9"), netip.MustParseAddr("1.2.3.4"), 2000, tc.dport, 3)
		n.In(b, "le0")
		var v view
		parse(&v, b)
		checksumsValid(t, b)
		if got := fmt.Sprintf("%v:%d", v.dst, v.dport); got != tc.want {
			t.Errorf("%s dport %d: got %s, want %s", tc.rule, tc.dport, got, tc.want)
		}
	}
}

// TestICMPError: an ICMP error about a translated packet comes back with
// its embedded header and outer destination translated back.
func TestICMPError(t *testing.T) {
	n := mustNAT(t, "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp/udp 20000:20010 sequential")
	a := netip.MustParseAddr
	orig := build(17, a("10.1.1.1"), a("203.0.113.9"), 5353, 53, 4)
	p := bytes.Clone(orig)
	if n.Out(p, "le0", "") != Translated {
		t.Fatal("not translated")
	}
	// A router answers port-unreachable to the translated packet.
	icmp := make([]byte, 20+8+28)
	icmp[0] = 0x45
	binary.BigEndian.PutUint16(icmp[2:], uint16(len(icmp)))
	icmp[8], icmp[9] = 64, 1
	copy(icmp[12:], a("203.0.113.9").AsSlice())
	copy(icmp[16:], p[12:16])
	icmp[20], icmp[21] = 3, 3
	copy(icmp[28:], p[:28])
	fixL4(icmp)
	if res := n.In(icmp, "le0"); res != Translated {
		t.Fatalf("got %v, want translated", res)
	}
	checksumsValid(t, icmp)
	if got := netip.AddrFrom4([4]byte(icmp[16:20])); got != a("10.1.1.1") {
		t.Errorf("outer destination %v, want 10.1.1.1", got)
	}
	if !bytes.Equal(icmp[28:56], orig[:28]) {
		t.Errorf("embedded header %x, want %x", icmp[28:56], orig[:28])
	}
}

func TestDump(t *testing.T) {
	n := mustNAT(t, "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp 20000:20010 sequential\nrdr le0 198.51.100.1/32 port 80 -> 10.9.9.9 port 8080 tcp")
	a := netip.MustParseAddr
	n.Out(build(6, a("10.1.1.1"), a("203.0.113.9"), 1025, 80, 0), "le0", "")
	n.In(build(6, a("203.0.113.7"), a("198.51.100.1"), 4000, 80, 0), "le0")
	var b strings.Builder
	n.Dump(&b)
	want := `List of active MAP/Redirect filters:
map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp 20000:20010 sequential
rdr le0 198.51.100.1/32 port 80 -> 10.9.9.9/32 port 8080 tcp

List of active sessions:
RDR 10.9.9.9        8080  <- -> 198.51.100.1    80    [203.0.113.7 4000]
MAP 10.1.1.1        1025  <- -> 198.51.100.1    20000 [203.0.113.9 80]

Hostmap table:
10.1.1.1,203.0.113.9 -> 198.51.100.1,0.0.0.0 (use = 1)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if c := n.Flush(); c != 2 {
		t.Errorf("flushed %d sessions, want 2", c)
	}
}

func TestIPFTestRandom(t *testing.T) {
	r := IPFTestRandom()
	var got []uint32
	for i := 0; i < 8; i++ {
		got = append(got, r())
	}
	// From the seventh call: number = last; last = last*calls + 1; number ^ last.
	last := uint32(0xa5a5a5a5)
	n7 := last
	last = last*7 + 1
	w7 := n7 ^ last
	n8 := last
	last = last*8 + 1
	w8 := n8 ^ last
	want := []uint32{0, 4, 3999, 4000, 48999, 49000, w7, w8}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d: got %d, want %d", i+1, got[i], want[i])
		}
	}
}

func BenchmarkEstablished(b *testing.B) {
	n := mustNAT(b, "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp/udp 20000:30000")
	out := build(6, netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("203.0.113.5"), 1234, 80, 0)
	p := bytes.Clone(out)
	n.Out(p, "le0", "")
	b.ReportAllocs()
	for b.Loop() {
		copy(p, out)
		n.Out(p, "le0", "")
	}
}

// FuzzPackets feeds arbitrary bytes through NAT in both directions: it
// must never panic, and only a translated packet may change.
func FuzzPackets(f *testing.F) {
	a := netip.MustParseAddr
	f.Add(build(6, a("10.1.1.1"), a("203.0.113.9"), 1025, 80, 3), true)
	f.Add(build(17, a("203.0.113.9"), a("198.51.100.1"), 53, 20000, 0), false)
	f.Add(build(1, a("10.1.1.1"), a("203.0.113.9"), 7, 0, 0), true)
	f.Add(build(58, a("fd00::1"), a("2001:db8::9"), 7, 0, 0), true)
	f.Add(build(6, a("fd00::1"), a("2001:db8::9"), 1025, 80, 0), true)
	f.Fuzz(func(t *testing.T, b []byte, out bool) {
		n := mustNAT(t, `map le0 10.0.0.0/8 -> 198.51.100.7/32 proxy port ftp ftp/tcp
map le0 10.0.0.0/8 -> 198.51.100.7/32 proxy port 1723 pptp/tcp
map le0 10.0.0.0/8 -> 198.51.100.7/32 proxy port shell rcmd/tcp
rdr le0 198.51.100.1/32 port 111 -> 10.9.9.7 port 111 udp proxy rpcbu
map le0 10.0.0.0/8 -> 198.51.100.9/32 icmpidmap icmp 1:3
map le0 10.0.0.0/8 -> 198.51.100.0/30 portmap tcp/udp 20000:20003 mssclamp 100
rdr le0 198.51.100.1/32 port 80 -> 10.9.9.9,10.9.9.8 port 8080 tcp sticky
map le0 inet6 fd00::/16 -> 2001:db8::/126
map-block le0 10.0.0.0/16 -> 192.0.2.0/24 ports auto
rewrite out on le0 proto tcp from any to 203.0.113.0/24 -> src 192.0.2.0/28,1000-1001 dst 203.0.113.9;
divert in on le0 proto udp from any to 192.0.2.77 -> src 127.0.0.1,10101 dst 127.0.0.1,10101 udp;
`)
		// The resizing entry points may wrap and unwrap (divert).
		buf := make([]byte, len(b), len(b)+28)
		copy(buf, b)
		if out {
			n.OutPacket(buf, "le0", "")
		} else {
			n.InPacket(buf, "le0")
		}
		for i := 0; i < 3; i++ {
			p := bytes.Clone(b)
			var res Result
			if out {
				res = n.Out(p, "le0", "")
			} else {
				res = n.In(p, "le0")
			}
			if res != Translated && !bytes.Equal(p, b) {
				t.Fatalf("packet changed although the result is %v", res)
			}
			back := bytes.Clone(p)
			if out {
				n.In(back, "le0")
			} else {
				n.Out(back, "le0", "")
			}
		}
		var w strings.Builder
		n.Dump(&w)
	})
}

// TestICMPErrorOutbound: an inside router reports an error about a reply
// that NAT translated inbound; the error leaves with the embedded packet
// shown as the outside host sent it and with the NAT source address.
func TestICMPErrorOutbound(t *testing.T) {
	n := mustNAT(t, "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp/udp 20000:20010 sequential")
	a := netip.MustParseAddr
	if n.Out(build(6, a("10.1.2.1"), a("192.0.2.51"), 1526, 119, 0), "le0", "") != Translated {
		t.Fatal("not translated")
	}
	wire := build(6, a("192.0.2.51"), a("198.51.100.1"), 119, 20000, 0)
	inside := bytes.Clone(wire)
	if n.In(inside, "le0") != Translated {
		t.Fatal("reply not translated")
	}
	icmp := make([]byte, 20+8+28)
	icmp[0] = 0x45
	binary.BigEndian.PutUint16(icmp[2:], uint16(len(icmp)))
	icmp[8], icmp[9] = 64, 1
	copy(icmp[12:], a("10.9.9.9").AsSlice())
	copy(icmp[16:], a("192.0.2.51").AsSlice())
	icmp[20], icmp[21] = 3, 4
	copy(icmp[28:], inside[:28])
	fixL4(icmp)
	if res := n.Out(icmp, "le0", ""); res != Translated {
		t.Fatalf("got %v, want translated", res)
	}
	checksumsValid(t, icmp)
	if got := netip.AddrFrom4([4]byte(icmp[12:16])); got != a("198.51.100.1") {
		t.Errorf("outer source %v, want 198.51.100.1", got)
	}
	if !bytes.Equal(icmp[28:56], wire[:28]) {
		t.Errorf("embedded header %x, want %x", icmp[28:56], wire[:28])
	}
}

type fakeClock struct{ t uint32 }

func (c *fakeClock) Ticks() uint32 { return c.t }

func TestAgeing(t *testing.T) {
	f, err := ipnat.Parse("t", "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp/udp 20000:20010 sequential\nmap le0 10.0.0.0/8 -> 198.51.100.1/32 age 5/5\n", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{}
	n, err := New(f, Config{Clock: clk, MaxSessions: 3})
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	udp := build(17, a("10.1.1.1"), a("203.0.113.9"), 5353, 53, 0)
	gre := build(47, a("10.1.1.1"), a("203.0.113.9"), 0, 0, 0)
	syn := build(6, a("10.1.1.2"), a("203.0.113.9"), 1000, 80, 0)
	syn[20+13] = packet.TCPFlagSyn
	fixL4(syn)
	for _, p := range [][]byte{udp, gre, syn} {
		if n.Out(bytes.Clone(p), "le0", "") != Translated {
			t.Fatal("not translated")
		}
	}
	if _, s, h := n.Stats(); s != 3 || h != 3 {
		t.Fatalf("got %d sessions %d hostmaps, want 3 and 3", s, h)
	}
	// The table is full: a fourth flow fails.
	if res := n.Out(build(17, a("10.1.1.3"), a("203.0.113.9"), 1, 53, 0), "le0", ""); res != Failed {
		t.Errorf("full table: got %v, want failed", res)
	}
	clk.t = 11 // the rule age 5/5 (10 ticks) has passed for GRE
	if got := n.Expire(); got != 1 {
		t.Errorf("expired %d at tick 11, want 1 (the age 5/5 session)", got)
	}
	clk.t = 481 // SYN-only TCP lasts tcp_timeout (480 ticks)
	if got := n.Expire(); got != 1 {
		t.Errorf("expired %d at tick 481, want 1 (TCP)", got)
	}
	clk.t = 1201 // UDP: DEF_NAT_AGE (1200 ticks)
	if got := n.Expire(); got != 1 {
		t.Errorf("expired %d at tick 1201, want 1 (UDP)", got)
	}
	if _, s, h := n.Stats(); s != 0 || h != 0 {
		t.Errorf("got %d sessions %d hostmaps after expiry, want 0 and 0", s, h)
	}
	// A packet of an expired flow starts a new session.
	p := bytes.Clone(udp)
	if n.Out(p, "le0", "") != Translated {
		t.Error("new session after expiry failed")
	}
}

func TestRdrDstList(t *testing.T) {
	pf, err := ippool.Parse("p", "pool nat/dstlist (name web; policy round-robin;) { 10.0.0.1; 10.0.0.2; };")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pool.NewSet(pf, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ipnat.Parse("t", "rdr le0 192.0.2.1/32 port 80 -> dstlist/web port 8080 tcp", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.String(); got != "rdr le0 192.0.2.1/32 port 80 -> dstlist/web port 8080 tcp\n" {
		t.Errorf("printed %q", got)
	}
	n, err := New(f, Config{Pools: ps})
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	for i, want := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.1"} {
		b := build(6, a("198.51.100.7"), a("192.0.2.1"), uint16(3000+i), 80, 0)
		if n.In(b, "le0") != Translated {
			t.Fatal("not translated")
		}
		var v view
		parse(&v, b)
		if v.dst.String() != want || v.dport != 8080 {
			t.Errorf("flow %d: got %v:%d, want %s:8080", i, v.dst, v.dport, want)
		}
	}
}

func TestFragmentsFollowFirst(t *testing.T) {
	n := mustNAT(t, "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp/udp 20000:20010 sequential")
	a := netip.MustParseAddr
	first := build(17, a("10.1.1.1"), a("203.0.113.9"), 5353, 53, 16)
	binary.BigEndian.PutUint16(first[6:], 0x2000) // MF
	fixL4(first)
	if n.Out(first, "le0", "") != Translated {
		t.Fatal("first fragment not translated")
	}
	body := make([]byte, 28)
	copy(body, first[:20])
	binary.BigEndian.PutUint16(body[2:], 28)
	binary.BigEndian.PutUint16(body[6:], 3) // offset 24, last fragment
	copy(body[12:], a("10.1.1.1").AsSlice())
	fixIP(body)
	if res := n.Out(body, "le0", ""); res != Translated {
		t.Fatalf("later fragment: got %v, want translated", res)
	}
	if got := netip.AddrFrom4([4]byte(body[12:16])); got != a("198.51.100.1") {
		t.Errorf("later fragment source %v, want 198.51.100.1", got)
	}
	checksumsValid(t, body)
	other := bytes.Clone(body)
	copy(other[12:], a("10.1.1.2").AsSlice())
	fixIP(other)
	want := bytes.Clone(other)
	if res := n.Out(other, "le0", ""); res != NoMatch || !bytes.Equal(other, want) {
		t.Errorf("unknown fragment: got %v, want nomatch and no change", res)
	}
}

func TestDivertNeedsResize(t *testing.T) {
	n := mustNAT(t, "divert in on le0 proto tcp from any to any -> src 127.0.0.1,10101 dst 127.0.0.1,10101 udp;")
	a := netip.MustParseAddr
	orig := build(6, a("99.99.99.99"), a("88.88.88.88"), 909, 80, 0)
	p := bytes.Clone(orig)
	if res := n.In(p, "le0"); res != Failed || !bytes.Equal(p, orig) {
		t.Fatalf("in place: got %v, want failed and the packet untouched", res)
	}
	if _, s, _ := n.Stats(); s != 0 {
		t.Fatalf("a failed divert left %d sessions", s)
	}
	buf := make([]byte, len(orig), len(orig)+28)
	copy(buf, orig)
	wrapped, res := n.InPacket(buf, "le0")
	if res != Translated || len(wrapped) != len(orig)+28 || !bytes.Equal(wrapped[28:], orig) {
		t.Fatalf("InPacket: got %v %x", res, wrapped)
	}
	// IPFilter sends the UDP wrapper without a checksum (0).
	if packet.Checksum(wrapped[:20], 0) != 0xffff || wrapped[26]|wrapped[27] != 0 {
		t.Errorf("wrapper header checksums: %x", wrapped[:28])
	}
	// The wrapped packet coming back out is unwrapped.
	back, res := n.OutPacket(bytes.Clone(wrapped), "le0", "")
	if res != Translated || !bytes.Equal(back, orig) {
		t.Fatalf("OutPacket: got %v %x, want %x", res, back, orig)
	}
}

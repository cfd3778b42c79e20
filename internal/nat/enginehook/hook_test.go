package enginehook

import (
	"encoding/binary"
	"io"
	"net/netip"
	"testing"

	"sluice/internal/engine"
	"sluice/internal/nat"
	"sluice/internal/packet"
	"sluice/internal/packet/packettest"
	"sluice/internal/pool"
	"sluice/internal/rules/ipnat"
)

// udp builds an IPv4/UDP datagram in a buffer with room to grow.
func udp(src, dst netip.Addr, sp, dp uint16) []byte {
	b := packettest.V4{Src: src.String(), Dst: dst.String(), Proto: 17, Payload: packettest.UDP(sp, dp, nil, false)}.Bytes()
	return append(make([]byte, 0, len(b)+64), b...)
}

func TestHookThroughEngine(t *testing.T) {
	f, err := ipnat.Parse("t", "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp/udp 20000:20010 sequential\ndivert in on le0 proto udp from any to 192.0.2.7 -> src 127.0.0.1,10101 dst 127.0.0.1,10101 udp;\n", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := nat.New(f, nat.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(engine.Config{NAT: Hook{n}})
	defer e.Close()
	a := netip.MustParseAddr

	p := &engine.Packet{Data: udp(a("10.1.1.1"), a("203.0.113.9"), 5353, 53), IfName: "le0", Out: true}
	p.ParseErr = p.Info.Parse(p.Data, packet.ParseOptions{VerifyChecksums: true})
	e.Check(p)
	if got := packet.IPv4(p.Data).SourceAddress(); got != a("198.51.100.1") {
		t.Errorf("source after NAT: got %v, want 198.51.100.1", got)
	}
	if p.Info.Flags&packet.FlagNATed == 0 || p.Info.Flags&packet.FlagBad != 0 {
		t.Errorf("flags %#x: want NATed and not bad", p.Info.Flags)
	}
	// Rewritten trusts NAT's incremental checksum updates; prove them.
	checksumsOK(t, p.Data)

	q := &engine.Packet{Data: udp(a("203.0.113.8"), a("192.0.2.7"), 4000, 53), IfName: "le0"}
	q.ParseErr = q.Info.Parse(q.Data, packet.ParseOptions{VerifyChecksums: true})
	e.Check(q)
	if len(q.Data) != 28+28 || q.Data[9] != 17 || binary.BigEndian.Uint16(q.Data[22:]) != 10101 {
		t.Errorf("divert: got %x, want the packet wrapped in UDP to port 10101", q.Data)
	}
}

// The pool set plugs straight into the engine's pool and dstlist hooks.
var (
	_ engine.Pools    = (*pool.Set)(nil)
	_ engine.DstLists = (*pool.Set)(nil)
)

// Rewritten skips the second checksum pass for translated packets whose
// checksum verified before NAT; its flags must match a full re-parse both
// for packets that stay valid and for ones that were already bad.
func TestRewrittenMatchesFullParse(t *testing.T) {
	f, err := ipnat.Parse("t", "map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp/udp 20000:20010\nmap le0 10.0.0.0/8 -> 198.51.100.1/32\n", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := nat.New(f, nat.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(engine.Config{NAT: Hook{n}})
	defer e.Close()
	tcp := packettest.TCP{SrcPort: 1234, DstPort: 80, Seq: 1, Flags: packet.TCPFlagSyn, Win: 8192, Data: []byte("hello")}.Bytes()
	cases := []struct {
		name    string
		pkt     packettest.V4
		wantBad bool
	}{
		{"tcp", packettest.V4{Src: "10.1.1.1", Dst: "203.0.113.9", Proto: 6, Payload: tcp}, false},
		{"tcp bad sum", packettest.V4{Src: "10.1.1.2", Dst: "203.0.113.9", Proto: 6, Payload: tcp, BadL4Sum: true}, true},
		{"udp", packettest.V4{Src: "10.1.1.3", Dst: "203.0.113.9", Proto: 17, Payload: packettest.UDP(53, 53, []byte("q"), false)}, false},
		{"udp bad sum", packettest.V4{Src: "10.1.1.4", Dst: "203.0.113.9", Proto: 17, Payload: packettest.UDP(53, 53, []byte("q"), false), BadL4Sum: true}, true},
		{"udp no sum", packettest.V4{Src: "10.1.1.5", Dst: "203.0.113.9", Proto: 17, Payload: packettest.UDP(53, 53, []byte("q"), true)}, false},
		{"icmp echo", packettest.V4{Src: "10.1.1.6", Dst: "203.0.113.9", Proto: 1, Payload: packettest.ICMP(8, 0, 0x10001, []byte("ping"))}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.pkt.Bytes()
			var p engine.Packet
			p.Load(append(make([]byte, 0, len(b)+64), b...), "le0", true, 0)
			if got := p.Info.Flags&packet.FlagBad != 0; got != c.wantBad {
				t.Fatalf("before NAT: bad %v, want %v", got, c.wantBad)
			}
			e.Check(&p)
			if packet.IPv4(p.Data).SourceAddress() != netip.MustParseAddr("198.51.100.1") {
				t.Fatalf("not translated: %x", p.Data)
			}
			var full packet.Info
			ferr := full.Parse(p.Data, packet.ParseOptions{VerifyChecksums: true})
			if ferr != p.ParseErr || full.Flags|packet.FlagNATed != p.Info.Flags|packet.FlagNATed {
				t.Errorf("Rewritten: flags %#x err %v; full parse: flags %#x err %v", p.Info.Flags, p.ParseErr, full.Flags, ferr)
			}
			if got := p.Info.Flags&packet.FlagBad != 0; got != c.wantBad {
				t.Errorf("after NAT: bad %v, want %v", got, c.wantBad)
			}
		})
	}
}

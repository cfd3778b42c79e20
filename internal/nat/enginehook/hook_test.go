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
		t.Errorf("flags %#x: want NATed and not bad (checksums stay valid)", p.Info.Flags)
	}

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

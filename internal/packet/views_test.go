package packet_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"sluice/internal/packet"
	pt "sluice/internal/packet/packettest"
)

// TestChecksumUpdateMatchesRecompute checks every SetXWithChecksumUpdate
// against a full recomputation on random values (RFC 1624 incremental
// update versus the slow, obviously correct sum).
func TestChecksumUpdateMatchesRecompute(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	randAddr := func() netip.Addr {
		return netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
	}
	for n := 0; n < 500; n++ {
		seg := pt.TCP{SrcPort: uint16(r.Uint32()), DstPort: uint16(r.Uint32()), Seq: r.Uint32(), Ack: r.Uint32(),
			Flags: packet.TCPFlagAck, Win: uint16(r.Uint32()), Data: []byte{byte(n), 1, 2}}.Bytes()
		b := pt.V4{Src: randAddr().String(), Dst: randAddr().String(), Proto: packet.ProtoTCP, TTL: uint8(r.Uint32()),
			ID: uint16(r.Uint32()), Payload: seg}.Bytes()
		ip := packet.IPv4(b)
		tcp := packet.TCP(b[20:])
		switch n % 8 {
		case 0:
			ip.SetTTLWithChecksumUpdate(uint8(r.Uint32()))
		case 1:
			ip.SetTOSWithChecksumUpdate(uint8(r.Uint32()))
		case 2:
			ip.SetIDWithChecksumUpdate(uint16(r.Uint32()))
		case 3:
			na := randAddr()
			tcp.UpdateChecksumPseudoHeaderAddress(ip.SourceAddress(), na)
			ip.SetSourceAddressWithChecksumUpdate(na)
		case 4:
			na := randAddr()
			tcp.UpdateChecksumPseudoHeaderAddress(ip.DestinationAddress(), na)
			ip.SetDestinationAddressWithChecksumUpdate(na)
		case 5:
			tcp.SetSourcePortWithChecksumUpdate(uint16(r.Uint32()))
		case 6:
			tcp.SetSequenceNumberWithChecksumUpdate(r.Uint32())
		case 7:
			tcp.SetAckNumberWithChecksumUpdate(r.Uint32())
			tcp.SetDestinationPortWithChecksumUpdate(uint16(r.Uint32()))
		}
		if got, want := ip.Checksum(), ip.CalculateChecksum(); !sumEqual(got, want) {
			t.Fatalf("case %d: ip checksum %#04x, want %#04x", n, got, want)
		}
		pseudo := packet.PseudoHeaderChecksum(packet.ProtoTCP, ip.SourceAddress(), ip.DestinationAddress(), len(tcp))
		if got, want := tcp.Checksum(), tcp.CalculateChecksum(pseudo); !sumEqual(got, want) {
			t.Fatalf("case %d: tcp checksum %#04x, want %#04x", n, got, want)
		}
		var in packet.Info
		if err := in.Parse(b, packet.ParseOptions{VerifyChecksums: true}); err != nil || in.Flags&packet.FlagBad != 0 {
			t.Fatalf("case %d: parse after update: err %v flags %#x", n, err, uint32(in.Flags))
		}
	}
}

// sumEqual treats 0x0000 and 0xffff as the same ones' complement value.
func sumEqual(a, b uint16) bool {
	return a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
}

func TestUDPAndICMPViews(t *testing.T) {
	b := pt.V4{Src: "10.0.0.1", Dst: "10.0.0.2", Proto: packet.ProtoUDP, Payload: pt.UDP(53, 1000, []byte("hello"), false)}.Bytes()
	u := packet.UDP(b[20:])
	u.SetDestinationPortWithChecksumUpdate(2000)
	pseudo := packet.PseudoHeaderChecksum(packet.ProtoUDP, packet.IPv4(b).SourceAddress(), packet.IPv4(b).DestinationAddress(), len(u))
	if got, want := u.Checksum(), u.CalculateChecksum(pseudo); !sumEqual(got, want) {
		t.Errorf("udp checksum %#04x, want %#04x", got, want)
	}
	if u.DestinationPort() != 2000 || u.Length() != 13 {
		t.Errorf("udp fields: dport %d len %d", u.DestinationPort(), u.Length())
	}
	nb := pt.V4{Src: "10.0.0.1", Dst: "10.0.0.2", Proto: packet.ProtoUDP, Payload: pt.UDP(53, 1000, nil, true)}.Bytes()
	packet.UDP(nb[20:]).SetSourcePortWithChecksumUpdate(99)
	if c := packet.UDP(nb[20:]).Checksum(); c != 0 {
		t.Errorf("zero udp checksum changed to %#04x", c)
	}
	ib := pt.ICMP(packet.ICMPv4Echo, 0, 0x00010002, []byte("data"))
	ic := packet.ICMPv4(ib)
	ic.SetChecksum(ic.CalculateChecksum())
	ic.SetIdentWithChecksumUpdate(0xbeef)
	if got, want := ic.Checksum(), ic.CalculateChecksum(); !sumEqual(got, want) || ic.Ident() != 0xbeef || ic.Sequence() != 2 {
		t.Errorf("icmp: checksum %#04x want %#04x ident %#x seq %d", got, want, ic.Ident(), ic.Sequence())
	}
}

func TestIPv6Views(t *testing.T) {
	b := pt.V6{Src: "2001:db8::1", Dst: "ff02::2", Next: packet.ProtoUDP, HopLimit: 9, Flow: 0xabcde,
		Payload: pt.UDP(1, 2, nil, false), L4Proto: packet.ProtoUDP}.Bytes()
	ip := packet.IPv6(b)
	ip.SetTrafficClass(0xb8)
	if ip.Version() != 6 || ip.TrafficClass() != 0xb8 || ip.FlowLabel() != 0xabcde || ip.HopLimit() != 9 ||
		ip.PayloadLength() != 8 || ip.NextHeader() != packet.ProtoUDP || ip.DestinationAddress().String() != "ff02::2" {
		t.Errorf("ipv6 fields wrong: %x", b[:8])
	}
	f := packet.IPv6Fragment(pt.Frag(6, 1232, true, 0x01020304))
	if f.FragmentOffset() != 1232 || !f.More() || f.ID() != 0x01020304 || f.NextHeader() != 6 {
		t.Errorf("fragment view: off %d more %v id %#x", f.FragmentOffset(), f.More(), f.ID())
	}
}

func TestTCPOptions(t *testing.T) {
	opts := []byte{packet.TCPOptMSS, 4, 0x05, 0xb4, packet.TCPOptNOP, packet.TCPOptWS, 3, 7,
		packet.TCPOptSACKPermitted, 2, packet.TCPOptNOP, packet.TCPOptNOP}
	b := pt.TCP{Flags: packet.TCPFlagSyn, Options: opts}.Bytes()
	o := packet.TCP(b).ParseTCPOptions()
	want := packet.TCPSynOptions{MSS: 1460, HasMSS: true, WindowScale: 7, HasWS: true, SACKPermitted: true, MSSOffset: 22}
	if o != want {
		t.Errorf("got %+v, want %+v", o, want)
	}
	bad := pt.TCP{Flags: packet.TCPFlagSyn, Options: []byte{packet.TCPOptMSS, 40, 0, 0}}.Bytes()
	if o := packet.TCP(bad).ParseTCPOptions(); o.HasMSS {
		t.Errorf("malformed MSS accepted: %+v", o)
	}
}

func TestIPv4OptionWalk(t *testing.T) {
	opts := []byte{1, packet.IPOptLSRR, 7, 4, 1, 2, 3, 4, 0, 9}
	var types []uint8
	for rest := opts; ; {
		o, r, ok := packet.NextIPv4Option(rest)
		if !ok {
			break
		}
		types = append(types, o.Type)
		rest = r
	}
	if len(types) != 2 || types[0] != packet.IPOptNOP || types[1] != packet.IPOptLSRR {
		t.Errorf("walk: got %v", types)
	}
}

func BenchmarkChecksum1500(b *testing.B) {
	buf := make([]byte, 1500)
	b.SetBytes(1500)
	b.ReportAllocs()
	for b.Loop() {
		_ = packet.Checksum(buf, 0)
	}
}

// TestChecksumAgainstReference compares Checksum with a 16-bit-at-a-time
// RFC 1071 sum on random data of every length and alignment.
func TestChecksumAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ref := func(b []byte, init uint16) uint16 {
		s := uint32(init)
		for k := 0; k+1 < len(b); k += 2 {
			s += uint32(b[k])<<8 | uint32(b[k+1])
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
		for s > 0xffff {
			s = s>>16 + s&0xffff
		}
		return uint16(s)
	}
	buf := make([]byte, 300)
	for n := 0; n < 2000; n++ {
		for k := range buf {
			buf[k] = byte(r.Uint32())
			if n%3 == 0 {
				buf[k] = 0xff
			}
		}
		l := r.IntN(len(buf))
		init := uint16(r.Uint32())
		if got, want := packet.Checksum(buf[:l], init), ref(buf[:l], init); !sumEqual(got, want) {
			t.Fatalf("len %d: got %#04x, want %#04x", l, got, want)
		}
	}
}

func TestChecksumUpdateAddrIPv6(t *testing.T) {
	b := pt.V6{Src: "2001:db8::1", Dst: "2001:db8::2", Next: packet.ProtoTCP,
		Payload: pt.TCP{SrcPort: 5, DstPort: 6, Flags: packet.TCPFlagSyn}.Bytes(), L4Proto: packet.ProtoTCP}.Bytes()
	ip := packet.IPv6(b)
	tcp := packet.TCP(b[40:])
	na := netip.MustParseAddr("fd00:1234::77")
	tcp.UpdateChecksumPseudoHeaderAddress(ip.SourceAddress(), na)
	ip.SetSourceAddress(na)
	var in packet.Info
	if err := in.Parse(b, packet.ParseOptions{VerifyChecksums: true}); err != nil || in.Flags&packet.FlagBad != 0 {
		t.Errorf("after IPv6 address rewrite: err %v flags %#x", err, uint32(in.Flags))
	}
}

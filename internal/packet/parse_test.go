package packet_test

import (
	"errors"
	"testing"

	"sluice/internal/packet"
	pt "sluice/internal/packet/packettest"
)

const (
	F   = packet.FlagFrag
	FB  = packet.FlagFragBody
	SH  = packet.FlagShort
	BAD = packet.FlagBad
	TU  = packet.FlagTCPUDP
	OPT = packet.FlagOptions
	ERR = packet.FlagICMPErr
	Q   = packet.FlagICMPQuery
	X6  = packet.FlagV6ExtHdr
	MC  = packet.FlagMulticast | packet.FlagMBCast
)

func tcp4(flags uint8, mod func(*pt.TCP)) []byte {
	t := pt.TCP{SrcPort: 1025, DstPort: 25, Seq: 1, Flags: flags, Win: 4096}
	if mod != nil {
		mod(&t)
	}
	return pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoTCP, Payload: t.Bytes()}.Bytes()
}

func icmp4(typ, code uint8, rest uint32, data []byte) []byte {
	return pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoICMP, Payload: pt.ICMP(typ, code, rest, data)}.Bytes()
}

// embedded returns an IPv4 header+8 bytes as quoted in an ICMP error.
func embedded(src, dst string, flagsOff uint16) []byte {
	b := pt.V4{Src: src, Dst: dst, Proto: packet.ProtoUDP, FlagsOff: flagsOff,
		Payload: pt.UDP(1, 53, nil, true)}.Bytes()
	return b[:28]
}

type parseCase struct {
	name  string
	pkt   []byte
	want  packet.Flags // exact flag set expected
	check func(t *testing.T, in *packet.Info)
	err   error
}

func runCases(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in packet.Info
			err := in.Parse(c.pkt, packet.ParseOptions{VerifyChecksums: true})
			if !errors.Is(err, c.err) {
				t.Fatalf("Parse error: got %v, want %v", err, c.err)
			}
			if in.Flags != c.want {
				t.Errorf("flags: got %#x, want %#x", uint32(in.Flags), uint32(c.want))
			}
			if c.check != nil {
				c.check(t, &in)
			}
		})
	}
}

func TestParseTCPFlags(t *testing.T) {
	ports := func(t *testing.T, in *packet.Info) {
		if in.SrcPort != 1025 || in.DstPort != 25 {
			t.Errorf("ports: got %d,%d, want 1025,25", in.SrcPort, in.DstPort)
		}
	}
	const (
		fin = packet.TCPFlagFin
		syn = packet.TCPFlagSyn
		rst = packet.TCPFlagRst
		psh = packet.TCPFlagPsh
		ack = packet.TCPFlagAck
		urg = packet.TCPFlagUrg
	)
	runCases(t, []parseCase{
		{name: "syn", pkt: tcp4(syn, nil), want: TU, check: func(t *testing.T, in *packet.Info) {
			ports(t, in)
			if in.TCPFlags != syn || in.Seq != 1 || in.Win != 4096 || in.TCPHdrLen != 20 || in.DLen != 20 {
				t.Errorf("tcp fields: %+v", *in)
			}
		}},
		{name: "syn-ack", pkt: tcp4(syn|ack, nil), want: TU},
		{name: "fin-ack", pkt: tcp4(fin|ack, nil), want: TU},
		{name: "rst", pkt: tcp4(rst, nil), want: TU},
		{name: "fin-rst-ack natural", pkt: tcp4(fin|rst|ack, nil), want: TU},
		{name: "syn with ack field", pkt: tcp4(syn, func(x *pt.TCP) { x.Ack = 99 }), want: TU},
		{name: "urg with urp", pkt: tcp4(ack|urg, func(x *pt.TCP) { x.Urp = 1 }), want: TU},
		{name: "urg without urp", pkt: tcp4(ack|urg, nil), want: TU | BAD},
		{name: "syn-rst", pkt: tcp4(syn|rst, nil), want: TU | BAD},
		{name: "fin-rst", pkt: tcp4(fin|rst, nil), want: TU | BAD},
		{name: "syn-psh", pkt: tcp4(syn|psh|ack, nil), want: TU | BAD},
		{name: "syn-urg", pkt: tcp4(syn|urg|ack, func(x *pt.TCP) { x.Urp = 5 }), want: TU | BAD},
		{name: "null", pkt: tcp4(0, nil), want: TU | BAD},
		{name: "fin only", pkt: tcp4(fin, nil), want: TU | BAD},
		{name: "psh only", pkt: tcp4(psh, nil), want: TU | BAD},
		{name: "rst-psh", pkt: tcp4(rst|psh, nil), want: TU | BAD},
		{name: "doff below 5", pkt: tcp4(ack, func(x *pt.TCP) { x.DataOff = 16 }), want: TU | BAD},
		{name: "bad checksum", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoTCP, BadL4Sum: true,
			Payload: pt.TCP{Flags: ack}.Bytes()}.Bytes(), want: TU | BAD},
		{name: "short", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoTCP,
			Payload: pt.TCP{SrcPort: 1025, DstPort: 25, Flags: ack}.Bytes()[:10]}.Bytes(), want: TU | SH, check: ports},
		{name: "short 3 bytes", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoTCP,
			Payload: []byte{4, 1, 0}}.Bytes(), want: TU | SH, check: func(t *testing.T, in *packet.Info) {
			if in.SrcPort != 0 {
				t.Errorf("ports read from 3 bytes: %d", in.SrcPort)
			}
		}},
		{name: "ip_len beyond data", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoTCP, TotalLen: 60,
			Payload: pt.TCP{Flags: ack}.Bytes()[:10]}.Bytes(), want: TU | BAD, err: packet.ErrPullup},
		{name: "multicast dst", pkt: pt.V4{Src: "1.1.1.1", Dst: "224.0.0.1", Proto: packet.ProtoUDP,
			Payload: pt.UDP(1, 2, nil, false)}.Bytes(), want: TU | MC},
	})
}

func TestParseUDP(t *testing.T) {
	runCases(t, []parseCase{
		{name: "ok", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoUDP,
			Payload: pt.UDP(53, 1024, []byte("abc"), false)}.Bytes(), want: TU},
		{name: "no checksum", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoUDP,
			Payload: pt.UDP(53, 1024, []byte("abc"), true)}.Bytes(), want: TU},
		{name: "bad checksum", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoUDP, BadL4Sum: true,
			Payload: pt.UDP(53, 1024, []byte("abc"), false)}.Bytes(), want: TU | BAD},
		{name: "short", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoUDP,
			Payload: pt.UDP(53, 1024, nil, true)[:6]}.Bytes(), want: TU | SH | BAD, err: packet.ErrPullup},
		{name: "empty", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoUDP}.Bytes(), want: TU | SH},
	})
}

func TestParseFragments(t *testing.T) {
	frag := func(flagsOff uint16, proto uint8, payload []byte) []byte {
		return pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: proto, FlagsOff: flagsOff, Payload: payload}.Bytes()
	}
	const mf = packet.IPv4FlagMoreFragments
	runCases(t, []parseCase{
		{name: "first fragment", pkt: frag(mf, packet.ProtoUDP, pt.UDP(1, 2, make([]byte, 8), true)), want: F | TU,
			check: func(t *testing.T, in *packet.Info) {
				if !in.MoreFrags || in.Off != 0 || in.SrcPort != 1 {
					t.Errorf("got MF=%v off=%d sport=%d", in.MoreFrags, in.Off, in.SrcPort)
				}
			}},
		{name: "middle fragment", pkt: frag(mf|2, packet.ProtoUDP, make([]byte, 16)), want: F | FB | TU,
			check: func(t *testing.T, in *packet.Info) {
				if in.Off != 16 || in.SrcPort != 0 {
					t.Errorf("got off=%d sport=%d, want 16, 0", in.Off, in.SrcPort)
				}
			}},
		{name: "short first tcp fragment keeps ports (f12)", pkt: frag(mf, packet.ProtoTCP,
			pt.TCP{SrcPort: 1025, DstPort: 25}.Bytes()[:8]), want: F | TU | SH,
			check: func(t *testing.T, in *packet.Info) {
				if in.SrcPort != 1025 || in.DstPort != 25 {
					t.Errorf("ports %d,%d, want 1025,25", in.SrcPort, in.DstPort)
				}
			}},
		{name: "udp first fragment with 4 bytes is dropped (f12)", pkt: frag(mf, packet.ProtoUDP, []byte{0, 53, 0, 53}),
			want: F | TU | SH | BAD, err: packet.ErrPullup},
		{name: "last fragment odd length", pkt: frag(2, packet.ProtoUDP, make([]byte, 13)), want: F | FB | TU},
		{name: "middle fragment odd length", pkt: frag(mf|2, packet.ProtoUDP, make([]byte, 13)), want: F | FB | TU | BAD},
		{name: "empty fragment body", pkt: frag(2, packet.ProtoUDP, nil), want: F | FB | TU | BAD},
		{name: "beyond 65535", pkt: frag(0x1fff, packet.ProtoUDP, make([]byte, 16)), want: F | FB | TU | BAD},
		{name: "tcp offset 1 (RFC 3128)", pkt: frag(1, packet.ProtoTCP, make([]byte, 16)), want: F | FB | TU | SH},
		{name: "udp offset 1 overlaps header", pkt: frag(1, packet.ProtoUDP, make([]byte, 16)), want: F | FB | TU},
		{name: "icmp offset 1", pkt: frag(1, packet.ProtoICMP, make([]byte, 16)), want: F | FB},
	})
}

func TestParseICMP(t *testing.T) {
	query := func(t *testing.T, in *packet.Info) {
		if !in.HasICMP {
			t.Error("HasICMP false")
		}
	}
	runCases(t, []parseCase{
		{name: "echo", pkt: icmp4(8, 0, 0x12340001, nil), want: Q, check: func(t *testing.T, in *packet.Info) {
			query(t, in)
			if in.ICMPType != 8 || in.ICMPID != 0x1234 {
				t.Errorf("type %d id %#x", in.ICMPType, in.ICMPID)
			}
		}},
		{name: "echo reply", pkt: icmp4(0, 0, 0, nil), want: Q},
		{name: "router solicit", pkt: icmp4(10, 0, 0, nil), want: Q},
		{name: "timestamp short", pkt: icmp4(13, 0, 0, nil), want: Q | SH},
		{name: "timestamp", pkt: icmp4(13, 0, 0, make([]byte, 12)), want: Q},
		{name: "mask request short", pkt: icmp4(17, 0, 0, nil), want: Q | SH},
		{name: "mask request", pkt: icmp4(17, 0, 0, make([]byte, 4)), want: Q},
		{name: "info request is not a query", pkt: icmp4(15, 0, 0, make([]byte, 20)), want: 0},
		{name: "header short", pkt: pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoICMP,
			Payload: []byte{8, 0, 0, 0}}.Bytes(), want: SH | BAD, err: packet.ErrPullup},
		{name: "unreach ok", pkt: icmp4(3, 3, 0, embedded("2.2.2.2", "1.1.1.1", 0)), want: ERR},
		// no quoted header to hold the source the error must go to: bad
		{name: "unreach too short", pkt: icmp4(3, 3, 0, nil), want: ERR | SH | BAD},
		{name: "unreach embedded src mismatch", pkt: icmp4(3, 3, 0, embedded("9.9.9.9", "1.1.1.1", 0)), want: ERR | BAD},
		{name: "unreach embedded non-first fragment", pkt: icmp4(3, 1, 0, embedded("2.2.2.2", "1.1.1.1", 5)), want: ERR | BAD},
		{name: "needfrag small mtu", pkt: icmp4(3, 4, 60, embedded("2.2.2.2", "1.1.1.1", 0)), want: ERR | BAD},
		{name: "needfrag mtu 68", pkt: icmp4(3, 4, 68, embedded("2.2.2.2", "1.1.1.1", 0)), want: ERR},
		{name: "timex", pkt: icmp4(11, 0, 0, embedded("2.2.2.2", "1.1.1.1", 0)), want: ERR},
		{name: "bad checksum", pkt: func() []byte {
			b := icmp4(8, 0, 0, nil)
			b[22] ^= 0xff
			return b
		}(), want: Q | BAD},
	})
}

func TestParseIPv4Options(t *testing.T) {
	opt := func(o ...byte) []byte {
		return pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: 0, Options: o}.Bytes()
	}
	mask := func(want uint32, sec uint16) func(*testing.T, *packet.Info) {
		return func(t *testing.T, in *packet.Info) {
			if in.OptMask != want || in.SecMask != sec {
				t.Errorf("optmask %#x secmask %#x, want %#x %#x", in.OptMask, in.SecMask, want, sec)
			}
		}
	}
	lsrr := []byte{packet.IPOptLSRR, 7, 4, 1, 2, 3, 4}
	sec := []byte{packet.IPOptSecurity, 11, 0x3d, 0, 0, 0, 0, 0, 0, 0, 0}
	runCases(t, []parseCase{
		{name: "lsrr", pkt: opt(pt.Cat(lsrr, []byte{0})...), want: OPT, check: mask(packet.OptLSRR, 0)},
		{name: "nop only records no bit", pkt: opt(1, 1, 1, 0), want: OPT, check: mask(0, 0)},
		{name: "4-byte option records no bit", pkt: opt(packet.IPOptSATID, 4, 0, 1), want: OPT, check: mask(0, 0)},
		{name: "security topsecret", pkt: opt(pt.Cat(sec, []byte{0})...), want: OPT, check: mask(packet.OptSecurity, packet.SecTopSecret)},
		{name: "duplicate security", pkt: opt(pt.Cat(sec, sec, []byte{0, 0})...), want: OPT | BAD},
		{name: "bad length stops walk", pkt: opt(pt.Cat([]byte{packet.IPOptTS, 1, 0, 0}, lsrr, []byte{0})...), want: OPT, check: mask(0, 0)},
		{name: "length beyond header stops walk", pkt: opt(packet.IPOptRR, 40, 0, 0), want: OPT, check: mask(0, 0)},
		{name: "eol ends", pkt: opt(pt.Cat([]byte{0}, lsrr)...), want: OPT, check: mask(0, 0)},
	})
}

func TestParseIPv6(t *testing.T) {
	tcp := pt.TCP{SrcPort: 1, DstPort: 80, Flags: packet.TCPFlagSyn, Data: []byte{1, 2, 3, 4}}.Bytes()
	v6 := func(next uint8, l4off int, l4 uint8, payload ...[]byte) []byte {
		return pt.V6{Src: "2001:db8::1", Dst: "2001:db8::2", Next: next, Payload: pt.Cat(payload...),
			L4Off: l4off, L4Proto: l4}.Bytes()
	}
	ext := func(want uint32, proto uint8) func(*testing.T, *packet.Info) {
		return func(t *testing.T, in *packet.Info) {
			if in.OptMask != want || in.Proto != proto {
				t.Errorf("optmask %#x proto %d, want %#x %d", in.OptMask, in.Proto, want, proto)
			}
		}
	}
	const (
		hop = packet.ProtoHopOpts
		dst = packet.ProtoDstOpts
		rt  = packet.ProtoRouting
		fr  = packet.ProtoFragment
		tp  = packet.ProtoTCP
	)
	icmp6 := func(typ uint8, data []byte) []byte {
		return v6(packet.ProtoICMPv6, 0, packet.ProtoICMPv6, pt.ICMP(typ, 0, 0, data))
	}
	quoted := pt.V6{Src: "2001:db8::2", Dst: "2001:db8::9", Next: packet.ProtoUDP, Payload: pt.UDP(1, 2, nil, true)}.Bytes()
	wrongQuote := pt.V6{Src: "2001:db8::7", Dst: "2001:db8::9", Next: packet.ProtoUDP, Payload: pt.UDP(1, 2, nil, true)}.Bytes()
	runCases(t, []parseCase{
		{name: "tcp", pkt: v6(tp, 0, tp, tcp), want: TU, check: ext(0, tp)},
		{name: "bad tcp checksum", pkt: pt.V6{Src: "2001:db8::1", Dst: "2001:db8::2", Next: tp, Payload: tcp,
			L4Proto: tp, BadL4Sum: true}.Bytes(), want: TU | BAD},
		// IPFilter does not mark an IPv6 packet multicast by its
		// destination (only the link layer's flags do).
		{name: "multicast", pkt: pt.V6{Src: "2001:db8::1", Dst: "ff02::1", Next: tp, Payload: tcp, L4Proto: tp}.Bytes(),
			want: TU},
		{name: "hop-by-hop", pkt: v6(hop, 8, tp, pt.Ext(tp, 0), tcp), want: TU | X6, check: ext(packet.ExtHopOpts, tp)},
		{name: "hop-by-hop twice", pkt: v6(hop, 16, tp, pt.Ext(hop, 0), pt.Ext(tp, 0), tcp), want: TU | X6 | BAD},
		// IPFilter calls a second destination-options header bad, as it
		// does a second of any other (its ipftest: `with bad` matches).
		{name: "dstopts twice bad", pkt: v6(dst, 24, tp, pt.Ext(dst, 0), pt.Ext(tp, 1), tcp), want: TU | X6 | BAD,
			check: ext(packet.ExtDstOpts, tp)},
		{name: "dstopts around routing bad", pkt: v6(dst, 24, tp, pt.Ext(rt, 0), pt.Routing(dst, 0, 2, 0), pt.Ext(tp, 0), tcp),
			want: TU | X6 | BAD, check: ext(packet.ExtDstOpts|packet.ExtRouting, tp)},
		{name: "routing ok", pkt: v6(rt, 24, tp, pt.Routing(tp, 2, 0, 1), tcp), want: TU | X6, check: ext(packet.ExtRouting, tp)},
		{name: "routing type0 segleft too big", pkt: v6(rt, 24, tp, pt.Routing(tp, 2, 0, 2), tcp), want: X6 | BAD},
		{name: "routing type0 odd len", pkt: v6(rt, 32, tp, pt.Routing(tp, 3, 0, 1), tcp), want: X6 | BAD},
		{name: "routing type2 unchecked", pkt: v6(rt, 32, tp, pt.Routing(tp, 3, 2, 9), tcp), want: TU | X6},
		{name: "ext header short", pkt: v6(hop, 0, 0, []byte{tp, 0, 0, 0}), want: X6 | SH},
		{name: "ext header length beyond data", pkt: v6(hop, 0, 0, pt.Ext(tp, 4)[:16]), want: X6 | BAD},
		{name: "first fragment", pkt: v6(fr, 8, tp, pt.Frag(tp, 0, true, 7), tcp), want: X6 | F | TU,
			check: func(t *testing.T, in *packet.Info) {
				ext(packet.ExtFragment, tp)(t, in)
				if in.ID != 7 || !in.MoreFrags || in.FragHdrOff != 40 {
					t.Errorf("id %d mf %v fragoff %d", in.ID, in.MoreFrags, in.FragHdrOff)
				}
			}},
		{name: "fragment body stops walk", pkt: v6(fr, 0, 0, pt.Frag(tp, 64, false, 7), make([]byte, 13)),
			want: X6 | F | FB, check: func(t *testing.T, in *packet.Info) {
				if in.Off != 64 || in.Proto != tp || in.SrcPort != 0 {
					t.Errorf("off %d proto %d sport %d", in.Off, in.Proto, in.SrcPort)
				}
			}},
		{name: "non-final fragment not multiple of 8", pkt: v6(fr, 0, 0, pt.Frag(tp, 64, true, 7), make([]byte, 13)),
			want: X6 | F | FB | BAD},
		{name: "headers after fragment not recorded", pkt: v6(fr, 16, tp, pt.Frag(dst, 0, true, 1), pt.Ext(tp, 0), tcp),
			want: X6 | F | TU, check: ext(packet.ExtFragment, tp)},
		{name: "first fragment without transport header", pkt: v6(fr, 0, 0, pt.Frag(dst, 0, true, 1), []byte{tp, 0}),
			want: X6 | F | SH | BAD},
		{name: "ah recorded as hop-by-hop", pkt: v6(packet.ProtoAH, 16, tp, pt.Ext(tp, 1), tcp), want: TU | X6 | packet.FlagAH,
			check: ext(packet.ExtHopOpts, tp)},
		{name: "icmpv6 echo", pkt: icmp6(128, nil), want: Q},
		{name: "icmpv6 unreach ok", pkt: icmp6(1, quoted), want: ERR},
		{name: "icmpv6 unreach wrong source", pkt: icmp6(1, wrongQuote), want: ERR | BAD},
		{name: "icmpv6 unreach short", pkt: icmp6(1, quoted[:30]), want: ERR | SH},
		{name: "esp", pkt: v6(packet.ProtoESP, 0, 0, make([]byte, 16)), want: 0, check: ext(0, packet.ProtoESP)},
		{name: "jumbogram", pkt: v6(tp, 0, 0, nil), want: BAD, err: packet.ErrJumbogram},
	})
}

func TestParseErrors(t *testing.T) {
	good := tcp4(packet.TCPFlagSyn, nil)
	hl4 := append([]byte{0x44}, good[1:]...)
	v5 := append([]byte{0x55}, good[1:]...)
	shortLen := append([]byte(nil), good...)
	shortLen[2], shortLen[3] = 0, 10
	runCases(t, []parseCase{
		{name: "empty", pkt: nil, want: BAD, err: packet.ErrTruncated},
		{name: "truncated v4", pkt: good[:12], want: BAD, err: packet.ErrTruncated},
		{name: "ihl below 5", pkt: hl4, want: BAD, err: packet.ErrHeaderLen},
		{name: "version 5", pkt: v5, want: BAD, err: packet.ErrVersion},
		{name: "total length below header", pkt: shortLen, want: BAD, err: packet.ErrTotalLen},
		{name: "truncated v6", pkt: []byte{0x60, 0, 0, 0}, want: BAD, err: packet.ErrTruncated},
	})
}

func TestParseIgnoresLinkPadding(t *testing.T) {
	b := append(tcp4(packet.TCPFlagSyn, nil), 0xde, 0xad, 0xbe, 0xef)
	var in packet.Info
	if err := in.Parse(b, packet.ParseOptions{VerifyChecksums: true}); err != nil {
		t.Fatal(err)
	}
	if in.Flags != TU || in.PLen != 40 || in.DLen != 20 {
		t.Errorf("flags %#x plen %d dlen %d, want %#x 40 20", uint32(in.Flags), in.PLen, in.DLen, uint32(TU))
	}
}

func TestParseAH4(t *testing.T) {
	ah := make([]byte, 16)
	ah[0], ah[1] = packet.ProtoUDP, 2 // (2+2)*4 = 16 bytes
	b := pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoAH, Payload: pt.Cat(ah, pt.UDP(7, 9, nil, true))}.Bytes()
	var in packet.Info
	if err := in.Parse(b, packet.ParseOptions{VerifyChecksums: true}); err != nil {
		t.Fatal(err)
	}
	if in.Proto != packet.ProtoAH || in.L4Proto != packet.ProtoUDP || in.SrcPort != 7 || in.L4Off != 36 || in.DLen != 8 {
		t.Errorf("got proto %d l4proto %d sport %d l4off %d dlen %d", in.Proto, in.L4Proto, in.SrcPort, in.L4Off, in.DLen)
	}
	if in.Flags != packet.FlagAH|TU {
		t.Errorf("flags %#x", uint32(in.Flags))
	}
}

func TestParseLinkFlags(t *testing.T) {
	var in packet.Info
	if err := in.Parse(tcp4(packet.TCPFlagSyn, nil), packet.ParseOptions{LinkFlags: packet.FlagBroadcast | packet.FlagMBCast}); err != nil {
		t.Fatal(err)
	}
	if in.Flags != TU|packet.FlagBroadcast|packet.FlagMBCast {
		t.Errorf("flags %#x", uint32(in.Flags))
	}
}

func TestParseNoAllocs(t *testing.T) {
	pkts := [][]byte{
		tcp4(packet.TCPFlagSyn|packet.TCPFlagAck, nil),
		icmp4(3, 3, 0, embedded("2.2.2.2", "1.1.1.1", 0)),
		pt.V6{Src: "2001:db8::1", Dst: "2001:db8::2", Next: packet.ProtoHopOpts,
			Payload: pt.Cat(pt.Ext(packet.ProtoTCP, 0), pt.TCP{Flags: packet.TCPFlagSyn}.Bytes()), L4Off: 8, L4Proto: packet.ProtoTCP}.Bytes(),
	}
	var in packet.Info
	for _, p := range pkts {
		n := testing.AllocsPerRun(100, func() {
			_ = in.Parse(p, packet.ParseOptions{VerifyChecksums: true})
		})
		if n != 0 {
			t.Errorf("Parse allocates %v times per packet", n)
		}
	}
}

func BenchmarkParseTCP4(b *testing.B) {
	p := tcp4(packet.TCPFlagSyn|packet.TCPFlagAck, func(x *pt.TCP) { x.Data = make([]byte, 1400) })
	benchParse(b, p, false)
}

func BenchmarkParseTCP4Checksum(b *testing.B) {
	p := tcp4(packet.TCPFlagSyn|packet.TCPFlagAck, func(x *pt.TCP) { x.Data = make([]byte, 1400) })
	benchParse(b, p, true)
}

func BenchmarkParseTCP6Ext(b *testing.B) {
	p := pt.V6{Src: "2001:db8::1", Dst: "2001:db8::2", Next: packet.ProtoHopOpts,
		Payload: pt.Cat(pt.Ext(packet.ProtoTCP, 0), pt.TCP{Flags: packet.TCPFlagAck}.Bytes()), L4Off: 8, L4Proto: packet.ProtoTCP}.Bytes()
	benchParse(b, p, false)
}

func benchParse(b *testing.B, p []byte, sum bool) {
	var in packet.Info
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		_ = in.Parse(p, packet.ParseOptions{VerifyChecksums: sum})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(tcp4(packet.TCPFlagSyn, nil))
	f.Add(icmp4(3, 3, 0, embedded("2.2.2.2", "1.1.1.1", 0)))
	f.Add(pt.V4{Src: "1.1.1.1", Dst: "2.1.1.1", Options: []byte{packet.IPOptLSRR, 7, 4, 1, 2, 3, 4, 0}}.Bytes())
	f.Add(pt.V6{Src: "::1", Dst: "::2", Next: packet.ProtoFragment, Payload: pt.Cat(pt.Frag(packet.ProtoRouting, 0, true, 1),
		pt.Routing(packet.ProtoTCP, 2, 0, 1))}.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		var in packet.Info
		err := in.Parse(b, packet.ParseOptions{VerifyChecksums: true})
		if err != nil && in.Flags&packet.FlagBad == 0 {
			t.Fatalf("error %v without FlagBad", err)
		}
		if err == nil && (in.L4Off < 0 || in.DLen < 0 || in.L4Off > in.PLen) {
			t.Fatalf("inconsistent offsets: l4off %d dlen %d plen %d", in.L4Off, in.DLen, in.PLen)
		}
	})
}

func TestParseIPv6FragmentOffsetQuirk(t *testing.T) {
	mk := func(off int) []byte {
		return pt.V6{Src: "2001:db8::1", Dst: "2001:db8::2", Next: packet.ProtoFragment,
			Payload: pt.Cat(pt.Frag(packet.ProtoUDP, off, false, 1), make([]byte, 16))}.Bytes()
	}
	for _, c := range []struct {
		off int
		bad bool
	}{{8, false}, {8184, false}, {8192, true}} {
		var in packet.Info
		if err := in.Parse(mk(c.off), packet.ParseOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := in.Flags&packet.FlagBad != 0; got != c.bad {
			t.Errorf("offset %d: bad %v, want %v", c.off, got, c.bad)
		}
	}
}

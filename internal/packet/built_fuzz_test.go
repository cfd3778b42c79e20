package packet_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"sluice/internal/packet"
	pt "sluice/internal/packet/packettest"
)

// FuzzParseBuilt builds a well-formed TCP or UDP packet, IPv4 or IPv6
// (behind up to three different extension headers), from fuzzed fields
// and requires Parse to give back exactly the fields it was built from,
// and to call it bad exactly when ipf-reference §2.1's TCP flag rules do. FuzzParse only holds Parse to "no panic and
// consistent offsets" on junk; this one catches a decoder that reads a
// field from the wrong offset, truncates a length or flags a good packet.
func FuzzParseBuilt(f *testing.F) {
	f.Add(false, false, uint64(0x0a000001), uint64(0x0a000002), uint16(1025), uint16(80), uint8(packet.TCPFlagSyn), uint32(1), uint32(0), uint16(512), uint16(0), uint8(64), uint8(0), []byte("x"))
	f.Add(true, true, uint64(0x20010db8<<32), uint64(9), uint16(53), uint16(53000), uint8(0), uint32(0), uint32(0), uint16(0), uint16(0), uint8(1), uint8(2), []byte{})
	f.Add(true, false, uint64(0xfe80<<48), uint64(1), uint16(0), uint16(0), uint8(0x3f), uint32(1<<31), uint32(7), uint16(65535), uint16(1), uint8(255), uint8(3), []byte("data"))
	f.Fuzz(func(t *testing.T, v6, udp bool, src, dst uint64, sport, dport uint16, flags uint8, seq, ack uint32, win, urp uint16, ttl, exts uint8, data []byte) {
		if len(data) > 1400 {
			data = data[:1400]
		}
		proto := uint8(packet.ProtoTCP)
		var l4 []byte
		if udp {
			proto = packet.ProtoUDP
			l4 = pt.UDP(sport, dport, data, false)
		} else {
			l4 = pt.TCP{SrcPort: sport, DstPort: dport, Seq: seq, Ack: ack, Flags: flags, Win: win, Urp: urp, Data: data}.Bytes()
		}
		var b []byte
		var s, d netip.Addr
		l4off := 20
		if v6 {
			var sa, da [16]byte
			binary.BigEndian.PutUint64(sa[:], src)
			binary.BigEndian.PutUint64(sa[8:], ^src)
			binary.BigEndian.PutUint64(da[:], dst)
			binary.BigEndian.PutUint64(da[8:], ^dst)
			s, d = netip.AddrFrom16(sa), netip.AddrFrom16(da)
			next, payload := proto, l4
			// a repeated header is bad (ipf-reference §2.1): one each
			for _, h := range []uint8{packet.ProtoDstOpts, packet.ProtoRouting, packet.ProtoHopOpts}[:exts%4] {
				ext := pt.Ext(next, exts>>2&3)
				if h == packet.ProtoRouting {
					ext = pt.Routing(next, exts>>2&3, 2, 0)
				}
				payload, next = pt.Cat(ext, payload), h
			}
			l4off = 40 + len(payload) - len(l4)
			b = pt.V6{Src: s.String(), Dst: d.String(), Next: next, HopLimit: ttl, Payload: payload,
				L4Off: len(payload) - len(l4), L4Proto: proto}.Bytes()
		} else {
			var sa, da [4]byte
			binary.BigEndian.PutUint32(sa[:], uint32(src))
			binary.BigEndian.PutUint32(da[:], uint32(dst))
			s, d = netip.AddrFrom4(sa), netip.AddrFrom4(da)
			if ttl == 0 {
				ttl = 1 // V4 would write 64 for 0
			}
			b = pt.V4{Src: s.String(), Dst: d.String(), Proto: proto, TTL: ttl, Payload: l4}.Bytes()
		}
		var in packet.Info
		if err := in.Parse(b, packet.ParseOptions{VerifyChecksums: true}); err != nil {
			t.Fatalf("parse of a built packet: %v (% x)", err, b)
		}
		if in.Flags&(packet.FlagShort|packet.FlagFrag) != 0 {
			t.Fatalf("flags %#x on a whole, long enough packet (% x)", in.Flags, b)
		}
		if bad := !udp && tcpBad(flags, urp); bad != (in.Flags&packet.FlagBad != 0) {
			t.Fatalf("flags %#x, TCP flags %#x urp %d: bad is %v by the reference (% x)", in.Flags, flags, urp, bad, b)
		}
		want := packet.Info{Version: 4, Proto: proto, L4Proto: proto, TTL: ttl, Src: s, Dst: d, SrcPort: sport, DstPort: dport,
			PLen: len(b), HLen: 20, DLen: len(b) - l4off, L4Off: l4off}
		if v6 {
			want.Version, want.HLen = 6, 40
		}
		if !udp {
			want.TCPFlags, want.Seq, want.Ack, want.Win, want.TCPHdrLen = flags, seq, ack, win, 20
		}
		got := packet.Info{Version: in.Version, Proto: in.Proto, L4Proto: in.L4Proto, TTL: in.TTL, Src: in.Src, Dst: in.Dst,
			SrcPort: in.SrcPort, DstPort: in.DstPort, PLen: in.PLen, HLen: in.HLen, DLen: in.DLen, L4Off: in.L4Off,
			TCPFlags: in.TCPFlags, Seq: in.Seq, Ack: in.Ack, Win: in.Win, TCPHdrLen: in.TCPHdrLen}
		if got != want {
			t.Fatalf("parsed\n%+v\nbuilt\n%+v\n(% x)", got, want, b)
		}
		if in.Flags&packet.FlagTCPUDP == 0 {
			t.Fatalf("flags %#x: TCP/UDP packet without FlagTCPUDP", in.Flags)
		}
		if in.TCPDataLen() != len(data) && !udp {
			t.Fatalf("TCP data length %d, built with %d", in.TCPDataLen(), len(data))
		}
	})
}

// tcpBad is ipf-reference §2.1's "TCP bad" list, written from the
// reference rather than from the parser.
func tcpBad(flags uint8, urp uint16) bool {
	has := func(f uint8) bool { return flags&f != 0 }
	fin, syn, rst := has(packet.TCPFlagFin), has(packet.TCPFlagSyn), has(packet.TCPFlagRst)
	psh, ack, urg := has(packet.TCPFlagPsh), has(packet.TCPFlagAck), has(packet.TCPFlagUrg)
	return urg && urp == 0 ||
		(syn || fin) && rst && !ack ||
		syn && (urg || psh) ||
		!ack && !syn && !rst ||
		!ack && (syn || rst) && (urg || psh || fin)
}

// Package packettest builds packets for tests: IPv4 and IPv6 headers
// with options or extension headers, TCP, UDP, ICMP and ICMPv6, with
// correct lengths and checksums unless a test asks otherwise.
package packettest

import (
	"encoding/binary"
	"net/netip"

	"sluice/internal/packet"
)

// V4 describes an IPv4 packet.
type V4 struct {
	Src, Dst string
	Proto    uint8
	TTL      uint8
	ID       uint16
	// FlagsOff is the raw flags/fragment-offset word.
	FlagsOff uint16
	// Options are appended to the header (must be a multiple of 4 bytes).
	Options []byte
	// Payload is the transport header and data.
	Payload []byte
	// TotalLen overrides ip_len when non-zero.
	TotalLen int
	// BadL4Sum leaves the transport checksum wrong.
	BadL4Sum bool
}

// Bytes returns the packet.
func (v V4) Bytes() []byte {
	hl := 20 + len(v.Options)
	b := make([]byte, hl+len(v.Payload))
	ip := packet.IPv4(b)
	ip.SetVersionAndHeaderLength(hl)
	tl := len(b)
	if v.TotalLen != 0 {
		tl = v.TotalLen
	}
	ip.SetTotalLength(uint16(tl))
	ip.SetID(v.ID)
	ip.SetFlagsFragmentOffset(v.FlagsOff)
	ttl := v.TTL
	if ttl == 0 {
		ttl = 64
	}
	ip.SetTTL(ttl)
	ip.SetProtocol(v.Proto)
	ip.SetSourceAddress(netip.MustParseAddr(v.Src))
	ip.SetDestinationAddress(netip.MustParseAddr(v.Dst))
	copy(b[20:], v.Options)
	copy(b[hl:], v.Payload)
	ip.SetChecksum(ip.CalculateChecksum())
	if v.FlagsOff&packet.IPv4OffsetMask == 0 {
		fixL4(b[hl:], v.Proto, ip.SourceAddress(), ip.DestinationAddress(), v.BadL4Sum)
	}
	return b
}

// V6 describes an IPv6 packet; Payload holds extension headers and the
// transport header in order.
type V6 struct {
	Src, Dst string
	Next     uint8
	HopLimit uint8
	Flow     uint32
	Payload  []byte
	// PayloadLen overrides the payload length when non-zero.
	PayloadLen int
	// L4Off is the offset of the transport header in Payload, used to
	// fix its checksum (with L4Proto); ignored when L4Proto is 0.
	L4Off    int
	L4Proto  uint8
	BadL4Sum bool
}

// Bytes returns the packet.
func (v V6) Bytes() []byte {
	b := make([]byte, 40+len(v.Payload))
	ip := packet.IPv6(b)
	ip.SetVersionTrafficClassFlow(6<<28 | v.Flow&0xfffff)
	pl := len(v.Payload)
	if v.PayloadLen != 0 {
		pl = v.PayloadLen
	}
	ip.SetPayloadLength(uint16(pl))
	ip.SetNextHeader(v.Next)
	ip.SetHopLimit(v.HopLimit)
	ip.SetSourceAddress(netip.MustParseAddr(v.Src))
	ip.SetDestinationAddress(netip.MustParseAddr(v.Dst))
	copy(b[40:], v.Payload)
	if v.L4Proto != 0 {
		fixL4(b[40+v.L4Off:], v.L4Proto, ip.SourceAddress(), ip.DestinationAddress(), v.BadL4Sum)
	}
	return b
}

func fixL4(l4 []byte, proto uint8, src, dst netip.Addr, bad bool) {
	var off int
	pseudo := packet.PseudoHeaderChecksum(proto, src, dst, len(l4))
	switch proto {
	case packet.ProtoTCP:
		off = 16
	case packet.ProtoUDP:
		off = 6
		if len(l4) >= 8 && binary.BigEndian.Uint16(l4[6:]) == 0 && !bad {
			return // keep "no checksum"
		}
	case packet.ProtoICMP:
		off, pseudo = 2, 0
	case packet.ProtoICMPv6:
		off = 2
	default:
		return
	}
	if len(l4) < off+2 {
		return
	}
	binary.BigEndian.PutUint16(l4[off:], 0)
	sum := ^packet.Checksum(l4, pseudo)
	if bad {
		sum ^= 0x5a5a
	}
	binary.BigEndian.PutUint16(l4[off:], sum)
}

// TCP describes a TCP header.
type TCP struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Flags            uint8
	Win, Urp         uint16
	// DataOff is the header length in bytes (0 = 20 + len(Options)).
	DataOff int
	Options []byte
	Data    []byte
}

// Bytes returns the header and data (checksum filled by V4/V6).
func (t TCP) Bytes() []byte {
	hl := 20 + len(t.Options)
	b := make([]byte, hl+len(t.Data))
	h := packet.TCP(b)
	h.SetSourcePort(t.SrcPort)
	h.SetDestinationPort(t.DstPort)
	h.SetSequenceNumber(t.Seq)
	h.SetAckNumber(t.Ack)
	doff := t.DataOff
	if doff == 0 {
		doff = hl
	}
	h.SetDataOffset(doff)
	h.SetFlags(t.Flags)
	h.SetWindowSize(t.Win)
	h.SetUrgentPointer(t.Urp)
	copy(b[20:], t.Options)
	copy(b[hl:], t.Data)
	return b
}

// UDP returns a UDP header with data; the checksum is filled by V4/V6
// unless noSum is set (checksum 0).
func UDP(sport, dport uint16, data []byte, noSum bool) []byte {
	b := make([]byte, 8+len(data))
	u := packet.UDP(b)
	u.SetSourcePort(sport)
	u.SetDestinationPort(dport)
	u.SetLength(uint16(len(b)))
	if !noSum {
		u.SetChecksum(1) // any non-zero value: V4/V6 recompute it
	}
	copy(b[8:], data)
	return b
}

// ICMP returns an ICMP (or ICMPv6) header: type, code, the 4-byte rest
// of header, then data.
func ICMP(typ, code uint8, rest uint32, data []byte) []byte {
	b := make([]byte, 8+len(data))
	b[0], b[1] = typ, code
	binary.BigEndian.PutUint32(b[4:], rest)
	copy(b[8:], data)
	return b
}

// Ext returns an IPv6 extension header of (units+1)*8 bytes.
func Ext(next, units uint8) []byte {
	b := make([]byte, (int(units)+1)*8)
	b[0], b[1] = next, units
	return b
}

// Routing returns a routing header with the given type, length units and
// segments left.
func Routing(next, units, typ, segLeft uint8) []byte {
	b := Ext(next, units)
	b[2], b[3] = typ, segLeft
	return b
}

// Frag returns an IPv6 fragment header (offset in bytes, multiple of 8).
func Frag(next uint8, offset int, more bool, id uint32) []byte {
	b := make([]byte, 8)
	b[0] = next
	w := uint16(offset) &^ 7
	if more {
		w |= 1
	}
	binary.BigEndian.PutUint16(b[2:], w)
	binary.BigEndian.PutUint32(b[4:], id)
	return b
}

// Cat concatenates byte slices.
func Cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

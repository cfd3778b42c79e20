package packet

import (
	"encoding/binary"
	"net/netip"
)

// IPv6 is a view of an IPv6 fixed header (RFC 8200 §3).
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	|                         Source Address (16)                   |
//	|                      Destination Address (16)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IPv6 []byte

const (
	ipv6VerTCFlow   = 0
	ipv6PayloadLen  = 4
	ipv6NextHeader  = 6
	ipv6HopLimit    = 7
	ipv6SrcAddr     = 8
	ipv6DstAddr     = 24
	IPv6MinimumSize = 40 // IPv6MinimumSize is the fixed header length.
)

// Version returns the version nibble.
func (b IPv6) Version() uint8 { return b[0] >> 4 }

// TrafficClass returns the traffic class byte.
func (b IPv6) TrafficClass() uint8 {
	return uint8(binary.BigEndian.Uint16(b[ipv6VerTCFlow:]) >> 4)
}

// FlowLabel returns the 20-bit flow label.
func (b IPv6) FlowLabel() uint32 { return binary.BigEndian.Uint32(b[ipv6VerTCFlow:]) & 0xfffff }

// PayloadLength returns the payload length field.
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[ipv6PayloadLen:]) }

// NextHeader returns the next header field.
func (b IPv6) NextHeader() uint8 { return b[ipv6NextHeader] }

// HopLimit returns the hop limit.
func (b IPv6) HopLimit() uint8 { return b[ipv6HopLimit] }

// SourceAddress returns the source address.
func (b IPv6) SourceAddress() netip.Addr { return netip.AddrFrom16([16]byte(b[ipv6SrcAddr:])) }

// DestinationAddress returns the destination address.
func (b IPv6) DestinationAddress() netip.Addr {
	return netip.AddrFrom16([16]byte(b[ipv6DstAddr:]))
}

// SetTrafficClass sets the traffic class.
func (b IPv6) SetTrafficClass(tc uint8) {
	w := binary.BigEndian.Uint32(b) &^ (0xff << 20)
	binary.BigEndian.PutUint32(b, w|uint32(tc)<<20)
}

// SetVersionTrafficClassFlow sets the first 32-bit word.
func (b IPv6) SetVersionTrafficClassFlow(v uint32) { binary.BigEndian.PutUint32(b, v) }

// SetPayloadLength sets the payload length.
func (b IPv6) SetPayloadLength(v uint16) { binary.BigEndian.PutUint16(b[ipv6PayloadLen:], v) }

// SetNextHeader sets the next header.
func (b IPv6) SetNextHeader(v uint8) { b[ipv6NextHeader] = v }

// SetHopLimit sets the hop limit.
func (b IPv6) SetHopLimit(v uint8) { b[ipv6HopLimit] = v }

// SetSourceAddress sets the source address.
func (b IPv6) SetSourceAddress(a netip.Addr) { s := a.As16(); copy(b[ipv6SrcAddr:], s[:]) }

// SetDestinationAddress sets the destination address.
func (b IPv6) SetDestinationAddress(a netip.Addr) { s := a.As16(); copy(b[ipv6DstAddr:], s[:]) }

// IPv6ExtHdr is a view of a generic extension header (hop-by-hop, routing,
// destination options, mobility): next header, length in 8-octet units
// not counting the first 8.
type IPv6ExtHdr []byte

// Length returns the header length in bytes ((len+1)*8).
func (b IPv6ExtHdr) Length() int { return (int(b[1]) + 1) * 8 }

// IPv6Routing is a view of a routing header (RFC 8200 §4.4).
type IPv6Routing []byte

// HdrExtLen returns the raw header extension length (8-octet units).
func (b IPv6Routing) HdrExtLen() uint8 { return b[1] }

// RoutingType returns the routing type.
func (b IPv6Routing) RoutingType() uint8 { return b[2] }

// SegmentsLeft returns the segments-left field.
func (b IPv6Routing) SegmentsLeft() uint8 { return b[3] }

// IPv6Fragment is a view of a fragment header (RFC 8200 §4.5).
type IPv6Fragment []byte

// IPv6FragmentHeaderSize is the length of a fragment header.
const IPv6FragmentHeaderSize = 8

// NextHeader returns the next header field.
func (b IPv6Fragment) NextHeader() uint8 { return b[0] }

// FragmentOffset returns the offset in bytes.
func (b IPv6Fragment) FragmentOffset() int { return int(binary.BigEndian.Uint16(b[2:]) &^ 7) }

// More reports the M bit.
func (b IPv6Fragment) More() bool { return b[3]&1 != 0 }

// ID returns the identification.
func (b IPv6Fragment) ID() uint32 { return binary.BigEndian.Uint32(b[4:]) }

// AH is a view of an IP Authentication Header (RFC 4302).
type AH []byte

// AHMinimumSize is the fixed part of AH (next, len, reserved, SPI, seq).
const AHMinimumSize = 12

// NextHeader returns the next header field.
func (b AH) NextHeader() uint8 { return b[0] }

// Length returns the header length in bytes ((len+2)*4).
func (b AH) Length() int { return (int(b[1]) + 2) * 4 }

// ESP is a view of an Encapsulating Security Payload header (RFC 4303).
type ESP []byte

// ESPMinimumSize is the SPI plus sequence number.
const ESPMinimumSize = 8

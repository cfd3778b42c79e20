package packet

import "encoding/binary"

// ICMPv4 is a view of an ICMP header (RFC 792).
//
//	|     Type      |     Code      |          Checksum             |
//	|           Identifier          |        Sequence Number        |  (echo)
//	|             unused            |         Next-Hop MTU          |  (needfrag)
type ICMPv4 []byte

// ICMPv6 is a view of an ICMPv6 header (RFC 4443); the layout of the
// first 8 bytes matches ICMPv4.
type ICMPv6 []byte

const (
	icmpType     = 0
	icmpCode     = 1
	icmpChecksum = 2
	icmpID       = 4
	icmpSeq      = 6
	icmpMTU      = 6
	// ICMPv4MinimumSize is the fixed ICMP header length.
	ICMPv4MinimumSize = 8
	// ICMPv6MinimumSize is the fixed ICMPv6 header length.
	ICMPv6MinimumSize = 8
)

// ICMPv4 types.
const (
	ICMPv4EchoReply      = 0
	ICMPv4Unreach        = 3
	ICMPv4SourceQuench   = 4
	ICMPv4Redirect       = 5
	ICMPv4Echo           = 8
	ICMPv4RouterAdvert   = 9
	ICMPv4RouterSolicit  = 10
	ICMPv4TimeExceeded   = 11
	ICMPv4ParamProblem   = 12
	ICMPv4Timestamp      = 13
	ICMPv4TimestampReply = 14
	ICMPv4InfoRequest    = 15
	ICMPv4InfoReply      = 16
	ICMPv4MaskRequest    = 17
	ICMPv4MaskReply      = 18

	// ICMPv4UnreachNeedFrag is the "fragmentation needed" unreach code.
	ICMPv4UnreachNeedFrag = 4
)

// ICMPv6 types.
const (
	ICMPv6DstUnreach   = 1
	ICMPv6PacketTooBig = 2
	ICMPv6TimeExceeded = 3
	ICMPv6ParamProblem = 4
	ICMPv6EchoRequest  = 128
	ICMPv6EchoReply    = 129
)

// Type returns the type.
func (b ICMPv4) Type() uint8 { return b[icmpType] }

// Code returns the code.
func (b ICMPv4) Code() uint8 { return b[icmpCode] }

// Checksum returns the checksum field.
func (b ICMPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpChecksum:]) }

// Ident returns the echo identifier.
func (b ICMPv4) Ident() uint16 { return binary.BigEndian.Uint16(b[icmpID:]) }

// Sequence returns the echo sequence number.
func (b ICMPv4) Sequence() uint16 { return binary.BigEndian.Uint16(b[icmpSeq:]) }

// MTU returns the next-hop MTU of a needfrag unreach (RFC 1191).
func (b ICMPv4) MTU() uint16 { return binary.BigEndian.Uint16(b[icmpMTU:]) }

// SetChecksum sets the checksum.
func (b ICMPv4) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[icmpChecksum:], v) }

// SetIdent sets the echo identifier.
func (b ICMPv4) SetIdent(v uint16) { binary.BigEndian.PutUint16(b[icmpID:], v) }

// SetIdentWithChecksumUpdate sets the echo identifier and patches the checksum.
func (b ICMPv4) SetIdentWithChecksumUpdate(v uint16) {
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), b.Ident(), v))
	b.SetIdent(v)
}

// CalculateChecksum returns the checksum the message b should carry.
func (b ICMPv4) CalculateChecksum() uint16 {
	s := Checksum(b[:icmpChecksum], 0)
	return ^Checksum(b[icmpChecksum+2:], s)
}

// Type returns the type.
func (b ICMPv6) Type() uint8 { return b[icmpType] }

// Code returns the code.
func (b ICMPv6) Code() uint8 { return b[icmpCode] }

// Ident returns the echo identifier.
func (b ICMPv6) Ident() uint16 { return binary.BigEndian.Uint16(b[icmpID:]) }

package packet

import (
	"encoding/binary"
)

// UDP is a view of a UDP header (RFC 768).
//
//	|     Source Port     |   Destination Port  |
//	|       Length        |       Checksum      |
type UDP []byte

const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6
	// UDPMinimumSize is the UDP header length.
	UDPMinimumSize = 8
)

// SourcePort returns the source port.
func (b UDP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[udpSrcPort:]) }

// DestinationPort returns the destination port.
func (b UDP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[udpDstPort:]) }

// Length returns the length field.
func (b UDP) Length() uint16 { return binary.BigEndian.Uint16(b[udpLength:]) }

// Checksum returns the checksum field (0 = none, IPv4 only).
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[udpChecksum:]) }

// SetSourcePort sets the source port.
func (b UDP) SetSourcePort(v uint16) { binary.BigEndian.PutUint16(b[udpSrcPort:], v) }

// SetDestinationPort sets the destination port.
func (b UDP) SetDestinationPort(v uint16) { binary.BigEndian.PutUint16(b[udpDstPort:], v) }

// SetLength sets the length field.
func (b UDP) SetLength(v uint16) { binary.BigEndian.PutUint16(b[udpLength:], v) }

// SetChecksum sets the checksum field.
func (b UDP) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[udpChecksum:], v) }

// SetSourcePortWithChecksumUpdate sets the source port and patches a
// non-zero checksum (zero means "no checksum" and must stay zero).
func (b UDP) SetSourcePortWithChecksumUpdate(v uint16) {
	if c := b.Checksum(); c != 0 {
		b.SetChecksum(nonZero(ChecksumUpdate16(c, b.SourcePort(), v)))
	}
	b.SetSourcePort(v)
}

// SetDestinationPortWithChecksumUpdate sets the destination port and
// patches a non-zero checksum.
func (b UDP) SetDestinationPortWithChecksumUpdate(v uint16) {
	if c := b.Checksum(); c != 0 {
		b.SetChecksum(nonZero(ChecksumUpdate16(c, b.DestinationPort(), v)))
	}
	b.SetDestinationPort(v)
}

// CalculateChecksum returns the checksum the datagram b should carry given
// the pseudo-header partial sum; a computed 0 is sent as 0xffff.
func (b UDP) CalculateChecksum(pseudo uint16) uint16 {
	s := Checksum(b[:udpChecksum], pseudo)
	return nonZero(^Checksum(b[udpChecksum+2:], s))
}

func nonZero(c uint16) uint16 {
	if c == 0 {
		return 0xffff
	}
	return c
}

package packet

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 is a view of an IPv4 header (and what follows it).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	|         Identification        |Flags|      Fragment Offset    |
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	|                       Source Address                          |
//	|                    Destination Address                        |
//	|                    Options                    |    Padding    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IPv4 []byte

const (
	ipv4VerIHL   = 0
	ipv4TOS      = 1
	ipv4TotalLen = 2
	ipv4ID       = 4
	ipv4FlagsOff = 6
	ipv4TTL      = 8
	ipv4Protocol = 9
	ipv4Checksum = 10
	ipv4SrcAddr  = 12
	ipv4DstAddr  = 16
)

// IPv4 constants.
const (
	IPv4MinimumSize = 20
	IPv4MaximumSize = 60
	// IPv4FlagMoreFragments and IPv4FlagDontFragment are bits of the
	// 16-bit flags/offset word.
	IPv4FlagMoreFragments = 0x2000
	IPv4FlagDontFragment  = 0x4000
	IPv4OffsetMask        = 0x1fff
)

// HeaderLength returns the IHL in bytes.
func (b IPv4) HeaderLength() int { return int(b[ipv4VerIHL]&0xf) * 4 }

// TOS returns the type of service byte.
func (b IPv4) TOS() uint8 { return b[ipv4TOS] }

// TotalLength returns the total length field.
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[ipv4TotalLen:]) }

// ID returns the identification field.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[ipv4ID:]) }

// FlagsFragmentOffset returns the raw flags and fragment-offset word.
func (b IPv4) FlagsFragmentOffset() uint16 { return binary.BigEndian.Uint16(b[ipv4FlagsOff:]) }

// FragmentOffset returns the fragment offset in bytes.
func (b IPv4) FragmentOffset() int { return int(b.FlagsFragmentOffset()&IPv4OffsetMask) * 8 }

// MoreFragments reports the MF bit.
func (b IPv4) MoreFragments() bool { return b.FlagsFragmentOffset()&IPv4FlagMoreFragments != 0 }

// TTL returns the time to live.
func (b IPv4) TTL() uint8 { return b[ipv4TTL] }

// Protocol returns the protocol field.
func (b IPv4) Protocol() uint8 { return b[ipv4Protocol] }

// Checksum returns the header checksum field.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[ipv4Checksum:]) }

// SourceAddress returns the source address.
func (b IPv4) SourceAddress() netip.Addr { return netip.AddrFrom4([4]byte(b[ipv4SrcAddr:])) }

// DestinationAddress returns the destination address.
func (b IPv4) DestinationAddress() netip.Addr { return netip.AddrFrom4([4]byte(b[ipv4DstAddr:])) }

// CalculateChecksum returns the header checksum the header should carry.
func (b IPv4) CalculateChecksum() uint16 {
	h := b.HeaderLength()
	sum := Checksum(b[:ipv4Checksum], 0)
	return ^Checksum(b[ipv4Checksum+2:h], sum)
}

// SetVersionAndHeaderLength sets the version nibble to 4 and the IHL to hlen bytes.
func (b IPv4) SetVersionAndHeaderLength(hlen int) { b[ipv4VerIHL] = 4<<4 | uint8(hlen/4)&0xf }

// SetTotalLength sets the total length.
func (b IPv4) SetTotalLength(v uint16) { binary.BigEndian.PutUint16(b[ipv4TotalLen:], v) }

// SetID sets the identification.
func (b IPv4) SetID(v uint16) { binary.BigEndian.PutUint16(b[ipv4ID:], v) }

// SetFlagsFragmentOffset sets the raw flags and fragment-offset word.
func (b IPv4) SetFlagsFragmentOffset(v uint16) { binary.BigEndian.PutUint16(b[ipv4FlagsOff:], v) }

// SetTTL sets the time to live.
func (b IPv4) SetTTL(v uint8) { b[ipv4TTL] = v }

// SetProtocol sets the protocol.
func (b IPv4) SetProtocol(v uint8) { b[ipv4Protocol] = v }

// SetChecksum sets the header checksum.
func (b IPv4) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[ipv4Checksum:], v) }

// SetSourceAddress sets the source address (a must be IPv4).
func (b IPv4) SetSourceAddress(a netip.Addr) { s := a.As4(); copy(b[ipv4SrcAddr:], s[:]) }

// SetDestinationAddress sets the destination address (a must be IPv4).
func (b IPv4) SetDestinationAddress(a netip.Addr) { s := a.As4(); copy(b[ipv4DstAddr:], s[:]) }

// SetTOSWithChecksumUpdate sets the TOS and patches the header checksum.
func (b IPv4) SetTOSWithChecksumUpdate(v uint8) {
	old := binary.BigEndian.Uint16(b[ipv4VerIHL:])
	b[ipv4TOS] = v
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), old, binary.BigEndian.Uint16(b[ipv4VerIHL:])))
}

// SetTTLWithChecksumUpdate sets the TTL and patches the header checksum.
func (b IPv4) SetTTLWithChecksumUpdate(v uint8) {
	old := binary.BigEndian.Uint16(b[ipv4TTL:])
	b[ipv4TTL] = v
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), old, binary.BigEndian.Uint16(b[ipv4TTL:])))
}

// SetIDWithChecksumUpdate sets the identification and patches the header checksum.
func (b IPv4) SetIDWithChecksumUpdate(v uint16) {
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), b.ID(), v))
	b.SetID(v)
}

// SetSourceAddressWithChecksumUpdate sets the source address and patches
// the header checksum (not the transport checksum: see ChecksumUpdateAddr).
func (b IPv4) SetSourceAddressWithChecksumUpdate(a netip.Addr) {
	b.SetChecksum(ChecksumUpdateAddr(b.Checksum(), b.SourceAddress(), a))
	b.SetSourceAddress(a)
}

// SetDestinationAddressWithChecksumUpdate sets the destination address and
// patches the header checksum.
func (b IPv4) SetDestinationAddressWithChecksumUpdate(a netip.Addr) {
	b.SetChecksum(ChecksumUpdateAddr(b.Checksum(), b.DestinationAddress(), a))
	b.SetDestinationAddress(a)
}

// IPv4Option is one option found by IPv4OptionIter.
type IPv4Option struct {
	Type uint8
	Data []byte // the whole option including type and length bytes
}

// NextIPv4Option returns the option at the start of opts and the rest. It
// follows IPFilter's walk: EOL ends the list, NOP is one byte, any other
// option whose length is below 2 or beyond the list ends it (ok = false).
func NextIPv4Option(opts []byte) (opt IPv4Option, rest []byte, ok bool) {
	if len(opts) == 0 || opts[0] == IPOptEOL {
		return IPv4Option{}, nil, false
	}
	if opts[0] == IPOptNOP {
		return IPv4Option{Type: IPOptNOP, Data: opts[:1]}, opts[1:], true
	}
	if len(opts) < 2 {
		return IPv4Option{}, nil, false
	}
	l := int(opts[1])
	if l < 2 || l > len(opts) {
		return IPv4Option{}, nil, false
	}
	return IPv4Option{Type: opts[0], Data: opts[:l]}, opts[l:], true
}

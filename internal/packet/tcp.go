package packet

import (
	"encoding/binary"
	"net/netip"
)

// TCP is a view of a TCP header (RFC 9293 §3.1).
//
//	|          Source Port          |       Destination Port        |
//	|                        Sequence Number                        |
//	|                    Acknowledgment Number                      |
//	|  Data |       |C|E|U|A|P|R|S|F|                               |
//	| Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//	|           Checksum            |         Urgent Pointer        |
type TCP []byte

const (
	tcpSrcPort  = 0
	tcpDstPort  = 2
	tcpSeq      = 4
	tcpAck      = 8
	tcpDataOff  = 12
	tcpFlags    = 13
	tcpWindow   = 14
	tcpChecksum = 16
	tcpUrgent   = 18
	// TCPMinimumSize is the length of a TCP header without options.
	TCPMinimumSize = 20
)

// TCP option kinds.
const (
	TCPOptEOL           = 0
	TCPOptNOP           = 1
	TCPOptMSS           = 2
	TCPOptWS            = 3
	TCPOptSACKPermitted = 4
	TCPOptSACK          = 5
	TCPOptTimestamp     = 8
)

// SourcePort returns the source port.
func (b TCP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[tcpSrcPort:]) }

// DestinationPort returns the destination port.
func (b TCP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[tcpDstPort:]) }

// SequenceNumber returns the sequence number.
func (b TCP) SequenceNumber() uint32 { return binary.BigEndian.Uint32(b[tcpSeq:]) }

// AckNumber returns the acknowledgment number.
func (b TCP) AckNumber() uint32 { return binary.BigEndian.Uint32(b[tcpAck:]) }

// DataOffset returns the header length in bytes.
func (b TCP) DataOffset() int { return int(b[tcpDataOff]>>4) * 4 }

// Flags returns the flag byte (TCPFlag*).
func (b TCP) Flags() uint8 { return b[tcpFlags] }

// WindowSize returns the window.
func (b TCP) WindowSize() uint16 { return binary.BigEndian.Uint16(b[tcpWindow:]) }

// Checksum returns the checksum field.
func (b TCP) Checksum() uint16 { return binary.BigEndian.Uint16(b[tcpChecksum:]) }

// UrgentPointer returns the urgent pointer.
func (b TCP) UrgentPointer() uint16 { return binary.BigEndian.Uint16(b[tcpUrgent:]) }

// Options returns the option bytes, clipped to the view.
func (b TCP) Options() []byte {
	end := b.DataOffset()
	if end > len(b) {
		end = len(b)
	}
	if end < TCPMinimumSize {
		return nil
	}
	return b[TCPMinimumSize:end]
}

// SetSourcePort sets the source port.
func (b TCP) SetSourcePort(v uint16) { binary.BigEndian.PutUint16(b[tcpSrcPort:], v) }

// SetDestinationPort sets the destination port.
func (b TCP) SetDestinationPort(v uint16) { binary.BigEndian.PutUint16(b[tcpDstPort:], v) }

// SetSequenceNumber sets the sequence number.
func (b TCP) SetSequenceNumber(v uint32) { binary.BigEndian.PutUint32(b[tcpSeq:], v) }

// SetAckNumber sets the acknowledgment number.
func (b TCP) SetAckNumber(v uint32) { binary.BigEndian.PutUint32(b[tcpAck:], v) }

// SetDataOffset sets the header length in bytes.
func (b TCP) SetDataOffset(n int) { b[tcpDataOff] = uint8(n/4) << 4 }

// SetFlags sets the flag byte.
func (b TCP) SetFlags(v uint8) { b[tcpFlags] = v }

// SetWindowSize sets the window.
func (b TCP) SetWindowSize(v uint16) { binary.BigEndian.PutUint16(b[tcpWindow:], v) }

// SetChecksum sets the checksum.
func (b TCP) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[tcpChecksum:], v) }

// SetUrgentPointer sets the urgent pointer.
func (b TCP) SetUrgentPointer(v uint16) { binary.BigEndian.PutUint16(b[tcpUrgent:], v) }

// SetSourcePortWithChecksumUpdate sets the source port and patches the checksum.
func (b TCP) SetSourcePortWithChecksumUpdate(v uint16) {
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), b.SourcePort(), v))
	b.SetSourcePort(v)
}

// SetDestinationPortWithChecksumUpdate sets the destination port and patches the checksum.
func (b TCP) SetDestinationPortWithChecksumUpdate(v uint16) {
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), b.DestinationPort(), v))
	b.SetDestinationPort(v)
}

// SetSequenceNumberWithChecksumUpdate sets the sequence number and patches the checksum.
func (b TCP) SetSequenceNumberWithChecksumUpdate(v uint32) {
	b.SetChecksum(ChecksumUpdate32(b.Checksum(), b.SequenceNumber(), v))
	b.SetSequenceNumber(v)
}

// SetAckNumberWithChecksumUpdate sets the acknowledgment number and patches the checksum.
func (b TCP) SetAckNumberWithChecksumUpdate(v uint32) {
	b.SetChecksum(ChecksumUpdate32(b.Checksum(), b.AckNumber(), v))
	b.SetAckNumber(v)
}

// UpdateChecksumPseudoHeaderAddress patches the checksum for a change of
// one pseudo-header address (NAT).
func (b TCP) UpdateChecksumPseudoHeaderAddress(old, new netip.Addr) {
	b.SetChecksum(ChecksumUpdateAddr(b.Checksum(), old, new))
}

// CalculateChecksum returns the checksum the segment b should carry, given
// the pseudo-header partial sum (PseudoHeaderChecksum with len(b)).
func (b TCP) CalculateChecksum(pseudo uint16) uint16 {
	s := Checksum(b[:tcpChecksum], pseudo)
	return ^Checksum(b[tcpChecksum+2:], s)
}

// TCPSynOptions are the options IPFilter and the state code care about.
type TCPSynOptions struct {
	MSS           uint16
	HasMSS        bool
	WindowScale   uint8
	HasWS         bool
	SACKPermitted bool
	// MSSOffset is the offset of the MSS value within the TCP header
	// (for MSS clamping), or 0.
	MSSOffset int
}

// ParseTCPOptions walks the option bytes of a TCP header. A malformed
// option (length below 2 or past the end) stops the walk; nothing panics.
func (b TCP) ParseTCPOptions() TCPSynOptions {
	var o TCPSynOptions
	opts := b.Options()
	base := TCPMinimumSize
	for k := 0; k < len(opts); {
		kind := opts[k]
		if kind == TCPOptEOL {
			break
		}
		if kind == TCPOptNOP {
			k++
			continue
		}
		if k+1 >= len(opts) {
			break
		}
		l := int(opts[k+1])
		if l < 2 || k+l > len(opts) {
			break
		}
		switch {
		case kind == TCPOptMSS && l == 4:
			o.MSS, o.HasMSS, o.MSSOffset = binary.BigEndian.Uint16(opts[k+2:]), true, base+k+2
		case kind == TCPOptWS && l == 3:
			o.WindowScale, o.HasWS = opts[k+2], true
		case kind == TCPOptSACKPermitted && l == 2:
			o.SACKPermitted = true
		}
		k += l
	}
	return o
}

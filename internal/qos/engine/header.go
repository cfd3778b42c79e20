package engine

import (
	"encoding/binary"

	"sluice/internal/qos"
)

// A small local header view; internal/packet did not exist when this was
// written, and marking needs only the fields below.

// IPv4 header offsets (RFC 791):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	|         Identification        |Flags|      Fragment Offset    |
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	|                       Source Address                          |
//	|                    Destination Address                        |
const (
	v4TOS      = 1
	v4FragOff  = 6
	v4Protocol = 9
	v4Checksum = 10
	v4Src      = 12
	v4Dst      = 16
	v4MinLen   = 20
)

// IPv6 header offsets (RFC 8200): version(4) traffic class(8) flow(20),
// payload length at 4, next header at 6, addresses at 8 and 24.
const (
	v6NextHeader = 6
	v6Src        = 8
	v6Dst        = 24
	v6Len        = 40
	// maxExtHeaders bounds the IPv6 extension-header walk (the BPF program
	// uses the same bound, so both datapaths agree).
	maxExtHeaders = 4
)

// Checksum returns the Internet checksum (RFC 1071) of b, folded and
// complemented; used for from-scratch recomputation.
func Checksum(b []byte) uint16 {
	var sum uint32
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// ChecksumUpdate16 patches checksum sum after a 16-bit word changed from
// old to new (RFC 1624, eqn. 3), the same arithmetic as the kernel's
// csum_replace2 that the BPF program relies on.
func ChecksumUpdate16(sum, old, new uint16) uint16 {
	s := uint32(^sum) + uint32(^old) + uint32(new)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return ^uint16(s)
}

// IPv4HeaderChecksum recomputes the header checksum of an IPv4 header from
// scratch (with the checksum field taken as zero).
func IPv4HeaderChecksum(h []byte) uint16 {
	ihl := int(h[0]&0x0f) * 4
	var sum uint32
	for i := 0; i+1 < ihl; i += 2 {
		if i == v4Checksum {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// TrafficClass returns the IPv4 TOS byte or the IPv6 traffic class, and
// false if l3 is not a plausible IP header.
func TrafficClass(l3 []byte) (uint8, bool) {
	if len(l3) < 2 {
		return 0, false
	}
	switch l3[0] >> 4 {
	case 4:
		return l3[v4TOS], len(l3) >= v4MinLen
	case 6:
		return l3[0]<<4 | l3[1]>>4, len(l3) >= v6Len
	}
	return 0, false
}

// SetDSCP writes dscp into the top six bits of the IPv4 TOS or IPv6 traffic
// class, keeping the two ECN bits, and patches the IPv4 header checksum
// incrementally. It does nothing on a header it cannot read.
func SetDSCP(l3 []byte, dscp uint8) {
	tc, ok := TrafficClass(l3)
	if !ok {
		return
	}
	ntc := dscp<<2 | tc&3
	if ntc == tc {
		return
	}
	if l3[0]>>4 == 4 {
		old := binary.BigEndian.Uint16(l3[0:])
		l3[v4TOS] = ntc
		sum := binary.BigEndian.Uint16(l3[v4Checksum:])
		binary.BigEndian.PutUint16(l3[v4Checksum:], ChecksumUpdate16(sum, old, binary.BigEndian.Uint16(l3[0:])))
		return
	}
	l3[0] = 0x60 | ntc>>4
	l3[1] = ntc<<4 | l3[1]&0x0f
}

// flow is what the classifier looks at, read once per packet.
type flow struct {
	family       uint8
	proto        uint8
	tc           uint8
	hasPorts     bool
	sport, dport uint16
	src, dst     qos.Addr128
}

func hasPorts(proto uint8) bool {
	return proto == 6 || proto == 17 || proto == 132 || proto == 136 // TCP, UDP, SCTP, UDP-Lite
}

func isExtHeader(nh uint8) bool { return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60 }

// parseFlow reads the classification fields of an IP packet.
func parseFlow(l3 []byte, f *flow) bool {
	if len(l3) < 1 {
		return false
	}
	var l4 []byte
	switch l3[0] >> 4 {
	case 4:
		ihl := int(l3[0]&0x0f) * 4
		if len(l3) < v4MinLen || ihl < v4MinLen || len(l3) < ihl {
			return false
		}
		f.family, f.proto, f.tc = 4, l3[v4Protocol], l3[v4TOS]
		f.src = qos.Addr128{Lo: uint64(binary.BigEndian.Uint32(l3[v4Src:]))}
		f.dst = qos.Addr128{Lo: uint64(binary.BigEndian.Uint32(l3[v4Dst:]))}
		if binary.BigEndian.Uint16(l3[v4FragOff:])&0x1fff == 0 {
			l4 = l3[ihl:]
		}
	case 6:
		if len(l3) < v6Len {
			return false
		}
		f.family, f.tc = 6, l3[0]<<4|l3[1]>>4
		f.src = qos.Addr128{Hi: binary.BigEndian.Uint64(l3[v6Src:]), Lo: binary.BigEndian.Uint64(l3[v6Src+8:])}
		f.dst = qos.Addr128{Hi: binary.BigEndian.Uint64(l3[v6Dst:]), Lo: binary.BigEndian.Uint64(l3[v6Dst+8:])}
		nh, off := l3[v6NextHeader], v6Len
		for i := 0; i < maxExtHeaders && isExtHeader(nh) && off+8 <= len(l3); i++ {
			next := l3[off]
			switch nh {
			case 44: // fragment: ports only in the first fragment
				if binary.BigEndian.Uint16(l3[off+2:])&0xfff8 != 0 {
					f.proto, f.hasPorts = next, false
					return true
				}
				off += 8
			case 51: // AH counts 4-byte units
				off += (int(l3[off+1]) + 2) * 4
			default:
				off += (int(l3[off+1]) + 1) * 8
			}
			nh = next
		}
		l4 = nil
		if !isExtHeader(nh) && off <= len(l3) {
			l4 = l3[off:]
		}
		f.proto = nh
	default:
		return false
	}
	f.hasPorts = false
	if hasPorts(f.proto) && len(l4) >= 4 {
		f.hasPorts = true
		f.sport = binary.BigEndian.Uint16(l4[0:])
		f.dport = binary.BigEndian.Uint16(l4[2:])
	}
	return true
}

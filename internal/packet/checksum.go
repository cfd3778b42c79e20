package packet

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// Checksum returns the 16-bit ones' complement sum (not complemented) of b
// added to initial. A trailing odd byte is padded with zero, as RFC 1071
// requires. Callers complement the result to get the header field.
func Checksum(b []byte, initial uint16) uint16 {
	// Ones' complement addition with end-around carry gives the same
	// folded result over 64-bit words as over 16-bit ones.
	var sum, c uint64
	sum = uint64(initial)
	for len(b) >= 32 {
		sum, c = bits.Add64(sum, binary.BigEndian.Uint64(b), 0)
		sum, c = bits.Add64(sum, binary.BigEndian.Uint64(b[8:]), c)
		sum, c = bits.Add64(sum, binary.BigEndian.Uint64(b[16:]), c)
		sum, c = bits.Add64(sum, binary.BigEndian.Uint64(b[24:]), c)
		sum += c
		b = b[32:]
	}
	for len(b) >= 8 {
		sum, c = bits.Add64(sum, binary.BigEndian.Uint64(b), 0)
		sum += c
		b = b[8:]
	}
	sum = (sum >> 32) + (sum & 0xffffffff)
	for len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	return fold(sum)
}

func fold(sum uint64) uint16 {
	sum = (sum >> 32) + (sum & 0xffffffff)
	for sum > 0xffff {
		sum = (sum >> 16) + (sum & 0xffff)
	}
	return uint16(sum)
}

// PseudoHeaderChecksum returns the partial sum of the IPv4 or IPv6 pseudo
// header (RFC 793 / RFC 8200 §8.1) for an upper-layer packet of length
// l4len. src and dst must be of the same family.
func PseudoHeaderChecksum(proto uint8, src, dst netip.Addr, l4len int) uint16 {
	var sum uint64
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		sum = uint64(binary.BigEndian.Uint16(s[0:])) + uint64(binary.BigEndian.Uint16(s[2:])) +
			uint64(binary.BigEndian.Uint16(d[0:])) + uint64(binary.BigEndian.Uint16(d[2:]))
	} else {
		s, d := src.As16(), dst.As16()
		for k := 0; k < 16; k += 2 {
			sum += uint64(binary.BigEndian.Uint16(s[k:])) + uint64(binary.BigEndian.Uint16(d[k:]))
		}
	}
	sum += uint64(proto) + uint64(uint32(l4len)>>16) + uint64(uint16(l4len))
	return fold(sum)
}

// pseudoSum is PseudoHeaderChecksum over raw address bytes (4 or 16 each),
// used by the parser so that it need not build netip.Addr values twice.
func pseudoSum(proto uint8, src, dst []byte, l4len int) uint16 {
	sum := uint64(Checksum(src, 0)) + uint64(Checksum(dst, 0))
	sum += uint64(proto) + uint64(uint32(l4len)>>16) + uint64(uint16(l4len))
	return fold(sum)
}

// ChecksumUpdate16 returns the header checksum hc patched for a 16-bit
// field changing from old to new (RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')).
func ChecksumUpdate16(hc, old, new uint16) uint16 {
	return ^fold(uint64(^hc) + uint64(^old) + uint64(new))
}

// ChecksumUpdate32 is ChecksumUpdate16 for a 32-bit field.
func ChecksumUpdate32(hc uint16, old, new uint32) uint16 {
	hc = ChecksumUpdate16(hc, uint16(old>>16), uint16(new>>16))
	return ChecksumUpdate16(hc, uint16(old), uint16(new))
}

// ChecksumUpdateAddr patches hc for an address change (4 or 16 bytes);
// TCP, UDP and ICMPv6 checksums cover the addresses through the pseudo header.
func ChecksumUpdateAddr(hc uint16, old, new netip.Addr) uint16 {
	o, n := old.As16(), new.As16()
	start := 0
	if old.Is4() {
		start = 12
	}
	for k := start; k < 16; k += 2 {
		hc = ChecksumUpdate16(hc, binary.BigEndian.Uint16(o[k:]), binary.BigEndian.Uint16(n[k:]))
	}
	return hc
}

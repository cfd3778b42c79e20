package ipftext

import (
	"encoding/binary"
	"strconv"

	"sluice/internal/packet"
)

// AppendSummary appends ipftest's one-line packet summary (printpacket,
// ipf-conformance README §7.2) without a trailing newline:
//
//	< nic0 ip #0 40(20) 6 10.1.1.2,1025 > 10.1.1.1,1025 S
//	> nic0 ip6/0 20 0 6 9:9:9:0:0:0:0:9,10011 > 3:0:3:0:0:0:3:3,80
//
// out selects the direction mark ("<" in, ">" out). For a fragment with a
// non-zero offset IPFilter prints " @" and the whole flags/offset word
// shifted left by 3 (so MF/DF show up in the number), reproduced here.
func AppendSummary(dst []byte, out bool, iface string, b []byte) []byte {
	if out {
		dst = append(dst, "> "...)
	} else {
		dst = append(dst, "< "...)
	}
	dst = append(dst, iface...)
	dst = append(dst, ' ')
	if len(b) >= 1 && b[0]>>4 == 6 {
		return appendSummary6(dst, b)
	}
	if len(b) < packet.IPv4MinimumSize {
		return append(dst, "ip (truncated)"...)
	}
	ip := packet.IPv4(b)
	hl := ip.HeaderLength()
	off := ip.FlagsFragmentOffset()
	dst = append(dst, "ip #"...)
	dst = strconv.AppendInt(dst, int64(ip.ID()), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(ip.TotalLength()), 10)
	dst = append(dst, '(')
	dst = strconv.AppendInt(dst, int64(hl), 10)
	dst = append(dst, ") "...)
	dst = strconv.AppendInt(dst, int64(ip.Protocol()), 10)
	if off&packet.IPv4OffsetMask != 0 {
		dst = append(dst, " @"...)
		dst = strconv.AppendInt(dst, int64(off)<<3, 10)
	}
	p := ip.Protocol()
	var l4 []byte
	if hl <= len(b) {
		l4 = b[hl:]
	}
	ports := off&packet.IPv4OffsetMask == 0 && (p == packet.ProtoTCP || p == packet.ProtoUDP) && len(l4) >= 4
	dst = append(dst, ' ')
	dst = AppendIPv4(dst, b[12:16])
	if ports {
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, int64(binary.BigEndian.Uint16(l4)), 10)
	}
	dst = append(dst, " > "...)
	dst = AppendIPv4(dst, b[16:20])
	if ports {
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, int64(binary.BigEndian.Uint16(l4[2:])), 10)
		if p == packet.ProtoTCP && len(l4) >= 14 && l4[13] != 0 {
			dst = append(dst, ' ')
			dst = AppendTCPFlags(dst, l4[13], "FSRPAUEC")
		}
	}
	return dst
}

func appendSummary6(dst, b []byte) []byte {
	if len(b) < packet.IPv6MinimumSize {
		return append(dst, "ip6 (truncated)"...)
	}
	ip := packet.IPv6(b)
	dst = append(dst, "ip6/"...)
	dst = strconv.AppendInt(dst, int64(b[0]&0x0f), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(ip.PayloadLength()), 10)
	dst = append(dst, ' ')
	if fl := ip.FlowLabel(); fl != 0 {
		dst = append(dst, "0x"...)
		dst = strconv.AppendUint(dst, uint64(fl), 16)
	} else {
		dst = append(dst, '0')
	}
	dst = append(dst, ' ')
	nxt := ip.NextHeader()
	dst = strconv.AppendInt(dst, int64(nxt), 10)
	l4 := b[40:]
	ports := (nxt == packet.ProtoTCP || nxt == packet.ProtoUDP) && len(l4) >= 4
	dst = append(dst, ' ')
	dst = AppendIPv6Groups(dst, b[8:24])
	if ports {
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, int64(binary.BigEndian.Uint16(l4)), 10)
	}
	dst = append(dst, " > "...)
	dst = AppendIPv6Groups(dst, b[24:40])
	if ports {
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, int64(binary.BigEndian.Uint16(l4[2:])), 10)
	}
	return dst
}

// AppendIPv4 appends a dotted quad (inet_ntoa) of the 4 bytes a.
func AppendIPv4(dst, a []byte) []byte {
	for k := 0; k < 4; k++ {
		if k > 0 {
			dst = append(dst, '.')
		}
		dst = strconv.AppendInt(dst, int64(a[k]), 10)
	}
	return dst
}

// AppendIPv6Groups appends the 16 bytes a as eight %x groups joined by ':'
// (no "::" compression), IPFilter's IPv6 packet-line form.
func AppendIPv6Groups(dst, a []byte) []byte {
	for k := 0; k < 16; k += 2 {
		if k > 0 {
			dst = append(dst, ':')
		}
		dst = strconv.AppendUint(dst, uint64(binary.BigEndian.Uint16(a[k:])), 16)
	}
	return dst
}

// AppendTCPFlags appends the letters of the set flag bits in the order of
// the given 8-letter table, bit 0 first ("FSRPAUEC" for printpacket).
func AppendTCPFlags(dst []byte, flags uint8, table string) []byte {
	for k := 0; k < 8; k++ {
		if flags&(1<<k) != 0 {
			dst = append(dst, table[k])
		}
	}
	return dst
}

// AppendHex appends ipftest's -x packet dump: 4-hex-digit groups (a final
// odd byte as 2 digits), each followed by a blank, then "\n\n".
func AppendHex(dst, b []byte) []byte {
	const digits = "0123456789abcdef"
	for k := 0; k < len(b); k++ {
		dst = append(dst, digits[b[k]>>4], digits[b[k]&0xf])
		if len(b)-k > 1 {
			k++
			dst = append(dst, digits[b[k]>>4], digits[b[k]&0xf])
		}
		dst = append(dst, ' ')
	}
	return append(dst, '\n', '\n')
}

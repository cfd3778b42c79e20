package nat

import (
	"encoding/binary"
	"net/netip"

	"sluice/internal/packet"
)

// Packet-side protocol flags (IPFilter IPN_TCP, IPN_UDP, IPN_ICMPQUERY).
const (
	flagTCP       = 1
	flagUDP       = 2
	flagTCPUDP    = flagTCP | flagUDP
	flagICMPQuery = 4
)

// view locates the fields NAT reads and rewrites in one packet. It lives
// on the caller's stack.
type view struct {
	b        []byte
	v6       bool
	proto    uint8
	l4       int // offset of the L4 header, -1 if not present (fragment body)
	l4len    int
	src, dst netip.Addr
	sport    uint16 // TCP/UDP ports; ICMP query id in both
	dport    uint16
	flags    int
	icmpType uint8
	icmpErr  bool
	// errType: an ICMP error type with its 8 header bytes, whether or
	// not it quotes a whole IP header (icmpErr).
	errType bool
	// nqICMP: an ICMPv4 packet that is not a query (an error, or
	// another type) with its 8 header bytes; nqID holds its bytes 4-5,
	// where a query's id would be: IPFilter looks such a packet up by
	// them (fin_data), so it finds a query's session with that id, and
	// a session without an id only when they are 0.
	nqICMP    bool
	nqID      uint16
	fragBody  bool
	moreFrags bool
	// fragOff is where a fragment's data starts in its datagram and
	// fragEnd where it ends (bytes after the IPv4 header or the IPv6
	// fragment header).
	fragOff, fragEnd int
	ipid             uint32
	resize           bool // the caller accepts a packet of another length
	// cutPorts: a TCP header too short to be one (4-19 bytes) whose
	// ports sport and dport are there; flags and l4 treat the packet
	// as one without ports.
	cutPorts bool
	// cut6: an IPv6 TCP header cut short (4-19 bytes). IPFilter treats
	// it as a TCP packet with ports (its session lists them, a portmap
	// rewrites them), only without a checksum to patch; l4 and l4len
	// hold what there is of the header.
	cut6 bool
	// ah: the IPv6 packet has an AH header, walked as an extension
	// header; proto is what follows it.
	ah bool
}

// fragKey identifies the fragments of one datagram (the IPv6 fragment
// header's id in place of the IPv4 one).
//
// As IPFilter's fragment cache (ipfr_optmsk, ipfr_secmsk, ipfr_auth), an
// IPv4 key holds the copied options of the fragment too: a first
// fragment with a security or source-route option shares no entry with
// fragments without it (checked against its ipftest); a timestamp or
// record-route option, never copied, is left out.
type fragKey struct {
	proto    uint8
	id       uint32
	src, dst netip.Addr
	optmsk   uint32
	secmsk   uint16
	auth     uint16
}

func (v *view) fragKey() fragKey {
	k := fragKey{proto: v.proto, id: v.ipid, src: v.src, dst: v.dst}
	if !v.v6 && (v.moreFrags || v.fragOff != 0) {
		if hl := packet.IPv4(v.b).HeaderLength(); hl > packet.IPv4MinimumSize {
			k.optmsk, k.secmsk, k.auth = packet.IPv4FragKeyOptions(v.b[packet.IPv4MinimumSize:hl])
		}
	}
	return k
}

// isICMPv4Query reports the ICMP types IPFilter NATs by their id: those
// its packet parser marks FI_ICMPQUERY (echo, router advertisement and
// solicitation, timestamp, address mask). Information request and reply
// (15, 16) are not among them: such a packet gets a portless session like
// any other ICMP message, so a second one between the same hosts through
// a single-address map clashes (checked against IPFilter's ipftest).
func isICMPv4Query(t uint8) bool {
	switch t {
	case 0, 8, 13, 14, 17, 18, 9, 10:
		return true
	}
	return false
}

// natQueryV4 reports whether IPFilter's NAT takes an ICMPv4 packet of
// type t with n bytes of ICMP as a query (a session of its id): not an
// information request or reply, nor a timestamp shorter than 20 bytes or
// an address mask message shorter than 12 (checked against its ipftest:
// the reply to such a request is not matched to its session, even by its
// id; a short reply to a whole request is, as other non-queries are).
func natQueryV4(t uint8, n int) bool {
	switch t {
	case 15, 16:
		return false
	case 13, 14:
		return n >= 20
	case 17, 18:
		return n >= 12
	}
	return isICMPv4Query(t)
}

func isICMPv4Error(t uint8) bool {
	switch t {
	case 3, 4, 5, 11, 12:
		return true
	}
	return false
}

// isICMPv6Query reports the ICMPv6 types IPFilter NATs by their id
// (ipf_nat6_icmpquerytype): echo, multicast listener, who-are-you and
// mtrace. Neighbour discovery is left alone: rewriting it would need the
// options in its body changed too.
func isICMPv6Query(t uint8) bool {
	switch t {
	case 128, 129, 130, 131, 132, 139, 140, 200, 201:
		return true
	}
	return false
}

// isICMPv6Error reports the ICMPv6 errors that carry the offending
// packet (unreachable, too big, time exceeded, parameter problem). Other
// types below 128 (such as 0, reserved) are translated as bare IP.
func isICMPv6Error(t uint8) bool { return t >= 1 && t <= 4 }

// parse fills v from b; it reports false for packets NAT cannot handle.
func parse(v *view, b []byte) bool {
	*v = view{b: b, l4: -1}
	if len(b) < 1 {
		return false
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < packet.IPv4MinimumSize {
			return false
		}
		h := packet.IPv4(b)
		hl := h.HeaderLength()
		if hl < packet.IPv4MinimumSize || hl > len(b) {
			return false
		}
		v.proto = h.Protocol()
		v.src, v.dst = h.SourceAddress(), h.DestinationAddress()
		end := int(h.TotalLength())
		if end > len(b) || end < hl {
			end = len(b)
		}
		v.ipid = uint32(h.ID())
		v.moreFrags = h.MoreFragments()
		v.fragOff = int(h.FragmentOffset())
		v.fragEnd = v.fragOff + end - hl
		if h.FragmentOffset() != 0 {
			v.fragBody = true
		} else {
			v.l4, v.l4len = hl, end-hl
		}
	case 6:
		if len(b) < packet.IPv6MinimumSize {
			return false
		}
		h := packet.IPv6(b)
		v.v6 = true
		v.src, v.dst = h.SourceAddress(), h.DestinationAddress()
		nh, off := h.NextHeader(), packet.IPv6MinimumSize
		end := off + int(h.PayloadLength())
		if end > len(b) {
			end = len(b)
		}
	walk:
		for {
			switch nh {
			case 0, 43, 60, 135, 51:
				// AH is one of IPFilter's IPv6 extension
				// headers, its length read as theirs (8-byte
				// units, not AH's own 4-byte ones): the
				// packet's protocol is what follows it.
				hl := (int(b[min(off+1, len(b)-1)]) + 1) * 8
				if off+8 > end || off+hl > end {
					// A header cut short, or running past
					// the packet: IPFilter still translates
					// the addresses, with no protocol
					// (IPPROTO_NONE: such packets share one
					// session whatever header was cut;
					// checked against its ipftest).
					v.proto = 59
					return true
				}
				v.ah = v.ah || nh == 51
				nh, off = b[off], off+hl
			case 44:
				if off+8 > end {
					// Cut short like any extension header:
					// no protocol (checked against its
					// ipftest: such a packet clashes with
					// another protocol-59 session).
					v.proto = 59
					return true
				}
				v.ipid = binary.BigEndian.Uint32(b[off+4:])
				v.moreFrags = b[off+3]&1 != 0
				v.fragOff = int(binary.BigEndian.Uint16(b[off+2:]) & 0xfff8)
				v.fragEnd = v.fragOff + end - (off + 8)
				if binary.BigEndian.Uint16(b[off+2:])&0xfff8 != 0 {
					v.fragBody = true
					v.proto = b[off]
					return true
				}
				nh, off = b[off], off+8
			default:
				break walk
			}
		}
		v.proto = nh
		if v.ah && (nh != 6 || end-off < packet.TCPMinimumSize) {
			// Behind AH, IPFilter reads the ports of a whole TCP
			// header only: UDP, a cut TCP header and ICMPv6 give
			// a session of their protocol without ports or ids
			// (checked against its ipftest).
			return true
		}
		if off <= end {
			v.l4, v.l4len = off, end-off
		}
	default:
		return false
	}
	if v.l4 < 0 {
		return true
	}
	l4 := b[v.l4 : v.l4+v.l4len]
	switch v.proto {
	case 6, 17:
		min := 8
		if v.proto == 6 {
			min = 20
			v.flags = flagTCP
		} else {
			v.flags = flagUDP
		}
		if len(l4) < min {
			if v.proto == 6 && v.v6 && len(l4) >= 4 {
				// IPv6: a TCP packet with ports all the same
				// (checked against IPFilter's ipftest: sessions
				// with ports, ports translated both ways).
				v.cut6 = true
				v.sport = binary.BigEndian.Uint16(l4)
				v.dport = binary.BigEndian.Uint16(l4[2:])
				return true
			}
			v.flags = 0
			v.l4 = -1
			if v.proto == 6 && len(l4) >= 4 {
				// A TCP header cut short (a first fragment of 8 or
				// 16 bytes of it) still has its ports: IPFilter
				// finds the packet's session by them (see check).
				v.cutPorts = true
				v.sport = binary.BigEndian.Uint16(l4)
				v.dport = binary.BigEndian.Uint16(l4[2:])
			}
			return true
		}
		v.sport = binary.BigEndian.Uint16(l4)
		v.dport = binary.BigEndian.Uint16(l4[2:])
	case 1, 58:
		if (v.proto == 58) != v.v6 {
			// ICMP in IPv6 or ICMPv6 in IPv4: a protocol like any
			// other to IPFilter, which reads neither's header there.
			return true
		}
		if len(l4) < 8 {
			v.l4 = -1
			return true
		}
		v.icmpType = l4[0]
		if v.proto == 1 && !natQueryV4(v.icmpType, len(l4)) {
			v.nqICMP = true
			v.nqID = binary.BigEndian.Uint16(l4[4:])
		}
		if (v.proto == 1 && natQueryV4(v.icmpType, len(l4))) || (v.proto == 58 && isICMPv6Query(v.icmpType)) {
			v.flags = flagICMPQuery
			id := binary.BigEndian.Uint16(l4[4:])
			v.sport, v.dport = id, id
		} else if (v.proto == 1 && isICMPv4Error(v.icmpType)) || (v.proto == 58 && isICMPv6Error(v.icmpType)) {
			// An error too short to quote an IP header is translated
			// as a plain packet, as IPFilter does.
			quoted := packet.IPv4MinimumSize
			if v.proto == 58 {
				quoted = packet.IPv6MinimumSize
			}
			v.icmpErr = len(l4) >= 8+quoted
			v.errType = true
		}
	}
	return true
}

// parseInner parses the packet embedded in an ICMP error, of which
// only the first 8 bytes of the L4 header are present.
func parseInner(v *view, b []byte) bool {
	if !parse(v, b) {
		return false
	}
	// A quoted header is always cut short: its checksum is patched as
	// the ICMP error code decides, not skipped as cut6 would.
	v.cut6 = false
	if v.l4 < 0 && !v.fragBody && (v.proto == 6 || v.proto == 17) {
		hl := packet.IPv4MinimumSize
		if !v.v6 {
			hl = packet.IPv4(b).HeaderLength()
		} else {
			hl = packet.IPv6MinimumSize
		}
		if !v.v6 && len(b) < hl+8 {
			// IPFilter's IPv4 error lookup wants 8 bytes of a quoted
			// TCP or UDP header (its IPv6 one 4): with fewer the error
			// is no session's, an ICMP packet like another (checked
			// against its ipftest: 4 and 6 bytes, TCP and UDP, rdr).
			return false
		}
		if len(b) >= hl+4 {
			v.l4, v.l4len = hl, len(b)-hl
			v.sport = binary.BigEndian.Uint16(b[hl:])
			v.dport = binary.BigEndian.Uint16(b[hl+2:])
			v.flags = flagUDP
			if v.proto == 6 {
				v.flags = flagTCP
			}
		}
	}
	return true
}

// l4csum returns the offset of the L4 checksum field, or -1.
func (v *view) l4csum() int {
	if v.l4 < 0 || v.cut6 {
		return -1
	}
	c := v.l4csumOff()
	if c+2 > len(v.b) {
		return -1
	}
	return c
}

func (v *view) l4csumOff() int {
	switch v.proto {
	case 6:
		return v.l4 + 16
	case 17:
		if v.l4+8 <= len(v.b) && binary.BigEndian.Uint16(v.b[v.l4+6:]) == 0 && !v.v6 {
			return -1 // no UDP checksum
		}
		return v.l4 + 6
	case 1:
		return v.l4 + 2
	case 58:
		return v.l4 + 2
	}
	return -1
}

// rewrite gives v the source and destination src and dst and, for TCP
// and UDP, the ports sport and dport. An ICMP query has one id, in the
// source-port slot, which becomes id.
func (v *view) rewrite(src, dst netip.Addr, sport, dport, id uint16) {
	v.setAddr(0, src)
	v.setAddr(1, dst)
	if v.flags&flagICMPQuery != 0 {
		v.setPort(0, id)
		return
	}
	v.setPort(0, sport)
	v.setPort(1, dport)
}

// setAddr rewrites the source (which=0) or destination address and
// patches the IPv4 header checksum and the pseudo-header checksums.
func (v *view) setAddr(which int, a netip.Addr) {
	old := v.src
	if which == 1 {
		old = v.dst
	}
	if old == a {
		return
	}
	if v.v6 {
		s := a.As16()
		copy(v.b[8+16*which:], s[:])
	} else {
		s := a.As4()
		h := packet.IPv4(v.b)
		copy(v.b[12+4*which:], s[:])
		o := old.As4()
		h.SetChecksum(packet.ChecksumUpdate32(h.Checksum(), binary.BigEndian.Uint32(o[:]), binary.BigEndian.Uint32(s[:])))
	}
	// ICMPv4 has no pseudo header; everything else does.
	if c := v.l4csum(); c >= 0 && v.proto != 1 {
		hc := binary.BigEndian.Uint16(v.b[c:])
		hc = packet.ChecksumUpdateAddr(hc, old, a)
		if v.proto == 17 && hc == 0 {
			hc = 0xffff
		}
		binary.BigEndian.PutUint16(v.b[c:], hc)
	}
	if which == 0 {
		v.src = a
	} else {
		v.dst = a
	}
}

// setPort rewrites the TCP/UDP source (which=0) or destination port, or
// the ICMP query id (either which), patching the L4 checksum.
func (v *view) setPort(which int, p uint16) {
	if v.l4 < 0 {
		return
	}
	off := v.l4 + 2*which
	if v.flags&flagICMPQuery != 0 {
		off = v.l4 + 4
	} else if v.flags&flagTCPUDP == 0 {
		return
	}
	old := binary.BigEndian.Uint16(v.b[off:])
	if old == p {
		return
	}
	binary.BigEndian.PutUint16(v.b[off:], p)
	if c := v.l4csum(); c >= 0 {
		hc := packet.ChecksumUpdate16(binary.BigEndian.Uint16(v.b[c:]), old, p)
		if v.proto == 17 && hc == 0 {
			hc = 0xffff
		}
		binary.BigEndian.PutUint16(v.b[c:], hc)
	}
	if v.flags&flagICMPQuery != 0 {
		v.sport, v.dport = p, p
	} else if which == 0 {
		v.sport = p
	} else {
		v.dport = p
	}
}

// clampMSS lowers the MSS option of a TCP SYN to max (mssclamp).
func (v *view) clampMSS(max uint16) {
	tcp := v.b[v.l4 : v.l4+v.l4len]
	if len(tcp) < 20 || tcp[13]&packet.TCPFlagSyn == 0 {
		return
	}
	hl := int(tcp[12]>>4) * 4
	if hl > len(tcp) {
		hl = len(tcp)
	}
	for i := 20; i < hl; {
		switch kind := tcp[i]; {
		case kind == 0:
			return
		case kind == 1:
			i++
			continue
		case i+1 >= hl || tcp[i+1] < 2:
			return
		case kind == 2 && tcp[i+1] == 4 && i+4 <= hl:
			mss := binary.BigEndian.Uint16(tcp[i+2:])
			if mss > max {
				binary.BigEndian.PutUint16(tcp[i+2:], max)
				// The option may sit at an odd offset; patch the sum
				// over the aligned words that hold it.
				c := binary.BigEndian.Uint16(tcp[16:])
				if i%2 == 0 {
					c = packet.ChecksumUpdate16(c, mss, max)
				} else {
					c = packet.ChecksumUpdate16(c, uint16(mss>>8), uint16(max>>8))
					c = packet.ChecksumUpdate16(c, uint16(mss&0xff)<<8, uint16(max&0xff)<<8)
				}
				binary.BigEndian.PutUint16(tcp[16:], c)
			}
			return
		}
		i += int(tcp[i+1])
	}
}

package bpf

import (
	"encoding/binary"
	"net/netip"
)

// testPkt describes a packet for the datapath tests.
type testPkt struct {
	src, dst   string
	proto      uint8
	sport      uint16
	dport      uint16
	flags      uint8 // TCP
	seq, ack   uint32
	win        uint16
	icmpType   uint8
	icmpCode   uint8
	icmpID     uint16
	payload    int
	ttl        uint8
	ipOpts     []byte // IPv4 options (padded by the caller)
	fragOff    uint16 // IPv4 fragment offset in 8-byte units
	moreFrags  bool
	tcpOptions []byte
	id         uint16 // IPv4 id
}

// build returns an Ethernet frame carrying p.
func (p testPkt) build() []byte {
	src, dst := netip.MustParseAddr(p.src), netip.MustParseAddr(p.dst)
	ttl := p.ttl
	if ttl == 0 {
		ttl = 64
	}
	var l4 []byte
	switch p.proto {
	case 6:
		hl := 20 + len(p.tcpOptions)
		l4 = make([]byte, hl+p.payload)
		binary.BigEndian.PutUint16(l4[0:], p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		binary.BigEndian.PutUint32(l4[4:], p.seq)
		binary.BigEndian.PutUint32(l4[8:], p.ack)
		l4[12] = byte(hl/4) << 4
		l4[13] = p.flags
		win := p.win
		if win == 0 {
			win = 4096
		}
		binary.BigEndian.PutUint16(l4[14:], win)
		copy(l4[20:], p.tcpOptions)
	case 17:
		l4 = make([]byte, 8+p.payload)
		binary.BigEndian.PutUint16(l4[0:], p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	case 1, 58:
		l4 = make([]byte, 8+p.payload)
		l4[0], l4[1] = p.icmpType, p.icmpCode
		binary.BigEndian.PutUint16(l4[4:], p.icmpID)
	default:
		l4 = make([]byte, p.payload)
	}
	frame := make([]byte, 14, 14+60+len(l4))
	copy(frame[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(frame[6:12], []byte{2, 0, 0, 0, 0, 1})
	if src.Is4() {
		binary.BigEndian.PutUint16(frame[12:], 0x0800)
		hl := 20 + len(p.ipOpts)
		ip := make([]byte, hl)
		ip[0] = 0x40 | byte(hl/4)
		binary.BigEndian.PutUint16(ip[2:], uint16(hl+len(l4)))
		fo := p.fragOff
		if p.moreFrags {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(ip[4:], p.id)
		binary.BigEndian.PutUint16(ip[6:], fo)
		ip[8] = ttl
		ip[9] = p.proto
		s4, d4 := src.As4(), dst.As4()
		copy(ip[12:], s4[:])
		copy(ip[16:], d4[:])
		copy(ip[20:], p.ipOpts)
		binary.BigEndian.PutUint16(ip[10:], ^csum(ip, 0))
		frame = append(frame, ip...)
	} else {
		binary.BigEndian.PutUint16(frame[12:], 0x86dd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6] = p.proto
		ip[7] = ttl
		s16, d16 := src.As16(), dst.As16()
		copy(ip[8:], s16[:])
		copy(ip[24:], d16[:])
		frame = append(frame, ip...)
	}
	return append(frame, l4...)
}

func csum(b []byte, s uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// reply returns the packet travelling the other way on the same flow.
func (p testPkt) reply(flags uint8) testPkt {
	r := p
	r.src, r.dst = p.dst, p.src
	r.sport, r.dport = p.dport, p.sport
	r.flags = flags
	r.seq, r.ack = p.ack, p.seq+1
	if p.proto == 1 && p.icmpType == 8 {
		r.icmpType = 0
	}
	if p.proto == 58 && p.icmpType == 128 {
		r.icmpType = 129
	}
	return r
}

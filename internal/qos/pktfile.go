package qos

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// InputPacket is one packet read from an IPFilter-kit packet file.
type InputPacket struct {
	Line   int    // line where the packet starts
	Out    bool   // direction: outbound
	Ifname string // interface, "anon0" when the file names none
	Data   []byte // starts at the IP header
}

// ReadPackets reads packets in the IPFilter test kit's `text` or `hex`
// format (ipf-conformance README §6). It implements the subset IPQoS needs:
// IP options (`opt`) and host names are rejected with an error.
func ReadPackets(r io.Reader, format string) ([]InputPacket, error) {
	switch format {
	case "text":
		return readText(r)
	case "hex":
		return readHex(r)
	}
	return nil, fmt.Errorf("unknown packet format %q (want text or hex)", format)
}

func readHex(r io.Reader) ([]InputPacket, error) {
	var out []InputPacket
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	cur := InputPacket{Ifname: "anon0", Out: false}
	started := false
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if line == "" {
			if started {
				out = append(out, cur)
			}
			cur, started = InputPacket{Ifname: "anon0"}, false
			continue
		}
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return nil, fmt.Errorf("line %d: expected \"]\" closing the packet header", lineNo)
			}
			hdr := line[1:end]
			if hdr != "" {
				dir, ifn, ok := strings.Cut(hdr, ",")
				if !ok {
					dir, ifn = "", hdr
				} else {
					cur.Out = dir != "" && (dir[0] == 'o' || dir[0] == 'O')
				}
				if name, _, ok := strings.Cut(ifn, "="); ok {
					ifn = name
				}
				if ifn != "" {
					cur.Ifname = ifn
				}
			}
			line = line[end+1:]
			if line != "" { // the character after "]" is always skipped (flags like +mcast too)
				for line != "" && line[0] != ' ' && line[0] != '\t' {
					line = line[1:]
				}
			}
		}
		if !started {
			cur.Line = lineNo
			started = true
		}
		var hi int = -1
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c == ' ' || c == '\t' || c == '\r' {
				continue
			}
			v, ok := unhex(c)
			if !ok {
				break
			}
			if hi < 0 {
				hi = v
			} else {
				cur.Data = append(cur.Data, byte(hi<<4|v))
				hi = -1
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// A packet not followed by an empty line at EOF is not processed (§6.2).
	return out, nil
}

func unhex(c byte) (int, bool) {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0'), true
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

var icmpTypes = map[string]uint8{
	"echorep": 0, "unreach": 3, "squench": 4, "redir": 5, "echo": 8, "routerad": 9, "routersol": 10,
	"timex": 11, "paramprob": 12, "timest": 13, "timestrep": 14, "inforeq": 15, "inforep": 16,
	"maskreq": 17, "maskrep": 18,
}

var services = map[string]uint16{
	"ftp-data": 20, "ftp": 21, "ssh": 22, "telnet": 23, "smtp": 25, "domain": 53, "http": 80, "www": 80,
	"pop3": 110, "ntp": 123, "imap": 143, "snmp": 161, "https": 443,
}

func readText(r io.Reader) ([]InputPacket, error) {
	var out []InputPacket
	sc := bufio.NewScanner(r)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		w := strings.Fields(line)
		if len(w) == 0 || w[0] == "nic" {
			continue
		}
		p, err := textPacket(w)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		p.Line = lineNo
		out = append(out, p)
	}
	return out, sc.Err()
}

func textPacket(w []string) (InputPacket, error) {
	p := InputPacket{Ifname: "anon0"}
	dir := w[0]
	v6 := dir == "in6" || dir == "out6"
	switch dir[0] {
	case 'o', 'O':
		p.Out = true
	case 'i', 'I':
	default:
		return p, fmt.Errorf("expected in or out, found %q", dir)
	}
	w = w[1:]
	if len(w) >= 2 && w[0] == "on" {
		p.Ifname, w = w[1], w[2:]
	}
	if len(w) == 0 {
		return p, fmt.Errorf("expected protocol or address, found end of line")
	}
	proto := -1
	switch w[0] {
	case "tcp":
		proto = 6
	case "udp":
		proto = 17
	case "icmp":
		proto = 1
	case "icmpv6":
		proto = 58
	default:
		if !strings.Contains(w[0], ".") && !strings.Contains(w[0], ":") {
			n, err := strconv.ParseUint(w[0], 10, 8)
			if err != nil {
				return p, fmt.Errorf("expected protocol, found %q", w[0])
			}
			proto = int(n)
		}
	}
	if proto >= 0 {
		w = w[1:]
	} else {
		proto = 0
	}
	if len(w) < 2 {
		return p, fmt.Errorf("expected source and destination")
	}
	withPorts := proto == 6 || proto == 17
	src, sport, err := textAddr(w[0], withPorts, v6, proto)
	if err != nil {
		return p, err
	}
	dst, dport, err := textAddr(w[1], withPorts, v6, proto)
	if err != nil {
		return p, err
	}
	w = w[2:]
	var flags uint8
	var seq, ack uint32
	var itype, icode uint8
	for i, word := range w {
		switch {
		case word == "opt":
			return p, fmt.Errorf("IP options are not supported by ipqosadmin -test")
		case strings.HasPrefix(word, "seq="):
			v, err := strconv.ParseUint(word[4:], 0, 32)
			if err != nil {
				return p, fmt.Errorf("bad %q", word)
			}
			seq = uint32(v)
		case strings.HasPrefix(word, "ack="):
			v, err := strconv.ParseUint(word[4:], 0, 32)
			if err != nil {
				return p, fmt.Errorf("bad %q", word)
			}
			ack = uint32(v)
		case proto == 6 && i == 0:
			flags = tcpFlags(word)
		case (proto == 1 || proto == 58) && i == 0:
			t, c, _ := strings.Cut(word, ",")
			if v, ok := icmpTypes[t]; ok && proto == 1 {
				itype = v
			} else if v, err := strconv.ParseUint(t, 10, 8); err == nil {
				itype = uint8(v)
			} else {
				return p, fmt.Errorf("unknown ICMP type %q", t)
			}
			if c != "" {
				v, err := strconv.ParseUint(c, 10, 8)
				if err != nil {
					return p, fmt.Errorf("bad ICMP code %q", c)
				}
				icode = uint8(v)
			}
		}
	}
	var l4 []byte
	switch proto {
	case 6:
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		binary.BigEndian.PutUint32(l4[4:], seq)
		binary.BigEndian.PutUint32(l4[8:], ack)
		l4[12] = 5 << 4
		l4[13] = flags
		binary.BigEndian.PutUint16(l4[14:], 4096)
		if flags&0x20 != 0 {
			binary.BigEndian.PutUint16(l4[18:], 1)
		}
	case 17:
		l4 = make([]byte, 8)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		binary.BigEndian.PutUint16(l4[4:], 8)
	case 1:
		l4 = make([]byte, 28)
		l4[0], l4[1] = itype, icode
	case 58:
		if v6 {
			l4 = make([]byte, 88)
			l4[0], l4[1] = itype, icode
		}
	}
	if v6 {
		plen := len(l4)
		if plen == 0 {
			plen, l4 = 1, []byte{0}
		}
		h := make([]byte, v6Len, v6Len+plen)
		h[0] = 0x60
		binary.BigEndian.PutUint16(h[4:], uint16(plen))
		h[v6NextHeader] = uint8(proto)
		s16, d16 := src.As16(), dst.As16()
		copy(h[v6Src:], s16[:])
		copy(h[v6Dst:], d16[:])
		p.Data = append(h, l4...)
		fixL4Checksum(p.Data, v6Len, uint8(proto))
		return p, nil
	}
	h := make([]byte, v4MinLen, v4MinLen+len(l4))
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(v4MinLen+len(l4)))
	h[8] = 63
	h[v4Protocol] = uint8(proto)
	s4, d4 := src.As4(), dst.As4()
	copy(h[v4Src:], s4[:])
	copy(h[v4Dst:], d4[:])
	binary.BigEndian.PutUint16(h[v4Checksum:], IPv4HeaderChecksum(h))
	p.Data = append(h, l4...)
	fixL4Checksum(p.Data, v4MinLen, uint8(proto))
	return p, nil
}

func tcpFlags(word string) uint8 {
	var f uint8
	for _, c := range word {
		switch c {
		case 'F':
			f |= 0x01
		case 'S':
			f |= 0x02
		case 'R':
			f |= 0x04
		case 'P':
			f |= 0x08
		case 'A':
			f |= 0x10
		case 'U':
			f |= 0x20
		case 'E':
			f |= 0x40
		case 'C':
			f |= 0x80
		}
	}
	return f
}

func textAddr(s string, withPort, v6 bool, proto int) (netip.Addr, uint16, error) {
	host, port := s, ""
	if withPort {
		i := strings.LastIndexByte(s, ',')
		if i < 0 {
			return netip.Addr{}, 0, fmt.Errorf("expected ADDRESS,PORT, found %q", s)
		}
		host, port = s[:i], s[i+1:]
	}
	var ip netip.Addr
	if host == "any" {
		ip = netip.IPv4Unspecified()
		if v6 {
			ip = netip.IPv6Unspecified()
		}
	} else {
		var err error
		ip, err = netip.ParseAddr(host)
		if err != nil || ip.Is4() == v6 {
			return ip, 0, fmt.Errorf("expected an IPv%d address, found %q (host names are not resolved)", map[bool]int{false: 4, true: 6}[v6], host)
		}
	}
	if !withPort {
		return ip, 0, nil
	}
	if v, ok := services[port]; ok {
		return ip, v, nil
	}
	v, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return ip, 0, fmt.Errorf("expected port, found %q", port)
	}
	return ip, uint16(v), nil
}

// fixL4Checksum fills in the TCP, UDP, ICMP or ICMPv6 checksum of a
// freshly built packet whose transport header starts at off.
func fixL4Checksum(pkt []byte, off int, proto uint8) {
	l4 := pkt[off:]
	var at int
	switch proto {
	case 6:
		at = 16
	case 17:
		at = 6
	case 1, 58:
		at = 2
	default:
		return
	}
	if len(l4) < at+2 {
		return
	}
	l4[at], l4[at+1] = 0, 0
	var sum uint32
	if proto != 1 { // pseudo header
		if pkt[0]>>4 == 4 {
			sum += sum16(pkt[v4Src : v4Src+8])
		} else {
			sum += sum16(pkt[v6Src : v6Src+32])
		}
		sum += uint32(proto) + uint32(len(l4))
	}
	sum += sum16(l4)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 && proto == 17 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[at:], c)
}

func sum16(b []byte) uint32 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

package ipftext

import (
	"bufio"
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"strings"

	"sluice/internal/packet"
)

// TextReader reads the "text" packet format (ipf-conformance README §6.1):
// one packet per line, built as ipftest builds it, with checksums
// computed.
type TextReader struct {
	s    *bufio.Reader
	line int
	// EchoID is the ICMP identifier given to echo and echo-reply packets.
	// ipftest uses its process id; NewTextReader does too.
	EchoID uint16
	// Warn, if set, receives non-fatal problems (unknown service or host
	// name) that ipftest reports on stderr while still building the packet.
	Warn func(line int, msg string)
}

// NewTextReader returns a TextReader over r.
func NewTextReader(r io.Reader) *TextReader {
	return &TextReader{s: bufio.NewReader(r), EchoID: uint16(os.Getpid())}
}

func (t *TextReader) warn(msg string) {
	if t.Warn != nil {
		t.Warn(t.line, msg)
	}
}

// Next implements Reader.
func (t *TextReader) Next(buf []byte) (Record, error) {
	for {
		line, _, err := readLine(t.s)
		if err != nil {
			return Record{}, err
		}
		t.line++
		if k := strings.IndexByte(line, '\r'); k >= 0 {
			line = line[:k]
		}
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		words := strings.FieldsFunc(line, func(r rune) bool {
			return r == ' ' || r == '\b' || r == '\t' || r == '\r' || r == '\n'
		})
		if len(words) == 0 {
			continue
		}
		if len(words) > 19 {
			words = words[:19]
		}
		if strings.EqualFold(words[0], "nic") {
			return Record{NICs: words[1:], Line: t.line}, nil
		}
		rec, err := t.parseLine(words, buf)
		rec.Line = t.line
		if err != nil {
			return Record{Line: t.line}, &SyntaxError{Line: t.line, Msg: err.Error()}
		}
		return rec, nil
	}
}

type parseErr string

func (e parseErr) Error() string { return string(e) }

var myFlags = [...]struct {
	c byte
	f uint8
}{{'F', packet.TCPFlagFin}, {'S', packet.TCPFlagSyn}, {'R', packet.TCPFlagRst},
	{'P', packet.TCPFlagPsh}, {'A', packet.TCPFlagAck}, {'U', packet.TCPFlagUrg},
	{'E', packet.TCPFlagEce}, {'C', packet.TCPFlagCwr}}

// tcpFlagsOf is the "FSRPAUEC" scan of ipft_tx.c: other letters are ignored.
func tcpFlagsOf(w string) uint8 {
	var f uint8
	for k := 0; k < len(w); k++ {
		for _, m := range myFlags {
			if w[k] == m.c {
				f |= m.f
			}
		}
	}
	return f
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func (t *TextReader) portNum(name, proto string) uint16 {
	if name != "" && isDigit(name[0]) {
		return uint16(atoi(name))
	}
	if p, ok := ServicePort(name, proto); ok {
		return p
	}
	t.warn("unknown service \"" + name + "\".")
	return 0
}

// endpoint splits a TCP or UDP "host,port" word, storing the port in the
// transport header l4 (and, for a TCP source, the window and data offset
// ipftest gives every TCP header); other protocols have no port, so word
// is the host.
func (t *TextReader) endpoint(word string, proto uint8, protoName string, l4 []byte, dst bool) (string, error) {
	if proto != packet.ProtoTCP && proto != packet.ProtoUDP {
		return word, nil
	}
	side, off := "source", 0
	if dst {
		side, off = "destination", 2
	}
	h, p, ok := strings.Cut(word, ",")
	if !ok {
		return "", parseErr(protoName + " with no " + side + " port")
	}
	binary.BigEndian.PutUint16(l4[off:], t.portNum(p, protoName))
	if proto == packet.ProtoTCP && !dst {
		binary.BigEndian.PutUint16(l4[14:], 4096)
		l4[12] = 5 << 4
	}
	return h, nil
}

func (t *TextReader) hostNum(s string) [4]byte {
	if strings.EqualFold(s, "any") {
		return [4]byte{}
	}
	if s != "" && isDigit(s[0]) {
		if a, ok := InetAddr(s); ok {
			return a.As4()
		}
		return [4]byte{255, 255, 255, 255} // INADDR_NONE
	}
	if a, ok := LookupHost(s); ok && a.Is4() {
		return a.As4()
	}
	t.warn("can't resolve hostname: " + s)
	return [4]byte{}
}

// parseLine builds one packet from the words of a line (ipft_tx.c parseline).
func (t *TextReader) parseLine(w []string, buf []byte) (Record, error) {
	var rec Record
	c := w[0][0]
	if !isAlpha(c) || (c|0x20 != 'o' && c|0x20 != 'i') {
		return rec, parseErr("bad direction \"" + w[0] + "\"")
	}
	if strings.EqualFold(w[0], "out6") || strings.EqualFold(w[0], "in6") {
		return t.parseIPv6(w, buf)
	}
	rec.Out = c|0x20 == 'o'
	w = w[1:]
	if len(w) == 0 {
		return rec, parseErr("missing packet description")
	}
	if strings.EqualFold(w[0], "on") {
		if len(w) < 3 {
			return rec, parseErr("missing interface or packet after \"on\"")
		}
		rec.Iface, rec.IfaceAddr = splitIface(w[1])
		w = w[2:]
	}
	const maxHdr = 20 + 48
	if len(buf) < maxHdr+28 {
		return rec, ErrBufferTooSmall
	}
	pkt := buf[:maxHdr+28]
	clear(pkt)
	var proto uint8
	ipLen := 20
	l4len := 0
	protoName := ""
	switch {
	case strings.EqualFold(w[0], "tcp"):
		proto, l4len, protoName = packet.ProtoTCP, 20, "tcp"
		w = w[1:]
	case strings.EqualFold(w[0], "udp"):
		proto, l4len, protoName = packet.ProtoUDP, 8, "udp"
		w = w[1:]
	case strings.EqualFold(w[0], "icmp"):
		proto, l4len, protoName = packet.ProtoICMP, 28, "icmp"
		w = w[1:]
	case isDigit(w[0][0]) && !strings.Contains(w[0], "."):
		proto = uint8(atoi(w[0]))
		protoName = ProtocolName(proto)
		w = w[1:]
	}
	ipLen += l4len
	if len(w) == 0 {
		return rec, parseErr("missing source address")
	}
	var l4 [28]byte
	src, err := t.endpoint(w[0], proto, protoName, l4[:], false)
	if err != nil {
		return rec, err
	}
	srcA := t.hostNum(src)
	w = w[1:]
	if len(w) == 0 {
		return rec, parseErr("missing destination address")
	}
	dst, err := t.endpoint(w[0], proto, protoName, l4[:], true)
	if err != nil {
		return rec, err
	}
	dstA := t.hostNum(dst)
	w = w[1:]
	switch {
	case proto == packet.ProtoTCP:
		w = tcpExtras(w, l4[:])
	case proto == packet.ProtoICMP && len(w) > 0:
		t.icmpTypeCode(w[0], l4[:], false)
		w = w[1:]
	}
	var opts []byte
	var optBuf [48]byte
	if len(w) > 0 && strings.EqualFold(w[0], "opt") {
		if len(w) > 1 {
			n, err := buildOpts(w[1], optBuf[:])
			if err != nil {
				return rec, err
			}
			opts = optBuf[:n]
		}
	}
	hlen := 20 + len(opts)
	ipLen += len(opts)
	ip := packet.IPv4(pkt)
	ip.SetVersionAndHeaderLength(hlen)
	ip.SetTTL(63)
	ip.SetProtocol(proto)
	copy(pkt[12:16], srcA[:])
	copy(pkt[16:20], dstA[:])
	copy(pkt[20:], opts)
	copy(pkt[hlen:], l4[:l4len])
	ip.SetTotalLength(uint16(ipLen))
	rec.Packet = pkt[:ipLen]
	FixChecksums(rec.Packet)
	return rec, nil
}

// tcpExtras reads the optional FLAGS, seq= and ack= words into the TCP
// header l4 and returns the remaining words.
func tcpExtras(w []string, l4 []byte) []string {
	if len(w) > 0 {
		if f := tcpFlagsOf(w[0]); f != 0 {
			l4[13] = f
			w = w[1:]
		}
	}
	if l4[13]&packet.TCPFlagUrg != 0 {
		binary.BigEndian.PutUint16(l4[18:], 1)
	}
	if len(w) > 0 && hasPrefixFold(w[0], "seq=") {
		binary.BigEndian.PutUint32(l4[4:], uint32(atoi(w[0][4:])))
		w = w[1:]
	}
	if len(w) > 0 && hasPrefixFold(w[0], "ack=") {
		binary.BigEndian.PutUint32(l4[8:], uint32(atoi(w[0][4:])))
		w = w[1:]
	}
	return w
}

func (t *TextReader) icmpTypeCode(word string, l4 []byte, v6 bool) {
	name, code, hasCode := strings.Cut(word, ",")
	typ := ICMPType(name, v6)
	if typ < 0 && name != "" && isDigit(name[0]) {
		typ = atoi(name)
	}
	l4[0] = uint8(typ)
	if hasCode {
		l4[1] = uint8(atoi(code))
	}
	echo := (!v6 && (l4[0] == packet.ICMPv4Echo || l4[0] == packet.ICMPv4EchoReply)) ||
		(v6 && (l4[0] == packet.ICMPv6EchoRequest || l4[0] == packet.ICMPv6EchoReply))
	if echo {
		binary.BigEndian.PutUint16(l4[4:], t.EchoID)
	}
}

// parseIPv6 is ipft_tx.c parseipv6.
func (t *TextReader) parseIPv6(w []string, buf []byte) (Record, error) {
	var rec Record
	rec.Out = w[0][0]|0x20 == 'o'
	w = w[1:]
	if len(w) == 0 {
		return rec, parseErr("missing packet description")
	}
	if strings.EqualFold(w[0], "on") {
		if len(w) < 3 {
			return rec, parseErr("missing interface or packet after \"on\"")
		}
		rec.Iface, rec.IfaceAddr = splitIface(w[1])
		w = w[2:]
	}
	if len(buf) < 40+88 {
		return rec, ErrBufferTooSmall
	}
	pkt := buf[:40+88]
	clear(pkt)
	var nxt uint8
	plen := 0
	protoName := ""
	switch {
	case strings.EqualFold(w[0], "tcp"):
		nxt = packet.ProtoTCP
		w = w[1:]
	case strings.EqualFold(w[0], "udp"):
		nxt = packet.ProtoUDP
		w = w[1:]
	case strings.EqualFold(w[0], "icmpv6"):
		nxt = packet.ProtoICMPv6
		w = w[1:]
	case isDigit(w[0][0]) && !strings.Contains(w[0], ":"):
		nxt = uint8(atoi(w[0]))
		w = w[1:]
	default:
		nxt = packet.ProtoIPv6
	}
	// Unlike the IPv4 form, the payload length follows the protocol
	// number however it was written ("58" builds an 88-byte ICMPv6
	// payload, as n1_6 expects).
	switch nxt {
	case packet.ProtoTCP:
		plen, protoName = 20, "tcp"
	case packet.ProtoUDP:
		plen, protoName = 8, "udp"
	case packet.ProtoICMPv6:
		plen = 88
	}
	if len(w) == 0 {
		return rec, parseErr("missing source address")
	}
	var l4 [28]byte
	tcpudp := nxt == packet.ProtoTCP || nxt == packet.ProtoUDP
	src, err := t.endpoint(w[0], nxt, protoName, l4[:], false)
	if err != nil {
		return rec, err
	}
	sa, err := netip.ParseAddr(src)
	if err != nil || !sa.Is6() || sa.Zone() != "" {
		return rec, parseErr("cannot parse source address '" + src + "'")
	}
	w = w[1:]
	if len(w) == 0 {
		return rec, parseErr("missing destination address")
	}
	dst, err := t.endpoint(w[0], nxt, protoName, l4[:], true)
	if err != nil {
		return rec, err
	}
	da, err := netip.ParseAddr(dst)
	if err != nil || !da.Is6() || da.Zone() != "" {
		return rec, parseErr("cannot parse destination address '" + dst + "'")
	}
	w = w[1:]
	switch {
	case nxt == packet.ProtoTCP:
		tcpExtras(w, l4[:])
	case nxt == packet.ProtoICMPv6 && len(w) > 0:
		t.icmpTypeCode(w[0], l4[:], true)
	}
	ip := packet.IPv6(pkt)
	ip.SetVersionTrafficClassFlow(6 << 28)
	ip.SetNextHeader(nxt)
	ip.SetSourceAddress(sa)
	ip.SetDestinationAddress(da)
	switch {
	case tcpudp:
		copy(pkt[40:], l4[:20])
	case nxt == packet.ProtoICMPv6:
		copy(pkt[40:], l4[:8])
	}
	if plen == 0 {
		plen = 1 // a payload length of 0 would mean a jumbogram
	}
	ip.SetPayloadLength(uint16(plen))
	rec.Packet = pkt[:40+plen]
	FixChecksums(rec.Packet)
	return rec, nil
}

// ipOption is one entry of IPFilter's ionames table (lib/ionames.c):
// name, option type, bit, and the option length addipopt writes.
type ipOption struct {
	name string
	typ  uint8
	bit  uint32
	size int
}

var ioNames = []ipOption{
	{"nop", packet.IPOptNOP, packet.OptNOP, 1},
	{"rr", packet.IPOptRR, packet.OptRR, 7},
	{"zsu", packet.IPOptZSU, packet.OptZSU, 3},
	{"mtup", packet.IPOptMTUP, packet.OptMTUP, 3},
	{"mtur", packet.IPOptMTUR, packet.OptMTUR, 3},
	{"encode", packet.IPOptEncode, packet.OptEncode, 3},
	{"ts", packet.IPOptTS, packet.OptTS, 8},
	{"tr", packet.IPOptTR, packet.OptTR, 3},
	{"sec", packet.IPOptSecurity, packet.OptSecurity, 11},
	{"sec-class", packet.IPOptSecurity, packet.OptSecurity, 11},
	{"lsrr", packet.IPOptLSRR, packet.OptLSRR, 7},
	{"e-sec", packet.IPOptESec, packet.OptESec, 3},
	{"cipso", packet.IPOptCIPSO, packet.OptCIPSO, 3},
	{"satid", packet.IPOptSATID, packet.OptSATID, 4},
	{"ssrr", packet.IPOptSSRR, packet.OptSSRR, 7},
	{"addext", packet.IPOptAddExt, packet.OptAddExt, 3},
	{"visa", packet.IPOptVISA, packet.OptVISA, 3},
	{"imitd", packet.IPOptIMITD, packet.OptIMITD, 3},
	{"eip", packet.IPOptEIP, packet.OptEIP, 3},
	{"finn", packet.IPOptFINN, packet.OptFINN, 3},
}

// SecLevel returns the RIPSO classification byte of a sec-class name.
func SecLevel(name string) (uint8, bool) {
	switch strings.ToLower(name) {
	case "unclass":
		return 0xab, true
	case "confid":
		return 0x96, true
	case "reserv-1":
		return 0xf1, true
	case "reserv-2":
		return 0xcc, true
	case "reserv-3":
		return 0x66, true
	case "reserv-4":
		return 0x01, true
	case "secret":
		return 0x5a, true
	case "topsecret":
		return 0x3d, true
	}
	return 0, false
}

// buildOpts is lib/buildopts.c: the comma-separated options, each padded
// with one NOP when its end is not 4-aligned, then NOPs up to a 4-byte
// boundary less one and a final EOL. It returns the length written.
func buildOpts(list string, out []byte) (int, error) {
	n := 0
	var seen uint32
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		name, arg, _ := strings.Cut(item, "=")
		var io *ipOption
		for k := range ioNames {
			if strings.EqualFold(ioNames[k].name, name) && seen&ioNames[k].bit == 0 {
				io = &ioNames[k]
				break
			}
		}
		if io == nil {
			found := false
			for k := range ioNames {
				found = found || strings.EqualFold(ioNames[k].name, name)
			}
			if found {
				continue // a repeated option is ignored
			}
			return 0, parseErr("unknown IP option name " + name)
		}
		seen |= io.bit
		size := io.size
		if n+size+4 > len(out) {
			return 0, parseErr("options too long")
		}
		o := out[n : n+size]
		o[0] = io.typ
		if size > 1 {
			o[1] = uint8(size)
			if len(o) > 2 {
				o[2] = 4 // IPOPT_MINOFF
				if io.typ == packet.IPOptTS {
					o[2] = 5
				}
			}
			switch io.typ {
			case packet.IPOptSecurity:
				if arg != "" {
					lvl, _ := SecLevel(arg)
					o[2] = lvl
				} else {
					o[2] = 0
				}
			case packet.IPOptLSRR, packet.IPOptSSRR:
				if arg != "" {
					b := [4]byte{255, 255, 255, 255} // inet_addr's INADDR_NONE
					if a, ok := InetAddr(arg); ok {
						b = a.As4()
					}
					o[1] = 7
					copy(o[3:7], b[:])
				}
			case packet.IPOptSATID:
				if arg != "" {
					v := uint16(atoi(arg))
					o[2], o[3] = byte(v), byte(v>>8) // host (little-endian) order, as bcopy of a u_short
				}
			}
		}
		n += size
		if size > 1 && n&3 != 0 {
			out[n] = packet.IPOptNOP
			n++
		}
	}
	for n&3 != 3 {
		out[n] = packet.IPOptNOP
		n++
	}
	out[n] = packet.IPOptEOL
	n++
	return n, nil
}

// FixChecksums recomputes the IPv4 header checksum and the TCP, UDP or
// ICMP checksum (TCP and UDP for IPv6) of a whole packet, as ipftest's
// fixv4sums does for text input and for -C. Packets too short for their
// headers are left alone.
func FixChecksums(b []byte) {
	if len(b) < 1 {
		return
	}
	var l4 []byte
	var proto uint8
	var pseudo uint16
	switch b[0] >> 4 {
	case 4:
		ip := packet.IPv4(b)
		if len(b) < packet.IPv4MinimumSize || ip.HeaderLength() < 20 || ip.HeaderLength() > len(b) {
			return
		}
		ip.SetChecksum(0)
		ip.SetChecksum(ip.CalculateChecksum())
		end := int(ip.TotalLength())
		if end > len(b) || end < ip.HeaderLength() {
			return
		}
		if ip.FlagsFragmentOffset()&packet.IPv4OffsetMask != 0 {
			return
		}
		l4, proto = b[ip.HeaderLength():end], ip.Protocol()
		pseudo = packet.PseudoHeaderChecksum(proto, ip.SourceAddress(), ip.DestinationAddress(), len(l4))
	case 6:
		if len(b) < packet.IPv6MinimumSize {
			return
		}
		ip := packet.IPv6(b)
		end := 40 + int(ip.PayloadLength())
		if end > len(b) {
			return
		}
		l4, proto = b[40:end], ip.NextHeader()
		pseudo = packet.PseudoHeaderChecksum(proto, ip.SourceAddress(), ip.DestinationAddress(), len(l4))
	default:
		return
	}
	switch proto {
	case packet.ProtoTCP:
		if len(l4) >= packet.TCPMinimumSize {
			tcp := packet.TCP(l4)
			tcp.SetChecksum(0)
			tcp.SetChecksum(^packet.Checksum(l4, pseudo))
		}
	case packet.ProtoUDP:
		if len(l4) >= packet.UDPMinimumSize {
			u := packet.UDP(l4)
			u.SetChecksum(0)
			u.SetChecksum(^packet.Checksum(l4, pseudo))
		}
	case packet.ProtoICMP:
		if b[0]>>4 == 4 && len(l4) >= packet.ICMPv4MinimumSize {
			ic := packet.ICMPv4(l4)
			ic.SetChecksum(0)
			ic.SetChecksum(^packet.Checksum(l4, 0))
		}
	}
}

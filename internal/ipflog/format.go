package ipflog

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"time"

	"sluice/internal/packet"
	"sluice/internal/packet/ipftext"
)

// FormatOptions select ipmon's output variants.
type FormatOptions struct {
	// Syslog drops the date (the syslog line carries its own).
	Syslog bool
	// Verbose adds TCP seq, ack and window (-v).
	Verbose bool
	// Resolve prints service names for ports (-n); PortNum forces numbers (-p).
	Resolve, PortNum bool
	// HexHeader dumps the encoded record header (-X).
	HexHeader bool
	// HexPacket dumps the logged packet bytes (-x).
	HexPacket bool
	// LogBody dumps the logged body of "log body" records (-b).
	LogBody bool
	// Location is the time zone for timestamps (nil = time.Local, which
	// honours TZ).
	Location *time.Location
}

// Printer renders records as ipmon does and tracks the sequence numbers
// to report missed records. The zero value is ready to use.
type Printer struct {
	// Opts are the output options.
	Opts FormatOptions
	// seqnum is the next expected sequence number per log type.
	seqnum [3]uint32
}

var logNames = [3]string{"ipf", "NAT", "state"}

// reasons are the names ipmon prints after "reason:", indexed by a
// record's reason: IPFilter's fin_reason (5.x) up to natv6_in-fail, then
// the kernel datapath's own reasons, which it numbers from 20 (bpf.RSN*
// above RSNBad keep their number in log records). This is the only table
// of block-reason names: ipmon, ipfstat and the exporter all name a
// reason through ReasonName (bpf.ReasonName for the datapath's numbers).
var reasons = [...]string{
	"filter-rule", "log-or-block_1", "pps-rate", "jumbogram", "makefrip-fail",
	"state_add-fail", "updateipid-fail", "log-or-block_2", "decap-fail",
	"auth_new-fail", "auth_captured", "coalesce-fail", "pullup-fail",
	"auth-feedback", "bad-frag", "natv4_out-fail", "natv4_in-fail",
	"natv6_out-fail", "natv6_in-fail",
	// Sluice's kernel datapath (RSN_BAD, RSN_DCA, RSN_SCANCUT in
	// internal/bpf/c/include/filter.h)
	20: "bad-packet", 21: "keep-limit", 23: "scan-cut",
}

// ReasonName returns the name of a log record's block reason r as ipmon
// prints it after "reason:", or "" for a number that has none (ipmon
// prints the number).
func ReasonName(r uint8) string {
	if int(r) < len(reasons) {
		return reasons[r]
	}
	return ""
}

// Level returns the syslog priority ipmon uses for r.
func Level(r *Record) int {
	const (
		logEmerg   = 0
		logErr     = 3
		logWarning = 4
		logNotice  = 5
		logInfo    = 6
	)
	lvl := logNotice
	if r.LFlags&uint32(packet.FlagShort) != 0 {
		lvl = logErr
	}
	switch {
	case r.Flags&FRCmdMask == FRPass:
	case r.Flags&FRCmdMask == FRBlock:
		lvl = logWarning
	case r.Flags&FRLogMask == FRLog:
		lvl = logInfo
	case r.Flags&FFLogNoMatch != 0:
	default:
		lvl = logEmerg
	}
	if r.Level != NoLevel {
		lvl = int(r.Level)
	}
	return lvl
}

// Append appends the text of r: a "missed N ipf log entries" line when
// sequence numbers were skipped, the record line, and any hex dumps the
// options ask for.
func (p *Printer) Append(dst []byte, r *Record) []byte {
	typ := int(r.Type)
	if typ >= len(p.seqnum) {
		dst = append(dst, "unknown log record type "...)
		dst = strconv.AppendInt(dst, int64(typ), 10)
		return append(dst, '\n')
	}
	if r.Seq != p.seqnum[typ] {
		dst = append(dst, "missed "...)
		dst = strconv.AppendUint(dst, uint64(r.Seq-p.seqnum[typ]), 10)
		dst = append(dst, ' ')
		dst = append(dst, logNames[typ]...)
		dst = append(dst, " log entries: "...)
		dst = strconv.AppendUint(dst, uint64(p.seqnum[typ]), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, uint64(r.Seq), 10)
		dst = append(dst, '\n')
	}
	p.seqnum[typ] = r.Seq + r.Count
	switch r.Type {
	case TypeState:
		return append(p.appendState(dst, r), '\n')
	case TypeNAT:
		return append(p.appendNAT(dst, r), '\n')
	}
	dst = p.AppendLine(dst, r)
	dst = append(dst, '\n')
	if p.Opts.HexHeader {
		var hdr []byte
		hdr = r.AppendBinary(hdr)
		dst = AppendHexDump(dst, hdr[:headerSize])
	}
	switch {
	case p.Opts.HexPacket:
		dst = AppendHexDump(dst, r.Data)
	case p.Opts.LogBody && r.Flags&FRLogBody != 0:
		dst = AppendHexDump(dst, r.Data[r.HLen:])
	}
	return dst
}

// AppendLine appends ipmon's packet record line for r, without newline.
func (p *Printer) AppendLine(dst []byte, r *Record) []byte {
	dst = p.appendTime(dst, r.Time)
	dst = append(dst, ' ')
	if r.Count > 1 {
		dst = strconv.AppendUint(dst, uint64(r.Count), 10)
		dst = append(dst, "x "...)
	}
	dst = append(dst, r.Iface...)
	switch {
	case r.GroupUnset:
		dst = append(dst, " @-1:"...)
	case r.Group == "":
		dst = append(dst, " @0:"...)
	default:
		dst = append(dst, " @"...)
		dst = append(dst, r.Group...)
		dst = append(dst, ':')
	}
	if r.Rule < 0 {
		dst = append(dst, "-1 "...)
	} else {
		dst = strconv.AppendUint(dst, uint64(r.Rule)+1, 10)
		dst = append(dst, ' ')
	}
	if r.LFlags&uint32(packet.FlagShort) != 0 {
		dst = append(dst, 'S')
	}
	switch {
	case r.Flags&FRCmdMask == FRPass:
		dst = append(dst, 'p')
	case r.Flags&FRCmdMask == FRBlock:
		dst = append(dst, 'b')
	case r.Flags&FRLogMask == FRLog:
		dst = append(dst, 'L')
	case r.Flags&FFLogNoMatch != 0:
		dst = append(dst, 'n')
	default:
		dst = append(dst, '?')
	}
	dst = append(dst, ' ')
	dst = p.appendPacket(dst, r)
	if r.Flags&FRKeepState != 0 {
		dst = append(dst, " K-S"...)
	}
	if r.Flags&FRKeepFrag != 0 {
		dst = append(dst, " K-F"...)
	}
	if r.Out {
		dst = append(dst, " OUT"...)
	} else {
		dst = append(dst, " IN"...)
	}
	if r.LogTag != 0 {
		dst = append(dst, " log-tag "...)
		dst = strconv.AppendInt(dst, int64(int32(r.LogTag)), 10)
	}
	if r.NatTag != "" {
		dst = append(dst, " nat-tag "...)
		dst = append(dst, r.NatTag...)
	}
	lf := packet.Flags(r.LFlags)
	for _, f := range [...]struct {
		f packet.Flags
		s string
	}{{packet.FlagLowTTL, " low-ttl"}, {packet.FlagOOW, " OOW"}, {packet.FlagBad, " bad"},
		{packet.FlagNATed, " NAT"}, {packet.FlagBadNAT, " bad-NAT"}, {packet.FlagBadSrc, " bad-src"},
		{packet.FlagMulticast, " multicast"}, {packet.FlagBroadcast, " broadcast"}} {
		if lf&f.f != 0 {
			dst = append(dst, f.s...)
		}
	}
	if lf&(packet.FlagMulticast|packet.FlagBroadcast|packet.FlagMBCast) == packet.FlagMBCast {
		dst = append(dst, " mbcast"...)
	}
	if r.Reason != 0 {
		dst = append(dst, " reason:"...)
		if name := ReasonName(r.Reason); name != "" {
			dst = append(dst, name...)
		} else {
			dst = strconv.AppendInt(dst, int64(r.Reason), 10)
		}
	}
	return dst
}

func append2(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/10%10), byte('0'+v%10))
}

// tcpFlagOrder is ipmon's tcpfl table order: A R S F U P E C.
var tcpFlagOrder = [...]struct {
	f uint8
	c byte
}{{packet.TCPFlagAck, 'A'}, {packet.TCPFlagRst, 'R'}, {packet.TCPFlagSyn, 'S'},
	{packet.TCPFlagFin, 'F'}, {packet.TCPFlagUrg, 'U'}, {packet.TCPFlagPsh, 'P'},
	{packet.TCPFlagEce, 'E'}, {packet.TCPFlagCwr, 'C'}}

func protoName(p uint8) string {
	if n := ipftext.ProtocolName(p); n != "" {
		return n
	}
	return strconv.Itoa(int(p))
}

func (p *Printer) appendPort(dst []byte, port uint16, proto string) []byte {
	if p.Opts.Resolve && !p.Opts.PortNum {
		if name := serviceName(port, proto); name != "" {
			return append(dst, name...)
		}
	}
	return strconv.AppendUint(dst, uint64(port), 10)
}

func serviceName(port uint16, proto string) string {
	for _, name := range []string{"ftp", "ssh", "telnet", "smtp", "domain", "http", "https", "pop3", "imap", "ntp", "snmp", "nfs", "sunrpc"} {
		if v, ok := ipftext.ServicePort(name, proto); ok && v == port {
			return name
		}
	}
	return ""
}

func appendAddr(dst []byte, b []byte) []byte {
	if len(b) == 4 {
		return ipftext.AppendIPv4(dst, b)
	}
	return netip.AddrFrom16([16]byte(b)).AppendTo(dst)
}

// appendPacket renders the addresses, protocol and lengths of the logged
// packet (print_ipflog's per-protocol part).
func (p *Printer) appendPacket(dst []byte, r *Record) []byte {
	b := r.Data
	if len(b) < 1 {
		return dst
	}
	var hl, plen int
	var ipoff uint16
	var proto uint8
	var src, dst2 []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return dst
		}
		ip := packet.IPv4(b)
		hl, ipoff, proto, plen = ip.HeaderLength(), ip.FlagsFragmentOffset(), ip.Protocol(), int(ip.TotalLength())
		src, dst2 = b[12:16], b[16:20]
	case 6:
		if len(b) < 40 {
			return dst
		}
		ip := packet.IPv6(b)
		hl, proto, plen = 40, ip.NextHeader(), 40+int(ip.PayloadLength())
		src, dst2 = b[8:24], b[24:40]
	default:
		return dst
	}
	l4 := []byte(nil)
	if hl <= len(b) {
		l4 = b[hl:]
	}
	pr := protoName(proto)
	frag := ipoff&packet.IPv4OffsetMask != 0
	switch {
	case (proto == packet.ProtoTCP || proto == packet.ProtoUDP) && !frag:
		if r.LFlags&uint32(packet.FlagShort) == 0 && len(l4) >= 4 {
			dst = appendAddr(dst, src)
			dst = append(dst, ',')
			dst = p.appendPort(dst, binary.BigEndian.Uint16(l4), pr)
			dst = append(dst, " -> "...)
			dst = appendAddr(dst, dst2)
			dst = append(dst, ',')
			dst = p.appendPort(dst, binary.BigEndian.Uint16(l4[2:]), pr)
			dst = appendPRLen(dst, pr, hl, plen)
			if proto == packet.ProtoTCP && len(l4) >= 14 {
				dst = append(dst, " -"...)
				for _, f := range tcpFlagOrder {
					if l4[13]&f.f != 0 {
						dst = append(dst, f.c)
					}
				}
				if p.Opts.Verbose && len(l4) >= 16 {
					t := packet.TCP(l4)
					dst = append(dst, ' ')
					dst = strconv.AppendUint(dst, uint64(t.SequenceNumber()), 10)
					dst = append(dst, ' ')
					dst = strconv.AppendUint(dst, uint64(t.AckNumber()), 10)
					dst = append(dst, ' ')
					dst = strconv.AppendUint(dst, uint64(t.WindowSize()), 10)
				}
			}
		} else {
			dst = appendAddr(dst, src)
			dst = append(dst, " -> "...)
			dst = appendAddr(dst, dst2)
			dst = appendPRLen(dst, pr, hl, plen)
		}
	case proto == packet.ProtoICMPv6 && len(src) == 16 && len(l4) >= 2:
		dst = appendAddr(dst, src)
		dst = append(dst, " -> "...)
		dst = appendAddr(dst, dst2)
		dst = appendPRLen(dst, "icmpv6", hl, plen)
		dst = append(dst, " icmpv6 "...)
		dst = appendICMP6Name(dst, l4[0], l4[1])
	case proto == packet.ProtoICMP && len(src) == 4 && !frag && len(l4) >= 2:
		dst = appendAddr(dst, src)
		dst = append(dst, " -> "...)
		dst = appendAddr(dst, dst2)
		dst = appendPRLen(dst, "icmp", hl, plen)
		dst = append(dst, " icmp "...)
		dst = appendICMPName(dst, l4[0], l4[1])
		switch l4[0] {
		case packet.ICMPv4Unreach, packet.ICMPv4SourceQuench, packet.ICMPv4ParamProblem,
			packet.ICMPv4Redirect, packet.ICMPv4TimeExceeded:
			dst = p.appendICMPError(dst, l4, hl)
		}
	default:
		dst = appendAddr(dst, src)
		dst = append(dst, " -> "...)
		dst = appendAddr(dst, dst2)
		dst = append(dst, " PR "...)
		dst = append(dst, pr...)
		dst = append(dst, " len "...)
		dst = strconv.AppendInt(dst, int64(hl), 10)
		dst = append(dst, " ("...)
		dst = strconv.AppendInt(dst, int64(plen), 10)
		dst = append(dst, ')')
		if frag {
			dst = appendFrag(dst, binary.BigEndian.Uint16(b[4:]), plen-hl, ipoff, true)
		}
	}
	return dst
}

func appendPRLen(dst []byte, pr string, hl, plen int) []byte {
	dst = append(dst, " PR "...)
	dst = append(dst, pr...)
	dst = append(dst, " len "...)
	dst = strconv.AppendInt(dst, int64(hl), 10)
	dst = append(dst, ' ')
	return strconv.AppendInt(dst, int64(uint16(plen)), 10)
}

func appendFrag(dst []byte, id uint16, n int, ipoff uint16, space bool) []byte {
	if space {
		dst = append(dst, ' ')
	}
	dst = append(dst, "(frag "...)
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, int64(uint16(n)), 10)
	dst = append(dst, '@')
	dst = strconv.AppendInt(dst, int64(ipoff&packet.IPv4OffsetMask)<<3, 10)
	if ipoff&packet.IPv4FlagMoreFragments != 0 {
		dst = append(dst, '+')
	}
	if ipoff&packet.IPv4FlagDontFragment != 0 {
		dst = append(dst, '-')
	}
	return append(dst, ')')
}

// appendICMPError renders " for SRC,SP - DST,DP PR p len HL TL" for the
// packet embedded in an ICMP error. Like ipmon, the embedded transport
// header is looked for at the outer header length.
func (p *Printer) appendICMPError(dst, l4 []byte, hl int) []byte {
	if len(l4) < 8+20 {
		return dst
	}
	oip := packet.IPv4(l4[8:])
	i := int(oip.TotalLength())
	if i > 1500 {
		i = int(binary.LittleEndian.Uint16(l4[8+2:]))
	}
	ipoff := oip.FlagsFragmentOffset()
	pr := protoName(oip.Protocol())
	ohl := oip.HeaderLength()
	var th []byte
	if hl <= len(oip) {
		th = oip[hl:]
	}
	frag := ipoff&packet.IPv4OffsetMask != 0
	switch {
	case !frag && (oip.Protocol() == packet.ProtoTCP || oip.Protocol() == packet.ProtoUDP) && len(th) >= 4:
		dst = append(dst, " for "...)
		dst = ipftext.AppendIPv4(dst, oip[12:16])
		dst = append(dst, ',')
		dst = p.appendPort(dst, binary.BigEndian.Uint16(th), pr)
		dst = append(dst, " - "...)
		dst = ipftext.AppendIPv4(dst, oip[16:20])
		dst = append(dst, ',')
		dst = p.appendPort(dst, binary.BigEndian.Uint16(th[2:]), pr)
		dst = appendPRLen(dst, pr, ohl, i)
	case !frag && oip.Protocol() == packet.ProtoICMP && len(th) >= 2:
		dst = append(dst, " for "...)
		dst = ipftext.AppendIPv4(dst, oip[12:16])
		dst = append(dst, " - "...)
		dst = ipftext.AppendIPv4(dst, oip[16:20])
		dst = appendPRLen(dst, "icmp", ohl, i)
		dst = append(dst, " icmp "...)
		dst = strconv.AppendInt(dst, int64(th[0]), 10)
		dst = append(dst, '/')
		dst = strconv.AppendInt(dst, int64(th[1]), 10)
	default:
		dst = append(dst, " for "...)
		dst = ipftext.AppendIPv4(dst, oip[12:16])
		dst = append(dst, " - "...)
		dst = ipftext.AppendIPv4(dst, oip[16:20])
		dst = append(dst, " PR "...)
		dst = append(dst, pr...)
		dst = append(dst, " len "...)
		dst = strconv.AppendInt(dst, int64(ohl), 10)
		dst = append(dst, " ("...)
		dst = strconv.AppendInt(dst, int64(uint16(i)), 10)
		dst = append(dst, ')')
		if frag {
			dst = appendFrag(dst, oip.ID(), i-ohl, ipoff, false)
		}
	}
	return dst
}

var icmpNames = [...]string{
	0: "echoreply", 3: "unreach", 4: "sourcequench", 5: "redirect", 8: "echo",
	9: "routeradvert", 10: "routersolicit", 11: "timxceed", 12: "paramprob",
	13: "timestamp", 14: "timestampreply", 15: "inforeq", 16: "inforeply",
	17: "maskreq", 18: "maskreply",
}

var unreachCodes = [...]string{
	0: "net", 1: "host", 2: "protocol", 3: "port", 4: "needfrag", 5: "srcfail",
	6: "net_unknown", 7: "host_unknown", 9: "net_prohib", 11: "tosnet",
	12: "toshost", 13: "admin_prohibit",
}

// appendICMPName is ipmon's icmpname: "name/code", with unreach codes by
// name; an unknown type prints as "icmptype(N)", other codes as numbers.
func appendICMPName(dst []byte, typ, code uint8) []byte {
	if int(typ) < len(icmpNames) && icmpNames[typ] != "" {
		dst = append(dst, icmpNames[typ]...)
	} else {
		dst = append(dst, "icmptype("...)
		dst = strconv.AppendInt(dst, int64(typ), 10)
		dst = append(dst, ')')
	}
	dst = append(dst, '/')
	if typ == packet.ICMPv4Unreach && int(code) < len(unreachCodes) && unreachCodes[code] != "" {
		return append(dst, unreachCodes[code]...)
	}
	return strconv.AppendInt(dst, int64(code), 10)
}

var icmp6Names = map[uint8]string{
	1: "unreach", 2: "toobig", 3: "timxceed", 4: "paramprob", 128: "echo", 129: "echoreply",
	130: "groupmemberquery", 131: "groupmemberreport", 132: "groupmemberterm",
	133: "routersolicit", 134: "routeradvert", 135: "neighborsolicit", 136: "neighboradvert",
	137: "redirect", 138: "routerrenum", 139: "nodeinforequest", 140: "nodeinforeply",
}

var unreach6Codes = [...]string{
	0: "noroute", 1: "admin", 2: "beyondscope", 3: "address", 4: "port",
}

// appendICMP6Name is ipmon's icmpname6.
func appendICMP6Name(dst []byte, typ, code uint8) []byte {
	if n, ok := icmp6Names[typ]; ok {
		dst = append(dst, n...)
	} else {
		dst = append(dst, "icmpv6type("...)
		dst = strconv.AppendInt(dst, int64(typ), 10)
		dst = append(dst, ')')
	}
	dst = append(dst, '/')
	if typ == packet.ICMPv6DstUnreach && int(code) < len(unreach6Codes) {
		return append(dst, unreach6Codes[code]...)
	}
	return strconv.AppendInt(dst, int64(code), 10)
}

// AppendHexDump appends ipmon's dumphex output: 16 bytes per line as
// "xx " groups, then the printable characters. As in ipmon, when the
// length is a multiple of 16 the last line has no newline.
func AppendHexDump(dst, b []byte) []byte {
	const digits = "0123456789abcdef"
	if len(b) == 0 {
		return dst
	}
	printable := func(c byte) byte {
		if c >= 0x20 && c < 0x7f {
			return c
		}
		return '.'
	}
	j := 0
	for ; j < len(b); j++ {
		if j != 0 && j&0xf == 0 {
			dst = append(dst, '\n')
		}
		dst = append(dst, digits[b[j]>>4], digits[b[j]&0xf])
		if (j+1)&0xf == 0 {
			dst = append(dst, "        "...)
			for k := j - 15; k <= j; k++ {
				dst = append(dst, printable(b[k]))
			}
		} else {
			dst = append(dst, ' ')
		}
	}
	if rem := j & 0xf; rem != 0 {
		for k := 16 - rem; k > 0; k-- {
			dst = append(dst, "   "...)
		}
		dst = append(dst, "       "...)
		for k := j - rem; k < j; k++ {
			dst = append(dst, printable(b[k]))
		}
		dst = append(dst, '\n')
	}
	return dst
}

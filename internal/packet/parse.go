package packet

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Errors returned by Info.Parse for packets IPFilter refuses before
// building its packet info (ipf_makefrip returning -1): the engine treats
// them as malformed ("bad-packet"). Info.Flags has FlagBad set as well.
var (
	ErrTruncated = errors.New("packet: truncated IP header")
	ErrVersion   = errors.New("packet: not IPv4 or IPv6")
	ErrHeaderLen = errors.New("packet: bad IP header length")
	ErrJumbogram = errors.New("packet: IPv6 jumbogram")
	ErrTotalLen  = errors.New("packet: IP total length below header length")
	// ErrPullup reports a header that IPFilter needed but the buffer did
	// not hold (ipf_pr_pullup failing; ipftest then frees the packet).
	// Info is still filled as far as parsing got.
	ErrPullup = errors.New("packet: header beyond the end of the packet")
)

// ParseOptions tune Info.Parse.
type ParseOptions struct {
	// VerifyChecksums makes Parse verify TCP, UDP, ICMP and ICMPv6
	// checksums of whole, non-short packets and set FlagBad on a mismatch
	// (ipftest always does; a kernel only with IPFILTER_CKSUM).
	VerifyChecksums bool
	// LinkFlags are ORed into Flags before parsing: FlagMulticast,
	// FlagBroadcast, FlagMBCast as the link layer reported them.
	LinkFlags Flags
}

// IPFilter's minimum ICMP sizes (fil.c ipf_pr_icmp).
const (
	icmpErrHdrLen     = 8  // ICMPERR_ICMPHLEN
	icmpMinLen        = 8  // ICMP_MINLEN
	icmpFullLen       = 28 // sizeof(struct icmp)
	icmp6ErrMinLen    = 8  // ICMP6ERR_MINPKTLEN - sizeof(ip6_t)
	icmp6ErrIPICMPLen = 88 // ICMP6ERR_IPICMPHLEN
	icmpMinFragMTU    = 68 // icmp_minfragmtu default
	greHdrLen         = 8  // sizeof(grehdr_t)
)

// Parse fills i from the packet b (starting at the IP header) exactly as
// IPFilter's ipf_makefrip and the ipf_pr_* dissectors do (ipf-reference
// §2.1). It never allocates and never panics. A non-nil error means the
// packet is unusable (bad-packet); otherwise the packet's oddities are
// reported through i.Flags (FlagShort, FlagBad, ...).
func (i *Info) Parse(b []byte, o ParseOptions) error {
	*i = Info{Flags: o.LinkFlags}
	if len(b) < 1 {
		i.Flags |= FlagBad
		return ErrTruncated
	}
	var err error
	switch b[0] >> 4 {
	case 4:
		err = i.parseIPv4(b, o)
	case 6:
		err = i.parseIPv6(b, o)
	default:
		i.Flags |= FlagBad
		return ErrVersion
	}
	if err == nil && i.pulledOut {
		err = ErrPullup
	}
	return err
}

// avail returns the packet bytes that belong to the IP packet: b clipped
// to PLen. Bytes past PLen (link padding) are ignored as IPFilter does.
func (i *Info) avail(b []byte) []byte {
	if len(b) > i.PLen {
		return b[:i.PLen]
	}
	return b
}

// pullup reports whether n bytes from L4Off are in the buffer b (not
// clipped to PLen: IPFilter compares with the buffer length). When they
// are not, IPFilter's user-mode ipf_pr_pullup frees the packet; Parse then
// returns ErrPullup and FlagBad is set.
func (i *Info) pullup(b []byte, n int) bool {
	if i.L4Off+n <= len(b) {
		return true
	}
	i.Flags |= FlagBad
	i.pulledOut = true
	return false
}

// short is ipf_pr_short: FlagShort when the L4 header cannot fit.
func (i *Info) short(min int) {
	if i.Off == 0 {
		if i.DLen < min {
			i.Flags |= FlagShort
		}
	} else if i.Off < min {
		i.Flags |= FlagShort
	}
}

func (i *Info) parseIPv4(b []byte, o ParseOptions) error {
	i.Version = 4
	if len(b) < IPv4MinimumSize {
		i.Flags |= FlagBad
		return ErrTruncated
	}
	ip := IPv4(b)
	hlen := ip.HeaderLength()
	if hlen < IPv4MinimumSize || hlen > len(b) {
		i.Flags |= FlagBad
		return ErrHeaderLen
	}
	i.HLen = hlen
	i.PLen = int(ip.TotalLength())
	if i.PLen < hlen {
		i.Flags |= FlagBad
		return ErrTotalLen
	}
	i.DLen = i.PLen - hlen
	i.L4Off = hlen
	i.Proto = ip.Protocol()
	i.L4Proto = i.Proto
	i.TOS = ip.TOS()
	i.TTL = ip.TTL()
	i.ID = uint32(ip.ID())
	i.Src = netip.AddrFrom4([4]byte(b[ipv4SrcAddr:]))
	i.Dst = netip.AddrFrom4([4]byte(b[ipv4DstAddr:]))
	if b[ipv4DstAddr]&0xf0 == 0xe0 {
		i.Flags |= FlagMulticast | FlagMBCast
	}

	off := ip.FlagsFragmentOffset() & (IPv4FlagMoreFragments | IPv4OffsetMask)
	if off != 0 {
		mf := off&IPv4FlagMoreFragments != 0
		i.MoreFrags = mf
		i.Flags |= FlagFrag
		off &= IPv4OffsetMask
		if off == 1 && i.Proto == ProtoTCP {
			// RFC 3128: an offset of 8 bytes can rewrite the TCP flags.
			i.Flags |= FlagShort
		}
		if off != 0 {
			i.Flags |= FlagFragBody
			boff := int(off) << 3
			if boff+i.DLen > 65535 || i.DLen == 0 || (mf && i.DLen&7 != 0) {
				i.Flags |= FlagBad
			}
			i.Off = boff
		}
	}

	proto := i.Proto
	if proto == ProtoAH {
		proto = i.skipAH4(b)
		i.L4Proto = proto
	}
	switch proto {
	case ProtoUDP:
		i.short(UDPMinimumSize)
		if i.udpCommon(b) {
			i.checkSum(b, o, false)
		}
	case ProtoTCP:
		i.short(TCPMinimumSize)
		if i.tcpCommon(b) {
			i.checkSum(b, o, false)
		}
	case ProtoICMP:
		i.icmp4(b, o)
	case ProtoESP:
		if i.Off == 0 {
			i.short(ESPMinimumSize)
			if i.pullup(b, ESPMinimumSize) {
				// IPFilter keeps the SPI in fin_data for ESP matching.
				spi := binary.BigEndian.Uint32(b[i.L4Off:])
				i.SrcPort, i.DstPort = uint16(spi>>16), uint16(spi)
			}
		}
	case ProtoGRE:
		// ipf_pr_gre checks for and pulls up a whole grehdr_t (8
		// bytes, the PPTP form), though it reads the first four.
		i.short(greHdrLen)
		if i.Off == 0 && i.pullup(b, greHdrLen) {
			i.SrcPort = binary.BigEndian.Uint16(b[i.L4Off:])
			i.DstPort = binary.BigEndian.Uint16(b[i.L4Off+2:])
		}
	}

	if hlen > IPv4MinimumSize {
		i.Flags |= FlagOptions
		i.walkIPv4Options(b[IPv4MinimumSize:hlen])
	}
	return nil
}

// skipAH4 is ipf_pr_ah: skip (len+2)*4 bytes of AH and return the next
// protocol, or ProtoNone when the header is short or unavailable.
func (i *Info) skipAH4(p []byte) uint8 {
	i.Flags |= FlagAH
	i.short(AHMinimumSize)
	if i.Flags&FlagShort != 0 || i.Off != 0 {
		return ProtoNone
	}
	if !i.pullup(p, AHMinimumSize) {
		return ProtoNone
	}
	ah := AH(p[i.L4Off:])
	n := ah.Length()
	if n > i.DLen {
		// IPFilter steps past the end of the packet here, and the next
		// pull-up frees it: the packet is bad (a bad-packet verdict).
		i.Flags |= FlagBad
		i.pulledOut = true
		return ProtoNone
	}
	i.DLen -= n
	i.L4Off += n
	return ah.NextHeader()
}

// ipv4OptBit maps an option type to its OptMask bit (0 if unknown).
func ipv4OptBit(t uint8) uint32 {
	switch t {
	case IPOptNOP:
		return OptNOP
	case IPOptRR:
		return OptRR
	case IPOptZSU:
		return OptZSU
	case IPOptMTUP:
		return OptMTUP
	case IPOptMTUR:
		return OptMTUR
	case IPOptEncode:
		return OptEncode
	case IPOptTS:
		return OptTS
	case IPOptTR:
		return OptTR
	case IPOptSecurity:
		return OptSecurity
	case IPOptLSRR:
		return OptLSRR
	case IPOptESec:
		return OptESec
	case IPOptCIPSO:
		return OptCIPSO
	case IPOptSATID:
		return OptSATID
	case IPOptSSRR:
		return OptSSRR
	case IPOptAddExt:
		return OptAddExt
	case IPOptVISA:
		return OptVISA
	case IPOptIMITD:
		return OptIMITD
	case IPOptEIP:
		return OptEIP
	case IPOptFINN:
		return OptFINN
	}
	return 0
}

// ripsoClass maps a RIPSO classification byte to its SecMask bit.
func ripsoClass(c uint8) uint16 {
	switch c {
	case 0x01:
		return SecReserv4
	case 0x3d:
		return SecTopSecret
	case 0x5a:
		return SecSecret
	case 0x66:
		return SecReserv3
	case 0x96:
		return SecConfidential
	case 0xab:
		return SecUnclass
	case 0xcc:
		return SecReserv2
	case 0xf1:
		return SecReserv1
	}
	return 0
}

// walkIPv4Options records option bits as ipf_pr_ipv4hdr does. IPFilter
// records an option only when its length exceeds 4 bytes (the "ol > 4"
// test in fil.c), so NOP and 4-byte options such as satid set FlagOptions
// but no OptMask bit; this is reproduced on purpose.
func (i *Info) walkIPv4Options(opts []byte) {
	var optmsk uint32
	var secmsk, auth uint16
	for {
		opt, rest, ok := NextIPv4Option(opts)
		if !ok {
			break
		}
		ol := len(opt.Data)
		if bit := ipv4OptBit(opt.Type); bit != 0 && ol > 4 {
			switch opt.Type {
			case IPOptSecurity:
				if optmsk&bit != 0 {
					i.Flags |= FlagBad
				} else {
					secmsk = ripsoClass(opt.Data[2])
					if secmsk != 0 {
						auth = uint16(opt.Data[3])<<8 | uint16(opt.Data[4])
					} else {
						auth = 0
					}
				}
			case IPOptCIPSO:
				if optmsk&bit != 0 {
					i.Flags |= FlagBad
				} else if !validCIPSO(opt.Data) {
					i.Flags |= FlagBad
				}
			}
			optmsk |= bit
		}
		opts = rest
	}
	if auth != 0 && auth&0x0100 == 0 {
		auth &= 0xff00
	}
	i.OptMask, i.SecMask, i.Auth = optmsk, secmsk, auth
}

// IPv4FragKeyOptions returns the option fields IPFilter keys fragments
// by (ipfr_optmsk, ipfr_secmsk, ipfr_auth): the OptMask bits of the
// copied options (IPF_OPTCOPY, security to FINN), the security class and
// its authority, as walkIPv4Options records them from opts (the option
// bytes after the fixed 20-byte header).
func IPv4FragKeyOptions(opts []byte) (optmsk uint32, secmsk, auth uint16) {
	optmsk, secmsk, auth = IPv4OptionMasks(opts)
	return optmsk & ipv4OptCopy, secmsk, auth
}

// IPv4OptionMasks returns the option bits, security class and authority
// walkIPv4Options records from opts (the option bytes after the fixed
// 20-byte header): what ipf_pr_ipv4hdr sets of a header that is not the
// packet's own, such as the one an ICMP error quotes.
func IPv4OptionMasks(opts []byte) (optmsk uint32, secmsk, auth uint16) {
	var i Info
	i.walkIPv4Options(opts)
	return i.OptMask, i.SecMask, i.Auth
}

// ipv4OptCopy is IPFilter's IPF_OPTCOPY: the OptMask bits of the IPv4
// options copied into every fragment.
const ipv4OptCopy = 0x07ff00

// validCIPSO checks a CIPSO option's length (6..40) and that each tag has
// a sane length within the option.
func validCIPSO(d []byte) bool {
	if len(d) < 6 || len(d) > 40 {
		return false
	}
	for t := d[6:]; len(t) > 0; {
		if len(t) < 2 {
			return false
		}
		tl := int(t[1])
		if tl < 2 || tl > len(t) {
			return false
		}
		switch t[0] {
		case 1, 2, 5:
			if tl < 4 {
				return false
			}
		case 6, 7:
		default:
			return false
		}
		t = t[tl:]
	}
	return true
}

// tcpCommon is ipf_pr_tcpcommon; it reports whether the checksum should
// then be verified.
func (i *Info) tcpCommon(p []byte) bool {
	i.Flags |= FlagTCPUDP
	if i.Off != 0 {
		return true
	}
	// The ports of a short segment are read and matched on before the
	// whole header is pulled up (ipftest's f12 depends on it).
	if i.DLen > 3 && i.L4Off+4 <= len(p) {
		i.SrcPort = binary.BigEndian.Uint16(p[i.L4Off:])
		i.DstPort = binary.BigEndian.Uint16(p[i.L4Off+2:])
	}
	if i.Flags&FlagShort != 0 {
		return false
	}
	if i.Version == 6 && i.DLen < TCPMinimumSize {
		i.shortTCP6(p)
		return false
	}
	if !i.pullup(p, TCPMinimumSize) {
		return false
	}
	tcp := TCP(p[i.L4Off:])
	tlen := tcp.DataOffset()
	if tlen < TCPMinimumSize {
		i.Flags |= FlagBad
		return false
	}
	i.TCPHdrLen = tlen
	flags := tcp.Flags()
	i.TCPFlags = flags
	i.Seq, i.Ack, i.Win, i.Urp = tcp.SequenceNumber(), tcp.AckNumber(), tcp.WindowSize(), tcp.UrgentPointer()
	if TCPFlagsBad(flags, i.Urp, i.Ack) {
		i.Flags |= FlagBad
		return false
	}
	// ipf_pr_tcpcommon then pulls up the options too: a header whose
	// data offset runs past the buffer (options cut by a first
	// fragment, or a lying offset) makes the packet bad.
	if tlen > TCPMinimumSize && !i.pullup(p, tlen) {
		return false
	}
	return true
}

// shortTCP6 is what IPFilter's IPv6 path does with a TCP header shorter
// than 20 bytes: unlike the IPv4 path it does not call the packet short
// but bad (its pull-up of the header fails without freeing it) and goes
// on to read the header, bytes past the packet's end reading as zero (so
// flag tests see flags 0); a header that claims options is pulled up
// again, and that failure frees it (bad-packet).
//
// A first fragment is not made bad: IPFilter's IPv6 path finds nothing
// wrong with a fragment header's first fragment whose TCP header is cut
// (its flags, as far as they are there, match state and rules).
func (i *Info) shortTCP6(p []byte) {
	if i.Flags&FlagFrag == 0 {
		i.Flags |= FlagBad
	}
	var h [TCPMinimumSize]byte
	if i.L4Off < len(p) {
		copy(h[:], p[i.L4Off:min(len(p), i.L4Off+i.DLen)])
	}
	tcp := TCP(h[:])
	i.TCPFlags = tcp.Flags()
	// The sequence, acknowledgement and window are read as they are
	// there: state made by such a first fragment tracks them.
	i.Seq, i.Ack, i.Win, i.Urp = tcp.SequenceNumber(), tcp.AckNumber(), tcp.WindowSize(), tcp.UrgentPointer()
	if TCPFlagsBad(tcp.Flags(), tcp.UrgentPointer(), tcp.AckNumber()) {
		i.Flags |= FlagBad
		return
	}
	if tlen := tcp.DataOffset(); tlen > TCPMinimumSize {
		i.pullup(p, tlen)
	}
}

// TCPFlagsBad reports whether IPFilter considers a TCP flag combination
// malformed (ipf-reference §2.1 "TCP bad").
func TCPFlagsBad(flags uint8, urp uint16, ack uint32) bool {
	switch {
	case flags&TCPFlagUrg != 0 && urp == 0:
		return true
	case flags&(TCPFlagSyn|TCPFlagFin) != 0 && flags&(TCPFlagRst|TCPFlagAck) == TCPFlagRst:
		return true
	case flags&TCPFlagSyn != 0 && flags&(TCPFlagUrg|TCPFlagPsh) != 0:
		return true
	case flags&TCPFlagAck == 0:
		if flags == TCPFlagSyn && ack != 0 {
			return false // Cisco PIX sends SYNs with a random ack field.
		}
		if flags&(TCPFlagRst|TCPFlagSyn) == 0 {
			return true
		}
		return flags&(TCPFlagUrg|TCPFlagPsh|TCPFlagFin) != 0
	}
	return false
}

// udpCommon is ipf_pr_udpcommon.
func (i *Info) udpCommon(p []byte) bool {
	i.Flags |= FlagTCPUDP
	if i.Off == 0 && i.DLen > 3 {
		if !i.pullup(p, UDPMinimumSize) {
			return false
		}
		u := UDP(p[i.L4Off:])
		i.SrcPort, i.DstPort = u.SourcePort(), u.DestinationPort()
	}
	return true
}

func (i *Info) icmp4(p []byte, o ParseOptions) {
	i.short(icmpErrHdrLen)
	if i.Off != 0 {
		return
	}
	if !i.pullup(p, icmpErrHdrLen) {
		return
	}
	ic := ICMPv4(p[i.L4Off:])
	i.HasICMP = true
	i.ICMPType, i.ICMPCode = ic.Type(), ic.Code()
	min := icmpFullLen
	switch ic.Type() {
	case ICMPv4EchoReply, ICMPv4Echo:
		i.Flags |= FlagICMPQuery
		i.ICMPID = ic.Ident()
		min = icmpMinLen
	case ICMPv4RouterAdvert, ICMPv4RouterSolicit:
		i.Flags |= FlagICMPQuery
		min = icmpMinLen
	case ICMPv4Timestamp, ICMPv4TimestampReply:
		i.Flags |= FlagICMPQuery
		i.ICMPID = ic.Ident()
		min = 20
	case ICMPv4MaskRequest, ICMPv4MaskReply:
		i.Flags |= FlagICMPQuery
		i.ICMPID = ic.Ident()
		min = 12
	case ICMPv4Unreach, ICMPv4SourceQuench, ICMPv4Redirect, ICMPv4TimeExceeded, ICMPv4ParamProblem:
		if ic.Type() == ICMPv4Unreach && ic.Code() == ICMPv4UnreachNeedFrag && ic.MTU() < icmpMinFragMTU {
			i.Flags |= FlagBad
		}
		i.Flags |= FlagICMPErr
		// The embedded header must be from a first fragment and must have
		// been sent by the host this error goes to.
		// Only the bytes up to the quoted source address are read: a
		// quote cut after it (an error of 24 bytes, say) is as good as a
		// whole header, as in IPFilter (checked against its ipftest).
		e := i.L4Off + icmpErrHdrLen
		if e+ipv4SrcAddr+4 <= len(p) {
			oip := IPv4(p[e:])
			if oip.FlagsFragmentOffset()&IPv4OffsetMask != 0 {
				i.Flags |= FlagBad
			}
			if [4]byte(p[e+ipv4SrcAddr:]) != [4]byte(p[ipv4DstAddr:]) {
				i.Flags |= FlagBad
			}
		} else {
			// Too short to quote the header whose sender it must go to:
			// IPFilter compares that source from past the packet's end,
			// which does not hold this one's destination.
			i.Flags |= FlagBad
		}
	}
	if i.Flags&FlagICMPErr == 0 {
		// IPFilter's state looks every message but an error up by the
		// id field (bytes 4-5), whatever its type: router and
		// information messages too (checked against its ipftest).
		i.ICMPID = ic.Ident()
	}
	i.short(min)
	i.checkSum(p, o, false)
}

// checkSum is ipf_checkv4sum/ipf_checkv6sum: verify the transport
// checksum of a whole, non-short packet.
func (i *Info) checkSum(p []byte, o ParseOptions, v6 bool) {
	if !o.VerifyChecksums || i.Flags&(FlagShort|FlagFrag|FlagNoCksum) != 0 {
		return
	}
	p = i.avail(p)
	if i.L4Off+i.DLen > len(p) || i.DLen < 0 {
		return
	}
	seg := p[i.L4Off : i.L4Off+i.DLen]
	var src, dst []byte
	if v6 {
		src, dst = p[ipv6SrcAddr:ipv6SrcAddr+16], p[ipv6DstAddr:ipv6DstAddr+16]
	} else {
		src, dst = p[ipv4SrcAddr:ipv4SrcAddr+4], p[ipv4DstAddr:ipv4DstAddr+4]
	}
	var sum uint16
	switch i.Proto {
	case ProtoTCP:
		sum = Checksum(seg, pseudoSum(ProtoTCP, src, dst, len(seg)))
	case ProtoUDP:
		if len(seg) < UDPMinimumSize || UDP(seg).Checksum() == 0 {
			return
		}
		sum = Checksum(seg, pseudoSum(ProtoUDP, src, dst, len(seg)))
	case ProtoICMP:
		sum = Checksum(seg, 0)
	case ProtoICMPv6:
		sum = Checksum(seg, pseudoSum(ProtoICMPv6, src, dst, len(seg)))
	default:
		return
	}
	if sum != 0xffff {
		i.Flags |= FlagBad
	}
}

func (i *Info) parseIPv6(b []byte, o ParseOptions) error {
	i.Version = 6
	if len(b) < IPv6MinimumSize {
		i.Flags |= FlagBad
		return ErrTruncated
	}
	ip := IPv6(b)
	plen := int(ip.PayloadLength())
	if plen == 0 {
		i.Flags |= FlagBad
		return ErrJumbogram
	}
	i.PLen = plen + IPv6MinimumSize
	i.HLen = IPv6MinimumSize
	i.DLen = plen
	i.L4Off = IPv6MinimumSize
	i.TTL = ip.HopLimit()
	i.Src = netip.AddrFrom16([16]byte(b[ipv6SrcAddr:]))
	i.Dst = netip.AddrFrom16([16]byte(b[ipv6DstAddr:]))
	// IPFilter marks IPv6 packets multicast only by the link layer's
	// flags (LinkFlags): an ff00::/8 destination alone is no FI_MULTICAST
	// (`with mcast` does not match it).
	p := b
	proto := ip.NextHeader()
	walking := true
	for walking && i.Flags&FlagShort == 0 {
		switch proto {
		case ProtoUDP:
			i.short(UDPMinimumSize)
			if i.udpCommon(p) {
				i.Proto = proto
				i.checkSum(p, o, true)
			}
			walking = false
		case ProtoTCP:
			// IPFilter's IPv6 path calls a first fragment or whole
			// segment with less than a TCP header not short (see
			// shortTCP6); a later fragment is, by its offset.
			if i.Off != 0 {
				i.short(TCPMinimumSize)
			}
			if i.tcpCommon(p) {
				i.Proto = proto
				i.checkSum(p, o, true)
			}
			walking = false
		case ProtoICMPv6:
			i.icmp6(p, o)
			walking = false
		case ProtoGRE:
			i.short(greHdrLen)
			if i.Off == 0 {
				i.pullup(p, greHdrLen)
			}
			walking = false
		case ProtoHopOpts, ProtoMobility, ProtoDstOpts:
			// A destination-options header seen twice is bad too
			// (IPFilter's ipftest: `with bad` matches two of them,
			// even around a routing header, and a keep state rule
			// then makes no entry), though IPv6 allows one on each
			// side of a routing header.
			proto = i.extHdr(p, proto)
		case ProtoRouting:
			proto = i.routing6(p)
		case ProtoAH:
			// IPFilter walks AH6 like a generic extension header and
			// records it under the hop-by-hop bit.
			i.Flags |= FlagAH
			proto = i.extHdr(p, ProtoHopOpts)
			if proto != ProtoNone && i.DLen < AHMinimumSize {
				// IPFilter then wants a whole AH header's worth
				// (12 bytes) beyond it: less is short, whatever
				// follows (a UDP header with nothing after it
				// gives no ports; checked against its ipftest).
				i.Flags |= FlagShort
			}
		case ProtoESP:
			i.short(ESPMinimumSize)
			if i.Off == 0 {
				i.pullup(p, ESPMinimumSize)
			}
			walking = false
		case ProtoIPv6:
			if i.Flags&FlagFrag == 0 {
				i.OptMask |= ExtIPv6
			}
			walking = false
		case ProtoNone:
			walking = false
		case ProtoFragment:
			proto = i.fragment6(p)
			if i.Off != 0 {
				walking = false
			}
		default:
			walking = false
		}
		if walking && proto != ProtoNone && !i.pullup(p, 0) {
			proto = ProtoNone
			break
		}
	}
	i.Proto = proto
	i.L4Proto = proto
	if walking && i.Flags&FlagFrag != 0 && i.Off == 0 {
		// A first fragment that ends before any transport header.
		i.Flags |= FlagBad
	}
	return nil
}

// extHdrBit maps an extension header protocol to its OptMask bit.
func extHdrBit(p uint8) uint32 {
	switch p {
	case ProtoHopOpts:
		return ExtHopOpts
	case ProtoIPv6:
		return ExtIPv6
	case ProtoRouting:
		return ExtRouting
	case ProtoFragment:
		return ExtFragment
	case ProtoESP:
		return ExtESP
	case ProtoAH:
		return ExtAH
	case ProtoNone:
		return ExtNone
	case ProtoDstOpts:
		return ExtDstOpts
	case ProtoMobility:
		return ExtMobility
	}
	return 0
}

// extHdr is ipf_pr_ipv6exthdr: skip one extension header at L4Off and
// return its next header (ProtoNone when short or malformed). A header
// type seen twice makes the packet bad: IPFilter's `multiple` argument is
// false for every header Sluice walks (a second destination-options
// header included, ops17), so it is not kept.
func (i *Info) extHdr(p []byte, proto uint8) uint8 {
	i.Flags |= FlagV6ExtHdr
	if i.DLen < 8 {
		i.Flags |= FlagShort
		return ProtoNone
	}
	if !i.pullup(p, 8) {
		return ProtoNone
	}
	h := p[i.L4Off:]
	shift := 8
	if proto != ProtoFragment {
		shift = IPv6ExtHdr(h).Length()
	}
	if shift > i.DLen {
		i.Flags |= FlagBad
		return ProtoNone
	}
	next := h[0]
	i.L4Off += shift
	i.DLen -= shift
	if i.Flags&FlagFrag != 0 {
		return next
	}
	if bit := extHdrBit(proto); bit != 0 {
		if i.OptMask&bit != 0 {
			i.Flags |= FlagBad
		} else {
			i.OptMask |= bit
		}
	}
	return next
}

// routing6 is ipf_pr_routing6.
func (i *Info) routing6(p []byte) uint8 {
	start := i.L4Off
	next := i.extHdr(p, ProtoRouting)
	if next == ProtoNone {
		return ProtoNone
	}
	r := IPv6Routing(p[start:])
	if r.RoutingType() == 0 {
		l, sl := r.HdrExtLen(), r.SegmentsLeft()
		if l>>1 < sl || (sl != 0 && l&1 != 0) {
			i.Flags |= FlagBad
			return ProtoNone
		}
	}
	return next
}

// fragment6 is ipf_pr_fragment6.
func (i *Info) fragment6(p []byte) uint8 {
	start := i.L4Off
	next := i.extHdr(p, ProtoFragment)
	i.Flags |= FlagFrag
	if next == ProtoNone && i.L4Off == start {
		return ProtoNone
	}
	f := IPv6Fragment(p[start:])
	i.FragHdrOff = start
	i.MoreFrags = f.More()
	if i.MoreFrags && i.PLen&7 != 0 {
		i.Flags |= FlagBad
	}
	i.ID = f.ID()
	i.Off = f.FragmentOffset()
	if i.Off != 0 {
		i.Flags |= FlagFragBody
	}
	// IPFilter shifts the offset, already in bytes, left by 3 once more
	// (ipf-reference §2.1: "off×8 + dlen > 65535"); kept for fidelity, so
	// fragments starting beyond about 8 KB are bad.
	if i.Off<<3+i.DLen > 65535 {
		i.Flags |= FlagBad
	}
	return next
}

func (i *Info) icmp6(p []byte, o ParseOptions) {
	if !i.pullup(p, icmp6ErrMinLen) {
		return
	}
	min := ICMPv6MinimumSize
	if i.DLen > 1 {
		ic := ICMPv6(p[i.L4Off:])
		i.HasICMP = true
		i.ICMPType, i.ICMPCode = ic.Type(), ic.Code()
		if ic.Type()&0x80 != 0 {
			i.Flags |= FlagICMPQuery
		}
		switch ic.Type() {
		case ICMPv6EchoRequest, ICMPv6EchoReply:
			if i.DLen >= 6 {
				i.ICMPID = ic.Ident()
			}
			min = icmp6ErrMinLen
		case ICMPv6DstUnreach, ICMPv6PacketTooBig, ICMPv6TimeExceeded, ICMPv6ParamProblem:
			i.Flags |= FlagICMPErr
			min = icmp6ErrIPICMPLen - IPv6MinimumSize
			if i.PLen < icmp6ErrIPICMPLen {
				break
			}
			if !i.pullup(p, icmpErrHdrLen+IPv6MinimumSize) {
				return
			}
			e := i.L4Off + icmpErrHdrLen
			if [16]byte(p[e+ipv6SrcAddr:]) != [16]byte(p[ipv6DstAddr:]) {
				i.Flags |= FlagBad
			}
		}
	}
	i.short(min)
	if i.Flags&(FlagShort|FlagBad) == 0 {
		i.Proto = ProtoICMPv6
		i.checkSum(p, o, true)
	}
}

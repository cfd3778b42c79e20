package engine

import (
	"encoding/binary"
	"net/netip"

	"sluice/internal/frag"
	"sluice/internal/packet"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// fillState describes p to the state table without allocating.
func fillState(p *Packet) *state.Packet {
	fi := &p.Info
	sp := &p.sp
	*sp = state.Packet{
		V: fi.Version, Proto: fi.Proto, Src: fi.Src, Dst: fi.Dst,
		SPort: fi.SrcPort, DPort: fi.DstPort,
		ICMPType: fi.ICMPType, ICMPCode: fi.ICMPCode, ICMPID: fi.ICMPID,
		TCPFlags: fi.TCPFlags, Seq: fi.Seq, Ack: fi.Ack, Win: fi.Win,
		PLen: fi.PLen, Out: p.Out, IfName: p.IfName,
		Flx: uint32(fi.Flags & packet.FlagCmpMask), Opt: fi.OptMask, Sec: fi.SecMask, Auth: fi.Auth,
		NATTag: p.NATTag,
	}
	switch fi.Proto {
	case packet.ProtoTCP:
		sp.DataLen = fi.TCPDataLen()
		if fi.TCPHdrLen == 0 && fi.Off == 0 && fi.L4Off+13 <= len(p.Data) {
			// a first fragment whose TCP header is cut: IPFilter's
			// segment length (fin_dlen - th_off*4) is negative, and
			// the entry's end takes it so (ipfdiff seed 1111 bucket
			// 5: end seq-3 for a SYN cut at 16 bytes; semantics
			// frag6-tcp-cut-first-end)
			if hl := int(p.Data[fi.L4Off+12]>>4) * 4; hl > fi.DLen {
				sp.DataLen = fi.DLen - hl
			}
		}
		if fi.TCPHdrLen > 20 && fi.L4Off+fi.TCPHdrLen <= len(p.Data) {
			sp.TCPOpts = p.Data[fi.L4Off+20 : fi.L4Off+fi.TCPHdrLen]
		}
	case packet.ProtoUDP:
		sp.DataLen = fi.DLen - 8
	case packet.ProtoICMP, packet.ProtoICMPv6:
		if fi.HasICMP && fi.Off == 0 && fi.L4Off+8 <= len(p.Data) {
			sp.ICMPSeq = binary.BigEndian.Uint16(p.Data[fi.L4Off+6:])
		}
	}
	if fi.Version == 4 {
		sp.MultiDst = fi.Flags&(packet.FlagMulticast|packet.FlagBroadcast|packet.FlagMBCast) != 0
	} else {
		sp.MultiDst = fi.Proto == packet.ProtoICMPv6 && fi.Dst.IsMulticast()
	}
	return sp
}

// stateCheck is ipf_state_check.
func (e *Engine) stateCheck(p *Packet) (*state.Entry, bool) {
	fi := &p.Info
	if fi.Flags&(packet.FlagShort|packet.FlagState|packet.FlagFragBody|packet.FlagBad) != 0 {
		return nil, false
	}
	if fi.Flags&packet.FlagICMPErr != 0 {
		return e.icmpErrorState(p)
	}
	sp := fillState(p)
	se, rev, res := e.States.Lookup(sp)
	switch res {
	case state.Hit:
		p.stateRev = rev
		if sp.Rewrite {
			rewriteSeqAck(p, sp.NewSeq, sp.NewAck)
		}
		return se, true
	case state.OutOfWindow:
		fi.Flags |= packet.FlagOOW
	}
	return nil, false
}

// icmpErrorState matches an ICMP error to the state of the packet it
// quotes (§3.6).
func (e *Engine) icmpErrorState(p *Packet) (*state.Entry, bool) {
	fi := &p.Info
	off := fi.L4Off + 8
	d := p.Data
	if fi.PLen < len(d) {
		d = d[:fi.PLen]
	}
	var emb state.Packet
	if fi.Version == 4 {
		if fi.HLen != 20 || off+20+8 > len(d) || d[off]>>4 != 4 {
			return nil, false
		}
		ip := d[off:]
		hl := int(ip[0]&0xf) * 4
		if hl < 20 || off+hl+4 > len(d) {
			return nil, false
		}
		if binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 {
			return nil, false
		}
		emb.V, emb.Proto = 4, ip[9]
		if hl > 20 {
			// ipf_checkicmpmatchingstate parses the quoted header
			// as a packet (ipf_makefrip): its option bits, security
			// class and authority are compared with the entry's
			// (semantics state-icmp-error-quote-options)
			emb.Flx |= uint32(packet.FlagOptions)
			emb.Opt, emb.Sec, emb.Auth = packet.IPv4OptionMasks(ip[20:hl])
		}
		// IPFilter's ipf_checkicmpmatchingstate looks up only quoted
		// TCP, UDP and ICMP packets: an error quoting any other
		// protocol's (AH, GRE, ...) finds no state, though an entry
		// of that protocol between the addresses exists (its IPv6
		// twin has no such limit; checked against IPFilter's ipftest:
		// testdata/semantics/state-icmp-error-other-proto). The
		// kernel datapath's sl_icmperr_lookup refuses them too.
		if p := ip[9]; p != packet.ProtoTCP && p != packet.ProtoUDP && p != packet.ProtoICMP {
			return nil, false
		}
		emb.Src = netip.AddrFrom4([4]byte(ip[12:16]))
		emb.Dst = netip.AddrFrom4([4]byte(ip[16:20]))
		l4 := ip[hl:]
		e.fillEmbL4(&emb, l4)
	} else {
		if off+40+8 > len(d) || d[off]>>4 != 6 {
			return nil, false
		}
		ip := d[off:]
		emb.V, emb.Proto = 6, ip[6]
		emb.Src = netip.AddrFrom16([16]byte(ip[8:24]))
		emb.Dst = netip.AddrFrom16([16]byte(ip[24:40]))
		e.fillEmbL4(&emb, ip[40:])
	}
	if emb.Proto == packet.ProtoICMP && isICMPError4(emb.ICMPType) ||
		emb.Proto == packet.ProtoICMPv6 && emb.ICMPType < 128 {
		// An error about an error never matches state.
		return nil, false
	}
	if emb.Proto == packet.ProtoTCP || emb.Proto == packet.ProtoUDP {
		emb.Flx |= uint32(packet.FlagTCPUDP)
	}
	// ipf_allowstateicmp scans the entry's icmp-head group first, before
	// no-icmp-err and the error count: an error the group blocks is not
	// counted, so a later one may pass (semantics state-icmp-head-order),
	// and the group's rules count every error of a no-icmp-err entry.
	allow := func(se *state.Entry) bool {
		g := e.sets.Active().Groups[se.ICMPHead]
		if g == nil {
			return true
		}
		sc := scan{e: e, p: p, ruleNum: -1}
		sc.portcmp = fi.Flags&packet.FlagTCPUDP != 0 && fi.DLen > 3 && fi.Off == 0
		return sc.scanList(g, e.defaultPass)&ruleset.FRCmdMask != ruleset.FRBlock
	}
	se, rev, ok := e.States.LookupICMPError(&emb, p.Out, fi.PLen, p.IfName, p.NATTag, allow)
	if !ok {
		return nil, false
	}
	p.stateRev = rev
	return se, true
}

func (e *Engine) fillEmbL4(emb *state.Packet, l4 []byte) {
	switch emb.Proto {
	case packet.ProtoTCP, packet.ProtoUDP:
		if len(l4) >= 4 {
			emb.SPort = binary.BigEndian.Uint16(l4)
			emb.DPort = binary.BigEndian.Uint16(l4[2:])
		}
	case packet.ProtoICMP, packet.ProtoICMPv6:
		if len(l4) >= 6 {
			emb.ICMPType = l4[0]
			emb.ICMPID = binary.BigEndian.Uint16(l4[4:])
		}
	}
}

// stateAdd is ipf_state_add for the packet of sc matched by sc.rule.
func (e *Engine) stateAdd(sc *scan, pass uint32) (*state.Entry, bool) {
	p := sc.p
	fi := &p.Info
	if fi.Flags&(packet.FlagShort|packet.FlagState|packet.FlagFragBody|packet.FlagBad) != 0 {
		return nil, false
	}
	if fi.Flags&packet.FlagOOW != 0 && !(fi.Proto == packet.ProtoTCP && fi.TCPFlags&packet.TCPFlagSyn != 0) {
		return nil, false
	}
	r := sc.rule
	lim := state.Limits{RuleNum: sc.ruleNum, Group: sc.group}
	if r != nil {
		lim.RuleID = r.ID
		lim.IfNames = r.IfNames
		lim.Tag = r.LogTag
		lim.NATTag = r.NATTag
		lim.Cookie = r
		lim.AgeFwd, lim.AgeRev = r.Age[0], r.Age[1]
		if ks := r.KeepState; ks != nil {
			lim.Limit = int(ks.Limit)
			// IPFilter tracks sources only for a rule with max-srcs
			// (ipf -Rnvf then drops a lone max-per-src too), and
			// without max-per-src it keys them by its default /32 mask,
			// IPv6 addresses included.
			if ks.MaxSrcs > 0 {
				lim.MaxSrcs = int(ks.MaxSrcs)
				lim.MaxPerSrc = int(ks.MaxPerSrc)
				lim.PerSrcBits = int(ks.MaxPerSrcBits)
				if ks.MaxPerSrc == 0 {
					lim.PerSrcBits = 32
				}
			}
			lim.Strict, lim.Loose, lim.NoICMPErr = ks.Strict, ks.Loose, ks.NoICMPErr
			lim.Sync = ks.Sync
			lim.ICMPHead = ks.ICMPHead
			lim.NewISN = ks.NewISN
		}
		if p.Out {
			// The rule's interfaces describe the outbound slots.
			lim.IfNames = [4]string{r.IfNames[2], r.IfNames[3], r.IfNames[0], r.IfNames[1]}
		}
	}
	if pass&ruleset.FRLogFirst != 0 {
		// ipf_state_add: only the first packet is logged, so the
		// entry's flags have neither log nor log first (but
		// its duplicate test still sees them: Limits.LogFirst).
		pass &^= ruleset.FRLogFirst | ruleset.FRLog
		lim.LogFirst = true
	}
	sp := fillState(p)
	se, err := e.States.Add(sp, pass, &lim)
	if err != state.AddOK {
		return nil, false
	}
	if sp.Rewrite {
		rewriteSeqAck(p, sp.NewSeq, sp.NewAck)
	}
	fi.Flags |= packet.FlagState
	if fi.Dst.IsUnspecified() {
		// IPFilter takes the first packet to 0.0.0.0 (::) for a reply
		// of the entry it made (fin_rev, as its state machine does:
		// state.Table.start): the rule's reply-to routes it, not its
		// to (checked against its ipftest: semantics
		// state-zero-dst-reply-to)
		p.stateRev = true
	}
	if fi.Flags&packet.FlagFrag != 0 {
		e.addFrag(p, pass, sc.rule, sc.ruleNum)
	}
	return se, true
}

func (e *Engine) fragKey(p *Packet) {
	fi := &p.Info
	p.fk = fragKeyOf(fi, p.IfName)
}

func fragKeyOf(fi *packet.Info, ifname string) (k fragKeyT) {
	k.V, k.Proto, k.ID = fi.Version, fi.Proto, fi.ID
	k.Src, k.Dst = fi.Src, fi.Dst
	// IPFilter keys fragments by the options every fragment carries
	// (fi_optmsk & IPF_OPTCOPY, the copied IPv4 options; of IPv6's
	// extension headers only mobility is in that mask): a first
	// fragment with a timestamp option, or an IPv6 hop-by-hop header,
	// shares its entry with fragments without (checked against its
	// ipftest, keep frags and update_ipid).
	k.OptMsk, k.SecMsk, k.Auth = fi.OptMask&optCopy, fi.SecMask, fi.Auth
	k.IfName = ifname
	return k
}

type fragKeyT = frag.Key

// optCopy is IPFilter's IPF_OPTCOPY: the OptMask bits of the IPv4 options
// that are copied into every fragment (security to FINN).
const optCopy = 0x07ff00

func isICMPError4(t uint8) bool {
	switch t {
	case 3, 4, 5, 11, 12:
		return true
	}
	return false
}

// rewriteSeqAck writes a newisn entry's translated sequence and
// acknowledgement numbers into the TCP header, patching the checksum
// (ipf_fixoutisn / ipf_fixinisn).
func rewriteSeqAck(p *Packet, seq, ack uint32) {
	fi := &p.Info
	o := fi.L4Off
	if fi.Proto != packet.ProtoTCP || fi.Off != 0 || o+20 > len(p.Data) {
		return
	}
	t := p.Data[o:]
	sum := binary.BigEndian.Uint16(t[16:])
	oldSeq, oldAck := binary.BigEndian.Uint32(t[4:]), binary.BigEndian.Uint32(t[8:])
	sum = packet.ChecksumUpdate32(sum, oldSeq, seq)
	sum = packet.ChecksumUpdate32(sum, oldAck, ack)
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], ack)
	binary.BigEndian.PutUint16(t[16:], sum)
	fi.Seq, fi.Ack = seq, ack
}

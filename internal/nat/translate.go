package nat

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"sluice/internal/packet"

	"sluice/internal/rules/ipnat"
)

// TagNone is the tag Out takes for a packet that a filter rule without a
// nat tag matched: only NAT rules without a tag apply to it (IPFilter
// matches a rule's tag against fin_fr's, unless no rule matched).
const TagNone = "\x00"

// Out offers an outbound packet leaving on ifname to NAT (map, bimap,
// map-block, rewrite out, and replies of inbound sessions). tag is the
// nat tag set by the matching filter rule, TagNone for a rule that sets
// none, "" when no rule matched. The packet is
// rewritten in place; a translation that would change its length
// (divert) fails here, use OutPacket for those.
func (n *NAT) Out(pkt []byte, ifname, tag string) Result {
	_, r := n.check(pkt, ifname, tag, Out, false)
	return r
}

// In offers an inbound packet arriving on ifname to NAT (rdr, bimap,
// rewrite in, and replies of outbound sessions); see Out.
func (n *NAT) In(pkt []byte, ifname string) Result {
	_, r := n.check(pkt, ifname, "", In, false)
	return r
}

// OutPacket is Out for packets that may change length: divert rules
// wrap packets in IP/UDP (28 bytes, taken from the spare capacity of
// pkt) and unwrap their replies. It returns the packet as it now is.
func (n *NAT) OutPacket(pkt []byte, ifname, tag string) ([]byte, Result) {
	return n.check(pkt, ifname, tag, Out, true)
}

// InPacket is In for packets that may change length (see OutPacket).
func (n *NAT) InPacket(pkt []byte, ifname string) ([]byte, Result) {
	return n.check(pkt, ifname, "", In, true)
}

// InPacketTag is InPacket that also returns the tag of the NAT rule whose
// session translated the packet ("" when none did, or its rule has none):
// IPFilter's fin_nattag, which match-tag rules and the state entries of
// set-tag(nat=...) rules compare (ipf_state_check).
func (n *NAT) InPacketTag(pkt []byte, ifname string) ([]byte, Result, string) {
	var tag string
	b, r := n.checkTag(pkt, ifname, "", In, true, &tag)
	return b, r, tag
}

// setTag records the tag of the rule of the session that translated a
// packet, for InPacketTag.
func setTag(got *string, s *session, r Result) {
	if got != nil && r == Translated && s.rule != nil {
		*got = s.rule.Tag
	}
}

// check runs one packet; resize says whether the caller can take a
// packet of another length back.
func (n *NAT) check(pkt []byte, ifname, tag string, dir Direction, resize bool) ([]byte, Result) {
	return n.checkTag(pkt, ifname, tag, dir, resize, nil)
}

// checkTag is check; got, when not nil, receives the translating rule's
// tag.
func (n *NAT) checkTag(pkt []byte, ifname, tag string, dir Direction, resize bool, got *string) ([]byte, Result) {
	var v view
	if !parse(&v, pkt) {
		return pkt, NoMatch
	}
	if v.v6 && v.proto == 58 && v.l4 >= 0 && v.icmpType > 129 {
		// IPFilter's NAT leaves ICMPv6 informational messages other
		// than echo alone (MLD, neighbour discovery, ...): no rule
		// translates them (checked against its ipftest, map and rdr).
		return pkt, NoMatch
	}
	v.resize = resize
	n.mu.Lock()
	defer n.mu.Unlock()
	if v.icmpErr {
		// An error quoting a session's packet is translated with it;
		// one quoting none is an ICMP packet like another: it finds or
		// starts a session of its own (ipf_nat_checkout/checkin try
		// ipf_nat_icmperror first, then the usual lookups and rules).
		if r := n.icmpError(&v, ifname, dir); r != NoMatch {
			return pkt, r
		}
	}
	if v.fragBody {
		// Fragments after the first carry no ports: they follow the
		// session their first fragment used, and never start one.
		fe, ok := n.frags[v.fragKey()]
		if !ok || v.fragOff < fe.end {
			// Unknown, or overlapping the first fragment: IPFilter's
			// cache does not match it (ipf_frag_lookup). A protocol
			// without ports or ids (GRE, ESP, IP in IP, ...) still
			// finds its session by its addresses, as any packet of it
			// does; it never starts one (checked against ipftest).
			// IPv6 AH bodies never find a session in IPFilter (AH is
			// an extension header to its IPv6 walk: the first
			// fragment's session is not one of protocol 51).
			// A TCP body finds, by its addresses and no ports, the
			// session a TCP header cut short started (it has none):
			// IPFilter looks the body up with fin_data zero, and such
			// a session is the one keyed so (checked against its
			// ipftest: a first fragment of 16 bytes and a body of
			// another datagram; none after a whole header).
			// So does an ICMP body the session of an ICMP packet whose
			// bytes 4-5 are zero (an error quoting no session; checked
			// against its ipftest, IPv6 with and without a hop-by-hop
			// header before the fragment header).
			if !portless(&v) && v.proto != 6 && v.proto != 1 && v.proto != 58 || v.v6 && v.proto == 51 {
				return pkt, NoMatch
			}
			if s := n.lookup(dir, &v, ifname); s != nil {
				b, r := n.apply(s, &v, dir)
				setTag(got, s, r)
				return b, r
			}
			return pkt, NoMatch
		}
		if fe.icmpErr {
			fe.setOuter(&v)
			return pkt, Translated
		}
		b, r := n.apply(fe.s, &v, dir)
		setTag(got, fe.s, r)
		return b, r
	}
	if v.cutPorts {
		// IPFilter looks a TCP packet whose header is cut short up by
		// the ports it has (fin_data), and translates only its
		// addresses (no port, no TCP checksum: the header is not
		// whole); the fragments after it follow it.
		// Without a session it is a packet without ports, and it does
		// not find a session without ports either: IPFilter looks it up
		// by its ports only, so each such packet starts a session of
		// its own (checked against its ipftest).
		if s := n.lookup(dir, &v, ifname); s != nil {
			// A cut first fragment starts a fragment entry whatever
			// flags or data offset it holds: IPFilter checks no
			// flags of a header it does not have whole (checked
			// against its ipftest: 8 to 16 bytes, SYN+FIN, FIN
			// alone, data offset 4).
			n.noteFrag(&v, s)
			b, r := n.apply(s, &v, dir)
			setTag(got, s, r)
			return b, r
		}
		v.sport, v.dport = 0, 0
	}
	if v.cutPorts {
		// no portless lookup (above)
	} else if s := n.lookupNonQuery(dir, &v, ifname); s != nil {
		// An ICMP packet that is not a query and finds a query's
		// session by its bytes 4-5 makes no fragment entry: the
		// rest of its datagram is not translated (checked against
		// IPFilter's ipftest: unreachable and redirect after an
		// echo, map and map-block).
		if !v.nqICMP {
			n.noteFrag(&v, s)
		}
		b, r := n.apply(s, &v, dir)
		setTag(got, s, r)
		return b, r
	}
	if len(n.wild) > 0 {
		if s := n.lookupWild(dir, &v, ifname); s != nil {
			b, r := n.apply(s, &v, dir)
			setTag(got, s, r)
			return b, r
		}
	}
	rules, masks, side, addr := n.maps, &n.mapMasks, 0, v.src
	if dir == In {
		rules, masks, side, addr = n.rdrs, &n.rdrMasks, 1, v.dst
	}
	fam := 0
	if v.v6 {
		fam = 1
	}
	a := fromAddr(addr)
	failed := false
	// IPFilter's hash walk (rulehash.go): each mask of the family,
	// longest first, tries the rules of the bucket the address falls in
	// under it, in the order they were added. A "no" rule or a session
	// ends the walk; a rule that matched but could not make a session
	// lets it go on. A walk that ends without a session looks once more
	// in the bucket of address 0: IPFilter's loop (ipf_nat_checkin,
	// ipf_nat_checkout and their IPv6 forms) runs while nmsk is at most
	// the number of masks, one past the last, whose slot is 0. The rules
	// of that bucket (0/0 ones, pools) are so tried a second time, their
	// round-robin or port state moved on by the first try (checked against
	// IPFilter's ipftest: a split rdr 0/0 whose first address clashes
	// takes its second, one on a /24 fails; IPv4 and IPv6).
	nm := len(masks[fam])
walk:
	for i := 0; i <= nm; i++ {
		var h int
		if i < nm {
			h = lookupBucket(a.and(prefixMask(masks[fam][i], v.v6)), v.v6)
		} else {
			h = lookupBucket(a128{}, v.v6)
		}
		for _, r := range rules {
			if r.bucket[side] != h || !n.ruleMatches(r, &v, ifname, tag, dir) {
				continue
			}
			if r.No {
				r.hits++
				break walk
			}
			s, move := n.newSession(r, &v, ifname, dir)
			if s == nil {
				failed = true
				continue
			}
			n.noteFrag(&v, s)
			out, res := n.apply(s, &v, dir)
			if res == Failed {
				// The first packet could not be rewritten (divert without
				// room): the session must not outlive it.
				n.unlink(s)
				n.active = n.active[:len(n.active)-1]
				return pkt, Failed
			}
			r.hits++
			// IPFilter moves a round-robin rule to the end of its
			// bucket after ipf_nat_newrdr only: map, map-block and
			// an outbound bimap stay where they are (checked
			// against its ipftest, IPv4 and IPv6). So does an
			// inbound bimap, whatever its masks (checked likewise:
			// a bimap before an rdr of the same bucket keeps
			// taking the next inbound flow).
			if r.RoundRobin && move && dir == In && r.Type != ipnat.Bimap {
				n.rotate(r, dir)
			}
			setTag(got, s, res)
			return out, res
		}
	}
	if failed {
		return pkt, Failed
	}
	return pkt, NoMatch
}

// portless reports a protocol whose sessions are keyed by addresses
// alone: not TCP, UDP or the family's ICMP.
func portless(v *view) bool {
	switch v.proto {
	case 6, 17:
		return false
	case 1:
		return v.v6
	case 58:
		return !v.v6
	}
	return true
}

// maxFrags bounds the NAT fragment table.
const maxFrags = 4096

// noteFrag remembers the session of a first fragment (MF set) for the
// fragments that follow (IPFilter's NAT fragment cache).
func (n *NAT) noteFrag(v *view, s *session) {
	if !v.moreFrags {
		return
	}
	// IPFilter makes no fragment entry for a TCP first fragment whose
	// header it calls bad (flags such as URG without an urgent
	// pointer, or FIN without ACK; a data offset below 20): the rest
	// of that datagram is not translated.
	if v.proto == 6 && v.l4 >= 0 && !v.cut6 && tcpHeaderBad(packet.TCP(v.b[v.l4:v.l4+v.l4len])) {
		return
	}
	if v.cut6 && cutTCPHeaderBad(v.b[v.l4:v.l4+v.l4len]) {
		return
	}
	end := v.fragEnd
	if !v.v6 {
		end = v4FirstEnd(v)
	} else if (v.fragEnd-v.fragOff)%8 != 0 || v.proto == 51 || v.ah || v.proto == 6 && v.l4len < 14 {
		// IPv6: a first fragment whose data is not a multiple of 8
		// bytes is bad and makes no entry; nor does AH, nor a TCP
		// header cut short that IPFilter calls bad. The end is where
		// the data ends: no rounding, no 20-byte TCP minimum (checked
		// against IPFilter's ipftest: TCP, UDP and ICMPv6 of 4 to 32
		// bytes).
		return
	}
	n.addFrag(v.fragKey(), fragEntry{s: s, end: end})
	s.hasFrags = true
}

// v4FirstEnd is where an IPv4 first fragment ends for the fragments that
// follow (IPFilter's ipfr_firstend): a fragment starting before it
// overlaps the first and is not translated. IPFilter keeps it in 8-byte
// units, rounded down; a TCP first fragment counts as at least 24 bytes
// (a header cut inside its 20 fixed bytes too), and an ICMP error, or a
// query shorter than its type's minimum (timestamp 20, mask 12), as 8,
// so every later fragment follows it (all checked against its ipftest,
// 8 to 48 bytes, each type).
func v4FirstEnd(v *view) int {
	end := v.fragEnd &^ 7
	switch {
	case v.proto == 6:
		end = max(end, 24)
	case v.proto == 1 && v.l4len >= 8 && (isICMPv4Error(v.icmpType) ||
		(v.icmpType == 13 || v.icmpType == 14) && v.l4len < 20 ||
		(v.icmpType == 17 || v.icmpType == 18) && v.l4len < 12):
		end = 8
	}
	return end
}

// addFrag enters a first fragment's entry for the fragments that follow.
func (n *NAT) addFrag(k fragKey, fe fragEntry) {
	if n.frags == nil {
		n.frags = make(map[fragKey]fragEntry)
	}
	if _, ok := n.frags[k]; ok {
		// IPFilter's cache keeps the entry it has for a datagram
		// (ipfr_new finds it and adds none): a second first
		// fragment with the same key does not take it over.
		return
	}
	if len(n.frags) >= maxFrags {
		// The table is full: forget an arbitrary datagram, as a real
		// fragment cache would age its oldest entry out.
		for k := range n.frags {
			delete(n.frags, k)
			break
		}
	}
	n.frags[k] = fe
}

// rotate moves a round-robin rule behind the other rules of its hash
// bucket, as IPFilter takes it out of its table and adds it again: the
// end of the list, since the walk looks at one bucket at a time.
func (n *NAT) rotate(r *rule, dir Direction) {
	list := n.maps
	if dir == In {
		list = n.rdrs
	}
	i := slices.Index(list, r)
	copy(list[i:], list[i+1:])
	list[len(list)-1] = r
}

func ifMatch(rule, pkt string) bool {
	return rule == "" || rule == "*" || rule == pkt
}

func (n *NAT) lookup(dir Direction, v *view, ifname string) *session {
	return n.find(key{dir, v.proto, v.src, v.dst, v.sport, v.dport}, ifname)
}

// lookupNonQuery is lookup, except for an ICMPv4 packet that is not a
// query: IPFilter looks it up with its bytes 4-5 in the id slot, so it
// finds the session of a query with that id, and one of its own kind
// (no id) only when they are 0; otherwise each such packet starts a
// session (checked against its ipftest: an echo then a redirect with
// the echo's id share one session, two redirects make two).
func (n *NAT) lookupNonQuery(dir Direction, v *view, ifname string) *session {
	if !v.nqICMP {
		return n.lookup(dir, v, ifname)
	}
	sp, dp := v.sport, v.dport
	v.sport, v.dport = v.nqID, v.nqID
	s := n.lookup(dir, v, ifname)
	v.sport, v.dport = sp, dp
	return s
}

// takeIf reports whether the session applies to packets on ifname going
// in direction dir. A session of a rule that names no interface for that
// direction ("*") starts bound to none and is bound to the interface of
// the first packet that finds it, as IPFilter's ipf_nat_inlookup and
// ipf_nat_outlookup fill an empty nat_ifps slot: the clash check of a
// new session and an ICMP error's lookup bind it too (checked against
// its ipftest: a `map *` session made on nic0 translates replies that
// come in on nic1 and then no longer those on nic0, and a second host's
// session on nic1 is refused its port).
func (s *session) takeIf(dir Direction, ifname string) bool {
	slot := s.ifSlot(dir)
	if *slot == "" {
		*slot = ifname
		return true
	}
	return ifMatch(*slot, ifname)
}

// hash puts s at the head of the chains of its forward and reverse keys:
// sessions that share a key (each bound to another interface, or one
// that took a key over) are kept newest first, as IPFilter's hash
// chains, so the next one is found again when the newest ends or is on
// another interface.
func (n *NAT) hash(s *session) {
	for side := range s.hnext {
		k := s.keyOf(side)
		s.hnext[side] = n.sessions[k]
		n.sessions[k] = s
	}
}

// unhash takes s out of its two chains.
func (n *NAT) unhash(s *session) {
	for side := range s.hnext {
		k := s.keyOf(side)
		next := s.hnext[side]
		s.hnext[side] = nil
		p := n.sessions[k]
		if p == s {
			if next == nil {
				delete(n.sessions, k)
			} else {
				n.sessions[k] = next
			}
			continue
		}
		for p != nil {
			ps := p.sideOf(k)
			if p.hnext[ps] == s {
				p.hnext[ps] = next
				break
			}
			p = p.hnext[ps]
		}
	}
}

// find walks k's chain for the first session that applies to a packet
// on ifname in k's direction, binding it there (takeIf), as IPFilter's
// lookups skip the sessions of other interfaces.
func (n *NAT) find(k key, ifname string) *session {
	for s := n.sessions[k]; s != nil; s = s.hnext[s.sideOf(k)] {
		if s.takeIf(k.dir, ifname) {
			return s
		}
	}
	return nil
}

func (s *session) keyOf(side int) key {
	if side == 0 {
		return s.fwdKey()
	}
	return s.revKey()
}

// sideOf is which of s's keys k is (s is on k's chain): the forward key
// travels in the session's direction, the reverse one against it.
func (s *session) sideOf(k key) int {
	if k.dir == s.dir {
		return 0
	}
	return 1
}

// onIf is takeIf without binding (a proxy's wildcard session waiting for
// its first packet).
func (s *session) onIf(dir Direction, ifname string) bool {
	return ifMatch(*s.ifSlot(dir), ifname)
}

// ifSlot is the interface the session is bound to in direction dir.
func (s *session) ifSlot(dir Direction) *string {
	if dir == In {
		return &s.ifIn
	}
	return &s.ifOut
}

// ruleIf is the interface a session of r uses in one direction: the
// rule's, or none yet ("", see takeIf) when the rule names none ("*").
func ruleIf(name string) string {
	if name == "*" {
		return ""
	}
	return name
}

func (n *NAT) operandMatch(o addrOperand, a netip.Addr) bool {
	if o.isLookup {
		if n.cfg.Pools == nil {
			return false
		}
		switch o.table {
		case "pool":
			return n.cfg.Pools.ContainsRole(roleNAT, false, o.name, a)
		case "hash":
			return n.cfg.Pools.ContainsRole(roleNAT, true, o.name, a)
		}
		return false
	}
	return fromAddr(a).and(o.m) == o.a
}

func (n *NAT) ruleMatches(r *rule, v *view, ifname, tag string, dir Direction) bool {
	if r.v6 != v.v6 {
		return false
	}
	if dir == Out && !ifMatch(r.outIf, ifname) || dir == In && !ifMatch(r.inIf, ifname) {
		return false
	}
	rf := 0
	if r.icmpID {
		// IPFilter's icmpidmap gives the rule the protocol ICMP (1)
		// whatever protocol it names, and no need for a query: it
		// takes ICMP errors and other types too (their addresses
		// alone are translated, a query's id is mapped). An IPv6 one
		// matches no ICMPv6 packet, only IPv6 packets of protocol 1,
		// which carry no ICMP query for IPv6.
		if v.proto != 1 {
			return false
		}
		// A port test makes the rule tcp/udp as well (ipnat_y.y sets
		// IPN_TCPUDP beside icmpidmap's IPN_ICMPQUERY): the rule then
		// has protocol flags, which an ICMP error (neither a query nor
		// TCP/UDP) does not meet, so only queries take it.
		if r.PortTest() && v.flags&flagICMPQuery == 0 {
			return false
		}
	} else {
		if !(r.TCP && r.UDP) && r.Proto != 0 && int(v.proto) != r.Proto {
			return false
		}
		if r.TCP {
			rf |= flagTCP
		}
		if r.UDP {
			rf |= flagUDP
		}
		if r.ICMPQuery {
			rf |= flagICMPQuery
		}
		if rf != 0 && rf&v.flags == 0 {
			return false
		}
	}
	if v.fragBody && rf&flagTCPUDP != 0 {
		return false
	}
	switch {
	case r.Filter:
		if n.operandMatch(r.src, v.src) == r.NotSrc || n.operandMatch(r.dst, v.dst) == r.notDst {
			return false
		}
		if r.IsTCPUDP() && (!r.SrcPort.Match(int(v.sport)) || !r.DstPort.Match(int(v.dport))) {
			return false
		}
	case r.Type == ipnat.Bimap && dir == In:
		if !n.operandMatch(r.newA, v.dst) {
			return false
		}
	case dir == Out:
		if !n.operandMatch(r.orig, v.src) {
			return false
		}
	default:
		if !n.operandMatch(r.orig, v.dst) {
			return false
		}
		if r.OPortMin != 0 && (int(v.dport) < r.OPortMin || int(v.dport) > r.OPortMax) {
			return false
		}
	}
	if r.ProxyName != "" && !r.Filter && r.ProxyPort != 0 && int(v.dport) != r.ProxyPort {
		return false
	}
	if tag == TagNone {
		tag = ""
	} else if tag == "" {
		return true
	}
	return r.Tag == tag
}

// newSession sets up a session for a packet that matched r. move is
// false when a round-robin rule must stay where it is (IPFilter's
// ipf_nat_newrdr "move").
func (n *NAT) newSession(r *rule, v *view, ifname string, dir Direction) (*session, bool) {
	if n.cfg.Clock != nil && n.cfg.Clock.Ticks() != n.lastAge {
		n.expireLocked()
	}
	if len(n.active) >= n.cfg.MaxSessions {
		return nil, false
	}
	s := &session{rule: r, dir: dir, proto: v.proto, flags: v.flags, v6: v.v6, ifname: ifname,
		ifIn: ruleIf(r.inIf), ifOut: ruleIf(r.outIf),
		osrc: v.src, odst: v.dst, nsrc: v.src, ndst: v.dst,
		osport: v.sport, odport: v.dport, nsport: v.sport, ndport: v.dport, dstIdx: -1}
	ok, move := false, true
	switch {
	case r.Type == ipnat.DivertIn || r.Type == ipnat.DivertOut:
		ok = !r.v6
		s.nsrc, s.ndst = r.nsrc.a.addr(false), r.ndst.a.addr(false)
		s.nsport, s.ndport = uint16(r.SPMin), uint16(r.DPMin)
	case r.Type.IsRewrite():
		ok = n.newRewrite(r, v, s)
	case dir == Out:
		ok = n.newMap(r, v, s)
	default:
		ok, move = n.newRdr(r, v, s)
	}
	if !ok {
		return nil, false
	}
	if r.ProxyName != "" {
		s.proxy = newProxy(r.ProxyName)
	}
	n.seq++
	s.seq = n.seq
	n.hash(s)
	n.active = append(n.active, s)
	if n.cfg.OnSession != nil {
		n.cfg.OnSession()
	}
	return s, move
}

func opposite(d Direction) Direction { return 1 - d }

func (s *session) fwdKey() key {
	return key{s.dir, s.proto, s.osrc, s.odst, s.osport, s.odport}
}

func (s *session) revKey() key {
	if s.rule.Type == ipnat.DivertIn || s.rule.Type == ipnat.DivertOut {
		// Replies come back wrapped in the divert UDP header.
		return key{opposite(s.dir), 17, s.ndst, s.nsrc, s.ndport, s.nsport}
	}
	return key{opposite(s.dir), s.proto, s.ndst, s.nsrc, s.ndport, s.nsport}
}

// apply rewrites the packet for session s and returns it.
func (n *NAT) apply(s *session, v *view, dir Direction) ([]byte, Result) {
	w := 0
	if dir != s.dir {
		w = 1
	}
	if dir == Out && !s.synced {
		s.synced = true
		if n.cfg.OnSyncUpdate != nil {
			n.cfg.OnSyncUpdate()
		}
	}
	if s.rule.Type == ipnat.DivertIn || s.rule.Type == ipnat.DivertOut {
		out, ok := n.divert(s, v, w)
		if !ok {
			return v.b, Failed
		}
		s.pkts[w]++
		s.bytes[w] += uint64(len(v.b))
		n.touch(s, v, w)
		return out, Translated
	}
	s.pkts[w]++
	s.bytes[w] += uint64(len(v.b))
	n.touch(s, v, w)
	if s.rule.MSSClamp != 0 && v.proto == 6 && v.l4 >= 0 {
		v.clampMSS(uint16(s.rule.MSSClamp))
	}
	if dir == s.dir && dir == In && v.errType && s.rule.Type == ipnat.RewriteIn {
		// An ICMP error that quotes no session, going a rewrite-in
		// session's way: IPFilter gives it the new destination only
		// (checked against its ipftest, IPv4 and IPv6, whole or behind
		// a fragment header; the session itself records both
		// addresses, and an echo through it gets both), even when its
		// quote is too short to read (a plain packet otherwise).
		// IPFilter's IPv4 header checksum there is adjusted for both
		// addresses (a bad sum, docs C30) and its ICMPv6 checksum not
		// at all (C34); Sluice's are right.
		v.setAddr(1, s.ndst)
	} else if dir == s.dir {
		v.rewrite(s.nsrc, s.ndst, s.nsport, s.ndport, s.nsport)
	} else {
		v.rewrite(s.odst, s.osrc, s.odport, s.osport, s.osport)
	}
	if s.proxy != nil {
		n.runProxy(s, v, dir == s.dir)
	}
	return v.b, Translated
}

// divert wraps a forward packet in IPv4/UDP from nsrc,nsport to
// ndst,ndport, or unwraps a reply (w == 1) that arrived that way.
func (n *NAT) divert(s *session, v *view, w int) ([]byte, bool) {
	b := v.b
	if !v.resize {
		return b, false
	}
	if w == 1 {
		hl := int(b[0]&15) * 4
		if v.v6 {
			hl = packet.IPv6MinimumSize
		}
		if len(b) < hl+8 {
			return b, false
		}
		m := copy(b, b[hl+8:])
		return b[:m], true
	}
	const hdr = packet.IPv4MinimumSize + 8
	if v.v6 || cap(b)-len(b) < hdr || len(b)+hdr > 0xffff {
		return b, false
	}
	out := b[:len(b)+hdr]
	copy(out[hdr:], b)
	ip := packet.IPv4(out)
	clear(out[:hdr])
	ip.SetVersionAndHeaderLength(packet.IPv4MinimumSize)
	ip.SetTotalLength(uint16(len(out)))
	ip.SetTTL(255)
	out[9] = 17
	src, dst := s.nsrc.As4(), s.ndst.As4()
	copy(out[12:16], src[:])
	copy(out[16:20], dst[:])
	ip.SetChecksum(^packet.Checksum(out[:packet.IPv4MinimumSize], 0))
	u := packet.UDP(out[packet.IPv4MinimumSize:])
	u.SetSourcePort(s.nsport)
	u.SetDestinationPort(s.ndport)
	u.SetLength(uint16(len(out) - packet.IPv4MinimumSize))
	return out, true
}

// hostmapGet finds the hostmap entry of (src, dst[, rule][, port]),
// creating one that maps to m when r is non-nil (ipf_nat_hostmap). The
// oldest matching entry wins, as in IPFilter's hash chain.
func (n *NAT) hostmapGet(r *rule, src, dst, m netip.Addr, port uint16) *hostmap {
	k := hmKey{src, dst}
	for _, h := range n.hostmaps[k] {
		if (r == nil || r == h.rule) && (port == 0 || port == h.port) {
			h.ref++
			return h
		}
	}
	if r == nil {
		return nil
	}
	n.seq++
	h := &hostmap{rule: r, v6: r.v6, osrc: src, odst: dst, nsrc: m, port: port, ref: 1, seq: n.seq}
	if r.v6 {
		h.ndst = netip.IPv6Unspecified()
	} else {
		h.ndst = netip.IPv4Unspecified()
	}
	if n.hostmaps == nil {
		n.hostmaps = make(map[hmKey][]*hostmap)
	}
	n.hostmaps[k] = append(n.hostmaps[k], h)
	n.nHostmaps++
	return h
}

// hostmapDel drops a reference; the entry goes with the last one.
func (n *NAT) hostmapDel(h *hostmap) {
	h.ref--
	if h.ref > 0 {
		return
	}
	k := hmKey{h.osrc, h.odst}
	list := n.hostmaps[k]
	for i, x := range list {
		if x == h {
			list = append(list[:i], list[i+1:]...)
			n.nHostmaps--
			break
		}
	}
	if len(list) == 0 {
		delete(n.hostmaps, k)
	} else {
		n.hostmaps[k] = list
	}
}

// exists reports whether a session already uses the packet view k.
func (n *NAT) exists(k key) bool {
	_, ok := n.sessions[k]
	return ok
}

// existsOn is exists for IPFilter's clash checks, which look the new
// session's tuple up as a packet on the new session's interface would
// be (binding an unbound session there, see takeIf): a session with
// that tuple on another interface is no clash
// (checked against its ipftest: a bimap session on nic0 and a map
// session of the same tuple on nic1).
func (n *NAT) existsOn(k key, ifname string) bool {
	return n.find(k, ifname) != nil
}

// newMap allocates the new source for an outbound map, bimap or
// map-block session (ipf_nat_newmap).
func (n *NAT) newMap(r *rule, v *view, s *session) (ok bool) {
	v6 := r.v6
	nsrc, nmask := r.newA.a, r.newA.m
	if r.newA.kind == ipnat.AddrRange {
		nmask = r.newA.m // the range end, compared as IPFilter does
	}
	allOnes := nmask.allOnes(v6) && r.newA.kind != ipnat.AddrRange
	// IPFilter's IPv6 NAT (ipf_nat6_newmap) has no map-block case: an
	// inet6 map-block allocates like a plain map (next address of the
	// new block, ports kept).
	block := r.Type == ipnat.MapBlock && !v6
	stIP, stPort := r.snip, r.spnext
	var hm *hostmap
	var in a128
	var port uint16
	src := fromAddr(v.src)
	defer func() {
		if !ok && hm != nil {
			n.hostmapDel(hm)
		}
	}()
	for l := 0; ; l++ {
		port = 0
		in = r.snip
		if l == 0 {
			hm = n.hostmapGet(r, v.src, v.dst, in.addr(v6), 0)
			if hm != nil {
				in = fromAddr(hm.nsrc)
			}
		} else if l == 1 && hm != nil {
			n.hostmapDel(hm)
			hm = nil
		}
		if allOnes && r.spnext == 0 && l > 0 {
			return false
		}
		switch {
		case r.Type == ipnat.Bimap && r.orig.m == r.newA.m:
			in = nsrc.or(src.and(r.orig.m.not(v6)))
		case block:
			if l >= r.ppip || (l > 0 && v.flags&flagTCPUDP == 0) {
				return false
			}
			h := src.and(r.orig.m.not(v6)).lo
			in = a128{0, (h / uint64(r.ippip)) & r.newA.m.not(v6).lo}.add(nsrc.lo)
			if !v6 {
				in = in.trim(false)
			}
			if v.flags&flagTCPUDP != 0 && r.ppip != 0 {
				p := (uint64(v.sport) + uint64(l)) % uint64(r.ppip)
				p += uint64(r.ppip) * (h % uint64(r.ippip))
				port = uint16(p + mapBlockMinPort)
			}
		case nsrc.isZero() && allOnes:
			if l > 0 || n.cfg.IfAddr == nil {
				return false
			}
			a, ok := n.cfg.IfAddr(s.ifname, v6)
			if !ok {
				return false
			}
			in = fromAddr(a)
		case nsrc.isZero() && nmask.isZero() && r.newA.kind == ipnat.AddrNormal:
			if l > 0 {
				return false
			}
			in = src
		case !allOnes && r.spnext == 0 && (l > 0 || hm == nil):
			r.snip = r.snip.add(1)
		}
		if v.flags&flagTCPUDP != 0 && !block && r.PortAuto {
			if l > 0 && r.ppip != 0 && l%r.ppip == 0 && l > r.ppip && !allOnes {
				r.snip = r.snip.add(1)
			}
			if r.ppip != 0 {
				p := (uint64(v.sport) + uint64(l%r.ppip)) % uint64(r.ppip)
				p += uint64(r.ppip) * (src.lo % uint64(r.ippip))
				port = uint16(p + mapBlockMinPort)
			}
		} else if !block && v.flags&(flagTCPUDP|flagICMPQuery) != 0 && r.spnext != 0 {
			var p int
			if r.Sequential {
				p = r.spnext
			} else {
				p = int(n.cfg.Rand()%uint32(r.SPMax-r.SPMin+1)) + r.SPMin
			}
			port = uint16(p)
			r.spnext++
			if r.spnext > r.SPMax {
				r.spnext = r.SPMin
				if !allOnes {
					r.snip = r.snip.add(1)
				}
			}
		}
		if r.newA.kind == ipnat.AddrRange {
			if r.newA.m.less(r.snip) {
				r.snip = r.newA.a
			}
		} else if !allOnes && !nmask.isZero() && nsrc.less(r.snip.add(1).and(nmask)) {
			// IPFilter tests the next address (in_snip), not the one
			// just taken: a next address whose successor leaves the
			// block is the broadcast one, skipped by starting over.
			r.snip = nsrc.add(1)
		}
		if port == 0 && v.flags&(flagTCPUDP|flagICMPQuery) != 0 {
			port = v.sport
		}
		na := in.addr(v6)
		k := key{In, v.proto, v.dst, na, v.dport, port}
		if v.flags&flagICMPQuery != 0 {
			k.sp = port
		}
		if v.cutPorts || v.flags&flagICMPQuery != 0 || !n.existsOn(k, s.ifname) {
			// A TCP packet cut short is checked by the ports it has
			// (IPFilter's fin_data), not by the portless view its
			// session gets: a second one from the host takes the same
			// address again.
			// An ICMP query is never seen as a clash: IPFilter's
			// ipf_nat_newmap looks the new tuple up with the ICMP id
			// where the session table keeps it elsewhere, so two hosts
			// pinging one peer with the same id both get the one new
			// address (and id), and the newer session takes the
			// replies (checked against its ipftest, with and without
			// icmpidmap, and against an inbound bimap session).
			break
		}
		if r.spnext != 0 && stPort == r.spnext && !r.snip.isZero() && stIP == r.snip {
			return false
		}
		if r.spnext == 0 && l > 0 && r.snip == stIP {
			// Every address of the pool has been tried.
			return false
		}
		if l > 1<<17 {
			return false
		}
	}
	s.nsrc = in.addr(v6)
	s.hm = hm
	if s.hm == nil {
		s.hm = n.hostmapGet(r, v.src, v.dst, s.nsrc, 0)
	}
	if v.flags&flagTCPUDP != 0 {
		s.nsport = port
	} else if v.flags&flagICMPQuery != 0 {
		s.nsport, s.ndport = port, port
	}
	return true
}

// newRdr picks the new destination of an inbound rdr or bimap session
// (ipf_nat_newrdr). move reports whether a round-robin rule should go to
// the back of its list.
func (n *NAT) newRdr(r *rule, v *view, s *session) (ok, move bool) {
	move = true
	var in a128
	var hm *hostmap
	dport := v.dport
	if (r.RoundRobin || r.newA.kind == ipnat.AddrSplit) && r.Sticky {
		// A sticky flow goes back to the rule that served it before.
		if h := n.hostmapGet(nil, v.src, v.dst, netip.Addr{}, dport); h != nil {
			r = h.rule
			s.rule = r
			move = false
			n.hostmapDel(h)
		}
	}
	v6 := r.v6
	split := r.newA.kind == ipnat.AddrSplit
	ndst, nmask := r.newA.a, r.newA.m
	if r.Type == ipnat.Bimap {
		ndst, nmask = r.orig.a, r.orig.m
	}
	switch {
	case r.newA.kind == ipnat.AddrLookup && r.newA.table == "dstlist":
		if n.cfg.Pools == nil {
			return false, false
		}
		dl := n.cfg.Pools.DstList(roleNAT, r.newA.name)
		if dl == nil {
			return false, false
		}
		d, idx, ok := dl.Select(v.src, v.dst)
		if !ok || d.Addr.Is6() != v6 {
			return false, false
		}
		in = fromAddr(d.Addr)
		s.dstList, s.dstIdx = dl, idx
	case split:
		in = r.dnip
		if !r.RoundRobin && r.Sticky {
			hm = n.hostmapGet(nil, v.src, v.dst, netip.Addr{}, dport)
			if hm != nil {
				in = fromAddr(hm.ndst)
				move = false
			}
		}
		if hm == nil || hm.ref == 1 {
			if r.newA.a == in {
				r.dnip = r.newA.m
				move = false
			} else {
				r.dnip = r.newA.a
			}
		}
		if hm != nil {
			n.hostmapDel(hm)
		}
	case ndst.isZero() && nmask.allOnes(v6):
		if n.cfg.IfAddr == nil {
			return false, false
		}
		a, ok := n.cfg.IfAddr(s.ifname, v6)
		if !ok {
			return false, false
		}
		in = fromAddr(a)
	case ndst.isZero() && nmask.isZero():
		in = fromAddr(v.dst)
	case r.Type == ipnat.Bimap && r.orig.m == r.newA.m:
		in = ndst.or(fromAddr(v.dst).and(nmask.not(v6)))
	default:
		in = ndst
	}
	nport := dport
	if r.dpnext != 0 {
		if !r.FixedDPort && (r.OPortMin != r.OPortMax || r.Filter) {
			// A from/to rdr maps a port P to P - LO + HI, LO
			// being its destination port test's first port (0
			// without one): `to X port > 50 -> Y port 22` sends 53
			// to 25 (checked against IPFilter's ipftest).
			base := r.OPortMin
			if r.Filter {
				base = r.DstPort.P1
			}
			nport = uint16(int(dport) - base + r.DPMax)
		} else {
			nport = uint16(r.dpnext)
			r.dpnext++
			if r.dpnext > r.DPMax {
				r.dpnext = r.DPMin
			}
		}
	}
	if in.isZero() {
		if nport == dport {
			return false, false
		}
		in = fromAddr(v.dst)
	}
	na := in.addr(v6)
	k := key{Out, v.proto, na, v.src, nport, v.sport}
	switch {
	case v.proto == 1 && (v.flags&flagICMPQuery != 0 || v.nqICMP):
		// IPFilter's ipf_nat_newrdr looks an ICMP packet's new tuple
		// up with its type and code word (fin_data[0]) where the
		// session table keeps the id: it clashes with a session whose
		// id is that word (an echo reply with a session without an id,
		// such as a short ICMP error's; an unreachable, code 0, with a
		// query session of id 0x0300), not with one of its own id
		// (checked against its ipftest: map then rdr sessions, an
		// echo reply or an unreachable after an unreachable).
		tc := uint16(v.icmpType)<<8 | uint16(v.b[v.l4+1])
		k.sp, k.dp = tc, tc
	case v.flags&flagICMPQuery != 0:
		k.sp, k.dp = nport, nport
	case v.flags&flagTCPUDP == 0:
		k.sp, k.dp = 0, 0
	}
	// An ICMP query is not seen as a clash by its id, as in newMap:
	// IPFilter's ipf_nat_newrdr looks the tuple up with the ICMP id where
	// the session table keeps it elsewhere, so a second flow redirected
	// onto a query session's tuple gets a session too and the newer one
	// takes the replies (checked against its ipftest, IPv4 and IPv6: echo
	// requests from one host and id to two outside addresses redirected
	// to one, and an echo reply onto a map session's tuple). In IPv4 that
	// lookup is by the type and code word (above); an ICMPv6 query never
	// clashes.
	if (v.proto == 1 || v.flags&flagICMPQuery == 0) && n.existsOn(k, s.ifname) {
		if s.dstList != nil {
			s.dstList.Release(s.dstIdx)
			s.dstList = nil
		}
		return false, false
	}
	s.ndst = na
	if r.Sticky {
		s.hm = n.hostmapGet(r, v.src, v.dst, na, dport)
	}
	if v.flags&flagTCPUDP != 0 {
		s.ndport = nport
	} else if v.flags&flagICMPQuery != 0 {
		s.nsport, s.ndport = nport, nport
	}
	return true, move
}

// rewriteStepsAddr reports whether a rewrite target is a pool
// IPFilter's odometer steps: not 0/0 (keep), not 0/32 (the interface's
// address), not a single host, not a destination list.
func rewriteStepsAddr(o addrOperand, v6 bool) bool {
	switch o.kind {
	case ipnat.AddrRange:
		return true
	case ipnat.AddrNormal:
		return !o.m.isZero() && !o.m.allOnes(v6)
	}
	return false
}

// stepAddr advances a rewrite address pool to its next address. IPFilter
// (ipf_nat_nextaddr) never wraps it and walks on past the pool's last
// address into whatever follows; Sluice goes back to the pool's first
// address there (docs/ipfilter-differences.md C18).
func stepAddr(o addrOperand, cur *a128, v6 bool) {
	switch o.kind {
	case ipnat.AddrRange:
		*cur = cur.add(1)
		if o.m.less(*cur) {
			*cur = o.a
		}
	case ipnat.AddrNormal:
		nxt := cur.add(1)
		if nxt.and(o.m) != o.a {
			nxt = o.a.add(1)
		}
		*cur = nxt
	}
}

// stepPort advances a rewrite port (in_spnext, in_dpnext) as IPFilter
// does, whether or not the rule gave a range: with none (0-0) it stays 0.
func stepPort(cur *int, lo, hi int) {
	*cur++
	if *cur > hi {
		*cur = lo
	}
}

// rewriteTries is how many 4-tuples a new rewrite session tries before it
// fails: IPFilter's ipf_nat_newrewrite gives up on the twentieth clash
// (found against its ipftest: the odometer's state after a failed
// session shows how many steps it took).
const rewriteTries = 20

// Rewrite odometer positions (in_stepnext): the field a new session
// steps next.
const (
	stepSrcAddr = iota
	stepSrcPort
	stepDstAddr
	stepDstPort
)

// newRewrite builds the 4-tuple of a rewrite (or divert) session with
// IPFilter's allocation odometer (ipf_nat_newrewrite). Each try takes the
// current source address, source port, destination address and
// destination port of the rule, and steps at most one of them, the one
// stepnext points at: the source address and the destination port step
// whenever their turn comes (after use), the source port and the
// destination address only on a retry after a clash. A fixed address
// (single host, 0/0, 0/32) passes its turn on; a fixed port (",port =")
// moves the turn past the destination address (source port) or back to
// the source address (destination port), and a packet without ports
// (not TCP, UDP or an ICMP query) passes both port turns on. A turn the
// rule cannot take otherwise (no port range) is held until a clash. The
// session fails after rewriteTries clashes, or at once on a clash when no field
// can step.
func (n *NAT) newRewrite(r *rule, v *view, s *session) bool {
	v6 := r.v6
	tcpudp := v.flags&flagTCPUDP != 0
	ports := v.flags&(flagTCPUDP|flagICMPQuery) != 0
	srcSearch, dstSearch := rewriteStepsAddr(r.nsrc, v6), rewriteStepsAddr(r.ndst, v6)
	for l := 0; ; l++ {
		clash := l > 0 // the previous try's tuple exists (natl != NULL)
		if !srcSearch && r.spnext == 0 && !dstSearch && r.dpnext == 0 && l > 0 {
			return false
		}
		changed := false
		s.nsrc, s.ndst = v.src, v.dst
		s.nsport, s.ndport = v.sport, v.dport
		if !r.nsrc.m.isZero() || r.nsrc.kind != ipnat.AddrNormal {
			s.nsrc = r.snip.addr(v6)
		}
		if !srcSearch {
			if r.stepnext == stepSrcAddr {
				r.stepnext = stepSrcPort
			}
		} else if r.stepnext == stepSrcAddr {
			stepAddr(r.nsrc, &r.snip, v6)
			r.stepnext++
			changed = true
		}
		if ports {
			if tcpudp && r.spnext != 0 {
				s.nsport = uint16(r.spnext)
			}
			if r.stepnext == stepSrcPort && !changed && clash {
				stepPort(&r.spnext, r.SPMin, r.SPMax)
				r.stepnext++
				changed = true
			}
		} else {
			r.stepnext = stepDstAddr
		}
		switch {
		case r.ndst.kind == ipnat.AddrLookup:
			if n.cfg.Pools == nil {
				return false
			}
			dl := n.cfg.Pools.DstList(roleNAT, r.ndst.name)
			if dl == nil {
				return false
			}
			d, idx, ok := dl.Select(v.src, v.dst)
			if !ok {
				return false
			}
			s.ndst, s.dstList, s.dstIdx = d.Addr, dl, idx
		case !r.ndst.m.isZero() || r.ndst.kind != ipnat.AddrNormal:
			s.ndst = r.dnip.addr(v6)
		}
		if !dstSearch {
			if r.stepnext == stepDstAddr {
				r.stepnext = stepDstPort
			}
		} else if r.stepnext == stepDstAddr && !changed && clash {
			stepAddr(r.ndst, &r.dnip, v6)
			r.stepnext++
			changed = true
		}
		if ports {
			if tcpudp && r.dpnext != 0 {
				s.ndport = uint16(r.dpnext)
			}
			if r.stepnext == stepDstPort && !changed {
				stepPort(&r.dpnext, r.DPMin, r.DPMax)
				r.stepnext++
			}
		} else if r.stepnext == stepDstPort {
			r.stepnext = stepSrcAddr
		}
		r.stepnext &= 3
		k := key{In, v.proto, s.ndst, s.nsrc, s.ndport, s.nsport}
		if s.dir == In {
			k.dir = Out
		}
		if !n.exists(k) {
			return true
		}
		if s.dstList != nil {
			s.dstList.Release(s.dstIdx)
			s.dstList = nil
		}
		if l >= rewriteTries-1 {
			return false
		}
	}
}

// icmpError translates an ICMP error whose embedded packet belongs to a
// session: the embedded header is rewritten back to what its sender saw,
// and so is the outer destination. An error quoting no session is
// NoMatch here (check then treats it as any other ICMP packet).
func (n *NAT) icmpError(v *view, ifname string, dir Direction) Result {
	var e view
	if v.l4 < 0 || v.l4len < 8+20 || !parseInner(&e, v.b[v.l4+8:v.l4+v.l4len]) {
		return NoMatch
	}
	if !v.v6 && v.l4 != packet.IPv4MinimumSize {
		// IPFilter takes only an error with a plain IPv4 header (no
		// options) for one (ipf_nat_icmperrorlookup checks fin_hlen):
		// with options it is an ICMP packet like another.
		return NoMatch
	}
	// The embedded packet E went the other way; a reply to it would
	// travel in dir with E's addresses swapped, which is the view the
	// session table is keyed by.
	s := n.find(key{dir, e.proto, e.dst, e.src, e.dport, e.sport}, ifname)
	if s == nil {
		return NoMatch
	}
	if v.dst != e.src {
		// IPFilter takes an error for one of the session's packets only
		// when it goes back to the quoted packet's sender: its outer
		// destination is the quote's source, either way (its source
		// may be any router on the path; checked against its ipftest,
		// map and rewrite, in and out).
		return NoMatch
	}
	var before [128]byte
	m := copy(before[:], e.b)
	if dir != s.dir {
		// E was a forward packet, already translated: restore it.
		e.rewrite(s.osrc, s.odst, s.osport, s.odport, s.osport)
	} else {
		// E was a reply, translated back to the original view: give it
		// the translated view its sender used.
		e.rewrite(s.ndst, s.nsrc, s.ndport, s.nsport, s.nsport)
	}
	if e.flags&flagTCPUDP != 0 && e.l4 >= 0 && e.l4+4 <= m && !e.innerSumKept() {
		// The embedded TCP/UDP checksum is absent (or zero) and was not
		// patched, so the ports' change lands in the ICMP checksum, by
		// IPFilter's arithmetic: the address changes cancel against the
		// embedded IP checksum, and the ports go through ipfPortDelta.
		var ports [4]byte
		copy(ports[:], before[e.l4:e.l4+4])
		copy(before[e.l4:e.l4+4], e.b[e.l4:e.l4+4])
		fixICMPChecksum(v.b[v.l4:v.l4+v.l4len], before[:m], e.b[:m])
		ck := v.b[v.l4+2:]
		binary.BigEndian.PutUint16(ck, ipfPortDelta(binary.BigEndian.Uint16(ck),
			binary.BigEndian.Uint16(ports[0:]), binary.BigEndian.Uint16(e.b[e.l4:]),
			binary.BigEndian.Uint16(ports[2:]), binary.BigEndian.Uint16(e.b[e.l4+2:])))
	} else {
		fixICMPChecksum(v.b[v.l4:v.l4+v.l4len], before[:m], e.b[:m])
	}
	// The outer header is translated as a packet of the session going
	// this way would be (ipf_nat_in/ipf_nat_out after icmperror).
	fe := fragEntry{s: s, icmpErr: true} // goes with the session
	switch {
	case dir == In:
		fe.which, fe.addr = 1, e.src
	case s.dir == Out:
		// ipf_nat_out gives it the session's new source, and its new
		// destination too (only a rewrite has one other than the
		// destination the error has; checked against its ipftest).
		fe.addr, fe.dst = s.nsrc, s.ndst
	default:
		fe.addr = s.odst
	}
	if v.moreFrags {
		// An error sent as a first fragment: the rest of its datagram
		// gets the same outer header (IPFilter starts a fragment entry
		// for it too, but then translates the rest by the session,
		// docs/ipfilter-differences.md C19).
		// Its end is ipfr_firstend's, as for any first fragment:
		// an ICMPv4 error's counts as 8 (checked against its
		// ipftest: a later fragment at 24 of a 32-byte error follows).
		fe.end = v.fragEnd
		if !v.v6 {
			fe.end = v4FirstEnd(v)
		}
		n.addFrag(v.fragKey(), fe)
		s.hasFrags = true
	}
	fe.setOuter(v)
	return Translated
}

// fixICMPChecksum patches the ICMP checksum for the embedded bytes that
// changed from old to new (which start at offset 8 of icmp, so 16-bit
// words line up).
func fixICMPChecksum(icmp, old, new []byte) {
	hc := binary.BigEndian.Uint16(icmp[2:])
	for i := 0; i+1 < len(old); i += 2 {
		o, w := binary.BigEndian.Uint16(old[i:]), binary.BigEndian.Uint16(new[i:])
		if o != w {
			hc = packet.ChecksumUpdate16(hc, o, w)
		}
	}
	if len(old)%2 == 1 {
		i := len(old) - 1
		hc = packet.ChecksumUpdate16(hc, uint16(old[i])<<8, uint16(new[i])<<8)
	}
	binary.BigEndian.PutUint16(icmp[2:], hc)
}

// innerSumKept reports whether the TCP/UDP checksum of a packet embedded
// in an ICMP error is there to be patched: IPFilter does so for TCP with
// at least 18 bytes of header and for UDP with a whole, non-zero header.
func (v *view) innerSumKept() bool {
	if v.proto == 6 {
		return v.l4len >= 18
	}
	return v.l4len >= 8 && binary.BigEndian.Uint16(v.b[v.l4+6:]) != 0
}

// calcSumd is IPFilter's CALC_SUMD: the one's-complement difference s2-s1.
// Like the C macro it folds and may decrement its operands in place; that
// side effect is what makes ipfPortDelta differ from exact arithmetic.
func calcSumd(s1, s2 *uint32) uint32 {
	*s1 = *s1&0xffff + *s1>>16
	*s1 = *s1&0xffff + *s1>>16
	*s2 = *s2&0xffff + *s2>>16
	*s2 = *s2&0xffff + *s2>>16
	if *s1 > *s2 {
		*s2--
	}
	sd := *s2 - *s1
	return sd&0xffff + sd>>16
}

// ipfPortDelta updates an ICMP checksum for the ports of an embedded
// TCP/UDP header changing (os→ns, od→nd) the way ipf_nat_icmperror does
// when the embedded checksum cannot carry the change: the deltas are
// first computed for the TCP/UDP sum (which decrements the new port when
// it is below the old one), then again, reversed, from the altered
// values, and applied with ipf_fix_incksum. The kit's expected bytes
// (ni8, ni11) depend on the off-by-one this leaves.
func ipfPortDelta(cksum, os, ns, od, nd uint16) uint16 {
	sum1, sum4 := uint32(ns), uint32(os)
	sum3, sum2 := uint32(nd), uint32(od)
	calcSumd(&sum4, &sum1)
	calcSumd(&sum2, &sum3)
	sumd2 := calcSumd(&sum1, &sum4)
	sumd2 += calcSumd(&sum3, &sum2)
	if sumd2 == 0 {
		return cksum
	}
	for i := 0; i < 3; i++ {
		sumd2 = sumd2&0xffff + sumd2>>16
	}
	return ipfFixIncksum(cksum, sumd2)
}

// ipfFixIncksum is ipf_fix_incksum: subtract n from the sum a checksum
// field holds.
func ipfFixIncksum(cksum uint16, n uint32) uint16 {
	if n == 0 {
		return cksum
	}
	sum := uint32(^cksum)
	sum += ^n & 0xffff
	sum = sum>>16 + sum&0xffff
	sum = sum>>16 + sum&0xffff
	return ^uint16(sum)
}

// tcpHeaderBad reports a whole TCP header IPFilter marks bad
// (ipf_pr_tcpcommon).
// cutTCPHeaderBad is tcpHeaderBad for an IPv6 TCP header cut short (4-19
// bytes): IPFilter judges the data offset and flags it has (from 14
// bytes on), reading the missing urgent pointer as 0, so a cut first
// fragment with SYN|FIN, FIN without ACK or URG makes no fragment entry
// (checked against its ipftest: 16-byte headers, each flag set).
func cutTCPHeaderBad(t []byte) bool {
	if len(t) < 14 {
		return false
	}
	var urp uint16
	if len(t) >= 20 {
		urp = binary.BigEndian.Uint16(t[18:])
	}
	return int(t[12]>>4)*4 < packet.TCPMinimumSize ||
		packet.TCPFlagsBad(t[13], urp, binary.BigEndian.Uint32(t[8:]))
}

func tcpHeaderBad(t packet.TCP) bool {
	return t.DataOffset() < packet.TCPMinimumSize || packet.TCPFlagsBad(t.Flags(), t.UrgentPointer(), t.AckNumber())
}

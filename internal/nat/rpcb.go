package nat

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"sluice/internal/packet"
)

// The rpcb proxy (ip_rpcb_pxy.c, rules "proxy rpcbu"/"proxy rpcbt")
// watches portmapper/rpcbind lookups through an rdr: a GETPORT (v2) or
// GETADDR (v3, v4) call is remembered by its xid, and a successful reply
// opens the service's port for that client, redirected like the
// portmapper itself, with a cloning NAT session and state entry. A v3/v4
// reply's universal address is rewritten to the address the client sees.

const (
	rpcbProg     = 100000
	rpcCall      = 0
	rpcReply     = 1
	rpcbGetPort  = 3 // PMAPPROC_GETPORT (v2) and RPCBPROC_GETADDR (v3, v4)
	rpcMaxAuth   = 400
	rpcbMaxCalls = 16
)

type rpcbCall struct {
	xid   uint32
	vers  uint32
	proto uint8
}

type rpcbState struct {
	calls []rpcbCall
	// seq holds what rewrites that changed the length did to each
	// direction of an rpcbt stream (0 from the client); IPFilter's
	// proxy layer (ipf_proxy_fixseqack) shifts later segments by it.
	seq [2]seqAdj
}

// xdr reads XDR items; a short or malformed buffer clears ok.
type xdr struct {
	b   []byte
	off int
	ok  bool
}

func (x *xdr) u32() uint32 {
	if !x.ok || x.off+4 > len(x.b) {
		x.ok = false
		return 0
	}
	v := binary.BigEndian.Uint32(x.b[x.off:])
	x.off += 4
	return v
}

// opaque reads a variable-length item of at most max bytes; it returns
// the offset of its length word and its bytes.
func (x *xdr) opaque(max int) (int, []byte) {
	at := x.off
	n := x.u32()
	if !x.ok || int(n) > max || x.off+int(n+3)&^3 > len(x.b) {
		x.ok = false
		return at, nil
	}
	b := x.b[x.off : x.off+int(n)]
	x.off += int(n+3) &^ 3
	return at, b
}

// rpcPayload returns the RPC message of v and its offset in the L4
// payload: UDP carries it whole, TCP after a record mark.
func (v *view) rpcPayload() (msg []byte, at int) {
	switch v.proto {
	case 17:
		if v.l4 < 0 || v.l4len < 8 {
			return nil, 0
		}
		return v.b[v.l4+8 : v.l4+v.l4len], 0
	case 6:
		p := v.payload()
		if len(p) < 4 {
			return nil, 0
		}
		return p[4:], 4
	}
	return nil, 0
}

func (n *NAT) rpcb(s *session, v *view, fwd bool) {
	if s.dir != In {
		// IPFilter's rpcb proxy serves redirected portmappers only.
		return
	}
	if v.proto != 6 {
		n.rpcbMsg(s, v, fwd)
		return
	}
	if v.l4 < 0 || v.l4len < 20 {
		return
	}
	w := 1
	if fwd {
		w = 0
	}
	rs := &s.proxy.rpcb
	tcp := v.b[v.l4:]
	seq := binary.BigEndian.Uint32(tcp[4:])
	ack := binary.BigEndian.Uint32(tcp[8:])
	plen := len(v.payload())
	inc, changed := n.rpcbMsg(s, v, fwd)
	if inc != 0 {
		rs.seq[w].record(seq, plen, inc)
	}
	v.shiftSeqAck(&rs.seq, w, seq, ack, inc != 0, changed)
}

// rpcbMsg looks at the RPC message of one packet: it remembers
// GETPORT/GETADDR calls and acts on their replies. It returns by how
// much the packet grew and whether its TCP payload changed (the caller
// then recomputes the TCP checksum; UDP is fixed here).
func (n *NAT) rpcbMsg(s *session, v *view, fwd bool) (inc int, changed bool) {
	msg, at := v.rpcPayload()
	if len(msg) < 8 {
		return 0, false
	}
	rs := &s.proxy.rpcb
	x := xdr{b: msg, ok: true}
	xid := x.u32()
	typ := x.u32()
	if fwd && typ == rpcCall {
		rs.call(&x, xid)
		return 0, false
	}
	if fwd || typ != rpcReply {
		return 0, false
	}
	i := 0
	for i < len(rs.calls) && rs.calls[i].xid != xid {
		i++
	}
	if i == len(rs.calls) {
		return 0, false
	}
	c := rs.calls[i]
	rs.calls = append(rs.calls[:i], rs.calls[i+1:]...)
	if x.u32() != 0 { // MSG_ACCEPTED
		return 0, false
	}
	x.u32() // verifier flavour
	x.opaque(rpcMaxAuth)
	if x.u32() != 0 || !x.ok { // SUCCESS
		return 0, false
	}
	if c.vers == 2 {
		port := x.u32()
		if x.ok && port != 0 && port <= 65535 {
			n.rpcbConn(s, c.proto, uint16(port))
		}
		return 0, false
	}
	lenAt, ua := x.opaque(64)
	if !x.ok || len(ua) == 0 {
		return 0, false
	}
	addr, port, ok := parseUaddr(string(ua))
	if !ok || port == 0 {
		return 0, false
	}
	if addr == s.ndst && s.ndst != s.odst && !s.v6 {
		// The server named its own (inside) address: give the client
		// the one it reaches the server at.
		a := s.odst.As4()
		nu := fmt.Appendf(make([]byte, 0, 64), "%d.%d.%d.%d.%d.%d", a[0], a[1], a[2], a[3], port>>8, port&0xff)
		repl := make([]byte, 4+(len(nu)+3)&^3)
		binary.BigEndian.PutUint32(repl, uint32(len(nu)))
		copy(repl[4:], nu)
		oldEnd := lenAt + 4 + (len(ua)+3)&^3
		if v.proto == 17 {
			v.replaceUDP(8+at+lenAt, 8+at+oldEnd, repl)
		} else if d, ok := v.replacePayload(at+lenAt, at+oldEnd, repl); ok {
			// The record mark in front of the message carries its
			// length (RFC 5531 section 11).
			p := v.payload()
			rm := binary.BigEndian.Uint32(p)
			binary.BigEndian.PutUint32(p, rm&0x80000000|(rm&0x7fffffff+uint32(d))&0x7fffffff)
			inc, changed = d, true
		}
	}
	n.rpcbConn(s, c.proto, uint16(port))
	return inc, changed
}

// call remembers a portmapper lookup.
func (rs *rpcbState) call(x *xdr, xid uint32) {
	if x.u32() != 2 || x.u32() != rpcbProg {
		return
	}
	vers := x.u32()
	if x.u32() != rpcbGetPort || vers < 2 || vers > 4 {
		return
	}
	for i := 0; i < 2; i++ { // credentials, verifier
		x.u32()
		x.opaque(rpcMaxAuth)
	}
	c := rpcbCall{xid: xid, vers: vers}
	x.u32() // program
	x.u32() // version
	if vers == 2 {
		p := x.u32()
		if p != 6 && p != 17 {
			return
		}
		c.proto = uint8(p)
	} else {
		_, netid := x.opaque(64)
		switch strings.TrimSuffix(string(netid), "6") {
		case "tcp":
			c.proto = 6
		case "udp":
			c.proto = 17
		default:
			return
		}
	}
	if !x.ok {
		return
	}
	for i := range rs.calls {
		if rs.calls[i].xid == xid {
			rs.calls[i] = c
			return
		}
	}
	if len(rs.calls) >= rpcbMaxCalls {
		rs.calls = append(rs.calls[:0], rs.calls[1:]...)
	}
	rs.calls = append(rs.calls, c)
}

// parseUaddr parses an IPv4 universal address "h1.h2.h3.h4.p1.p2".
func parseUaddr(s string) (netip.Addr, uint16, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 6 {
		return netip.Addr{}, 0, false
	}
	var b [6]byte
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 255 {
			return netip.Addr{}, 0, false
		}
		b[i] = byte(v)
	}
	return netip.AddrFrom4([4]byte(b[:4])), uint16(b[4])<<8 | uint16(b[5]), true
}

// rpcbConn opens port of the redirected server for the client of s: a
// cloning NAT session and state entry with any client port, from which
// each new client connection gets a copy.
func (n *NAT) rpcbConn(s *session, proto uint8, port uint16) {
	c := n.slave(s, In, proto, s.osrc, s.odst, s.osrc, s.ndst)
	if c == nil {
		return
	}
	c.flags = flagTCP
	if proto == 17 {
		c.flags = flagUDP
	}
	c.odport, c.ndport = port, port
	c.wildSP = true
	c.clone = true
	c.pass = rpcbPass
	n.linkSlave(c)
}

// replaceUDP replaces bytes [from, to) of the UDP segment with repl,
// fixing the UDP and IP lengths and the checksums.
func (v *view) replaceUDP(from, to int, repl []byte) bool {
	end := v.l4 + v.l4len
	inc := len(repl) - (to - from)
	if inc != 0 && (!v.resize || end+inc > cap(v.b) || end != len(v.b)) {
		return false
	}
	tot := end + inc
	b := v.b[:max(len(v.b), tot)]
	copy(b[v.l4+from+len(repl):], v.b[v.l4+to:end])
	copy(b[v.l4+from:], repl)
	v.b = b[:tot]
	v.l4len += inc
	binary.BigEndian.PutUint16(v.b[v.l4+4:], uint16(v.l4len))
	if v.v6 {
		binary.BigEndian.PutUint16(v.b[4:], uint16(tot-packet.IPv6MinimumSize))
	} else {
		h := packet.IPv4(v.b)
		old := h.TotalLength()
		binary.BigEndian.PutUint16(v.b[2:], uint16(tot))
		h.SetChecksum(packet.ChecksumUpdate16(h.Checksum(), old, uint16(tot)))
	}
	seg := v.b[v.l4:tot]
	if v.v6 || binary.BigEndian.Uint16(seg[6:]) != 0 {
		binary.BigEndian.PutUint16(seg[6:], 0)
		sum := ^packet.Checksum(seg, packet.PseudoHeaderChecksum(17, v.src, v.dst, len(seg)))
		if sum == 0 {
			sum = 0xffff
		}
		binary.BigEndian.PutUint16(seg[6:], sum)
	}
	return true
}

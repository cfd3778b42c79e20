package nat

import (
	"encoding/binary"
	"net/netip"
	"strings"
)

// ProxyState describes a connection an application proxy expects, as the
// filter will see its first packet: inbound packets after NAT-in,
// outbound ones before NAT-out. The filter opens it with a state entry
// (IPFilter's proxies call ipf_state_add with a pass/quick/keep-state
// rule of their own).
type ProxyState struct {
	Out         bool // direction of the first packet
	IfName      string
	V6          bool
	Proto       uint8
	Src, Dst    netip.Addr
	SPort       uint16
	DPort       uint16
	WildSrcPort bool // any source port (SI_W_SPORT)
	WildDstPort bool // any destination port (SI_W_DPORT)
	Clone       bool // every new connection gets a copy (SI_CLONE)
	PLen        int  // bytes counted for the entry's first packet
	// NoCount leaves the made-up first packet uncounted: the rcmd
	// back-connection's entry counts its real packets only.
	NoCount bool
	Pass    uint32
}

type proxyKind uint8

const (
	proxyNone proxyKind = iota
	proxyRcmd
	proxyPPTP
	proxyFTP
	proxyRPCB
)

// Filter flags of the state entries proxies make (IPFilter's static
// frentry_t of each proxy): ftp, rcmd and pptp use pass in quick keep
// state with FR_INQUE; rpcb leaves that bit out.
const (
	proxyPass = 0x8502
	rpcbPass  = 0x502
)

// proxy is the per-session state of an application proxy.
type proxy struct {
	kind proxyKind
	// rcmd: the stderr port the client announced (0 = not yet).
	rcmdPort uint16
	// pptp: the GRE session set up for the call.
	gre *session
	// ftp: see ftp.go.
	ftp ftpState
	// rpcb: see rpcb.go.
	rpcb rpcbState
}

func newProxy(name string) *proxy {
	switch strings.ToLower(name) {
	case "rcmd":
		return &proxy{kind: proxyRcmd}
	case "pptp":
		return &proxy{kind: proxyPPTP}
	case "ftp":
		return &proxy{kind: proxyFTP}
	case "rpcbu", "rpcbt":
		return &proxy{kind: proxyRPCB}
	}
	return nil
}

// payload returns the TCP payload of v, nil if none.
func (v *view) payload() []byte {
	if v.proto != 6 || v.l4 < 0 || v.l4len < 20 {
		return nil
	}
	hl := int(v.b[v.l4+12]>>4) * 4
	if hl < 20 || hl > v.l4len {
		return nil
	}
	return v.b[v.l4+hl : v.l4+v.l4len]
}

// runProxy gives the proxy of s a look at a packet of its session after
// translation; fwd is set for packets in the session's own direction
// (from the client that opened the control connection).
func (n *NAT) runProxy(s *session, v *view, fwd bool) {
	switch s.proxy.kind {
	case proxyRcmd:
		n.rcmd(s, v, fwd)
	case proxyPPTP:
		n.pptp(s, v, fwd)
	case proxyFTP:
		n.ftp(s, v, fwd)
	case proxyRPCB:
		n.rpcb(s, v, fwd)
	}
}

// rcmd is ipf_p_rcmd_portmsg: the first data the client sends on an
// rsh/rlogin connection is the decimal port on which it waits for the
// server's stderr connection. The proxy maps and admits that connection
// (from the server, any source port).
func (n *NAT) rcmd(s *session, v *view, fwd bool) {
	p := s.proxy
	if !fwd || p.rcmdPort != 0 {
		return
	}
	data := v.payload()
	if len(data) == 0 {
		return
	}
	port := 0
	for i := 0; i < len(data) && i < 10 && data[i] >= '0' && data[i] <= '9'; i++ {
		port = port*10 + int(data[i]-'0')
	}
	if port == 0 || port > 65535 {
		return
	}
	p.rcmdPort = uint16(port)
	n.reverseConn(s, 6, uint16(port), true)
}

// reverseConn sets up the NAT session and state entry for a TCP/UDP
// connection the server of s opens back to its client's port port. It
// returns the new session, nil if none was made. rcmd is set for the
// stderr connection of rsh, which ipf_p_rcmd_portmsg adds as a session
// of the opposite direction (an inside client's shows as RDR) whose
// state entry counts no made-up packet.
func (n *NAT) reverseConn(s *session, proto uint8, port uint16, rcmd bool) *session {
	var c *session
	if s.dir == Out {
		// The client is inside: the server connects to the mapped
		// address, which is translated back to the client.
		c = n.slave(s, In, proto, s.odst, s.nsrc, s.odst, s.osrc)
	} else {
		// The client is outside: the server's packets leave from the
		// redirection target and get the public address.
		c = n.slave(s, Out, proto, s.ndst, s.osrc, s.odst, s.osrc)
	}
	if c == nil {
		return nil
	}
	c.flags = flagTCP
	if proto == 17 {
		c.flags = flagUDP
	}
	c.odport, c.ndport = port, port
	c.wildSP = true
	c.rcmd = rcmd
	if !n.linkSlave(c) {
		return nil
	}
	return c
}

// slave makes a session that belongs to the proxy of parent; the caller
// sets its ports and links it with linkSlave.
func (n *NAT) slave(parent *session, dir Direction, proto uint8, osrc, odst, nsrc, ndst netip.Addr) *session {
	if len(n.active) >= n.cfg.MaxSessions {
		return nil
	}
	return &session{rule: parent.rule, dir: dir, proto: proto, v6: parent.v6, ifname: parent.ifname,
		ifIn: parent.ifIn, ifOut: parent.ifOut, osrc: osrc, odst: odst, nsrc: nsrc, ndst: ndst,
		dstIdx: -1, slave: true, expire: parent.expire}
}

// linkSlave enters a proxy session in the tables and opens the filter
// for it; it reports false when an existing session already holds the
// connection.
func (n *NAT) linkSlave(c *session) bool {
	n.seq++
	c.seq = n.seq
	if c.wildSP {
		n.wild = append(n.wild, c)
	} else {
		if n.exists(c.fwdKey()) || n.exists(c.revKey()) {
			return false
		}
		n.hash(c)
	}
	n.active = append(n.active, c)
	if n.cfg.AddState == nil {
		return true
	}
	ps := ProxyState{Out: c.dir == Out, IfName: c.ifname, V6: c.v6, Proto: c.proto, WildSrcPort: c.wildSP,
		Clone: c.clone, Pass: c.pass, NoCount: c.rcmd}
	if ps.Pass == 0 {
		ps.Pass = proxyPass
	}
	// The proxy's made-up first packet is a bare header.
	ps.PLen = 20
	if c.v6 {
		ps.PLen = 40
	}
	switch c.proto {
	case 6:
		ps.PLen += 20
	case 17:
		ps.PLen += 8
	}
	if c.dir == Out {
		ps.Src, ps.Dst, ps.SPort, ps.DPort = c.osrc, c.odst, c.osport, c.odport
		if c.ifOut != "" {
			ps.IfName = c.ifOut
		}
	} else {
		ps.Src, ps.Dst, ps.SPort, ps.DPort = c.nsrc, c.ndst, c.nsport, c.ndport
		if c.ifIn != "" {
			ps.IfName = c.ifIn
		}
	}
	n.cfg.AddState(ps)
	return true
}

// lookupWild finds a proxy session waiting for its first packet with any
// source port and fills the port in.
func (n *NAT) lookupWild(dir Direction, v *view, ifname string) *session {
	for i, s := range n.wild {
		if s.proto != v.proto || !s.onIf(dir, ifname) {
			continue
		}
		var port uint16
		switch {
		case dir == s.dir && v.src == s.osrc && v.dst == s.odst && v.dport == s.odport:
			port = v.sport
		case dir != s.dir && v.src == s.ndst && v.dst == s.nsrc && v.sport == s.ndport:
			port = v.dport
		default:
			continue
		}
		if s.clone {
			// The clone stays for the next connection; this one gets
			// a session of its own.
			c := *s
			c.clone, c.proxy = false, nil
			s = &c
			n.seq++
			s.seq = n.seq
			n.active = append(n.active, s)
		} else {
			n.wild = append(n.wild[:i], n.wild[i+1:]...)
		}
		s.osport, s.nsport = port, port
		s.wildSP = false
		if n.exists(s.fwdKey()) || n.exists(s.revKey()) {
			return nil
		}
		n.hash(s)
		return s
	}
	return nil
}

// PPTP control message types (RFC 2637).
const (
	pptpMagic     = 0x1a2b3c4d
	pptpOutCallRq = 7
	pptpOutCallRp = 8
	pptpInCallRq  = 9
	pptpInCallRp  = 10
)

// pptp is ipf_p_pptp: it follows the control connection and, once a call
// is answered (outgoing or incoming call reply), maps and admits the GRE
// tunnel between the two ends, translated as the control connection is.
func (n *NAT) pptp(s *session, v *view, fwd bool) {
	data := v.payload()
	for len(data) >= 16 {
		l := int(binary.BigEndian.Uint16(data))
		if l < 16 || l > len(data) || binary.BigEndian.Uint16(data[2:]) != 1 ||
			binary.BigEndian.Uint32(data[4:]) != pptpMagic {
			return
		}
		switch binary.BigEndian.Uint16(data[8:]) {
		case pptpOutCallRp, pptpInCallRp:
			n.pptpGRE(s)
		}
		data = data[l:]
	}
}

func (n *NAT) pptpGRE(s *session) {
	p := s.proxy
	if p.gre != nil {
		return
	}
	const protoGRE = 47
	c := n.slave(s, s.dir, protoGRE, s.osrc, s.odst, s.nsrc, s.ndst)
	if c == nil {
		return
	}
	p.gre = c
	n.linkSlave(c)
}

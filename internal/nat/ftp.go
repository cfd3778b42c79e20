package nat

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"

	"sluice/internal/packet"
)

// The ftp proxy follows ip_ftp_pxy.c: each side's bytes are gathered in
// a small line buffer, checked line by line (ipf_p_ftp_valid), and whole
// lines are acted upon: PORT/EPRT from the client, 227/229 replies from
// the server. Rewritten commands change the payload length; later
// sequence and acknowledgement numbers are shifted to match.

// ftpBufSize is FTP_BUFSZ, the size of a side's line buffer.
const ftpBufSize = 160

// ftpMaxLine is IPF_FTPBUFSZ, the room for a rebuilt command.
const ftpMaxLine = 96

// Line verdicts (FTPXY_JUNK_*).
const (
	junkOK   = 0 // a whole valid line is buffered
	junkBad  = 1 // not FTP: ignore everything
	junkEOL  = 2 // skip to the end of the line
	junkCont = 3 // a continuation line of a multi-line reply
)

// Login states (FTPXY_*): PORT and EPRT are only acted upon once the
// user has logged in (or ftp_insecure is set).
const (
	ftpInit  = 0
	ftpUser1 = 1
	ftpUsok1 = 2
	ftpPass1 = 3
	ftpPaok1 = 4
	ftpAcct1 = 7
	ftpGo    = 12
)

// Client commands the server's reply is matched with (FTPXY_C_*).
const (
	ftpCmdPASV = 1
	ftpCmdEPSV = 2
)

// ftp_debug bits (DEBUG_*).
const ftpDebugParseErr = 0x08

type ftpSide struct {
	buf   [ftpBufSize]byte
	r, w  int
	junk  uint8
	lines int // valid lines seen (ftps_cmds as a counter)
	cmd   int // last client command of interest (ftps_cmds)
}

// seqAdj records how a proxy changed one direction's byte stream: from
// original sequence number min on, off bytes were added (prev before).
type seqAdj struct {
	set       bool
	min       uint32
	ackMin    uint32 // min in the rewritten numbering the peer acks
	off, prev int32
}

func (a *seqAdj) offFor(seq uint32) int32 {
	if !a.set || int32(seq-a.min) >= 0 {
		return a.off
	}
	return a.prev
}

func (a *seqAdj) ackOff(ack uint32) int32 {
	if !a.set || int32(ack-a.ackMin) >= 0 {
		return a.off
	}
	return a.prev
}

// record notes that the segment at original seq with l payload bytes
// grew by inc.
func (a *seqAdj) record(seq uint32, l, inc int) {
	cur := a.offFor(seq)
	a.ackMin = seq + uint32(cur) + uint32(l+inc)
	a.prev, a.off = cur, cur+int32(inc)
	a.min = seq + uint32(l)
	a.set = true
}

type ftpState struct {
	side    [2]ftpSide
	seq     [2]seqAdj
	passOK  int
	incOK   bool
	gaveUp  bool
	started bool
	debug   int
	insec   bool
	pasv    bool // ftp_pasvonly
	force   bool // ftp_forcepasv: a 227/229 needs the PASV/EPSV before it
	single  bool // ftp_single_xfer: one data connection at a time
	// pend is the data connection set up last (ftp_pendnat); while it
	// is in the table, ftp_single_xfer refuses another.
	pend *session
}

// ftpDebugError is IPFilter's DEBUG_ERROR bit of ftp_debug.
const ftpDebugError = 0x2

// tunableOr reads a proxy tunable, def when the host does not know it.
func (n *NAT) tunableOr(name string, def int) int {
	if n.cfg.Tunable == nil {
		return def
	}
	v, ok := n.cfg.Tunable(name)
	if !ok {
		return def
	}
	return v
}

// ftpXferBusy is the ftp_single_xfer check of ipf_p_ftp_addport and
// ipf_p_ftp_pasvreply: with the tunable set, no new data connection is
// set up while the previous one is still in the table.
func (n *NAT) ftpXferBusy(f *ftpState, fn string) bool {
	if f.pend != nil && f.pend.gone {
		f.pend = nil
	}
	if f.pend == nil || !f.single {
		return false
	}
	if f.debug&ftpDebugError != 0 {
		n.debugf("%s:xfer active %p/%p\n", fn, f.pend, f.pend)
	}
	return true
}

// ftpPending records c as the control connection's pending transfer.
func ftpPending(f *ftpState, c *session) {
	if c != nil {
		f.pend = c
	}
}

func (n *NAT) tunable(name string) int {
	if n.cfg.Tunable == nil {
		return 0
	}
	v, _ := n.cfg.Tunable(name)
	return v
}

func (n *NAT) debugf(format string, args ...any) {
	if n.cfg.Debug != nil {
		n.cfg.Debug(fmt.Sprintf(format, args...))
	}
}

// ftp runs the ftp proxy over one packet of the control connection.
func (n *NAT) ftp(s *session, v *view, fwd bool) {
	f := &s.proxy.ftp
	if !f.started {
		f.started = true
		f.debug = n.tunable("ftp_debug")
		f.insec = n.tunable("ftp_insecure") != 0
		f.pasv = n.tunable("ftp_pasvonly") != 0
		// IPFilter's ipf_p_ftp_soft_create sets ftp_forcepasv to 1.
		f.force = n.tunableOr("ftp_forcepasv", 1) != 0
		f.single = n.tunable("ftp_single_xfer") != 0
	}
	if v.proto != 6 || v.l4 < 0 || v.l4len < 20 {
		return
	}
	w := 1
	if fwd {
		w = 0
	}
	tcp := v.b[v.l4:]
	seq := binary.BigEndian.Uint32(tcp[4:])
	ack := binary.BigEndian.Uint32(tcp[8:])
	plen := len(v.payload())
	changed := false
	if !f.gaveUp && plen > 0 {
		inc := n.ftpProcess(s, v, w)
		if inc != 0 {
			f.seq[w].record(seq, plen, inc)
			changed = true
		}
	}
	v.shiftSeqAck(&f.seq, w, seq, ack, changed, changed)
}

// shiftSeqAck moves the sequence and acknowledgement numbers of a proxied
// TCP segment (side w) by what the proxy has inserted into each direction
// so far; seq and ack are the values the segment arrived with. grown says
// the proxy has just resized this segment, which then moves by what
// preceded it only. A rewritten payload gets its checksum computed
// afresh; otherwise the checksum is adjusted for the two words.
func (v *view) shiftSeqAck(adj *[2]seqAdj, w int, seq, ack uint32, grown, rewritten bool) {
	tcp := v.b[v.l4:]
	nseq := seq + uint32(adj[w].offFor(seq))
	if grown {
		nseq = seq + uint32(adj[w].prev)
	}
	nack := ack
	if tcp[13]&packet.TCPFlagAck != 0 {
		nack = ack - uint32(adj[1-w].ackOff(ack))
	}
	binary.BigEndian.PutUint32(tcp[4:], nseq)
	binary.BigEndian.PutUint32(tcp[8:], nack)
	if rewritten {
		v.tcpChecksum()
		return
	}
	c := binary.BigEndian.Uint16(tcp[16:])
	c = packet.ChecksumUpdate32(c, seq, nseq)
	c = packet.ChecksumUpdate32(c, ack, nack)
	binary.BigEndian.PutUint16(tcp[16:], c)
}

// ftpProcess is ipf_p_ftp_process for side w (0 client, 1 server); it
// returns by how much the payload grew.
func (n *NAT) ftpProcess(s *session, v *view, w int) int {
	f := &s.proxy.ftp
	sd := &f.side[w]
	data := v.payload()
	inc := 0
	off := 0
	// base is the buffer index of payload byte 0.
	base := 0
	for off < len(data) {
		l := min(len(data)-off, len(sd.buf)-sd.w)
		if l <= 0 {
			sd.r, sd.w = 0, 0
			continue
		}
		base = sd.w - off
		copy(sd.buf[sd.w:], data[off:off+l])
		off += l
		sd.w += l
	again:
		if sd.junk != junkOK {
			sd.junk = n.ftpValid(f, w, sd.buf[sd.r:sd.w])
			if sd.junk == junkBad && sd.w-sd.r == len(sd.buf) {
				sd.r, sd.w = 0, 0
				continue
			}
		}
		for sd.junk == junkOK && sd.w > sd.r {
			sd.junk = n.ftpValid(f, w, sd.buf[sd.r:sd.w])
			if sd.junk != junkOK {
				break
			}
			sd.lines++
			d := n.ftpLine(s, v, w, sd.r-base)
			if d != 0 {
				inc += d
				base -= d
				off += d
				data = v.payload()
			}
			// Skip the line (ipf_p_ftp_client/server leave rptr after
			// its newline).
			for sd.r < sd.w {
				sd.r++
				if sd.buf[sd.r-1] == '\n' {
					break
				}
			}
		}
		if sd.lines == 0 && sd.junk == junkBad {
			// Off to a bad start: this is not FTP.
			f.gaveUp = true
			return inc
		}
		retry := false
		if sd.junk != junkOK && sd.r < sd.w {
			for i := sd.r; i+1 < sd.w; i++ {
				if sd.buf[i] == '\r' && sd.buf[i+1] == '\n' {
					sd.r = i + 2
					retry = true
					if sd.junk != junkCont {
						sd.junk = junkOK
					}
					break
				}
			}
		}
		if sd.r > 0 {
			copy(sd.buf[:], sd.buf[sd.r:sd.w])
			sd.w -= sd.r
			base -= sd.r
			sd.r = 0
		}
		if retry {
			goto again
		}
	}
	return inc
}

func (n *NAT) ftpValid(f *ftpState, w int, b []byte) uint8 {
	if w == 0 {
		return n.ftpClientValid(f, b)
	}
	return n.ftpServerValid(f, b)
}

func isAlpha(c byte) bool  { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigitB(c byte) bool { return c >= '0' && c <= '9' }

// ftpClientValid is ipf_p_ftp_client_valid: a command of 3 or 4 letters
// and a complete line.
func (n *NAT) ftpClientValid(f *ftpState, b []byte) uint8 {
	sd := &f.side[0]
	if sd.junk == junkBad {
		return junkBad
	}
	if len(b) < 5 {
		if f.debug&ftpDebugParseErr != 0 {
			n.debugf("ipf_p_ftp_client_valid:i(%d) < 5\n", len(b))
		}
		return junkEOL
	}
	var cmd [4]byte
	i := 0
	for ; i < 4 && isAlpha(b[i]); i++ {
		cmd[i] = b[i] &^ 0x20
	}
	if i < 3 || (b[i] != ' ' && b[i] != '\r') {
		if f.debug&ftpDebugParseErr != 0 {
			n.debugf("ipf_p_ftp_client_valid:bad:junk %d len %d/%d c 0x%x buf [%s]\n",
				sd.junk, len(b), len(b)-i-1, b[i], b)
		}
		return junkBad
	}
	for j := i + 1; j < len(b); j++ {
		if b[j-1] == '\r' && b[j] == '\n' {
			switch string(cmd[:]) {
			case "PASV":
				sd.cmd = ftpCmdPASV
			case "EPSV":
				sd.cmd = ftpCmdEPSV
			default:
				sd.cmd = 0
			}
			return junkOK
		}
	}
	if f.debug&ftpDebugParseErr != 0 {
		n.debugf("ipf_p_ftp_client_valid:junk after cmd[%s]\n", b)
	}
	return junkEOL
}

// ftpServerValid is ipf_p_ftp_server_valid: a three digit code, then a
// space (a complete line) or a dash (a continuation).
func (n *NAT) ftpServerValid(f *ftpState, b []byte) uint8 {
	if len(b) < 5 {
		if f.debug&ftpDebugParseErr != 0 {
			// Sic: IPFilter's message has the typo.
			n.debugf("ipf_p_ftp_servert_valid:i(%d) < 5\n", len(b))
		}
		return junkEOL
	}
	if !isDigitB(b[0]) || !isDigitB(b[1]) || !isDigitB(b[2]) || (b[3] != '-' && b[3] != ' ') {
		if f.debug&ftpDebugParseErr != 0 {
			n.debugf("ipf_p_ftp_server_valid:bad:junk %d len %d/%d c 0x%x\n",
				f.side[1].junk, len(b), len(b)-1, b[0])
		}
		return junkBad
	}
	if b[3] == '-' {
		return junkCont
	}
	for j := 4; j < len(b); j++ {
		if b[j-1] == '\r' && b[j] == '\n' {
			return junkOK
		}
	}
	if f.debug&ftpDebugParseErr != 0 {
		n.debugf("ipf_p_ftp_server_valid:junk after cmd[%s]\n", b)
	}
	return junkEOL
}

// ftpLine acts on the valid line at payload offset at of side w and
// returns the change in payload length.
func (n *NAT) ftpLine(s *session, v *view, w, at int) int {
	f := &s.proxy.ftp
	data := v.payload()
	if at < 0 || at >= len(data) {
		return 0
	}
	line := data[at:]
	if end := indexNL(line); end >= 0 {
		line = line[:end+1]
	}
	if w == 0 {
		return n.ftpClient(s, v, f, at, line)
	}
	return n.ftpServer(s, v, f, at, line)
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

func hasPrefixFold(b []byte, p string) bool {
	if len(b) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := b[i]
		if isAlpha(c) {
			c &^= 0x20
		}
		if c != p[i] {
			return false
		}
	}
	return true
}

func (n *NAT) ftpClient(s *session, v *view, f *ftpState, at int, line []byte) int {
	switch {
	case hasPrefixFold(line, "USER ") && (f.passOK == ftpInit || f.passOK == ftpUsok1):
		f.passOK = ftpUser1
		f.incOK = true
	case hasPrefixFold(line, "PASS ") && f.passOK == ftpUsok1:
		f.passOK = ftpPass1
		f.incOK = true
	case hasPrefixFold(line, "ACCT ") && f.passOK == ftpPaok1:
		f.passOK = ftpAcct1
		f.incOK = true
	case hasPrefixFold(line, "PORT ") && (f.passOK == ftpGo || f.insec) && !f.pasv:
		return n.ftpPort(s, v, at, line)
	case hasPrefixFold(line, "EPRT ") && (f.passOK == ftpGo || f.insec) && !f.pasv:
		return n.ftpEprt(s, v, at, line)
	}
	return 0
}

func (n *NAT) ftpServer(s *session, v *view, f *ftpState, at int, line []byte) int {
	inc := 0
	go1 := f.passOK == ftpGo || f.insec
	switch {
	case go1 && hasPrefixFold(line, "227 "):
		// ipf_p_ftp_pasv: only ftp_forcepasv ties the reply to a PASV.
		if f.force && f.side[0].cmd != ftpCmdPASV {
			if f.debug&ftpDebugError != 0 {
				n.debugf("ipf_p_ftp_pasv:ftps_cmd(%d) != FTPXY_C_PASV\n", f.side[0].cmd)
			}
			break
		}
		// ipf_p_ftp_pasv compares PASV_REPLEN (24) bytes of the reply.
		if !bytes.HasPrefix(line, []byte("227 Entering Passive Mod")) {
			if f.debug&ftpDebugError != 0 {
				n.debugf("ipf_p_ftp_pasv:%d reply wrong\n", 227)
			}
			break
		}
		inc = n.ftpPasv(s, v, at, line)
	case go1 && hasPrefixFold(line, "229 "):
		if f.force && f.side[0].cmd != ftpCmdEPSV {
			if f.debug&ftpDebugError != 0 {
				n.debugf("ipf_p_ftp_epsv:ftps_cmd(%d) != FTPXY_C_EPSV\n", f.side[0].cmd)
			}
			break
		}
		// ipf_p_ftp_epsv compares EPSV_REPLEN (33) bytes.
		if !bytes.HasPrefix(line, []byte("229 Entering Extended Passive Mod")) {
			if f.debug&ftpDebugError != 0 {
				n.debugf("ipf_p_ftp_epsv:%d reply wrong\n", 229)
			}
			break
		}
		n.ftpEpsv(s, line)
	case f.passOK == ftpGo:
	case line[0] == '4' || line[0] == '5':
		f.passOK = ftpInit
	case f.incOK && line[0] == '3':
		if f.passOK == ftpAcct1 {
			f.passOK = ftpGo
		} else {
			f.passOK++
		}
	case f.incOK && line[0] == '2':
		switch f.passOK {
		case ftpUser1, ftpPass1, ftpAcct1:
			f.passOK = ftpGo
		default:
			f.passOK += 3
		}
	}
	f.incOK = false
	return inc
}

// ftpNumbers parses "a,b,c,d,e,f" at b and returns the six numbers and
// the rest.
func ftpNumbers(b []byte) (nums [6]int, rest []byte, ok bool) {
	for i := 0; i < 6; i++ {
		j := 0
		v := 0
		for j < len(b) && j < 3 && isDigitB(b[j]) {
			v = v*10 + int(b[j]-'0')
			j++
		}
		if j == 0 || v > 255 {
			return nums, nil, false
		}
		nums[i] = v
		b = b[j:]
		if i < 5 {
			if len(b) == 0 || b[0] != ',' {
				return nums, nil, false
			}
			b = b[1:]
		}
	}
	return nums, b, true
}

// lineEnd checks that rest is "\r\n" (after an optional ")").
func lineEnd(rest []byte, paren bool) bool {
	if paren && len(rest) > 0 && rest[0] == ')' {
		rest = rest[1:]
	}
	return len(rest) >= 2 && rest[0] == '\r' && rest[1] == '\n'
}

// ftpPort is ipf_p_ftp_port: the client announces where it listens. A
// mapped client's address is replaced by its translated one, and the
// server's connection back to it is mapped and admitted.
func (n *NAT) ftpPort(s *session, v *view, at int, line []byte) int {
	if s.v6 {
		return 0
	}
	nums, rest, ok := ftpNumbers(line[5:])
	if !ok || !lineEnd(rest, false) {
		return 0
	}
	port := nums[4]<<8 | nums[5]
	if port < 1024 {
		return 0
	}
	inc := 0
	if s.dir == Out {
		a := s.nsrc.As4()
		nl := fmt.Appendf(make([]byte, 0, ftpMaxLine), "PORT %d,%d,%d,%d,%d,%d\r\n", a[0], a[1], a[2], a[3], nums[4], nums[5])
		var ok bool
		if inc, ok = v.replacePayload(at, at+len(line), nl); !ok {
			return 0
		}
	}
	if !n.ftpXferBusy(&s.proxy.ftp, "ipf_p_ftp_addport") {
		ftpPending(&s.proxy.ftp, n.reverseConn(s, 6, uint16(port), false))
	}
	return inc
}

// ftpEprt is ipf_p_ftp_eprt: "EPRT |1|addr|port|" (RFC 2428), handled as
// PORT is.
func (n *NAT) ftpEprt(s *session, v *view, at int, line []byte) int {
	b := line[5:]
	if len(b) < 2 {
		return 0
	}
	d := b[0]
	parts := splitDelim(b[1:], d)
	if len(parts) < 4 || !lineEnd(parts[3], false) {
		return 0
	}
	af, addr, ps := string(parts[0]), string(parts[1]), string(parts[2])
	a, err := netip.ParseAddr(addr)
	if err != nil || (af == "1") != a.Is4() || (af == "1") == s.v6 {
		return 0
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1024 || port > 65535 {
		return 0
	}
	inc := 0
	if s.dir == Out {
		nl := fmt.Appendf(make([]byte, 0, ftpMaxLine), "EPRT %c%s%c%s%c%d%c\r\n", d, af, d, s.nsrc, d, port, d)
		var ok bool
		if inc, ok = v.replacePayload(at, at+len(line), nl); !ok {
			return 0
		}
	}
	if !n.ftpXferBusy(&s.proxy.ftp, "ipf_p_ftp_addport") {
		ftpPending(&s.proxy.ftp, n.reverseConn(s, 6, uint16(port), false))
	}
	return inc
}

func splitDelim(b []byte, d byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == d {
			out = append(out, b[start:i])
			start = i + 1
			if len(out) == 3 {
				out = append(out, b[start:])
				return out
			}
		}
	}
	return out
}

// ftpPasv is ipf_p_ftp_pasv: the server's "227 ... (a,b,c,d,p1,p2)". The
// address must be the server's; the reply is rebuilt with the address
// the client sees, and the client's data connection is admitted.
func (n *NAT) ftpPasv(s *session, v *view, at int, line []byte) int {
	if s.v6 {
		return 0
	}
	b := line[4:]
	for len(b) > 0 && !isDigitB(b[0]) {
		b = b[1:]
	}
	paren := len(line)-len(b) > 4 && line[len(line)-len(b)-1] == '('
	nums, rest, ok := ftpNumbers(b)
	if !ok || !lineEnd(rest, paren) {
		return 0
	}
	got := netip.AddrFrom4([4]byte{byte(nums[0]), byte(nums[1]), byte(nums[2]), byte(nums[3])})
	server := s.odst
	if s.dir == In {
		server = s.ndst
	}
	if got != server {
		if s.proxy.ftp.debug&0x1 != 0 {
			n.debugf("ipf_p_ftp_pasv:%s != nat->nat_oip\n", got)
		}
		return 0
	}
	port := nums[4]<<8 | nums[5]
	a := s.odst.As4()
	open, closeP := "", ""
	if paren {
		open, closeP = "(", ")"
	}
	nl := fmt.Appendf(make([]byte, 0, ftpMaxLine), "227 Entering Passive Mode %s%d,%d,%d,%d,%d,%d%s\r\n",
		open, a[0], a[1], a[2], a[3], nums[4], nums[5], closeP)
	inc, ok := v.replacePayload(at, at+len(line), nl)
	if !ok {
		return 0
	}
	if !n.ftpXferBusy(&s.proxy.ftp, "ipf_p_ftp_pasvreply") {
		ftpPending(&s.proxy.ftp, n.forwardConn(s, 6, uint16(port)))
	}
	return inc
}

// ftpEpsv is ipf_p_ftp_epsv: "229 ... (|||port|)" names only a port.
func (n *NAT) ftpEpsv(s *session, line []byte) {
	b := line[4:]
	for len(b) > 0 && b[0] != '(' {
		b = b[1:]
	}
	if len(b) < 5 {
		return
	}
	d := b[1]
	if b[2] != d || b[3] != d {
		return
	}
	b = b[4:]
	port := 0
	i := 0
	for ; i < len(b) && isDigitB(b[i]); i++ {
		port = port*10 + int(b[i]-'0')
	}
	if i == 0 || i >= len(b) || b[i] != d || port < 1024 || port > 65535 {
		return
	}
	if !n.ftpXferBusy(&s.proxy.ftp, "ipf_p_ftp_pasvreply") {
		ftpPending(&s.proxy.ftp, n.forwardConn(s, 6, uint16(port)))
	}
}

// forwardConn sets up the NAT session and state entry for a connection
// the client of s opens to its server's port port (passive FTP). It
// returns the new session, nil if none was made.
func (n *NAT) forwardConn(s *session, proto uint8, port uint16) *session {
	c := n.slave(s, s.dir, proto, s.osrc, s.odst, s.nsrc, s.ndst)
	if c == nil {
		return nil
	}
	c.flags = flagTCP
	c.odport, c.ndport = port, port
	c.wildSP = true
	if !n.linkSlave(c) {
		return nil
	}
	return c
}

// replacePayload replaces payload bytes [from, to) with repl, moving the
// rest and fixing the IP length and checksum. It returns the change in
// length; ok is false when the packet cannot change length (no spare
// capacity, or a caller that cannot take a resized packet).
func (v *view) replacePayload(from, to int, repl []byte) (inc int, ok bool) {
	data := v.payload()
	start := len(v.b) - len(data)
	if v.l4+v.l4len != len(v.b) {
		// Trailing bytes after the IP datagram: work on the datagram.
		start = v.l4 + v.l4len - len(data)
	}
	end := v.l4 + v.l4len
	inc = len(repl) - (to - from)
	if inc != 0 && (!v.resize || end+inc > cap(v.b) || end != len(v.b)) {
		return 0, false
	}
	tot := end + inc
	if !v.v6 && tot > 65535 || v.v6 && tot-packet.IPv6MinimumSize > 65535 {
		return 0, false
	}
	b := v.b[:max(len(v.b), tot)]
	copy(b[start+from+len(repl):], v.b[start+to:end])
	copy(b[start+from:], repl)
	v.b = b[:tot]
	v.l4len += inc
	if v.v6 {
		binary.BigEndian.PutUint16(v.b[4:], uint16(tot-packet.IPv6MinimumSize))
	} else if inc != 0 {
		h := packet.IPv4(v.b)
		old := h.TotalLength()
		binary.BigEndian.PutUint16(v.b[2:], uint16(tot))
		h.SetChecksum(packet.ChecksumUpdate16(h.Checksum(), old, uint16(tot)))
	}
	return inc, true
}

// tcpChecksum recomputes the TCP checksum of v from scratch.
func (v *view) tcpChecksum() {
	seg := v.b[v.l4 : v.l4+v.l4len]
	binary.BigEndian.PutUint16(seg[16:], 0)
	sum := packet.Checksum(seg, packet.PseudoHeaderChecksum(6, v.src, v.dst, len(seg)))
	binary.BigEndian.PutUint16(seg[16:], ^sum)
}

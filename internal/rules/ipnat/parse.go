package ipnat

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"sluice/internal/rules/lex"
	"sluice/internal/rules/netfmt"
)

// Parse reads ipnat.conf text. name is used in error positions. Rules
// that parse are returned even when others fail; the error is then a
// netfmt.ErrorList of at most ten positioned errors. Warnings (options
// the grammar accepts but drops, as the original does) go to warn when
// it is non-nil.
func Parse(name, src string, warn io.Writer) (*File, error) {
	p := &parser{Parser: lex.NewSource(name, src, true), out: &File{}, warn: warn}
	p.Run(p.line)
	return p.out, p.Err()
}

// ParsePrinted is Parse for rules this package printed (Rule.String), as
// the kernel datapath stores them: it also takes the printer's
// "ADDR,port = N" in rewrite rules, which IPFilter's grammar, and so
// Parse, refuses in a rule file.
func ParsePrinted(name, src string, warn io.Writer) (*File, error) {
	p := &parser{Parser: lex.NewSource(name, src, true), out: &File{}, warn: warn, printed: true}
	p.Run(p.line)
	return p.out, p.Err()
}

type parser struct {
	lex.Parser
	out     *File
	warn    io.Writer
	r       *Rule
	printed bool // ParsePrinted
}

func (p *parser) warnf(format string, args ...any) {
	if p.warn != nil {
		fmt.Fprintf(p.warn, "%s:%d: "+format+"\n", append([]any{p.File, p.r.Pos.Line}, args...)...)
	}
}

func (p *parser) atEnd() bool {
	t := p.Peek()
	return t.Kind == netfmt.TokEOF || t.Kind == netfmt.TokNewline || (t.Kind == netfmt.TokPunct && t.Text == ";")
}

// skipLine resynchronises at the end of the line.
func (p *parser) skipLine() {
	for t := p.Peek(); t.Kind != netfmt.TokEOF && t.Kind != netfmt.TokNewline; t = p.Peek() {
		p.I++
	}
}

func (p *parser) line() {
	defer p.Guard(p.skipLine)
	t := p.Peek()
	if t.Kind == netfmt.TokNewline {
		p.Next()
		return
	}
	// A ";" ends a rule; ipnat_y.y has no empty statement, so one where a
	// rule should start (";;", a line of ";") is a syntax error there too.
	r := p.rule()
	t = p.Peek()
	switch {
	case t.Kind == netfmt.TokPunct && t.Text == ";":
		p.Next()
	case t.Kind == netfmt.TokNewline, t.Kind == netfmt.TokEOF:
		if r.Type.IsRewrite() || r.No {
			p.FailAt(t, `";"`)
		}
	default:
		p.FailAt(t, "end of rule")
	}
	p.out.Rules = append(p.out.Rules, r)
}

func (p *parser) rule() *Rule {
	start := p.Peek()
	r := &Rule{Pos: start.Pos, Family: 0}
	p.r = r
	if p.Accept("no") {
		r.No = true
	}
	t := p.Next()
	kw := ""
	if t.Kind == netfmt.TokWord {
		kw = strings.ToLower(t.Text)
	}
	switch kw {
	case "map":
		r.Type = Map
	case "bimap":
		r.Type = Bimap
	case "map-block":
		r.Type = MapBlock
	case "rdr":
		r.Type = Rdr
	case "rewrite", "divert":
		if r.No {
			p.FailAt(t, "map, map-block or rdr")
		}
		out := p.InOut()
		switch {
		case kw == "rewrite" && out:
			r.Type = RewriteOut
		case kw == "rewrite":
			r.Type = RewriteIn
		case out:
			r.Type = DivertOut
		default:
			r.Type = DivertIn
		}
		p.Expect("on")
	default:
		p.FailAt(t, "map, bimap, map-block, rdr, rewrite or divert")
	}
	p.ifnames(r)
	switch {
	case r.Type.IsRewrite():
		p.rewrite(r)
	case r.Type == Rdr:
		p.rdr(r)
	default:
		p.mapRule(r)
	}
	if r.Family == 0 {
		r.Family = 4
	}
	p.finish(r)
	return r
}

// ifs = IF [ "," IF ] [ "inet" | "inet6" ]
func (p *parser) ifnames(r *Rule) {
	t := p.Next()
	if t.Kind != netfmt.TokWord && t.Kind != netfmt.TokString {
		p.FailAt(t, "interface name")
	}
	r.Ifs[0] = t.Text
	if p.IsPunct(",") {
		p.Next()
		r.Ifs[1] = p.Word("interface name").Text
	}
	switch {
	case p.Accept("inet"):
		r.Family = 4
	case p.Accept("inet6"):
		r.Family = 6
	}
}

// protocol parses "tcp", "udp", "tcp/udp", "tcpudp", a name or a number.
func (p *parser) protocol(r *Rule) {
	t := p.Word("protocol")
	if r.protoSet {
		p.Errorf(t.Pos, "protocol %q given twice", t.Text)
	}
	name := strings.ToLower(t.Text)
	if name == "tcp" && p.IsPunct("/") {
		p.Next()
		p.Expect("udp")
		name = "tcp/udp"
	}
	p.setProto(r, t, name)
}

func (p *parser) setProto(r *Rule, t netfmt.Token, name string) {
	r.TCP, r.UDP = false, false
	switch name {
	case "tcp/udp", "tcpudp", "tcp-udp":
		r.Proto, r.TCP, r.UDP = 6, true, true
	case "tcp":
		r.Proto, r.TCP = 6, true
	case "udp":
		r.Proto, r.UDP = 17, true
	default:
		n, ok := netfmt.ProtoNumber(name)
		if !ok {
			p.Errorf(t.Pos, "unknown protocol %q", t.Text)
		}
		r.Proto = n
		switch n {
		case 6:
			r.TCP = true
		case 17:
			r.UDP = true
		}
	}
	r.protoSet = true
}

func isProtoWord(t netfmt.Token) bool {
	if t.Kind != netfmt.TokWord {
		return false
	}
	switch s := strings.ToLower(t.Text); s {
	case "tcp", "udp", "tcpudp", "tcp-udp", "ip", "icmp":
		return true
	default:
		if _, err := strconv.Atoi(s); err == nil {
			return true
		}
		_, ok := netfmt.ProtoNumber(s)
		return ok && !isOptionWord(s)
	}
}

func isOptionWord(s string) bool {
	switch s {
	case "round-robin", "frag", "age", "sticky", "mssclamp", "tag", "purge", "proxy",
		"sequential", "portmap", "icmpidmap", "ports", "port", "range", "from", "to":
		return true
	}
	return false
}

// mapRule = ("map"|"bimap"|"map-block") ifs lhs "->" rhs [mapport|proxy] mapopts
func (p *parser) mapRule(r *Rule) {
	if r.Type == MapBlock && (p.IsWord("from") || p.IsPunct("!")) {
		// ipnat_y.y's map-block takes an address only
		p.FailAt(p.Peek(), "address")
	}
	if p.IsWord("from") || p.IsPunct("!") {
		p.fromTo(r)
	} else {
		r.Orig = p.addrMask(r, false)
	}
	if r.No {
		if !p.atEnd() && !p.IsPunct("->") {
			p.protocol(r)
		}
		return
	}
	p.Expect("->")
	if p.Accept("range") {
		r.Range = true
		r.New = p.rangeAddr(r)
	} else {
		r.New = p.rhsAddr(r, false)
		if r.New.Kind == AddrRange {
			r.Range = true
		}
	}
	last := 0
	for !p.atEnd() {
		t := p.Peek()
		kw := strings.ToLower(t.Text)
		if t.Kind != netfmt.TokWord {
			p.FailAt(t, "map option")
		}
		p.inOrder(t, mapOrder, kw, isProtoWord(t), &last)
		switch {
		case kw == "portmap" && r.Type != MapBlock:
			p.Next()
			p.portmap(r)
		case kw == "icmpidmap" && r.Type != MapBlock:
			p.Next()
			pt := p.Word("icmp or ipv6-icmp")
			switch strings.ToLower(pt.Text) {
			case "icmp", "ipv6-icmp", "icmpv6":
			default:
				p.FailAt(pt, "icmp or ipv6-icmp")
			}
			r.ICMPIDMap, r.ICMPQuery, r.protoSet = true, true, true
			n, _ := netfmt.ProtoNumber(strings.ToLower(pt.Text))
			r.Proto = n
			r.SPMin, r.SPMax = p.portRange(true)
		case kw == "ports" && r.Type == MapBlock:
			p.Next()
			if p.Accept("auto") {
				r.PortAuto = true
			} else {
				r.SPMin = p.number("port count", 0, 65535)
			}
		case kw == "proxy":
			p.Next()
			p.proxy(r)
		case kw == "sticky":
			// rdr only: IPFilter's map grammar has no sticky
			p.FailAt(t, "map option")
		default:
			if !p.commonOpt(r, t, kw) {
				if isProtoWord(t) {
					p.protocol(r)
				} else {
					p.FailAt(t, "map option")
				}
			}
		}
	}
}

// mapOrder and rdrOrder are the places of a map or rdr rule's options in
// IPFilter's grammar (ipnat_y.y): after a map's right-hand side one of
// portmap (with its `sequential`), icmpidmap, proxy or a map-block's
// ports, then mapoptions `rr frag age mssclamp nattag setproto purge`; an
// rdr's protocol comes right after its port, then rdroptions `rr frag age
// sticky mssclamp rdrproxy nattag purge`. Each is taken once, in that
// order: `map … tag x frag`, `map … purge tcp`, `rdr … frag tcp` or
// `rdr … mssclamp 3 sticky` are syntax errors there. "" is the protocol.
var (
	mapOrder = map[string]int{"portmap": 1, "icmpidmap": 1, "proxy": 1, "ports": 1, "round-robin": 2,
		"frag": 3, "age": 4, "mssclamp": 5, "tag": 6, "": 7, "purge": 8}
	rdrOrder = map[string]int{"": 1, "round-robin": 2, "frag": 3, "age": 4, "sticky": 5, "mssclamp": 6,
		"proxy": 7, "tag": 8, "purge": 9}
)

// inOrder fails at t when its option (kw, or the protocol when proto is
// set) comes after one that IPFilter's grammar places later, or again.
func (p *parser) inOrder(t netfmt.Token, order map[string]int, kw string, proto bool, last *int) {
	rank, ok := order[kw]
	if !ok && proto {
		rank, ok = order[""], true
	}
	if !ok {
		return
	}
	if rank <= *last {
		p.Errorf(t.Pos, "%q out of place: IPFilter takes a rule's options once each, in the order of its grammar", t.Text)
	}
	*last = rank
}

// commonOpt handles the options shared by map and rdr rules.
func (p *parser) commonOpt(r *Rule, t netfmt.Token, kw string) bool {
	switch kw {
	case "round-robin":
		r.RoundRobin = true
	case "frag":
		r.Frag = true
	case "age":
		p.Next()
		a := p.number("age", 0, 1<<31-1)
		r.Age = [2]int{a, a}
		if p.IsPunct("/") {
			p.Next()
			r.Age[1] = p.number("age", 0, 1<<31-1)
		}
		return true
	case "sticky":
		r.Sticky = true
	case "mssclamp":
		p.Next()
		r.MSSClamp = p.number("MSS", 0, 65535)
		return true
	case "tag":
		p.Next()
		r.Tag = p.Word("tag name").Text
		if len(r.Tag) > 16 {
			r.Tag = r.Tag[:16]
		}
		return true
	case "purge":
		r.Purge = true
	default:
		return false
	}
	p.Next()
	return true
}

// portmap = tcpudp P (":"|"-") P | P ":" P tcpudp | tcpudp "auto"
func (p *parser) portmap(r *Rule) {
	r.Portmap = true
	t := p.Peek()
	if t.Kind == netfmt.TokWord && (t.Text[0] < '0' || t.Text[0] > '9') {
		p.portmapProto(r)
		if p.Accept("auto") {
			r.PortAuto = true
		} else {
			r.SPMin, r.SPMax = p.portRange(true)
		}
	} else {
		r.SPMin, r.SPMax = p.portRange(true)
		p.portmapProto(r)
	}
	if p.Accept("sequential") {
		r.Sequential = true
	}
}

func (p *parser) portmapProto(r *Rule) {
	t := p.Word("tcp, udp or tcp/udp")
	name := strings.ToLower(t.Text)
	if name == "tcp" && p.IsPunct("/") {
		p.Next()
		p.Expect("udp")
		name = "tcp/udp"
	}
	switch name {
	case "tcp", "udp", "tcp/udp", "tcpudp":
	default:
		p.FailAt(t, "tcp, udp or tcp/udp")
	}
	p.setProto(r, t, name)
}

// proxy = "proxy" "port" P NAME "/" proto [ "config" STRING ]
func (p *parser) proxy(r *Rule) {
	if r.Type == Rdr && !p.IsWord("port") {
		r.ProxyName = p.Word("proxy name").Text
		return
	}
	p.Expect("port")
	r.ProxyPort = p.port()
	r.ProxyName = p.Word("proxy name").Text
	p.Expect("/")
	t := p.Word("protocol")
	p.setProto(r, t, strings.ToLower(t.Text))
	r.ProxyProto = r.Proto
	if p.Accept("config") {
		r.ProxyConf = p.Word("proxy configuration").Text
	}
}

// rdr = "rdr" ifs ( ADDRMASK [ "port" P [("-"|":") P] ] | [!] "from" obj [!] "to" obj )
//
//	"->" dip [ "port" ( P [("-"|":") P] | "=" P ) ] [ proto ] rdropts
func (p *parser) rdr(r *Rule) {
	if p.IsWord("from") || p.IsPunct("!") {
		p.fromTo(r)
	} else {
		r.Orig = p.addrMask(r, false)
		if p.Accept("port") {
			r.OPortMin, r.OPortMax = p.portRange(false)
			r.hasPort = true
		}
	}
	if r.No {
		if !p.atEnd() {
			p.protocol(r)
		}
		return
	}
	p.Expect("->")
	if p.Accept("range") {
		// `-> range A-B` is the same address range as `-> A-B`.
		r.New = p.rangeAddr(r)
	} else {
		r.New = p.rhsAddr(r, true)
		if r.New.Kind == AddrNormal && !fullMask(r.New.M, r.Family) && r.New.M != ([16]byte{}) {
			// ipnat_y.y redirects to one host: "dest ip bitmask not
			// /32" (0/0 is taken: the conformance kit's ni13)
			bits := 32
			if r.Family == 6 {
				bits = 128
			}
			p.Errorf(p.Peek().Pos, "rdr destination must be one host (/%d)", bits)
		}
	}
	if p.Accept("port") {
		r.hasPort = true
		if p.IsPunct("=") {
			p.Next()
			r.FixedDPort = true
			r.DPMin = p.port()
			r.DPMax = r.DPMin
		} else {
			r.DPMin, r.DPMax = p.portRange(false)
		}
	}
	last := 0
	for !p.atEnd() {
		t := p.Peek()
		kw := strings.ToLower(t.Text)
		if t.Kind != netfmt.TokWord {
			p.FailAt(t, "rdr option")
		}
		p.inOrder(t, rdrOrder, kw, isProtoWord(t), &last)
		switch {
		case kw == "proxy":
			p.Next()
			p.proxy(r)
			if r.ProxyPort != 0 {
				r.OPortMin, r.OPortMax = r.ProxyPort, r.ProxyPort
				r.DPMin, r.DPMax = r.ProxyPort, r.ProxyPort
			}
		case p.commonOpt(r, t, kw):
		case isProtoWord(t):
			p.protocol(r)
		default:
			p.FailAt(t, "rdr option")
		}
	}
}

// fullMask reports whether m is all ones for family fam (4 or 6; 0 is
// read as 4).
func fullMask(m [16]byte, fam int) bool {
	n := 4
	if fam == 6 {
		n = 16
	}
	for _, b := range m[:n] {
		if b != 0xff {
			return false
		}
	}
	return true
}

// rewrite = ("rewrite"|"divert") dir "on" ifs [ "proto" proto ] "from" obj "to" obj
//
//	"->" "src" ADDR [ports] "dst" ADDR [ports] [ "purge" ] [ "udp" ]
func (p *parser) rewrite(r *Rule) {
	if p.Accept("proto") {
		p.protocol(r)
	}
	p.fromTo(r)
	p.Expect("->")
	p.Expect("src")
	r.NewSrc = p.rewriteAddr(r)
	if p.IsPunct(",") {
		p.Next()
		r.SPMin, r.SPMax, r.FixedSPort = p.rewriteCommaPorts()
	} else if p.IsWord("port") {
		r.SPMin, r.SPMax, r.FixedSPort = p.rewritePorts()
	}
	p.Expect("dst")
	r.NewDst = p.rewriteAddr(r)
	if p.IsPunct(",") {
		p.Next()
		r.DPMin, r.DPMax, r.FixedDPort = p.rewriteCommaPorts()
	} else if p.IsWord("port") {
		// "dst ADDR port = P" is also accepted (5.x grammar).
		r.DPMin, r.DPMax, r.FixedDPort = p.rewritePorts()
	}
	if r.Type == DivertIn || r.Type == DivertOut {
		// ipnat_y.y: a divert rule's target ends in "udp" (before
		// purge), the only encapsulation it has
		p.Expect("udp")
	}
	if p.Accept("purge") {
		r.Purge = true
	}
	if !p.atEnd() {
		p.FailAt(p.Peek(), `"purge" or ";"`)
	}
	if r.Type == DivertIn || r.Type == DivertOut {
		if r.SPMin == 0 || r.DPMin == 0 {
			p.Errorf(r.Pos, "divert needs a source and destination port")
		}
	}
}

func (p *parser) rewritePorts() (int, int, bool) {
	if p.Accept("port") {
		p.Expect("=")
		v := p.port()
		return v, v, true
	}
	a, b := p.portRange(false)
	return a, b, false
}

// rewriteCommaPorts reads the ports after "ADDR,": a number or a range only.
// IPFilter's grammar (ipnat_y.y, rhsaddr) takes "port = N" only without the
// comma; ",port = N", the form its own -v printer writes, is a syntax error
// there, and so here.
func (p *parser) rewriteCommaPorts() (int, int, bool) {
	if t := p.Peek(); strings.EqualFold(t.Text, "port") && !p.printed {
		p.FailAt(t, "a port number or range after \",\"")
	}
	return p.rewritePorts()
}

// rewriteAddr = "dstlist/NAME" | ["range"] IP "-" IP | ADDRMASK
// (ipnat_y.y's rhsaddr: a rewrite target may be an address range, which
// the odometer walks as it walks a subnet).
func (p *parser) rewriteAddr(r *Rule) Addr {
	if p.IsWord("dstlist") {
		p.Next()
		p.Expect("/")
		return Addr{Kind: AddrLookup, Table: "dstlist", Name: p.Word("dstlist name").Text}
	}
	if p.Accept("range") {
		return p.rangeAddr(r)
	}
	if a, ok := p.tryRange(r); ok {
		return a
	}
	return p.addrMask(r, false)
}

// fromTo = [!] "from" [!] obj [!] "to" [!] obj. IPFilter's grammar
// negates one side only: an rdr rule's source, any other rule's
// destination (`map … from !X`, `rdr … to !X` are syntax errors there),
// with one "!" on either side of the keyword.
func (p *parser) fromTo(r *Rule) {
	r.Filter = true
	rdr := r.Type == Rdr
	r.NotSrc, r.Src, r.SrcPort = p.endpoint(r, "from", rdr)
	r.NotDst, r.Dst, r.DstPort = p.endpoint(r, "to", !rdr)
}

// endpoint = [!] kw [!] obj ["port" cmp]; a "!" on either side negates
// (where negOK).
func (p *parser) endpoint(r *Rule, kw string, negOK bool) (not bool, a Addr, port PortCmp) {
	if p.IsPunct("!") && !negOK {
		p.FailAt(p.Peek(), strconv.Quote(kw))
	}
	not = p.Accept("!")
	p.Expect(kw)
	if p.IsPunct("!") && (!negOK || not) {
		p.FailAt(p.Peek(), "address")
	}
	if p.Accept("!") {
		not = true
	}
	a = p.addrMask(r, true)
	if p.Accept("port") {
		port = p.portCmp()
	}
	return not, a, port
}

var cmpWords = map[string]string{
	"=": "=", "!=": "!=", "<": "<", ">": ">", "<=": "<=", ">=": ">=",
	"eq": "=", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">=",
}

// portCmp = cmp P | P ("<>"|"><") P | P ":" P
func (p *parser) portCmp() PortCmp {
	t := p.Peek()
	if op, ok := cmpWords[strings.ToLower(t.Text)]; ok && (t.Kind == netfmt.TokPunct || t.Kind == netfmt.TokWord) {
		p.Next()
		return PortCmp{Op: op, P1: p.port()}
	}
	if t.Kind == netfmt.TokWord && strings.Contains(t.Text, ":") {
		a, b := p.portRange(true)
		return PortCmp{Op: ":", P1: a, P2: b}
	}
	a := p.port()
	op := p.Next()
	if op.Kind != netfmt.TokPunct || (op.Text != "<>" && op.Text != "><") {
		p.FailAt(op, `"<>" or "><"`)
	}
	return PortCmp{Op: op.Text, P1: a, P2: p.port()}
}

func (p *parser) number(want string, lo, hi int) int {
	t := p.Next()
	v, err := strconv.Atoi(t.Text)
	if t.Kind != netfmt.TokWord || err != nil {
		p.FailAt(t, want)
	}
	if v < lo || v > hi {
		p.Errorf(t.Pos, "%s %d out of range %d-%d", want, v, lo, hi)
	}
	return v
}

func (p *parser) port() int {
	t := p.Word("port")
	v, ok := netfmt.ServicePort(t.Text)
	if !ok {
		p.FailAt(t, "port number or service name")
	}
	return v
}

// portRange reads "P", "P-P" or "P:P" (the lexer keeps them as one word,
// or as "P" "-" "P" tokens when spaced out).
func (p *parser) portRange(colonOnly bool) (int, int) {
	t := p.Word("port range")
	s := t.Text
	sep := strings.IndexAny(s, ":-")
	if sep < 0 {
		a, ok := netfmt.ServicePort(s)
		if !ok {
			p.FailAt(t, "port number")
		}
		if p.IsWord("-") {
			p.Next()
			return a, p.port()
		}
		return a, a
	}
	a, ok1 := netfmt.ServicePort(s[:sep])
	b, ok2 := netfmt.ServicePort(s[sep+1:])
	if !ok1 || !ok2 {
		p.FailAt(t, "port range")
	}
	return a, b
}

// addrMask = "any" | HOST [ "/" (BITS|A.B.C.D|HEX) | ("mask"|"netmask") (A.B.C.D|HEX) ]
//
//	| ("pool"|"hash") "/" (N|NAME)        (only after from/to)
func (p *parser) addrMask(r *Rule, lookupOK bool) Addr {
	t := p.Word("address")
	lw := strings.ToLower(t.Text)
	if lw == "any" {
		return Addr{}
	}
	if (lw == "pool" || lw == "hash") && p.IsPunct("/") {
		if !lookupOK {
			p.Errorf(t.Pos, "%s/ is only allowed after from or to", lw)
		}
		p.Next()
		return Addr{Kind: AddrLookup, Table: lw, Name: p.Word("pool name or number").Text}
	}
	h := p.host(r, t)
	a := Addr{A: h.A}
	fam := h.Fam
	if fam == 0 {
		fam = r.Family
	}
	switch {
	case p.IsPunct("/"):
		p.Next()
		m := p.Word("mask")
		if n, err := strconv.Atoi(m.Text); err == nil {
			if n < 0 || n > 128 {
				p.Errorf(m.Pos, "bad prefix length %d", n)
			}
			if h.Fam == 0 && fam != 6 && n > 32 {
				// A mask longer than 32 bits implies IPv6.
				fam = 6
				r.Family = 6
			}
			a.M = maskFor(fam, n)
		} else {
			a.M = p.maskWord(m, fam)
		}
	case p.IsWord("mask") || p.IsWord("netmask"):
		p.Next()
		a.M = p.maskWord(p.Word("mask"), fam)
	default:
		if fam == 6 {
			a.M = netfmt.MaskV6(128)
		} else {
			a.M = maskFor(4, 32)
		}
	}
	for i := range a.A {
		a.A[i] &= a.M[i]
	}
	return a
}

// maskFor builds a mask as IPFilter's ntomask does; an IPv4 mask longer
// than 32 bits is invalid and stays zero.
func maskFor(fam, bits int) [16]byte {
	if fam == 6 {
		return netfmt.MaskV6(bits)
	}
	var m [16]byte
	if bits <= 32 {
		binary.BigEndian.PutUint32(m[:4], netfmt.MaskV4(bits))
	}
	return m
}

func (p *parser) maskWord(t netfmt.Token, fam int) [16]byte {
	var m [16]byte
	if a, ok := netfmt.ParseDotted(t.Text); ok {
		copy(m[:4], a[:])
		return m
	}
	if v, err := netfmt.ParseUint(t.Text); err == nil && strings.HasPrefix(strings.ToLower(t.Text), "0x") {
		binary.BigEndian.PutUint32(m[:4], v)
		return m
	}
	if strings.Contains(t.Text, ":") && fam == 6 {
		h, err := netfmt.ParseHost(t.Text, 6)
		if err == nil && h.Fam == 6 {
			return h.A
		}
	}
	p.FailAt(t, "netmask")
	return m
}

func (p *parser) host(r *Rule, t netfmt.Token) netfmt.Host {
	fam := r.Family
	if lf := literalFamily(t.Text); lf != 0 {
		if fam != 0 && lf != fam {
			// ipnat_y.y refuses an address of the other family
			// rather than reading it into the rule's.
			p.Errorf(t.Pos, "address family mismatch")
		}
		if fam == 0 {
			r.Family = lf
		}
	}
	h, err := netfmt.ParseHost(t.Text, fam)
	if err != nil {
		p.Errorf(t.Pos, "%v", err)
	}
	if h.Fam == 6 && r.Family == 0 {
		r.Family = 6
	}
	return h
}

// literalFamily is the family an address literal is written in: 6 for
// anything with a colon, 4 for a dotted quad, 0 for names and the short
// forms (such as 0) that take the rule's family.
func literalFamily(s string) int {
	switch {
	case strings.Contains(s, ":"):
		return 6
	case strings.Count(s, ".") == 3:
		if _, ok := netfmt.ParseDotted(s); ok {
			return 4
		}
	}
	return 0
}

// rhsAddr = ADDRMASK | IP "-" IP | (rdr only) IP "," IP
func (p *parser) rhsAddr(r *Rule, rdr bool) Addr {
	t := p.Peek()
	if a, ok := p.tryRange(r); ok {
		return a
	}
	if rdr && p.IsWord("dstlist") && p.PeekAt(1).Kind == netfmt.TokPunct && p.PeekAt(1).Text == "/" {
		// 5.x: redirect to a member of an ippool destination list.
		p.Next()
		p.Next()
		return Addr{Kind: AddrLookup, Table: "dstlist", Name: p.Word("dstlist name").Text}
	}
	if rdr && t.Kind == netfmt.TokWord && p.PeekAt(1).Kind == netfmt.TokPunct && p.PeekAt(1).Text == "," {
		p.Next()
		p.Next()
		a := p.host(r, t)
		b := p.host(r, p.Word("address"))
		return Addr{Kind: AddrSplit, A: a.A, M: b.A}
	}
	return p.addrMask(r, false)
}

func (p *parser) rangeAddr(r *Rule) Addr {
	if a, ok := p.tryRange(r); ok {
		return a
	}
	p.FailAt(p.Peek(), "address range a-b")
	return Addr{}
}

// tryRange reads an address range if one comes next: one word "A-B", or
// the forms IPFilter's lexer also joins, "A - B", "A -B" and "A- B".
// Nothing is consumed when the next tokens are not a range.
func (p *parser) tryRange(r *Rule) (Addr, bool) {
	t := p.Peek()
	if t.Kind != netfmt.TokWord {
		return Addr{}, false
	}
	if lo, hi, ok := p.splitRange(t.Text); ok {
		p.Next()
		return p.makeRange(r, t, lo, hi), true
	}
	n1 := p.PeekAt(1)
	lo, hi, take := "", "", 0
	switch {
	case n1.Kind == netfmt.TokWord && n1.Text == "-" && p.PeekAt(2).Kind == netfmt.TokWord:
		lo, hi, take = t.Text, p.PeekAt(2).Text, 3
	case strings.HasSuffix(t.Text, "-") && n1.Kind == netfmt.TokWord:
		lo, hi, take = strings.TrimSuffix(t.Text, "-"), n1.Text, 2
	case n1.Kind == netfmt.TokWord && strings.HasPrefix(n1.Text, "-"):
		lo, hi, take = t.Text, strings.TrimPrefix(n1.Text, "-"), 2
	}
	if take == 0 || !isRangeEnd(lo) || !isRangeEnd(hi) {
		return Addr{}, false
	}
	for range take {
		p.Next()
	}
	return p.makeRange(r, t, lo, hi), true
}

func (p *parser) makeRange(r *Rule, t netfmt.Token, lo, hi string) Addr {
	if p.printed {
		// The printer writes a zero end as "any", as IPFilter's does.
		zero := "0.0.0.0"
		if r.Family == 6 || literalFamily(lo) == 6 || literalFamily(hi) == 6 {
			zero = "::"
		}
		if strings.EqualFold(lo, "any") {
			lo = zero
		}
		if strings.EqualFold(hi, "any") {
			hi = zero
		}
	}
	a := p.host(r, netfmt.Token{Kind: netfmt.TokWord, Text: lo, Pos: t.Pos})
	b := p.host(r, netfmt.Token{Kind: netfmt.TokWord, Text: hi, Pos: t.Pos})
	return Addr{Kind: AddrRange, A: a.A, M: b.A}
}

func splitRange(s string) (string, string, bool) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok || lo == "" || hi == "" {
		return "", "", false
	}
	return lo, hi, isRangeEnd(lo) && isRangeEnd(hi)
}

// splitRange is the package's splitRange for ParsePrinted, which also takes the "any"
// the printer writes for a zero end.
func (p *parser) splitRange(s string) (string, string, bool) {
	lo, hi, ok := splitRange(s)
	if ok || !p.printed {
		return lo, hi, ok
	}
	lo, hi, ok = strings.Cut(s, "-")
	end := func(x string) bool { return strings.EqualFold(x, "any") || isRangeEnd(x) }
	return lo, hi, ok && end(lo) && end(hi)
}

// isRangeEnd reports whether s is an address literal that may end a range.
func isRangeEnd(s string) bool {
	if _, ok := netfmt.ParseDotted(s); ok {
		return true
	}
	h, err := netfmt.ParseHost(s, 6)
	return err == nil && h.Fam == 6 && strings.Contains(s, ":")
}

// finish applies the defaults and consistency rules of the original
// grammar's post-processing.
func (p *parser) finish(r *Rule) {
	if (r.Type == DivertIn || r.Type == DivertOut) && !r.protoSet {
		// The original marks protocol-less divert rules as TCP (and
		// prints them with "proto tcp").
		r.TCP = true
	}
	if !r.protoSet && (r.hasPort || r.SrcPort.Op != "" || r.DstPort.Op != "") && !r.Type.IsRewrite() {
		if r.Type == Rdr && r.DPMin != r.DPMax {
			r.Proto, r.TCP = 6, true
		} else {
			r.Proto, r.TCP, r.UDP = 6, true, true
		}
	}
	if r.Type == Rdr && !r.Filter && r.OPortMin == 0 && r.OPortMax == 0 && !r.FixedDPort && r.DPMax != 0 {
		// With no (or port 0) LHS port, ipnat_y.y takes the top of the
		// new port range as the top of the original one: the rule
		// prints `port 0-HI`, still matches every port (its bottom is
		// 0) and maps a port P to P + HI.
		r.OPortMax = r.DPMax
	}
	if !r.IsTCPUDP() {
		// Port tests and translations need TCP or UDP; the original
		// silently drops them otherwise.
		r.portTest = r.SrcPort.Op != "" || r.DstPort.Op != ""
		r.SrcPort, r.DstPort = PortCmp{}, PortCmp{}
		if r.Type == Rdr {
			r.OPortMin, r.OPortMax, r.DPMin, r.DPMax, r.FixedDPort = 0, 0, 0, 0, false
		}
		if r.Type.IsRewrite() && r.Type != DivertIn && r.Type != DivertOut {
			r.SPMin, r.SPMax, r.DPMin, r.DPMax = 0, 0, 0, 0
		}
	}
	if r.Sticky && !r.RoundRobin && r.New.Kind != AddrSplit {
		p.warnf("'sticky' for use with round-robin/IP splitting only")
		r.Sticky = false
	}
	if r.Type == MapBlock && r.Orig.Kind != AddrNormal {
		p.Errorf(r.Pos, "map-block needs an address/mask on the left")
	}
}

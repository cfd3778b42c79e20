package ipqos

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Error is one positioned problem in a configuration file.
type Error struct {
	File string
	Pos  Pos
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
}

// ErrorList is every problem Parse found, in file order; it stops at
// MaxErrors.
type ErrorList []*Error

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As find the individual errors.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// MaxErrors is how many errors Parse reports before it gives up.
const MaxErrors = 10

// Limits from the IPQoS documentation.
const (
	MaxNameLen    = 32
	MaxIfNameLen  = 15 // Linux IFNAMSIZ-1
	maxDSCP       = 63
	maxVPR        = 7
	maxPriority   = 65535
	maxPercentage = 100
)

type parser struct {
	file string
	lex  *lexer
	tok  token
	errs ErrorList
	cfg  *Config

	filterPos, policyPos, adapterPos map[string]Pos
}

// Parse reads a configuration. On any error it returns a nil Config and an
// ErrorList whose messages look like `file:line:col: expected X, found Y`.
func Parse(filename string, src []byte) (*Config, error) {
	p := &parser{
		file:       filename,
		lex:        newLexer(string(src)),
		cfg:        &Config{},
		filterPos:  map[string]Pos{},
		policyPos:  map[string]Pos{},
		adapterPos: map[string]Pos{},
	}
	p.next()
	p.parseFile()
	if len(p.errs) == 0 && len(p.cfg.Adapters) == 0 {
		p.errorf(p.tok.pos, "expected at least one adapter block, found %s", p.tok)
	}
	if len(p.errs) > 0 {
		// Block checks run when a block closes, so their errors arrive late.
		sort.SliceStable(p.errs, func(i, j int) bool {
			a, b := p.errs[i].Pos, p.errs[j].Pos
			return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
		})
		return nil, p.errs
	}
	return p.cfg, nil
}

func (p *parser) next() { p.tok = p.lex.next() }

func (p *parser) errorf(pos Pos, format string, args ...any) {
	if len(p.errs) >= MaxErrors {
		return
	}
	p.errs = append(p.errs, &Error{File: p.file, Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) expected(what string, t token) {
	p.errorf(t.pos, "expected %s, found %s", what, t)
}

func (p *parser) full() bool { return len(p.errs) >= MaxErrors }

// skipLine resynchronises after an error: it drops tokens up to and
// including the next line end (or stops before a closing brace).
func (p *parser) skipLine() {
	for p.tok.kind != tEOF && p.tok.kind != tNewline && p.tok.kind != tRBrace {
		p.next()
	}
	if p.tok.kind == tNewline {
		p.next()
	}
}

// addUse records a `uses` reference to the kind (plural kinds) of block
// named by n, in a block of type owner: each may be used once per owner
// and must already be defined.
func (p *parser) addUse(n token, kind, kinds, owner string, uses, defined map[string]Pos) bool {
	if prev, dup := uses[n.text]; dup {
		p.errorf(n.pos, "%s %s is already used by this %s (at %s)", kind, n.text, owner, prev)
		return false
	}
	if _, ok := defined[n.text]; !ok {
		p.errorf(n.pos, "unknown %s %s (%s must be defined before use)", kind, n.text, kinds)
		return false
	}
	uses[n.text] = n.pos
	return true
}

func (p *parser) skipNewlines() {
	for p.tok.kind == tNewline {
		p.next()
	}
}

// file := { newline | block }
func (p *parser) parseFile() {
	for !p.full() {
		p.skipNewlines()
		if p.tok.kind == tEOF {
			return
		}
		if p.tok.kind != tWord {
			p.expected("filter, policy or adapter", p.tok)
			p.next()
			p.skipLine()
			continue
		}
		switch p.tok.text {
		case "filter", "policy", "adapter":
			p.parseBlock()
		default:
			p.expected("filter, policy or adapter", p.tok)
			p.skipBlockOrLine()
		}
	}
}

// skipBlockOrLine skips an unknown line; if it opens a brace, the whole
// block is skipped so its attributes are not reported one by one.
func (p *parser) skipBlockOrLine() {
	for p.tok.kind != tEOF && p.tok.kind != tNewline && p.tok.kind != tLBrace {
		p.next()
	}
	if p.tok.kind == tLBrace {
		for p.tok.kind != tEOF && p.tok.kind != tRBrace {
			p.next()
		}
	}
	p.next()
}

// block := kind NAME "{" newline { attribute newline } "}"
func (p *parser) parseBlock() {
	kind, kpos := p.tok.text, p.tok.pos
	p.next()
	name := p.tok
	if name.kind != tWord {
		p.expected(kind+" name", name)
		p.skipBlockOrLine()
		return
	}
	p.next()
	p.checkName(kind, name)
	if p.tok.kind != tLBrace {
		p.expected(`"{"`, p.tok)
		p.skipBlockOrLine()
		return
	}
	p.next()
	var b blockParser
	switch kind {
	case "filter":
		b = p.newFilter(name.text, kpos)
	case "policy":
		b = p.newPolicy(name.text, kpos)
	default:
		b = p.newAdapter(name.text, kpos)
	}
	for !p.full() {
		p.skipNewlines()
		switch p.tok.kind {
		case tRBrace:
			p.next()
			if p.tok.kind != tNewline && p.tok.kind != tEOF {
				p.expected("end of line", p.tok)
				p.skipLine()
			}
			b.finish()
			return
		case tEOF:
			p.expected(`"}"`, p.tok)
			return
		case tWord:
			attr := p.tok
			p.next()
			var args []token
			for p.tok.kind == tWord {
				args = append(args, p.tok)
				p.next()
			}
			if p.tok.kind != tNewline && p.tok.kind != tRBrace && p.tok.kind != tEOF {
				p.expected("end of line", p.tok)
				p.skipLine()
				continue
			}
			b.attribute(attr, args)
		default:
			p.expected("attribute or \"}\"", p.tok)
			p.next()
			p.skipLine()
		}
	}
}

func (p *parser) checkName(kind string, t token) {
	if kind == "adapter" {
		if len(t.text) > MaxIfNameLen {
			p.errorf(t.pos, "adapter name %q is longer than %d characters", t.text, MaxIfNameLen)
		}
		for _, c := range []byte(t.text) {
			if !isNameByte(c) && c != '.' && c != '-' {
				p.errorf(t.pos, "expected adapter name (interface name), found %s", t)
				return
			}
		}
		if t.text == "lo" || t.text == "lo0" {
			p.errorf(t.pos, "the loopback adapter %q is not allowed", t.text)
		}
		return
	}
	if len(t.text) > MaxNameLen {
		p.errorf(t.pos, "%s name %q is longer than %d characters", kind, t.text, MaxNameLen)
		return
	}
	for _, c := range []byte(t.text) {
		if !isNameByte(c) {
			p.errorf(t.pos, "expected %s name (letters, digits, _), found %s", kind, t)
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

type blockParser interface {
	attribute(name token, args []token)
	finish()
}

// want checks an attribute's argument count.
func (p *parser) want(attr token, args []token, n int, what string) bool {
	if len(args) < n {
		p.errorf(p.tok.pos, "expected %s after %s, found %s", what, attr.text, p.tok)
		return false
	}
	if len(args) > n {
		p.expected("end of line", args[n])
		return false
	}
	return true
}

// parseUint reads a decimal (or 0x hexadecimal) number up to max.
func parseUint(s string, maxV uint64) (uint64, bool) {
	base := 10
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		s, base = s[2:], 16
	}
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil || v > maxV {
		return 0, false
	}
	return v, true
}

func (p *parser) number(t token, maxV uint64, what string) (uint64, bool) {
	v, ok := parseUint(t.text, maxV)
	if !ok {
		p.expected(fmt.Sprintf("%s (0-%d)", what, maxV), t)
	}
	return v, ok
}

// ---- filter ----

type addrPart struct {
	addr netip.Addr
	pfx  netip.Prefix
	pos  Pos
	set  bool
}

type portPart struct {
	v   uint16
	pos Pos
	set bool
}

type filterParser struct {
	p    *parser
	f    *Filter
	seen map[string]Pos
	addr [numSides][3]addrPart // base, lo, hi
	port [numSides][3]portPart
	dscp [3]struct {
		v   uint16
		set bool
	}
	famPos Pos
}

var sideNames = [numSides]string{"src", "dst", ""}
var partNames = [3]string{"", "lo", "hi"}

// shortcut is a protocol or service keyword that takes no argument.
type shortcut struct {
	proto  int
	lo, hi uint16 // either-direction port range; 0,0 = none
}

var shortcuts = map[string]shortcut{
	"tcp": {proto: 6}, "udp": {proto: 17}, "icmp": {proto: 1}, "icmpv6": {proto: 58}, "sctp": {proto: 132},
	"http": {6, 80, 80}, "https": {6, 443, 443}, "ftp": {6, 20, 21}, "ssh": {6, 22, 22},
	"telnet": {6, 23, 23}, "smtp": {6, 25, 25}, "dns": {17, 53, 53},
}

var protoNames = map[string]int{
	"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "gre": 47, "esp": 50, "ah": 51, "icmpv6": 58, "sctp": 132,
}

func (p *parser) newFilter(name string, pos Pos) *filterParser {
	if prev, dup := p.filterPos[name]; dup {
		p.errorf(pos, "duplicate filter %s (first defined at %s)", name, prev)
	}
	return &filterParser{p: p, f: &Filter{Name: name, Pos: pos, Protocol: -1, Priority: NoPriority}, seen: map[string]Pos{}}
}

// mark records that an attribute key was set, reporting duplicates.
func (fp *filterParser) mark(key string, t token) bool {
	if prev, dup := fp.seen[key]; dup {
		fp.p.errorf(t.pos, "duplicate %s (first set at %s)", key, prev)
		return false
	}
	fp.seen[key] = t.pos
	return true
}

func (fp *filterParser) attribute(attr token, args []token) {
	p := fp.p
	name := attr.text
	switch name {
	case "address":
		name = "addr"
	case "xport":
		name = "protocol"
	case "netproto":
		name = "net"
	case "pri":
		name = "priority"
	}
	if side, part, ok := splitSided(name, "addr"); ok {
		if !p.want(attr, args, 1, "address") || !fp.mark(name, attr) {
			return
		}
		a := args[0]
		ap := addrPart{pos: a.pos, set: true}
		if part == 0 && strings.Contains(a.text, "/") {
			pfx, err := netip.ParsePrefix(a.text)
			if err != nil || pfx.Addr().Zone() != "" {
				p.expected("address or address/length", a)
				return
			}
			ap.pfx, ap.addr = pfx.Masked(), pfx.Masked().Addr()
		} else {
			ip, err := netip.ParseAddr(a.text)
			if err != nil || ip.Zone() != "" {
				p.expected("address", a)
				return
			}
			ap.addr = ip
			if part == 0 {
				ap.pfx = netip.PrefixFrom(ip, ip.BitLen())
			}
		}
		fp.addr[side][part] = ap
		return
	}
	if side, part, ok := splitSided(name, "port"); ok {
		if !p.want(attr, args, 1, "port number") || !fp.mark(name, attr) {
			return
		}
		v, ok := p.number(args[0], 65535, "port number")
		if !ok {
			return
		}
		pp := &fp.port[side][part]
		pp.v, pp.pos, pp.set = uint16(v), args[0].pos, true
		return
	}
	if sc, ok := shortcuts[name]; ok {
		if !p.want(attr, args, 0, "") || !fp.mark("protocol", attr) {
			return
		}
		fp.f.Protocol = sc.proto
		switch {
		case sc.hi == 0:
		case sc.lo == sc.hi:
			if fp.mark("port", attr) {
				fp.port[Either][0] = portPart{sc.lo, attr.pos, true}
			}
		default:
			if fp.mark("portlo", attr) && fp.mark("porthi", attr) {
				fp.port[Either][1] = portPart{sc.lo, attr.pos, true}
				fp.port[Either][2] = portPart{sc.hi, attr.pos, true}
			}
		}
		return
	}
	switch name {
	case "protocol":
		if !p.want(attr, args, 1, "protocol number") || !fp.mark(name, attr) {
			return
		}
		if n, ok := protoNames[args[0].text]; ok {
			fp.f.Protocol = n
			return
		}
		if v, ok := p.number(args[0], 255, "protocol number"); ok {
			fp.f.Protocol = int(v)
		}
	case "net":
		if !p.want(attr, args, 1, "0x800 or 0x86DD") || !fp.mark(name, attr) {
			return
		}
		v, ok := parseUint(args[0].text, 0xffff)
		if !ok || (v != 0x800 && v != 0x86DD) {
			p.expected("0x800 or 0x86DD", args[0])
			return
		}
		fp.f.NetProto, fp.famPos = uint16(v), args[0].pos
	case "dscp", "dscplo", "dscphi":
		if !p.want(attr, args, 1, "DSCP value") || !fp.mark(name, attr) {
			return
		}
		v, ok := p.number(args[0], maxDSCP, "DSCP value")
		if !ok {
			return
		}
		i := map[string]int{"dscp": 0, "dscplo": 1, "dscphi": 2}[name]
		fp.dscp[i].v, fp.dscp[i].set = uint16(v), true
	case "dstphysaddr":
		if !p.want(attr, args, 1, "MAC address") || !fp.mark(name, attr) {
			return
		}
		mac, err := net.ParseMAC(args[0].text)
		if err != nil || len(mac) != 6 {
			p.expected("MAC address (aa:bb:cc:dd:ee:ff)", args[0])
			return
		}
		copy(fp.f.DstMAC[:], mac)
		fp.f.HasMAC = true
	case "priority":
		if !p.want(attr, args, 1, "priority") || !fp.mark(name, attr) {
			return
		}
		if v, ok := p.number(args[0], maxPriority, "priority"); ok {
			fp.f.Priority = int(v)
		}
	default:
		p.expected("filter attribute", attr)
	}
}

// splitSided splits e.g. "srcaddrlo" into (Src, 1) for base "addr".
func splitSided(name, base string) (Side, int, bool) {
	for s := Src; s < numSides; s++ {
		for part, suf := range partNames {
			if name == sideNames[s]+base+suf {
				return s, part, true
			}
		}
	}
	return 0, 0, false
}

func (fp *filterParser) finish() {
	p, f := fp.p, fp.f
	family, famFrom := 0, ""
	for s := Src; s < numSides; s++ {
		parts := fp.addr[s]
		attr := sideNames[s] + "addr"
		if parts[0].set && (parts[1].set || parts[2].set) {
			q := parts[1]
			if !q.set {
				q = parts[2]
			}
			p.errorf(q.pos, "%s conflicts with %s at %s", attr+"lo/hi", attr, parts[0].pos)
			continue
		}
		var m AddrMatch
		switch {
		case parts[0].set:
			m = AddrMatch{Prefix: parts[0].pfx, Lo: parts[0].pfx.Addr(), Hi: lastAddr(parts[0].pfx)}
		case parts[1].set || parts[2].set:
			lo, hi := parts[1].addr, parts[2].addr
			if !lo.IsValid() {
				lo = zeroAddr(hi)
			}
			if !hi.IsValid() {
				hi = lastAddr(netip.PrefixFrom(lo, 0))
			}
			if lo.Is4() != hi.Is4() {
				p.errorf(parts[2].pos, "%shi has a different address family from %slo", attr, attr)
				continue
			}
			if lo.Compare(hi) > 0 {
				p.errorf(parts[2].pos, "%shi %s is below %slo %s", attr, hi, attr, lo)
				continue
			}
			m = AddrMatch{Lo: lo, Hi: hi}
		default:
			continue
		}
		fam := 6
		if m.Lo.Is4() {
			fam = 4
		}
		pos := parts[0].pos
		if !parts[0].set {
			pos = parts[1].pos
			if !parts[1].set {
				pos = parts[2].pos
			}
		}
		if family == 0 {
			family, famFrom = fam, fmt.Sprintf("%s at %s", attr, pos)
		} else if fam != family {
			p.errorf(pos, "%s is IPv%d but the filter is IPv%d (from %s)", attr, fam, family, famFrom)
			continue
		}
		f.Addr[s] = m
	}
	if f.NetProto != 0 && family != 0 {
		want := uint16(0x800)
		if family == 6 {
			want = 0x86DD
		}
		if f.NetProto != want {
			p.errorf(fp.famPos, "net 0x%X contradicts the filter's IPv%d addresses (%s)", f.NetProto, family, famFrom)
		}
	}
	for s := Src; s < numSides; s++ {
		parts := fp.port[s]
		attr := sideNames[s] + "port"
		if parts[0].set && (parts[1].set || parts[2].set) {
			p.errorf(parts[0].pos, "%s conflicts with %slo/%shi", attr, attr, attr)
			continue
		}
		switch {
		case parts[0].set:
			f.Port[s] = Range{true, parts[0].v, parts[0].v}
		case parts[1].set || parts[2].set:
			r := Range{true, parts[1].v, 65535}
			if parts[2].set {
				r.Hi = parts[2].v
			}
			if r.Lo > r.Hi {
				p.errorf(parts[2].pos, "%shi %d is below %slo %d", attr, r.Hi, attr, r.Lo)
				continue
			}
			f.Port[s] = r
		}
	}
	d := fp.dscp
	switch {
	case d[0].set && (d[1].set || d[2].set):
		p.errorf(fp.seen["dscp"], "dscp conflicts with dscplo/dscphi")
	case d[0].set:
		f.DSCP = Range{true, d[0].v, d[0].v}
	case d[1].set || d[2].set:
		r := Range{true, d[1].v, maxDSCP}
		if d[2].set {
			r.Hi = d[2].v
		}
		if r.Lo > r.Hi {
			p.errorf(fp.seen["dscphi"], "dscphi %d is below dscplo %d", r.Hi, r.Lo)
		} else {
			f.DSCP = r
		}
	}
	if _, dup := p.filterPos[f.Name]; !dup {
		p.filterPos[f.Name] = f.Pos
		p.cfg.Filters = append(p.cfg.Filters, f)
	}
}

func zeroAddr(like netip.Addr) netip.Addr {
	if like.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// lastAddr returns the highest address inside the prefix.
func lastAddr(pfx netip.Prefix) netip.Addr {
	b := pfx.Addr().AsSlice()
	for i := pfx.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// ---- policy ----

type policyParser struct {
	p    *parser
	pol  *Policy
	seen map[string]Pos
	uses map[string]Pos
}

func (p *parser) newPolicy(name string, pos Pos) *policyParser {
	if prev, dup := p.policyPos[name]; dup {
		p.errorf(pos, "duplicate policy %s (first defined at %s)", name, prev)
	}
	return &policyParser{p: p, pol: &Policy{Name: name, Pos: pos, DSCP: -1, VPR: -1}, seen: map[string]Pos{}, uses: map[string]Pos{}}
}

func (pp *policyParser) mark(key string, t token) bool {
	if prev, dup := pp.seen[key]; dup {
		pp.p.errorf(t.pos, "duplicate %s (first set at %s)", key, prev)
		return false
	}
	pp.seen[key] = t.pos
	return true
}

func (pp *policyParser) attribute(attr token, args []token) {
	p, pol := pp.p, pp.pol
	switch attr.text {
	case "uses":
		if !p.want(attr, args, 1, "filter name") {
			return
		}
		n := args[0]
		if !p.addUse(n, "filter", "filters", "policy", pp.uses, p.filterPos) {
			return
		}
		pol.Uses = append(pol.Uses, Ref{n.text, n.pos})
	case "res", "reservation", "max", "maximum":
		key := attr.text[:3]
		if !p.want(attr, args, 1, "rate") || !pp.mark(key, attr) {
			return
		}
		r, ok := parseRate(args[0].text)
		if !ok {
			p.expected("rate (N%, N, Nk or Nm)", args[0])
			return
		}
		if key == "res" {
			pol.Res = r
		} else {
			pol.Max = r
		}
	case "dscp":
		if !p.want(attr, args, 1, "DSCP value") || !pp.mark("dscp", attr) {
			return
		}
		if v, ok := p.number(args[0], maxDSCP, "DSCP value"); ok {
			pol.DSCP = int(v)
		}
	case "vpr":
		if !p.want(attr, args, 1, "VLAN priority") || !pp.mark("vpr", attr) {
			return
		}
		if v, ok := p.number(args[0], maxVPR, "VLAN priority"); ok {
			pol.VPR = int(v)
		}
	default:
		p.expected("policy attribute (uses, res, max, dscp, vpr)", attr)
	}
}

// parseRate reads N% or N bits per second with an optional k/K (10^3) or
// m/M (10^6) suffix; HP lists both cases, so both mean the same. (g/G,
// 10^9, is accepted only by the `speed` extension: see parseSpeed.)
func parseRate(s string) (Rate, bool) {
	if strings.HasSuffix(s, "%") {
		v, ok := parseUint(s[:len(s)-1], maxPercentage)
		if !ok || v == 0 {
			return Rate{}, false
		}
		return Rate{Set: true, Percent: true, Value: v}, true
	}
	mult := uint64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1000
		case 'm', 'M':
			mult = 1000000
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		return Rate{}, false
	}
	const maxBits = 1 << 50 // ~1 Pbit/s, far beyond any link, keeps products in range
	v, ok := parseUint(s, maxBits/mult)
	if !ok || v == 0 {
		return Rate{}, false
	}
	return Rate{Set: true, Value: v * mult}, true
}

func (pp *policyParser) finish() {
	p, pol := pp.p, pp.pol
	if len(pol.Uses) == 0 {
		p.errorf(pol.Pos, "policy %s uses no filter", pol.Name)
	}
	if pol.Res.Set && pol.Max.Set && pol.Res.Percent == pol.Max.Percent && pol.Res.Value > pol.Max.Value {
		p.errorf(pp.seen["res"], "res %s is above max %s", formatRate(pol.Res), formatRate(pol.Max))
	}
	if _, dup := p.policyPos[pol.Name]; !dup {
		p.policyPos[pol.Name] = pol.Pos
		p.cfg.Policies = append(p.cfg.Policies, pol)
	}
}

// ---- adapter ----

type adapterParser struct {
	p    *parser
	a    *Adapter
	uses map[string]Pos
}

func (p *parser) newAdapter(name string, pos Pos) *adapterParser {
	if prev, dup := p.adapterPos[name]; dup {
		p.errorf(pos, "duplicate adapter %s (first defined at %s)", name, prev)
	}
	return &adapterParser{p: p, a: &Adapter{Name: name, Pos: pos}, uses: map[string]Pos{}}
}

// parseSpeed reads an adapter speed: N bits per second with an optional
// k/K, m/M or g/G (10^9) suffix; no percentage.
func parseSpeed(s string) (uint64, bool) {
	if strings.HasSuffix(s, "g") || strings.HasSuffix(s, "G") {
		r, ok := parseRate(s[:len(s)-1] + "M")
		if !ok || r.Value > (1<<50)/1000 {
			return 0, false
		}
		return r.Value * 1000, true
	}
	if strings.HasSuffix(s, "%") {
		return 0, false
	}
	r, ok := parseRate(s)
	return r.Value, ok
}

func (ap *adapterParser) attribute(attr token, args []token) {
	p := ap.p
	if attr.text == "speed" {
		if !p.want(attr, args, 1, "adapter speed (bits per second, k/M/G suffix)") {
			return
		}
		if ap.a.Speed != 0 {
			p.errorf(attr.pos, "adapter %s: speed given twice", ap.a.Name)
			return
		}
		v, ok := parseSpeed(args[0].text)
		if !ok {
			p.errorf(args[0].pos, "expected adapter speed (bits per second with an optional k, M or G suffix, not a percentage), found %s", args[0])
			return
		}
		ap.a.Speed = v
		return
	}
	if attr.text != "uses" {
		p.expected("adapter attribute (uses, speed)", attr)
		return
	}
	if !p.want(attr, args, 1, "policy name") {
		return
	}
	n := args[0]
	if !p.addUse(n, "policy", "policies", "adapter", ap.uses, p.policyPos) {
		return
	}
	ap.a.Uses = append(ap.a.Uses, Ref{n.text, n.pos})
}

func (ap *adapterParser) finish() {
	p, a := ap.p, ap.a
	var pct uint64
	for _, u := range a.Uses {
		if pol := p.cfg.Policy(u.Name); pol != nil && pol.Res.Set && pol.Res.Percent {
			pct += pol.Res.Value
		}
	}
	if pct > 100 {
		p.errorf(a.Pos, "adapter %s reserves %d%% of its bandwidth (more than 100%%)", a.Name, pct)
	}
	if _, dup := p.adapterPos[a.Name]; !dup {
		p.adapterPos[a.Name] = a.Pos
		p.cfg.Adapters = append(p.cfg.Adapters, a)
	}
}

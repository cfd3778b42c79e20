package ippool

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"sluice/internal/pool/netfmt"
)

const maxErrors = 10

type parser struct {
	file string
	toks []netfmt.Token
	i    int
	errs netfmt.ErrorList
	out  *File
}

type bailout struct{}

// Parse reads an ippool.conf text. name is used in error positions;
// file:// and whois sources are opened relative to the current directory.
// All errors found (up to ten) are returned as a netfmt.ErrorList.
func Parse(name, src string) (*File, error) {
	p := &parser{file: name, toks: netfmt.Lex(src, false), out: &File{}}
	p.run()
	if len(p.errs) > 0 {
		return p.out, p.errs
	}
	return p.out, nil
}

// ParseFile reads and parses path ("-" = standard input is left to callers).
func ParseFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, string(b))
}

func (p *parser) run() {
	for p.peek().Kind != netfmt.TokEOF && len(p.errs) < maxErrors {
		p.statement()
	}
}

func (p *parser) statement() {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			p.resync()
		}
	}()
	t := p.next()
	if t.Kind == netfmt.TokPunct && t.Text == ";" {
		return
	}
	if t.Kind != netfmt.TokWord {
		p.failAt(t, "table, group-map or pool")
	}
	switch strings.ToLower(t.Text) {
	case "table":
		p.table(t)
	case "group-map":
		p.groupMap(t)
	case "pool":
		p.pool(t)
	default:
		p.failAt(t, "table, group-map or pool")
	}
}

// resync skips to the start of the next definition.
func (p *parser) resync() {
	for {
		t := p.peek()
		if t.Kind == netfmt.TokEOF {
			return
		}
		if t.Kind == netfmt.TokWord {
			switch strings.ToLower(t.Text) {
			case "table", "group-map", "pool":
				return
			}
		}
		p.i++
	}
}

func (p *parser) peek() netfmt.Token { return p.toks[p.i] }

// peekAt looks k tokens ahead, stopping at the final EOF token.
func (p *parser) peekAt(k int) netfmt.Token {
	if p.i+k >= len(p.toks) {
		return p.toks[len(p.toks)-1]
	}
	return p.toks[p.i+k]
}

func (p *parser) next() netfmt.Token {
	t := p.toks[p.i]
	if t.Kind != netfmt.TokEOF {
		p.i++
	}
	return t
}

func (p *parser) errorf(pos netfmt.Pos, format string, args ...any) {
	p.errs = append(p.errs, &netfmt.PosError{File: p.file, Pos: pos, Msg: fmt.Sprintf(format, args...)})
	panic(bailout{})
}

func (p *parser) failAt(t netfmt.Token, want string) {
	if t.Kind == netfmt.TokError {
		p.errorf(t.Pos, "%s", t.Text)
	}
	p.errorf(t.Pos, "expected %s, found %s", want, t)
}

func (p *parser) isPunct(s string) bool {
	t := p.peek()
	return t.Kind == netfmt.TokPunct && t.Text == s
}

func (p *parser) punct(s string) netfmt.Token {
	t := p.next()
	if t.Kind != netfmt.TokPunct || t.Text != s {
		p.failAt(t, fmt.Sprintf("%q", s))
	}
	return t
}

func (p *parser) keyword(s string) netfmt.Token {
	t := p.next()
	if t.Kind != netfmt.TokWord || !strings.EqualFold(t.Text, s) {
		p.failAt(t, fmt.Sprintf("%q", s))
	}
	return t
}

func (p *parser) word(want string) netfmt.Token {
	t := p.next()
	if t.Kind != netfmt.TokWord && t.Kind != netfmt.TokString {
		p.failAt(t, want)
	}
	return t
}

func (p *parser) number(want string) uint32 {
	t := p.next()
	v, err := netfmt.ParseUint(t.Text)
	if t.Kind != netfmt.TokWord || err != nil {
		p.failAt(t, want)
	}
	return v
}

func (p *parser) role() Role {
	t := p.next()
	if t.Kind == netfmt.TokWord {
		switch strings.ToLower(t.Text) {
		case "ipf":
			return RoleIPF
		case "nat":
			return RoleNAT
		case "auth":
			return RoleAuth
		case "count":
			return RoleCount
		case "all":
			return RoleAll
		}
	}
	p.failAt(t, "role (ipf, nat, auth, count or all)")
	return 0
}

// table = "table" "role" "=" role "type" "=" ("tree"|"hash") {opt} "{" entries "}" [";"]
func (p *parser) table(start netfmt.Token) {
	tb := &Table{Pos: start.Pos}
	p.keyword("role")
	p.punct("=")
	tb.Role = p.role()
	p.keyword("type")
	p.punct("=")
	t := p.next()
	switch {
	case t.Kind == netfmt.TokWord && strings.EqualFold(t.Text, "tree"):
		tb.Type = Tree
	case t.Kind == netfmt.TokWord && strings.EqualFold(t.Text, "hash"):
		tb.Type = Hash
	default:
		p.failAt(t, "tree or hash")
	}
	size := -1
	p.tableOpts(tb, &size, nil)
	tb.Entries = p.entries(tb.Type == GroupMap, "")
	p.finish(tb, size)
}

// tableOpts reads "number = N", "name = S", "size = N", "seed = N" and,
// for group-maps, "group = G", in any order.
func (p *parser) tableOpts(tb *Table, size *int, group *string) {
	for {
		t := p.peek()
		if t.Kind != netfmt.TokWord {
			return
		}
		kw := strings.ToLower(t.Text)
		switch kw {
		case "number", "name":
			p.next()
			p.punct("=")
			// "number=" with nothing after it is how an unnamed table
			// prints; accept it back.
			if p.isPunct("{") || p.peekAt(1).Kind == netfmt.TokPunct && p.peekAt(1).Text == "=" {
				tb.Name = ""
				continue
			}
			tb.Name = p.word("table name or number").Text
		case "size":
			p.next()
			p.punct("=")
			*size = int(p.number("size"))
		case "seed":
			p.next()
			p.punct("=")
			tb.Seed = p.number("seed")
		case "group":
			if group == nil {
				return
			}
			p.next()
			p.punct("=")
			*group = p.word("group name").Text
		default:
			return
		}
	}
}

func (p *parser) finish(tb *Table, size int) {
	if p.isPunct(";") {
		p.next()
	}
	if tb.Type == Hash || tb.Type == GroupMap {
		if size > 0 {
			tb.Size = size
		} else {
			tb.Size = 2*len(tb.Entries) - 1
			if tb.Size < 1 {
				tb.Size = 1
			}
		}
	}
	p.out.Tables = append(p.out.Tables, tb)
}

// groupMap = "group-map" ("in"|"out") "role" "=" role {opt} "{" ... "}"
//
//	| "group-map" "(" name ";" ("in"|"out") ";" ")" "{" ... "}"   (5.x)
func (p *parser) groupMap(start netfmt.Token) {
	tb := &Table{Pos: start.Pos, Type: GroupMap}
	size := -1
	group := ""
	if p.isPunct("(") {
		p.next()
		tb.Name = p.poolName()
		p.punct(";")
		tb.Out = p.direction()
		p.punct(";")
		p.punct(")")
	} else {
		tb.Out = p.direction()
		p.keyword("role")
		p.punct("=")
		tb.Role = p.role()
		p.tableOpts(tb, &size, &group)
	}
	tb.Entries = p.entries(true, group)
	p.finish(tb, size)
}

func (p *parser) direction() bool {
	t := p.next()
	if t.Kind == netfmt.TokWord {
		switch strings.ToLower(t.Text) {
		case "in":
			return false
		case "out":
			return true
		}
	}
	p.failAt(t, "in or out")
	return false
}

// poolName = "name" STR | "number" NUM
func (p *parser) poolName() string {
	t := p.next()
	if t.Kind == netfmt.TokWord {
		switch strings.ToLower(t.Text) {
		case "name":
			return p.word("name").Text
		case "number":
			return strconv.FormatUint(uint64(p.number("number")), 10)
		}
	}
	p.failAt(t, "name or number")
	return ""
}

// pool = "pool" [ role "/" type ] "(" name ";" {opt ";"} ")" "{" nodes "}" ";"
func (p *parser) pool(start netfmt.Token) {
	tb := &Table{Pos: start.Pos, Type: Tree, Role: RoleAll}
	if !p.isPunct("(") {
		tb.Role = p.role()
		p.punct("/")
		t := p.next()
		switch strings.ToLower(t.Text) {
		case "tree":
			tb.Type = Tree
		case "hash":
			tb.Type = Hash
		case "dstlist":
			tb.Type = DstList
		default:
			p.failAt(t, "tree, hash or dstlist")
		}
	}
	p.punct("(")
	tb.Name = p.poolName()
	p.punct(";")
	for !p.isPunct(")") {
		t := p.next()
		if t.Kind != netfmt.TokWord {
			p.failAt(t, "pool option or \")\"")
		}
		switch kw := strings.ToLower(t.Text); {
		case kw == "policy" && tb.Type == DstList:
			tb.Policy = p.policy()
		case kw == "size" && tb.Type == Hash:
			// The 5.x loader sizes the table from its entries; the
			// value is accepted and, as there, not used.
			p.number("size")
		case kw == "seed" && tb.Type == Hash:
			tb.Seed = p.number("seed")
		default:
			p.failAt(t, "pool option")
		}
		p.punct(";")
	}
	p.punct(")")
	if tb.Type == DstList {
		tb.Dests = p.dests()
	} else {
		tb.Entries = p.entries(false, "")
	}
	p.finish(tb, -1)
}

func (p *parser) policy() Policy {
	t := p.next()
	switch strings.ToLower(t.Text) {
	case "round-robin":
		return PolicyRoundRobin
	case "random":
		return PolicyRandom
	case "hash":
		return PolicyHash
	case "src-hash":
		return PolicySrcHash
	case "dst-hash":
		return PolicyDstHash
	case "weighted", "weighting":
		p.keyword("connection")
		return PolicyWeighted
	}
	p.failAt(t, "dstlist policy")
	return 0
}

func (p *parser) dests() []Dest {
	p.punct("{")
	var ds []Dest
	for {
		if p.isPunct(";") {
			p.next()
			continue
		}
		if p.isPunct("}") {
			p.next()
			return ds
		}
		t := p.word("destination address")
		d := Dest{Pos: t.Pos}
		if a, err := netip.ParseAddr(t.Text); err == nil {
			d.Addr = a
		} else if k := strings.IndexByte(t.Text, ':'); k > 0 {
			d.Iface = t.Text[:k]
			h, err := netfmt.ParseHost(t.Text[k+1:], 0)
			if err != nil {
				p.errorf(t.Pos, "%v", err)
			}
			d.Addr = hostAddr(h)
		} else {
			h, err := netfmt.ParseHost(t.Text, 0)
			if err != nil {
				p.errorf(t.Pos, "%v", err)
			}
			d.Addr = hostAddr(h)
		}
		ds = append(ds, d)
		if !p.isPunct("}") {
			p.punct(";")
		}
	}
}

func hostAddr(h netfmt.Host) netip.Addr {
	if h.Fam == 6 {
		return netip.AddrFrom16(h.A)
	}
	return netip.AddrFrom4(h.V4())
}

// entries = "{" { ["!"] entry ["," "group" "=" G] ";" } "}"
func (p *parser) entries(groupMap bool, defGroup string) []Entry {
	p.punct("{")
	var es []Entry
	for {
		if p.isPunct(";") {
			p.next()
			continue
		}
		if p.isPunct("}") {
			p.next()
			return es
		}
		not := false
		if p.isPunct("!") {
			p.next()
			not = true
		}
		t := p.word("address")
		text := t.Text
		switch {
		case strings.HasPrefix(strings.ToLower(text), "file://"):
			es = append(es, p.loadFile(t, text[len("file://"):])...)
		case t.Kind == netfmt.TokWord && strings.EqualFold(text, "whois"):
			p.keyword("file")
			f := p.word("file name")
			es = append(es, p.loadWhois(f)...)
		default:
			e := p.address(t)
			e.Not = not
			if groupMap {
				e.Group = defGroup
				if p.isPunct(",") {
					p.next()
					p.keyword("group")
					p.punct("=")
					// "group=" with nothing after it is how an entry
					// without a group prints; accept it back.
					if !p.isPunct(";") && !p.isPunct("}") {
						e.Group = p.word("group name").Text
					} else {
						e.Group = ""
					}
				}
			}
			es = append(es, e)
		}
		if !p.isPunct("}") {
			p.punct(";")
		}
	}
}

// address = HOST [ "/" ( BITS | A.B.C.D | HEX ) ]
func (p *parser) address(t netfmt.Token) Entry {
	h, err := netfmt.ParseHost(t.Text, 0)
	if err != nil {
		p.errorf(t.Pos, "%v", err)
	}
	e := Entry{Pos: t.Pos, Fam: h.Fam, Addr: h.A}
	if e.Fam == 0 {
		e.Fam = 4
	}
	if e.Fam == 6 {
		e.Bits = 128
	} else {
		e.Bits = 32
	}
	if p.isPunct("/") {
		p.next()
		m := p.word("mask")
		bits, err := maskBits(m.Text, e.Fam)
		if err != nil {
			p.errorf(m.Pos, "%v", err)
		}
		e.Bits = bits
	}
	applyMask(&e)
	return e
}

func maskBits(s string, fam int) (int, error) {
	if a, ok := netfmt.ParseDotted(s); ok && fam == 4 {
		if n := netfmt.Count4Bits(binary.BigEndian.Uint32(a[:])); n >= 0 {
			return n, nil
		}
		return 0, fmt.Errorf("mask %s is not contiguous", s)
	}
	if strings.HasPrefix(s, "0x") && fam == 4 {
		v, err := netfmt.ParseUint(s)
		if err == nil {
			if n := netfmt.Count4Bits(v); n >= 0 {
				return n, nil
			}
		}
		return 0, fmt.Errorf("bad mask %s", s)
	}
	n, err := strconv.Atoi(s)
	max := 32
	if fam == 6 {
		max = 128
	}
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("bad prefix length %q", s)
	}
	return n, nil
}

func applyMask(e *Entry) {
	if e.Fam == 6 {
		m := netfmt.MaskV6(e.Bits)
		for i := range e.Addr {
			e.Addr[i] &= m[i]
		}
		return
	}
	v := binary.BigEndian.Uint32(e.Addr[:4]) & netfmt.MaskV4(e.Bits)
	e.Addr = [16]byte{}
	binary.BigEndian.PutUint32(e.Addr[:4], v)
}

// loadFile reads "[!]addr[/bits]" words with '#' comments. A dotted
// address that stops early gets the class-style mask its octets imply.
func (p *parser) loadFile(t netfmt.Token, path string) []Entry {
	f, err := os.Open(path)
	if err != nil {
		p.errorf(t.Pos, "%v", err)
	}
	defer f.Close()
	var es []Entry
	sc := bufio.NewScanner(f)
	ln := 0
	for sc.Scan() {
		ln++
		line := sc.Text()
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		for _, w := range strings.FieldsFunc(line, func(r rune) bool {
			return r == ' ' || r == '\t' || r == ',' || r == ';'
		}) {
			e, err := fileEntry(w)
			if err != nil {
				p.errs = append(p.errs, &netfmt.PosError{File: path, Pos: netfmt.Pos{Line: ln, Col: 1}, Msg: err.Error()})
				if len(p.errs) >= maxErrors {
					panic(bailout{})
				}
				continue
			}
			es = append(es, e)
		}
	}
	return es
}

func fileEntry(w string) (Entry, error) {
	var e Entry
	if strings.HasPrefix(w, "!") {
		e.Not = true
		w = w[1:]
	}
	host, mask, hasMask := strings.Cut(w, "/")
	if !strings.Contains(host, ":") && !hasMask {
		if parts := strings.Split(host, "."); len(parts) < 4 && netfmt.IsNumber(parts[0]) {
			for len(parts) < 4 {
				parts = append(parts, "0")
			}
			mask = strconv.Itoa(8*strings.Count(host, ".") + 8)
			hasMask = true
			host = strings.Join(parts, ".")
		}
	}
	h, err := netfmt.ParseHost(host, 0)
	if err != nil {
		return e, err
	}
	e.Fam, e.Addr = h.Fam, h.A
	if e.Fam == 0 {
		e.Fam = 4
	}
	e.Bits = 32
	if e.Fam == 6 {
		e.Bits = 128
	}
	if hasMask {
		b, err := maskBits(mask, e.Fam)
		if err != nil {
			return e, err
		}
		e.Bits = b
	}
	applyMask(&e)
	return e, nil
}

// loadWhois reads ARIN whois output: a line "... (NET-...) A - B" adds
// A/len when the range A-B is exactly one prefix; other lines are skipped.
func (p *parser) loadWhois(t netfmt.Token) []Entry {
	b, err := os.ReadFile(t.Text)
	if err != nil {
		p.errorf(t.Pos, "%v", err)
	}
	var es []Entry
	for _, line := range strings.Split(string(b), "\n") {
		if e, ok := whoisLine(line); ok {
			es = append(es, e)
		}
	}
	return es
}

func whoisLine(line string) (Entry, bool) {
	i := strings.IndexByte(line, '(')
	if i < 0 {
		return Entry{}, false
	}
	j := strings.IndexByte(line[i:], ')')
	if j < 0 {
		return Entry{}, false
	}
	f := strings.Fields(line[i+j+1:])
	if len(f) < 3 || f[1] != "-" {
		return Entry{}, false
	}
	a, ok1 := netfmt.ParseDotted(f[0])
	z, ok2 := netfmt.ParseDotted(f[2])
	if !ok1 || !ok2 {
		return Entry{}, false
	}
	lo, hi := binary.BigEndian.Uint32(a[:]), binary.BigEndian.Uint32(z[:])
	span := hi - lo
	if hi < lo || span&(span+1) != 0 || lo&span != 0 {
		return Entry{}, false
	}
	bits := 32
	for s := span; s != 0; s >>= 1 {
		bits--
	}
	e := Entry{Fam: 4, Bits: bits}
	copy(e.Addr[:4], a[:])
	return e, true
}

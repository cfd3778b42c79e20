package ippool

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"sluice/internal/rules/lex"
	"sluice/internal/rules/netfmt"
)

type parser struct {
	lex.Parser
	out *File
}

// Parse reads an ippool.conf text. name is used in error positions;
// file:// and whois sources are opened relative to the current directory.
// All errors found (up to ten) are returned as a netfmt.ErrorList.
func Parse(name, src string) (*File, error) {
	p := &parser{Parser: lex.NewSource(name, src, false), out: &File{}}
	p.Run(p.statement)
	return p.out, p.Err()
}

func (p *parser) statement() {
	defer p.Guard(p.resync)
	t := p.Next()
	if t.Kind != netfmt.TokWord {
		p.FailAt(t, "table, group-map or pool")
	}
	switch strings.ToLower(t.Text) {
	case "table":
		p.table(t)
	case "group-map":
		p.groupMap(t)
	case "pool":
		p.pool(t)
	default:
		p.FailAt(t, "table, group-map or pool")
	}
}

// resync skips to the start of the next definition.
func (p *parser) resync() {
	for {
		t := p.Peek()
		if t.Kind == netfmt.TokEOF {
			return
		}
		if t.Kind == netfmt.TokWord {
			switch strings.ToLower(t.Text) {
			case "table", "group-map", "pool":
				return
			}
		}
		p.I++
	}
}

func (p *parser) number(want string) uint32 {
	t := p.Next()
	v, err := netfmt.ParseUint(t.Text)
	if t.Kind != netfmt.TokWord || err != nil {
		p.FailAt(t, want)
	}
	return v
}

func (p *parser) role() Role {
	t := p.Next()
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
	p.FailAt(t, "role (ipf, nat, auth, count or all)")
	return 0
}

// table = "table" "role" "=" role "type" "=" ("tree"|"hash") {opt} "{" entries "}" ";"
func (p *parser) table(start netfmt.Token) {
	tb := &Table{Pos: start.Pos}
	p.Keyword("role")
	p.Punct("=")
	tb.Role = p.role()
	p.Keyword("type")
	p.Punct("=")
	t := p.Next()
	switch {
	case t.Kind == netfmt.TokWord && strings.EqualFold(t.Text, "tree"):
		tb.Type = Tree
	case t.Kind == netfmt.TokWord && strings.EqualFold(t.Text, "hash"):
		tb.Type = Hash
	default:
		p.FailAt(t, "tree or hash")
	}
	size := -1
	p.tableOpts(tb, &size, nil)
	tb.Entries = p.entries(false, "")
	p.finish(tb, size)
}

// tableOpts reads "number = N" or "name = S", then for group-maps
// "group = G", then for hash tables and group-maps "size = N" and
// "seed = N": each once, in that order, as IPFilter's grammar
// (ippool_y.y: `number hashopts`, `number ipfgroup hashopts`) takes them;
// a tree takes no size or seed.
func (p *parser) tableOpts(tb *Table, size *int, group *string) {
	last := 0
	for {
		t := p.Peek()
		if t.Kind != netfmt.TokWord {
			return
		}
		kw := strings.ToLower(t.Text)
		rank, ok := tableOptRank[kw]
		if ok && (rank <= last || rank > 2 && tb.Type == Tree) {
			p.Errorf(t.Pos, "%q out of place: IPFilter takes a table's number or name, group, size and seed once each, in that order (a tree no size or seed)", t.Text)
		}
		last = rank
		switch kw {
		case "number", "name":
			p.Next()
			p.Punct("=")
			// "number=" with nothing after it is how an unnamed table
			// prints; accept it back.
			if p.IsPunct("{") || p.PeekAt(1).Kind == netfmt.TokPunct && p.PeekAt(1).Text == "=" {
				tb.Name = ""
				continue
			}
			tb.Name = p.Word("table name or number").Text
		case "size":
			p.Next()
			p.Punct("=")
			*size = int(p.number("size"))
		case "seed":
			p.Next()
			p.Punct("=")
			tb.Seed = p.number("seed")
		case "group":
			if group == nil {
				return
			}
			p.Next()
			p.Punct("=")
			*group = p.Word("group name").Text
		default:
			return
		}
	}
}

var tableOptRank = map[string]int{"number": 1, "name": 1, "group": 2, "size": 3, "seed": 4}

func (p *parser) finish(tb *Table, size int) {
	p.Punct(";")
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
	if p.IsPunct("(") {
		p.Next()
		tb.Name = p.poolName()
		p.Punct(";")
		tb.Out = p.InOut()
		p.Punct(";")
		p.Punct(")")
	} else {
		tb.Out = p.InOut()
		p.Keyword("role")
		p.Punct("=")
		tb.Role = p.role()
		p.tableOpts(tb, &size, &group)
	}
	tb.Entries = p.entries(true, group)
	p.finish(tb, size)
}

// poolName = "name" STR | "number" NUM
func (p *parser) poolName() string {
	t := p.Next()
	if t.Kind == netfmt.TokWord {
		switch strings.ToLower(t.Text) {
		case "name":
			return p.Word("name").Text
		case "number":
			return strconv.FormatUint(uint64(p.number("number")), 10)
		}
	}
	p.FailAt(t, "name or number")
	return ""
}

// pool = "pool" [ role "/" type ] "(" name ";" {opt ";"} ")" "{" nodes "}" ";"
func (p *parser) pool(start netfmt.Token) {
	tb := &Table{Pos: start.Pos, Type: Tree, Role: RoleAll}
	if !p.IsPunct("(") {
		tb.Role = p.role()
		p.Punct("/")
		t := p.Next()
		switch strings.ToLower(t.Text) {
		case "tree":
			tb.Type = Tree
		case "hash":
			tb.Type = Hash
		case "dstlist":
			tb.Type = DstList
		default:
			p.FailAt(t, "tree, hash or dstlist")
		}
	}
	p.Punct("(")
	tb.Name = p.poolName()
	p.Punct(";")
	for !p.IsPunct(")") {
		t := p.Next()
		if t.Kind != netfmt.TokWord {
			p.FailAt(t, "pool option or \")\"")
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
			p.FailAt(t, "pool option")
		}
		p.Punct(";")
	}
	p.Punct(")")
	if tb.Type == DstList {
		tb.Dests = p.dests()
	} else {
		tb.Entries = p.entries(false, "")
	}
	p.finish(tb, -1)
}

func (p *parser) policy() Policy {
	t := p.Next()
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
		p.Keyword("connection")
		return PolicyWeighted
	}
	p.FailAt(t, "dstlist policy")
	return 0
}

func (p *parser) dests() []Dest {
	var ds []Dest
	p.block(func() {
		t := p.Word("destination address")
		d := Dest{Pos: t.Pos}
		if a, err := netip.ParseAddr(t.Text); err == nil {
			d.Addr = a
		} else {
			host := t.Text
			if k := strings.IndexByte(host, ':'); k > 0 {
				d.Iface, host = host[:k], host[k+1:]
			}
			h, err := netfmt.ParseHost(host, 0)
			if err != nil {
				p.Errorf(t.Pos, "%v", err)
			}
			d.Addr = hostAddr(h)
		}
		ds = append(ds, d)
	})
	return ds
}

// block reads `{ item ; item ; ... }`, each item ended by ";", or `{ ; }`
// for none: as in IPFilter's grammar, `{ }`, a missing ";" and empty
// items are syntax errors.
func (p *parser) block(item func()) {
	p.Punct("{")
	if p.IsPunct(";") {
		p.Next()
		p.Punct("}")
		return
	}
	for {
		item()
		p.Punct(";")
		if p.IsPunct("}") {
			p.Next()
			return
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
	var es []Entry
	p.block(func() {
		not := false
		if p.IsPunct("!") {
			p.Next()
			not = true
		}
		t := p.Word("address")
		text := t.Text
		switch {
		case strings.HasPrefix(strings.ToLower(text), "file://"):
			es = append(es, p.loadFile(t, text[len("file://"):])...)
		case t.Kind == netfmt.TokWord && strings.EqualFold(text, "whois"):
			p.Keyword("file")
			f := p.Word("file name")
			es = append(es, p.loadWhois(f)...)
		default:
			e := p.address(t)
			e.Not = not
			if groupMap {
				e.Group = defGroup
				if p.IsPunct(",") {
					p.Next()
					p.Keyword("group")
					p.Punct("=")
					// "group=" with nothing after it is how an entry
					// without a group prints; accept it back.
					if !p.IsPunct(";") && !p.IsPunct("}") {
						e.Group = p.Word("group name").Text
					} else {
						e.Group = ""
					}
				} else if defGroup == "" {
					// IPFilter's grammar wants a group for each
					// entry of a group-map without one of its own
					p.FailAt(p.Peek(), `", group = G" (the group-map names no group)`)
				}
			}
			es = append(es, e)
		}
	})
	return es
}

// address = HOST [ "/" ( BITS | A.B.C.D | HEX ) ]
func (p *parser) address(t netfmt.Token) Entry {
	h, err := netfmt.ParseHost(t.Text, 0)
	if err != nil {
		p.Errorf(t.Pos, "%v", err)
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
	if p.IsPunct("/") {
		p.Next()
		m := p.Word("mask")
		bits, err := maskBits(m.Text, e.Fam)
		if err != nil {
			p.Errorf(m.Pos, "%v", err)
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
		p.Errorf(t.Pos, "%v", err)
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
				p.Add(&netfmt.PosError{File: path, Pos: netfmt.Pos{Line: ln, Col: 1}, Msg: err.Error()})
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
		p.Errorf(t.Pos, "%v", err)
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

package ipf

import "strconv"

// fastRule parses the statement at the parser's position when it is a
// blocklist's rule, `block|pass in|out [quick] from OBJ to OBJ` with
// OBJ `any` or an IPv4 address with an optional /BITS, alone on its
// line, and reports whether it did. It reads the text directly instead
// of through the lexer's tokens (a million-rule blocklist spent ~2.5 µs
// a rule in the general parser) and makes the Rule the general parser
// makes: it calls the same address, mask and finish functions. Anything
// else — other words, case, comments, variables, continuations, a CR,
// IPv6, a port, a list — returns false with nothing consumed, and the
// general parser reads the statement. TestFastRuleSame compares the two
// on random rule text.
func (p *parser) fastRule() bool {
	if p.slow || len(p.lx.stack) != 1 || len(p.buf) > 1 || p.opts.Inet6 || p.opts.Inet4 {
		return false
	}
	f := p.lx.stack[0]
	s := f.src
	i, line, col := f.off, p.lx.line, p.lx.col
	var first token
	if len(p.buf) == 1 {
		// the statement's first word was read already (the previous
		// rule's end check peeks it): take it only when it is that
		// text, right before the lexer's position
		first = p.buf[0]
		n := len(first.text)
		if first.kind != tWord || first.pos.Line != line || first.pos.Col+n != col || i < n || s[i-n:i] != first.text {
			return false
		}
	} else {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			if s[i] == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
			i++
		}
		j := i
		for j < len(s) && s[j] >= 'a' && s[j] <= 'z' {
			j++
		}
		first = token{kind: tWord, text: s[i:j], pos: Pos{File: p.lx.file, Line: line, Col: col}, line: line}
		col += j - i
		i = j
	}
	if p.stopAt.Line > 0 && line >= p.stopAt.Line {
		return false
	}
	var act Action
	switch first.text {
	case "block":
		act = ActionBlock
	case "pass":
		act = ActionPass
	default:
		return false
	}
	// the rest of the line, word by word
	start := i
	word := func() string {
		k := i
		for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
			k++
		}
		if k == i {
			return "" // words are separated by blanks
		}
		j := k
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		i = j
		return s[k:j]
	}
	var dir Direction
	switch word() {
	case "in":
		dir = DirIn
	case "out":
		dir = DirOut
	default:
		return false
	}
	w, quick := word(), false
	if w == "quick" {
		w, quick = word(), true
	}
	if w != "from" {
		return false
	}
	// obj reads `any` or an address and its optional /BITS: what
	// parseAddr returns for them when the rule has no `on`
	obj := func() (Addr, bool) {
		w := word()
		if w == "any" {
			return Addr{Kind: AddrAny}, true
		}
		ip, ok := parseIPv4(w)
		if !ok {
			return Addr{}, false
		}
		mask := prefixMask(32, 32)
		if i < len(s) && s[i] == '/' {
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			v, err := strconv.ParseUint(s[i+1:j], 10, 8)
			if err != nil || v > 32 {
				return Addr{}, false
			}
			mask, i = prefixMask(32, int(v)), j
		}
		return Addr{Kind: AddrHost, IP: andMask(ip, mask), Mask: mask}, true
	}
	// a word ends at a blank or the line's end: anything else (a
	// delimiter, a letter after the digits) is the general parser's
	ends := func() bool { return i == len(s) || s[i] == ' ' || s[i] == '\t' || s[i] == '\n' }
	from, ok := obj()
	if !ok || !ends() || word() != "to" {
		return false
	}
	to, ok := obj()
	if !ok || !ends() {
		return false
	}
	lastCol := col + (i - start)
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i < len(s) && s[i] != '\n' {
		return false
	}
	r := p.newRule()
	r.Pos = first.pos
	r.Action, r.Dir, r.Quick = act, dir, quick
	r.HasFromTo, r.From.Addr, r.To.Addr = true, from, to
	b := builder{r: r}
	if p.finish(&b, r, first) != nil {
		// not for these rules (IPv4 addresses and any); the general
		// parser reports it, with a Rule of its own
		return false
	}
	p.rules = append(p.rules, r)
	p.fast++
	// the lexer resumes at the line's end, as after the general
	// parser's last token of the rule
	p.lx.line, p.lx.col = line, col+(i-start)
	f.off = i
	p.buf = p.buf[:0]
	p.last = token{kind: tWord, pos: Pos{File: p.lx.file, Line: line, Col: lastCol}, line: line}
	return true
}

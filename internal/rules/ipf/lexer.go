package ipf

import (
	"fmt"
	"strings"
)

// tokKind classifies a token.
type tokKind uint8

const (
	tEOF    tokKind = iota
	tWord           // bare word: keywords, names, numbers, addresses ("1.2.3.4", "le0:10.0.0.1", "1:1023")
	tString         // quoted string, without its quotes
	tPunct          // one of ; , { } ( ) = ! < > / @ and the pairs != <= >= <> ><
	tError          // lexical error; text is the message
)

type token struct {
	kind tokKind
	text string
	pos  Pos
	// line is the physical line the token starts on (for a token from a
	// $variable, the line of the `$`); the parser resynchronises on it.
	line int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tString:
		return fmt.Sprintf("%q", t.text)
	case tError:
		return "invalid input"
	}
	return fmt.Sprintf("%q", t.text)
}

// frame is one input source: the file, or the text of a $variable being
// expanded (which reports the position of its `$`).
type frame struct {
	src  string
	off  int
	at   Pos // for variable frames: the position of the `$`
	name string
}

// lexer turns ipf.conf text into tokens on demand. Variables are expanded
// textually as they are met, so a definition applies to every later use.
type lexer struct {
	file  string
	stack []*frame // stack[0] is the file
	line  int      // position in the file frame
	col   int
	vars  map[string]string
	// expansions counts variable expansions, to bound the work.
	expansions int
	// words holds one copy of each word that starts with a letter
	// (keywords, interface, group and table names), bounded by
	// maxInterned: a million-rule file repeats a dozen words a million
	// times, and each token's own copy was an allocation.
	words map[string]string
}

// maxInterned bounds the lexer's word table (an attacker's file of unique
// names costs a copy per word, as without the table).
const maxInterned = 4096

// word returns s (a piece of the source) as a string of its own,
// shared with the earlier tokens of the same text when it is a name.
func (l *lexer) word(s string) string {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return strings.Clone(s)
	}
	if w, ok := l.words[s]; ok {
		return w
	}
	w := strings.Clone(s)
	if len(l.words) < maxInterned {
		if l.words == nil {
			l.words = map[string]string{}
		}
		l.words[w] = w
	}
	return w
}

// newLexerAt is a lexer of src, a part of file that starts at the
// beginning of line line.
func newLexerAt(file, src string, line int, vars map[string]string) *lexer {
	l := &lexer{file: file, line: line, col: 1, vars: map[string]string{}}
	for k, v := range vars {
		l.vars[k] = v
	}
	l.stack = []*frame{{src: src}}
	return l
}

// pos returns the position of the next character.
func (l *lexer) pos() Pos {
	if len(l.stack) > 1 {
		return l.stack[1].at
	}
	return Pos{File: l.file, Line: l.line, Col: l.col}
}

// peekc returns the next character without consuming it, -1 at the end.
// Finished variable frames are popped on the way.
func (l *lexer) peekc() int {
	for {
		f := l.stack[len(l.stack)-1]
		if f.off < len(f.src) {
			return int(f.src[f.off])
		}
		if len(l.stack) == 1 {
			return -1
		}
		l.stack = l.stack[:len(l.stack)-1]
	}
}

// peekc2 returns the character after the next one in the same frame, -1
// if there is none.
func (l *lexer) peekc2() int {
	f := l.stack[len(l.stack)-1]
	if f.off+1 < len(f.src) {
		return int(f.src[f.off+1])
	}
	return -1
}

func (l *lexer) advance() {
	f := l.stack[len(l.stack)-1]
	if f.off >= len(f.src) {
		return
	}
	c := f.src[f.off]
	f.off++
	if len(l.stack) == 1 {
		if c == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
	}
}

// isDelim reports whether c ends a word.
func isDelim(c int) bool {
	switch c {
	case -1, ' ', '\t', '\r', '\n', '\f', '\v', '#', ';', ',', '{', '}', '(', ')', '=', '!', '<', '>', '"', '\'', '/', '@', '$':
		return true
	}
	return isControl(c)
}

// isControl reports a control character that is not a blank: never part
// of a rule (a NUL would otherwise hide inside a word).
func isControl(c int) bool {
	return c >= 0 && c < ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\f' && c != '\v' || c == 0x7f
}

// skipSpace skips blanks, comments and backslash-newline continuations.
func (l *lexer) skipSpace() {
	for {
		c := l.peekc()
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v':
			l.advance()
		case c == '#':
			for c = l.peekc(); c != -1 && c != '\n'; c = l.peekc() {
				l.advance()
			}
		case c == '\\' && (l.peekc2() == '\n' || (l.peekc2() == '\r')):
			l.continuation()
		default:
			return
		}
	}
}

// continuation consumes a backslash and the newline (CRLF too) after it.
func (l *lexer) continuation() {
	l.advance()
	if l.peekc() == '\r' {
		l.advance()
	}
	if l.peekc() == '\n' {
		l.advance()
	}
}

// next returns the next token.
func (l *lexer) next() token {
	for {
		l.skipSpace()
		c := l.peekc()
		if c != '$' {
			break
		}
		if t, ok := l.expand(); !ok {
			return t
		}
	}
	p := l.pos()
	t := token{pos: p, line: p.Line}
	c := l.peekc()
	switch c {
	case -1:
		t.kind = tEOF
		return t
	case '"', '\'':
		return l.lexString(t, byte(c))
	case ';', ',', '{', '}', '(', ')', '/', '@':
		l.advance()
		t.kind, t.text = tPunct, string(rune(c))
		return t
	case '=', '!', '<', '>':
		l.advance()
		t.kind, t.text = tPunct, string(rune(c))
		n := l.peekc()
		switch {
		case c == '!' && n == '=', c == '<' && (n == '=' || n == '>'), c == '>' && (n == '=' || n == '<'):
			l.advance()
			t.text += string(rune(n))
		}
		return t
	}
	if isControl(c) {
		l.advance()
		t.kind, t.text = tError, fmt.Sprintf("unexpected control character %#02x", c)
		return t
	}
	if len(l.stack) == 1 {
		// the common word, in the file and plain (no escape, no
		// variable spliced in): one copy of its bytes, not a builder
		// grown a byte at a time (a tenth of a blocklist's parse)
		f := l.stack[0]
		end := f.off
		for end < len(f.src) && f.src[end] != '\\' && !isDelim(int(f.src[end])) {
			end++
		}
		if end == len(f.src) || (f.src[end] != '\\' && f.src[end] != '$') {
			t.kind, t.text = tWord, l.word(f.src[f.off:end])
			l.col += end - f.off
			f.off = end
			return t
		}
	}
	var b strings.Builder
	for {
		c = l.peekc()
		if c == '\\' {
			n := l.peekc2()
			if n == '\n' || n == '\r' {
				l.continuation()
				continue
			}
			l.advance()
			if n == -1 {
				break
			}
			b.WriteByte(byte(n))
			l.advance()
			continue
		}
		if c == '$' {
			// A variable inside a word is spliced into it.
			if et, ok := l.expand(); !ok {
				return et
			}
			continue
		}
		if isDelim(c) {
			break
		}
		b.WriteByte(byte(c))
		l.advance()
	}
	t.kind, t.text = tWord, b.String()
	return t
}

func (l *lexer) lexString(t token, q byte) token {
	l.advance()
	var b strings.Builder
	for {
		c := l.peekc()
		if c == -1 || (c == '\n' && len(l.stack) == 1) {
			t.kind, t.text = tError, "unterminated string"
			return t
		}
		if c == '\\' && (l.peekc2() == '\n' || l.peekc2() == '\r') {
			l.continuation()
			continue
		}
		if c == '\\' && (l.peekc2() == int(q) || l.peekc2() == '\\') {
			l.advance()
			b.WriteByte(byte(l.peekc()))
			l.advance()
			continue
		}
		l.advance()
		if byte(c) == q {
			break
		}
		b.WriteByte(byte(c))
	}
	t.kind, t.text = tString, b.String()
	return t
}

// expand reads `$name` or `${name}` and pushes the variable's text. It
// returns ok=false and an error token when the variable is malformed or
// unknown.
func (l *lexer) expand() (token, bool) {
	p := l.pos()
	errTok := func(msg string) (token, bool) {
		return token{kind: tError, text: msg, pos: p, line: p.Line}, false
	}
	l.advance() // $
	// The name is read from the current frame only: a name never runs
	// on past the end of a variable's text.
	var name strings.Builder
	if l.peekLocal() == '{' {
		l.advance()
		for c := l.peekLocal(); c != '}'; c = l.peekLocal() {
			if c == -1 || c == '\n' {
				return errTok("unterminated ${")
			}
			name.WriteByte(byte(c))
			l.advance()
		}
		l.advance()
	} else {
		for c := l.peekLocal(); isVarChar(c); c = l.peekLocal() {
			name.WriteByte(byte(c))
			l.advance()
		}
	}
	n := name.String()
	if n == "" {
		return errTok("empty variable name")
	}
	v, ok := l.vars[n]
	if !ok {
		return errTok("unknown variable $" + n)
	}
	// Frames still on the stack are expansions in progress (a finished
	// one is popped only when reading goes past it), so meeting n among
	// them means n refers to itself.
	for _, f := range l.stack[1:] {
		if f.name == n {
			return errTok("variable $" + n + " refers to itself")
		}
	}
	l.expansions++
	if l.expansions > maxExpansions || len(l.stack) > 64 {
		return errTok("too many variable expansions")
	}
	at := p
	if len(l.stack) > 1 {
		at = l.stack[1].at
	}
	l.stack = append(l.stack, &frame{src: v, at: at, name: n})
	return token{}, true
}

// maxExpansions bounds the work of nested variables (a="$b$b", b="$c$c", ...).
const maxExpansions = 100000

// peekLocal returns the next character of the current frame, -1 at its end.
func (l *lexer) peekLocal() int {
	f := l.stack[len(l.stack)-1]
	if f.off < len(f.src) {
		return int(f.src[f.off])
	}
	return -1
}

func isVarChar(c int) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

package ipqos

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tNewline
	tLBrace
	tRBrace
	tWord
	tBad // a character that cannot start any token
)

type token struct {
	kind tokKind
	text string
	pos  Pos
}

// String describes the token for "found X" in error messages.
func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tNewline:
		return "end of line"
	case tLBrace:
		return `"{"`
	case tRBrace:
		return `"}"`
	case tBad:
		return fmt.Sprintf("invalid character %s", strconv.QuoteRune([]rune(t.text)[0]))
	}
	return strconv.Quote(t.text)
}

// lexer splits a file into words, braces and line ends; `#` comments are
// dropped. It works on bytes and never fails: odd characters become tBad
// tokens so the parser can report them with a position.
type lexer struct {
	src       string
	off       int
	line, col int
}

func newLexer(src string) *lexer { return &lexer{src: src, line: 1, col: 1} }

func (l *lexer) advance(n int) {
	for i := 0; i < n; i++ {
		if l.src[l.off] == '\n' {
			l.line++
			l.col = 1
		} else if l.src[l.off]&0xC0 != 0x80 { // count runes, not UTF-8 continuation bytes
			l.col++
		}
		l.off++
	}
}

func isWordByte(c byte) bool {
	return c > ' ' && c < 0x7f && c != '{' && c != '}' && c != '#'
}

func (l *lexer) next() token {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			l.advance(1)
			continue
		case c == '#':
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.advance(1)
			}
			continue
		}
		break
	}
	pos := Pos{l.line, l.col}
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: pos}
	}
	c := l.src[l.off]
	switch {
	case c == '\n':
		l.advance(1)
		return token{kind: tNewline, pos: pos}
	case c == '{':
		l.advance(1)
		return token{kind: tLBrace, text: "{", pos: pos}
	case c == '}':
		l.advance(1)
		return token{kind: tRBrace, text: "}", pos: pos}
	case isWordByte(c):
		start := l.off
		for l.off < len(l.src) && isWordByte(l.src[l.off]) {
			l.advance(1)
		}
		return token{kind: tWord, text: l.src[start:l.off], pos: pos}
	}
	_, size := utf8.DecodeRuneInString(l.src[l.off:])
	text := l.src[l.off : l.off+size]
	l.advance(size)
	return token{kind: tBad, text: text, pos: pos}
}

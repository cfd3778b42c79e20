package netfmt

import (
	"fmt"
	"strings"
)

// TokKind classifies a token.
type TokKind int

// Token kinds.
const (
	TokEOF TokKind = iota
	TokNewline
	TokWord   // identifiers, numbers, addresses, port ranges: parsed further by the grammar
	TokString // quoted string, quotes removed
	TokPunct  // { } ( ) ; , / = ! < > <= >= != <> >< ->
	TokError
)

// Pos is a 1-based position in a source file.
type Pos struct {
	Line, Col int
}

// Token is one lexical item.
type Token struct {
	Kind TokKind
	Text string
	Pos  Pos
}

// String describes the token for error messages.
func (t Token) String() string {
	switch t.Kind {
	case TokEOF:
		return "end of file"
	case TokNewline:
		return "end of line"
	case TokString:
		return fmt.Sprintf("%q", t.Text)
	case TokError:
		return t.Text
	}
	return fmt.Sprintf("%q", t.Text)
}

// Lex splits src into tokens. With newlines set, line ends are returned as
// TokNewline tokens (ipnat.conf rules end at a line end); otherwise they
// are blanks. A backslash before a newline joins the lines; '#' starts a
// comment that runs to the end of the line. The last token is TokEOF.
func Lex(src string, newlines bool) []Token {
	var toks []Token
	l := NewLexer(src, newlines)
	for {
		t := l.Next()
		toks = append(toks, t)
		if t.Kind == TokEOF {
			return toks
		}
	}
}

// Lexer hands out the tokens of a source one at a time, so that a parser
// that gives up early (after its error cap) never tokenizes, or holds,
// the rest of a huge input.
type Lexer struct {
	src       string
	newlines  bool
	i         int
	line, col int
}

// NewLexer returns a Lexer over src (see Lex for newlines).
func NewLexer(src string, newlines bool) *Lexer {
	return &Lexer{src: src, newlines: newlines, line: 1, col: 1}
}

func (l *Lexer) adv(n int) {
	for k := 0; k < n; k++ {
		if l.src[l.i] == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
		l.i++
	}
}

// Next returns the next token; at the end of the source, TokEOF (again
// and again).
func (l *Lexer) Next() Token {
	src := l.src
	for l.i < len(src) {
		i := l.i
		c := src[i]
		p := Pos{l.line, l.col}
		switch {
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			l.adv(2)
		case c == '\\' && i+2 < len(src) && src[i+1] == '\r' && src[i+2] == '\n':
			l.adv(3)
		case c == '\n':
			l.adv(1)
			if l.newlines {
				return Token{TokNewline, "\n", p}
			}
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			l.adv(1)
		case c == '#':
			for l.i < len(src) && src[l.i] != '\n' {
				l.adv(1)
			}
		case c == '"' || c == '\'':
			j := strings.IndexByte(src[i+1:], c)
			nl := strings.IndexByte(src[i+1:], '\n')
			if j < 0 || (nl >= 0 && nl < j) {
				l.adv(len(src) - i)
				return Token{TokError, "unterminated string", p}
			}
			l.adv(j + 2)
			return Token{TokString, src[i+1 : i+1+j], p}
		case strings.HasPrefix(src[i:], "file://"):
			// A file URL is one word even though it contains '/'.
			j := i
			for j < len(src) && strings.IndexByte(" \t\r\n;,}\"'", src[j]) < 0 {
				j++
			}
			l.adv(j - i)
			return Token{TokWord, src[i:j], p}
		case c == '-' && i+1 < len(src) && src[i+1] == '>':
			l.adv(2)
			return Token{TokPunct, "->", p}
		case strings.IndexByte("<>!", c) >= 0 && i+1 < len(src) && isTwoCharOp(src[i:i+2]):
			l.adv(2)
			return Token{TokPunct, src[i : i+2], p}
		case strings.IndexByte("{}();,/=!<>", c) >= 0:
			l.adv(1)
			return Token{TokPunct, string(c), p}
		case isWordChar(c):
			j := i
			for j < len(src) && isWordChar(src[j]) {
				if src[j] == '-' && j+1 < len(src) && src[j+1] == '>' && j > i {
					break
				}
				j++
			}
			l.adv(j - i)
			return Token{TokWord, src[i:j], p}
		default:
			l.adv(1)
			return Token{TokError, fmt.Sprintf("unexpected character %q", c), p}
		}
	}
	return Token{TokEOF, "", Pos{l.line, l.col}}
}

func isTwoCharOp(s string) bool {
	switch s {
	case "<=", ">=", "!=", "<>", "><":
		return true
	}
	return false
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-' || c == '*' || c == '+' || c == '$' || c >= 0x80
}

// ErrorList collects positioned parse errors.
type ErrorList []error

// Error joins the messages one per line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// PosError is an error at a source position.
type PosError struct {
	File string
	Pos  Pos
	Msg  string
}

// Error formats the error as file:line:col: msg.
func (e *PosError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
}

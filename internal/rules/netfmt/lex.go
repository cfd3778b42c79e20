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
// comment that runs to the end of the line.
func Lex(src string, newlines bool) []Token {
	var toks []Token
	line, col := 1, 1
	i := 0
	adv := func(n int) {
		for k := 0; k < n; k++ {
			if src[i] == '\n' {
				line++
				col = 1
			} else {
				col++
			}
			i++
		}
	}
	for i < len(src) {
		c := src[i]
		p := Pos{line, col}
		switch {
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			adv(2)
		case c == '\\' && i+2 < len(src) && src[i+1] == '\r' && src[i+2] == '\n':
			adv(3)
		case c == '\n':
			if newlines {
				toks = append(toks, Token{TokNewline, "\n", p})
			}
			adv(1)
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			adv(1)
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				adv(1)
			}
		case c == '"' || c == '\'':
			j := strings.IndexByte(src[i+1:], c)
			nl := strings.IndexByte(src[i+1:], '\n')
			if j < 0 || (nl >= 0 && nl < j) {
				toks = append(toks, Token{TokError, "unterminated string", p})
				adv(len(src) - i)
				continue
			}
			toks = append(toks, Token{TokString, src[i+1 : i+1+j], p})
			adv(j + 2)
		case strings.HasPrefix(src[i:], "file://"):
			// A file URL is one word even though it contains '/'.
			j := i
			for j < len(src) && strings.IndexByte(" \t\r\n;,}\"'", src[j]) < 0 {
				j++
			}
			toks = append(toks, Token{TokWord, src[i:j], p})
			adv(j - i)
		case c == '-' && i+1 < len(src) && src[i+1] == '>':
			toks = append(toks, Token{TokPunct, "->", p})
			adv(2)
		case strings.IndexByte("<>!", c) >= 0 && i+1 < len(src) && isTwoCharOp(src[i:i+2]):
			toks = append(toks, Token{TokPunct, src[i : i+2], p})
			adv(2)
		case strings.IndexByte("{}();,/=!<>", c) >= 0:
			toks = append(toks, Token{TokPunct, string(c), p})
			adv(1)
		case isWordChar(c):
			j := i
			for j < len(src) && isWordChar(src[j]) {
				if src[j] == '-' && j+1 < len(src) && src[j+1] == '>' && j > i {
					break
				}
				j++
			}
			toks = append(toks, Token{TokWord, src[i:j], p})
			adv(j - i)
		default:
			toks = append(toks, Token{TokError, fmt.Sprintf("unexpected character %q", c), p})
			adv(1)
		}
	}
	toks = append(toks, Token{TokEOF, "", Pos{line, col}})
	return toks
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

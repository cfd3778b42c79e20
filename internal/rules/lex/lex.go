// Package lex is the token cursor shared by the ipnat and ippool parsers:
// both read netfmt.Lex tokens, report `file:line:col: expected X, found Y`
// errors, drop the rest of a statement after an error and stop at
// MaxErrors. Keeping it in one place keeps their error texts identical.
//
// ipf and ipqos do not use it: their lexers are context-dependent (ipf) or
// stream their own token kinds (ipqos).
package lex

import (
	"fmt"
	"strings"

	"sluice/internal/rules/netfmt"
)

// MaxErrors is how many errors a parse collects before it gives up.
const MaxErrors = 10

// bailout unwinds a statement after its first error; Guard recovers it.
type bailout struct{}

// Parser walks a token slice that ends with a TokEOF token. Grammars embed
// it and add their own productions.
type Parser struct {
	File string
	// Toks holds the tokens read and not yet consumed, from Toks[I] on;
	// when they come from a lexer (NewSource) it is refilled as the
	// parser looks ahead and trimmed as it consumes, so a parser that
	// stops early never tokenizes the rest of its input.
	Toks []netfmt.Token
	I    int
	Errs netfmt.ErrorList
	lx   *netfmt.Lexer
}

// New returns a Parser over toks (as from netfmt.Lex); file names the
// source in error positions.
func New(file string, toks []netfmt.Token) Parser {
	return Parser{File: file, Toks: toks}
}

// NewSource returns a Parser that reads the tokens of src as it goes
// (netfmt.NewLexer; see netfmt.Lex for newlines).
func NewSource(file, src string, newlines bool) Parser {
	return Parser{File: file, lx: netfmt.NewLexer(src, newlines)}
}

// fill makes sure Toks[I+k] exists, unless the input ends before it (the
// last token is then TokEOF).
func (p *Parser) fill(k int) {
	if p.lx == nil {
		return
	}
	for len(p.Toks) <= p.I+k {
		if n := len(p.Toks); n > 0 && p.Toks[n-1].Kind == netfmt.TokEOF {
			return
		}
		if p.I >= 1024 && p.I > len(p.Toks)/2 {
			// drop what was consumed (Toks stays short however long the
			// input is)
			p.Toks = append(p.Toks[:0], p.Toks[p.I:]...)
			p.I = 0
		}
		p.Toks = append(p.Toks, p.lx.Next())
	}
}

// Run calls stmt until end of input or until MaxErrors errors are in.
func (p *Parser) Run(stmt func()) {
	for p.Peek().Kind != netfmt.TokEOF && len(p.Errs) < MaxErrors {
		stmt()
	}
}

// Err returns the collected errors, or a true nil when there are none (a
// nil ErrorList in an error interface would not compare equal to nil).
func (p *Parser) Err() error {
	if len(p.Errs) > 0 {
		return p.Errs
	}
	return nil
}

// Guard is deferred by a statement production: it swallows the bailout
// panic raised by Errorf and calls resync to skip to the next statement.
// Any other panic is a bug and goes on.
func (p *Parser) Guard(resync func()) {
	if r := recover(); r != nil {
		if _, ok := r.(bailout); !ok {
			panic(r)
		}
		resync()
	}
}

// Peek returns the current token without consuming it.
func (p *Parser) Peek() netfmt.Token {
	p.fill(0)
	return p.Toks[p.I]
}

// PeekAt looks k tokens ahead, stopping at the final EOF token.
func (p *Parser) PeekAt(k int) netfmt.Token {
	p.fill(k)
	if p.I+k >= len(p.Toks) {
		return p.Toks[len(p.Toks)-1]
	}
	return p.Toks[p.I+k]
}

// Next consumes and returns the current token; at EOF it stays put.
func (p *Parser) Next() netfmt.Token {
	p.fill(0)
	t := p.Toks[p.I]
	if t.Kind != netfmt.TokEOF {
		p.I++
	}
	return t
}

// Errorf records a positioned error and abandons the statement.
func (p *Parser) Errorf(pos netfmt.Pos, format string, args ...any) {
	p.Errs = append(p.Errs, &netfmt.PosError{File: p.File, Pos: pos, Msg: fmt.Sprintf(format, args...)})
	panic(bailout{})
}

// Add records an error that carries its own position (say, in a file the
// rules refer to) and abandons the statement only once MaxErrors are in.
func (p *Parser) Add(err error) {
	p.Errs = append(p.Errs, err)
	if len(p.Errs) >= MaxErrors {
		panic(bailout{})
	}
}

// FailAt reports "expected want, found t"; a lexer error token reports
// its own text instead.
func (p *Parser) FailAt(t netfmt.Token, want string) {
	if t.Kind == netfmt.TokError {
		p.Errorf(t.Pos, "%s", t.Text)
	}
	p.Errorf(t.Pos, "expected %s, found %s", want, t)
}

// IsPunct reports whether the current token is the punctuation s.
func (p *Parser) IsPunct(s string) bool {
	t := p.Peek()
	return t.Kind == netfmt.TokPunct && t.Text == s
}

// IsWord reports whether the current token is the word s, in any case.
func (p *Parser) IsWord(s string) bool {
	t := p.Peek()
	return t.Kind == netfmt.TokWord && strings.EqualFold(t.Text, s)
}

// Accept consumes the current token if it is the word or punctuation s.
func (p *Parser) Accept(s string) bool {
	if p.IsWord(s) || p.IsPunct(s) {
		p.Next()
		return true
	}
	return false
}

// Expect consumes s, as a word (any case) or as punctuation.
func (p *Parser) Expect(s string) netfmt.Token {
	t := p.Next()
	if (t.Kind == netfmt.TokWord && strings.EqualFold(t.Text, s)) || (t.Kind == netfmt.TokPunct && t.Text == s) {
		return t
	}
	p.FailAt(t, fmt.Sprintf("%q", s))
	return t
}

// Punct consumes the punctuation s.
func (p *Parser) Punct(s string) netfmt.Token {
	t := p.Next()
	if t.Kind != netfmt.TokPunct || t.Text != s {
		p.FailAt(t, fmt.Sprintf("%q", s))
	}
	return t
}

// Keyword consumes the word s, in any case.
func (p *Parser) Keyword(s string) netfmt.Token {
	t := p.Next()
	if t.Kind != netfmt.TokWord || !strings.EqualFold(t.Text, s) {
		p.FailAt(t, fmt.Sprintf("%q", s))
	}
	return t
}

// Word consumes a word or quoted string; want names it in the error.
func (p *Parser) Word(want string) netfmt.Token {
	t := p.Next()
	if t.Kind != netfmt.TokWord && t.Kind != netfmt.TokString {
		p.FailAt(t, want)
	}
	return t
}

// InOut reads the direction word "in" or "out"; it reports true for out.
func (p *Parser) InOut() bool {
	t := p.Next()
	if t.Kind == netfmt.TokWord {
		switch strings.ToLower(t.Text) {
		case "in":
			return false
		case "out":
			return true
		}
	}
	p.FailAt(t, "in or out")
	return false
}

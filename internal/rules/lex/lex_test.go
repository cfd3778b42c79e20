package lex

import (
	"strings"
	"testing"

	"sluice/internal/rules/netfmt"
)

// stmt reads `word = word ;` so the tests can drive errors and resync.
func stmt(p *Parser) func() {
	return func() {
		defer p.Guard(func() {
			for !p.IsPunct(";") && p.Peek().Kind != netfmt.TokEOF {
				p.Next()
			}
			p.Accept(";")
		})
		p.Word("name")
		p.Punct("=")
		p.Keyword("on")
		p.Expect(";")
	}
}

func TestErrorsAndResync(t *testing.T) {
	p := New("f.conf", netfmt.Lex("a = on;\nb x on;\nc = ON ;\nd = off;", false))
	p.Run(stmt(&p))
	want := "f.conf:2:3: expected \"=\", found \"x\"\nf.conf:4:5: expected \"on\", found \"off\""
	if err := p.Err(); err == nil || err.Error() != want {
		t.Fatalf("got %v, want\n%s", err, want)
	}
}

func TestErrNilWhenClean(t *testing.T) {
	p := New("f", netfmt.Lex("a = on;", false))
	p.Run(stmt(&p))
	if err := p.Err(); err != nil {
		t.Fatalf("got %v", err)
	}
}

func TestStopsAtMaxErrors(t *testing.T) {
	p := New("f", netfmt.Lex(strings.Repeat("a b;\n", 3*MaxErrors), false))
	p.Run(stmt(&p))
	if len(p.Errs) != MaxErrors {
		t.Fatalf("got %d errors, want %d", len(p.Errs), MaxErrors)
	}
}

func TestPeekAtStopsAtEOF(t *testing.T) {
	p := New("f", netfmt.Lex("a", false))
	if k := p.PeekAt(5).Kind; k != netfmt.TokEOF {
		t.Fatalf("PeekAt past end = %v", k)
	}
	p.Next()
	p.Next()
	if p.I != 1 {
		t.Fatalf("Next moved past EOF: I = %d", p.I)
	}
}

func TestInOut(t *testing.T) {
	p := New("f", netfmt.Lex("OUT in sideways", false))
	if !p.InOut() || p.InOut() {
		t.Fatal("in/out misread")
	}
	func() {
		defer p.Guard(func() {})
		p.InOut()
	}()
	if err := p.Err(); err == nil || err.Error() != `f:1:8: expected in or out, found "sideways"` {
		t.Fatalf("got %v", err)
	}
}

// TestSourceMatchesTokens: a parser reading from the source sees the same
// errors as one given all the tokens up front.
func TestSourceMatchesTokens(t *testing.T) {
	src := "a = on;\nb x on;\nc = ON ;\nd = off;\n" + strings.Repeat("e = on;\n", 3000) + "f = off;"
	p1 := New("f.conf", netfmt.Lex(src, false))
	p1.Run(stmt(&p1))
	p2 := NewSource("f.conf", src, false)
	p2.Run(stmt(&p2))
	if e1, e2 := p1.Err(), p2.Err(); e1 == nil || e2 == nil || e1.Error() != e2.Error() {
		t.Errorf("from tokens: %v\nfrom the source: %v", e1, e2)
	}
}

// TestSourceStopsEarly: after the error cap the rest of a huge input is
// neither tokenized nor held.
func TestSourceStopsEarly(t *testing.T) {
	src := strings.Repeat("bad ;\n", 20) + strings.Repeat("x = on ; ", 1<<20)
	p := NewSource("f.conf", src, false)
	p.Run(stmt(&p))
	if n := len(p.Err().(netfmt.ErrorList)); n != MaxErrors {
		t.Fatalf("%d errors, want %d", n, MaxErrors)
	}
	if len(p.Toks) > 64 || cap(p.Toks) > 4096 {
		t.Errorf("%d tokens held (capacity %d) after stopping at the error cap", len(p.Toks), cap(p.Toks))
	}
	// and a long good input is read in bounded memory
	p = NewSource("f.conf", strings.Repeat("x = on ; ", 1<<18), false)
	p.Run(stmt(&p))
	if p.Err() != nil || cap(p.Toks) > 4096 {
		t.Errorf("err %v, token buffer capacity %d after 2^18 statements", p.Err(), cap(p.Toks))
	}
}

package ruleset

import (
	"errors"
	"testing"

	"sluice/internal/rules/ipf"
)

// TestCompileExprAndDecap: exp and decapsulate rules compile (they used
// to be refused); bpf rules are still refused with ErrUnsupported.
func TestCompileExprAndDecap(t *testing.T) {
	rs, err := ipf.Parse("t", []byte("block in exp { \"ip.p = tcp; tcp.dport != 80,81; ip.src = 10.0.0.0/8;\" }\n"+
		"decapsulate in proto 4 all head 1\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Compile(rs)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	x := s.In.Rules[0]
	if x.Tests&TestExpr == 0 || len(x.Expr) != 3 {
		t.Fatalf("exp rule: tests %#x, %d clauses; want TestExpr and 3", x.Tests, len(x.Expr))
	}
	if c := x.Expr[1]; c.Op != ExprDport || c.Proto != 6 || !c.Not || len(c.Vals) != 2 || c.Vals[1].Num != 81 {
		t.Errorf("clause 2: got %+v", c)
	}
	if c := x.Expr[2]; c.Op != ExprSrc || c.Vals[0].W != [2]uint64{0x0a000000, 0} || c.Vals[0].M != [2]uint64{0xff000000, 0} {
		t.Errorf("clause 3: got %+v", c)
	}
	if d := s.In.Rules[1]; d.Flags&FRCmdMask != FRDecap || d.HeadList == nil {
		t.Errorf("decapsulate: flags %#x, head %v", d.Flags, d.HeadList)
	}
	rs, err = ipf.Parse("t", []byte("pass in bpf-v4 { \"0x1\" }\n"), ipf.ParseOptions{})
	if err != nil {
		t.Skipf("bpf-v4 does not parse here: %v", err)
	}
	var ue *ErrUnsupported
	if _, err := Compile(rs); !errors.As(err, &ue) {
		t.Errorf("bpf rule: got %v, want ErrUnsupported", err)
	}
}

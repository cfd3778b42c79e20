package ruleset

import (
	"fmt"

	"sluice/internal/rules/ipf"
)

// ExprOp is the field an exp clause tests (IPFilter's IPF_EXP_* commands).
type ExprOp uint8

// The exp fields. ExprNone stands for the flush-only fields (tcp.state,
// idle-gt), which ipf_fr_matcharray has no packet test for: they never
// hold, so only their `!=` form matches.
const (
	ExprNone ExprOp = iota
	ExprProto
	ExprAddr
	ExprSrc
	ExprDst
	ExprAddr6
	ExprSrc6
	ExprDst6
	ExprPort
	ExprSport
	ExprDport
	ExprFlags
)

// ExprTest is one compiled `field op values;` clause: the values are
// ORed, Not inverts the result, and a packet of another protocol than
// Proto (when non-zero) fails the whole expression whatever Not says.
type ExprTest struct {
	Op    ExprOp
	Proto uint8
	Not   bool
	Vals  []ExprVal
}

// ExprVal is one value: W/M as Words for addresses, Num/Mask otherwise
// (Mask only for tcp.flags).
type ExprVal struct {
	W, M      [2]uint64
	Num, Mask uint32
}

var exprOps = map[string]struct {
	op    ExprOp
	proto uint8
}{
	"ip.p": {ExprProto, 0}, "ip.addr": {ExprAddr, 0}, "ip.src": {ExprSrc, 0}, "ip.dst": {ExprDst, 0},
	"ip6.addr": {ExprAddr6, 0}, "ip6.src": {ExprSrc6, 0}, "ip6.dst": {ExprDst6, 0},
	"tcp.port": {ExprPort, 6}, "tcp.sport": {ExprSport, 6}, "tcp.dport": {ExprDport, 6},
	"udp.port": {ExprPort, 17}, "udp.sport": {ExprSport, 17}, "udp.dport": {ExprDport, 17},
	"tcp.flags": {ExprFlags, 6}, "tcp.state": {ExprNone, 6}, "idle-gt": {ExprNone, 0},
}

func compileExpr(r *ipf.Rule) ([]ExprTest, error) {
	out := make([]ExprTest, 0, len(r.Expr))
	for _, c := range r.Expr {
		o, ok := exprOps[c.Field]
		if !ok {
			return nil, &ErrUnsupported{r.Pos, fmt.Sprintf("exp: unknown field %q", c.Field)}
		}
		t := ExprTest{Op: o.op, Proto: o.proto, Not: c.Not, Vals: make([]ExprVal, len(c.Values))}
		for i, v := range c.Values {
			ev := &t.Vals[i]
			switch o.op {
			case ExprAddr, ExprSrc, ExprDst, ExprAddr6, ExprSrc6, ExprDst6:
				if !v.IP.IsValid() || !v.Mask.IsValid() {
					return nil, &ErrUnsupported{r.Pos, fmt.Sprintf("exp: %s needs an address", c.Field)}
				}
				ev.W, ev.M = Words(v.IP), Words(v.Mask)
			default:
				ev.Num, ev.Mask = v.Num, v.NumMask
			}
		}
		out = append(out, t)
	}
	return out, nil
}

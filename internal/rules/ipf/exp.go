package ipf

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// exprFields are the fields of `exp { "..." }` and the kind of value each takes.
var exprFields = map[string]byte{
	"ip.p": 'p', "ip.addr": '4', "ip.src": '4', "ip.dst": '4',
	"ip6.addr": '6', "ip6.src": '6', "ip6.dst": '6',
	"tcp.port": 'n', "tcp.sport": 'n', "tcp.dport": 'n',
	"udp.port": 'n', "udp.sport": 'n', "udp.dport": 'n',
	"tcp.flags": 'f', "tcp.state": 'n', "idle-gt": 'n',
}

// parseExp reads `{ "clauses" }` after exp.
func (p *parser) parseExp(r *Rule) *Error {
	if err := p.expectPunct("{"); err != nil {
		return err
	}
	s := p.next()
	if s.kind != tString {
		return expected("expression string", s)
	}
	clauses, err := ParseExpr(s.text)
	if err != nil {
		return errorf(s, "%v", err)
	}
	r.Expr = clauses
	return p.expectPunct("}")
}

// ParseExpr parses the text of an `exp { "..." }` clause list (also used
// by ipf -m and ipnat -m): `field=v1,v2;` or `field!=v;` clauses, each
// ended by `;`, whitespace ignored.
func ParseExpr(text string) ([]ExprClause, error) {
	s := strings.Map(func(c rune) rune {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			return -1
		}
		return c
	}, text)
	if s == "" {
		return nil, fmt.Errorf("empty expression")
	}
	if !strings.HasSuffix(s, ";") {
		return nil, fmt.Errorf("expression clause must end in ';'")
	}
	var out []ExprClause
	for _, c := range strings.Split(strings.TrimSuffix(s, ";"), ";") {
		var cl ExprClause
		var vals string
		if f, v, ok := strings.Cut(c, "!="); ok {
			cl.Field, cl.Not, vals = strings.ToLower(f), true, v
		} else if f, v, ok := strings.Cut(c, "="); ok {
			cl.Field, vals = strings.ToLower(f), v
		} else {
			return nil, fmt.Errorf("expected field=value in %q", c)
		}
		kind, ok := exprFields[cl.Field]
		if !ok {
			return nil, fmt.Errorf("unknown expression field %q", cl.Field)
		}
		if vals == "" {
			return nil, fmt.Errorf("missing value for %s", cl.Field)
		}
		for _, v := range strings.Split(vals, ",") {
			ev, err := exprValue(kind, v)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", cl.Field, err)
			}
			cl.Values = append(cl.Values, ev)
		}
		out = append(out, cl)
	}
	return out, nil
}

func exprValue(kind byte, v string) (ExprValue, error) {
	switch kind {
	case '4', '6':
		as, ms, hasMask := strings.Cut(v, "/")
		ip, err := netip.ParseAddr(as)
		if kind == '4' {
			a, ok := parseIPv4(as)
			if !ok {
				return ExprValue{}, fmt.Errorf("invalid IPv4 address %q", as)
			}
			ip, err = a, nil
		}
		if err != nil || (kind == '6' && !ip.Is6()) {
			return ExprValue{}, fmt.Errorf("invalid IPv6 address %q", as)
		}
		bl := ip.BitLen()
		m := prefixMask(bl, bl)
		if hasMask {
			if n, err := strconv.ParseUint(ms, 10, 8); err == nil && int(n) <= bl {
				m = prefixMask(bl, int(n))
			} else if a, err := netip.ParseAddr(ms); err == nil && a.BitLen() == bl {
				m = a
			} else {
				return ExprValue{}, fmt.Errorf("invalid mask %q", ms)
			}
		}
		return ExprValue{IP: andMask(ip, m), Mask: m}, nil
	case 'p':
		if n, err := parseUint(v, 8); err == nil {
			return ExprValue{Num: uint32(n)}, nil
		}
		if n, ok := LookupProto(v); ok {
			return ExprValue{Num: uint32(n)}, nil
		}
		return ExprValue{}, fmt.Errorf("unknown protocol %q", v)
	case 'f':
		fs, ms, hasMask := strings.Cut(v, "/")
		f, ok := parseFlagSet(fs)
		if !ok {
			return ExprValue{}, fmt.Errorf("invalid TCP flags %q", fs)
		}
		m := uint8(0xff)
		if hasMask {
			if m, ok = parseFlagSet(ms); !ok {
				return ExprValue{}, fmt.Errorf("invalid TCP flags %q", ms)
			}
		}
		return ExprValue{Num: uint32(f), NumMask: uint32(m)}, nil
	}
	if n, err := parseUint(v, 32); err == nil {
		return ExprValue{Num: uint32(n)}, nil
	}
	if n, ok := lookupService(v, 0, false, false); ok {
		return ExprValue{Num: uint32(n)}, nil
	}
	return ExprValue{}, fmt.Errorf("invalid number %q", v)
}

// FormatExpr prints expression clauses as IPFilter's printipfexpr does:
// `field = v1,v2;` joined by single spaces.
func FormatExpr(clauses []ExprClause) string {
	var b strings.Builder
	for i, c := range clauses {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.Field)
		if c.Not {
			b.WriteString(" != ")
		} else {
			b.WriteString(" = ")
		}
		kind := exprFields[c.Field]
		for j, v := range c.Values {
			if j > 0 {
				b.WriteByte(',')
			}
			switch kind {
			case '4', '6':
				b.WriteString(v.IP.String())
				writeMask(&b, v.Mask)
			case 'f':
				b.WriteString(formatFlags(uint8(v.Num), uint8(v.NumMask)))
			default:
				b.WriteString(strconv.FormatUint(uint64(v.Num), 10))
			}
		}
		b.WriteByte(';')
	}
	return b.String()
}

package ruleset

import (
	"fmt"
	"strconv"

	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ippool"
)

// AnonTableBase is the number IPFilter gives the first anonymous table it
// creates for an inline `pool=(...)` / `hash=(...)`.
const AnonTableBase = 0x80000001

// InlineTables returns rules with every inline `pool=(...)`/`hash=(...)`
// operand replaced by a reference to an anonymous ipf-role table, numbered
// from AnonTableBase in rule order as ipf does when it loads them, and
// those tables. Compile refuses inline operands because a matcher needs
// the table: a loader (ipftest, the kernel path) calls this first and
// makes the tables available under their numbers. Rules without inline
// operands are returned as they are, the others as copies.
func InlineTables(rules []*ipf.Rule) ([]*ipf.Rule, []*ippool.Table, error) {
	var tables []*ippool.Table
	out, copied := rules, false
	for i, r := range rules {
		if !hasInline(r) {
			continue
		}
		if !copied {
			out, copied = append([]*ipf.Rule(nil), rules...), true
		}
		c := r.Clone()
		for _, ep := range []*ipf.Endpoint{&c.From, &c.To} {
			a := &ep.Addr
			if a.Inline == nil || (a.Kind != ipf.AddrPool && a.Kind != ipf.AddrHash) {
				continue
			}
			t := &ippool.Table{Type: ippool.Tree, Role: ippool.RoleIPF,
				Name: strconv.FormatUint(uint64(AnonTableBase+len(tables)), 10)}
			if a.Kind == ipf.AddrHash {
				t.Type = ippool.Hash
				t.Size = 2*len(a.Inline) - 1
			}
			for _, pe := range a.Inline {
				bits := ipf.MaskBits(pe.Mask)
				if bits < 0 || !pe.IP.IsValid() || pe.IP.BitLen() != pe.Mask.BitLen() {
					return nil, nil, &ErrUnsupported{r.Pos, fmt.Sprintf("inline table entry %s/%s: not a prefix", pe.IP, pe.Mask)}
				}
				e := ippool.Entry{Not: pe.Negate, Fam: 4, Bits: bits}
				if pe.IP.Is6() {
					e.Fam, e.Addr = 6, pe.IP.As16()
				} else {
					b := pe.IP.As4()
					copy(e.Addr[:], b[:])
				}
				t.Entries = append(t.Entries, e)
			}
			tables = append(tables, t)
			a.Table, a.Inline = t.Name, nil
		}
		out[i] = c
	}
	return out, tables, nil
}

func hasInline(r *ipf.Rule) bool {
	for _, ep := range []*ipf.Endpoint{&r.From, &r.To} {
		if ep.Addr.Inline != nil && (ep.Addr.Kind == ipf.AddrPool || ep.Addr.Kind == ipf.AddrHash) {
			return true
		}
	}
	return false
}

package nat

import (
	"encoding/binary"
	"net/netip"

	"sluice/internal/rules/ipnat"
)

// a128 is an address as a 128-bit number; IPv4 uses the low 32 bits.
// NAT address pools step through addresses arithmetically (in_snip).
type a128 struct{ hi, lo uint64 }

func (a a128) add(n uint64) a128 {
	lo := a.lo + n
	hi := a.hi
	if lo < a.lo {
		hi++
	}
	return a128{hi, lo}
}

func (a a128) and(m a128) a128  { return a128{a.hi & m.hi, a.lo & m.lo} }
func (a a128) or(m a128) a128   { return a128{a.hi | m.hi, a.lo | m.lo} }
func (a a128) not(v6 bool) a128 { return a128{^a.hi, ^a.lo}.trim(v6) }
func (a a128) isZero() bool     { return a.hi == 0 && a.lo == 0 }
func (a a128) less(b a128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func (a a128) trim(v6 bool) a128 {
	if !v6 {
		return a128{0, a.lo & 0xffffffff}
	}
	return a
}

// allOnes reports whether m is a host mask (/32 or /128).
func (a a128) allOnes(v6 bool) bool {
	if v6 {
		return a.hi == ^uint64(0) && a.lo == ^uint64(0)
	}
	return a.lo == 0xffffffff
}

func fromAddr(a netip.Addr) a128 {
	if a.Is4() {
		b := a.As4()
		return a128{0, uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return a128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (a a128) addr(v6 bool) netip.Addr {
	if !v6 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(a.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return netip.AddrFrom16(b)
}

// fromRule converts a rule's i6addr_t-style bytes for a rule family.
func fromRule(b [16]byte, v6 bool) a128 {
	if !v6 {
		return a128{0, uint64(binary.BigEndian.Uint32(b[:4]))}
	}
	return a128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func maskBits(m a128, v6 bool) int {
	n := 0
	for _, w := range []uint64{m.hi, m.lo} {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	if !v6 && m.lo&0xffffffff == 0xffffffff {
		return 32
	}
	return n
}

// addrOperand is a rule address resolved for matching.
type addrOperand struct {
	kind     ipnat.AddrKind
	a, m     a128
	table    string
	name     string
	maskLen  int
	isLookup bool
}

func operand(x ipnat.Addr, v6 bool) addrOperand {
	o := addrOperand{kind: x.Kind, a: fromRule(x.A, v6), m: fromRule(x.M, v6), table: x.Table, name: x.Name}
	o.isLookup = x.Kind == ipnat.AddrLookup
	if x.Kind == ipnat.AddrNormal {
		o.maskLen = maskBits(o.m, v6)
	}
	return o
}

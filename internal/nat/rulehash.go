package nat

import (
	"math/bits"
	"slices"

	"sluice/internal/rules/ipnat"
)

// IPFilter finds the NAT rules for a packet no session knows through a
// hash table (ipf_nat_map_rules for outbound packets by source address,
// ipf_nat_rdr_rules for inbound ones by destination): each rule sits in
// the bucket of its own masked address (0 for pool and other lookup
// operands), every bucket lists its rules in the order they were added,
// and a packet walks the table once per mask that a rule of its family
// uses, longest first, looking in the bucket of its address under that
// mask. A rule is therefore tried as soon as the packet's address under a
// longer mask lands in the rule's bucket: `map nic0 10.1.2.0/24` listed
// before `map nic0 10.1.2.0/28` takes 10.1.2.1 (both are in the bucket of
// 10.1.2.0, found at /28), and a rule whose address merely hashes to the
// same bucket is tried there too. Checked against IPFilter's ipftest.

// ruleBuckets is the size of the rule hash tables (NAT_SIZE, RDR_SIZE).
const ruleBuckets = 127

// hashWord is NAT_HASH_FN's term for one 32-bit word of an address as it
// sits in memory (network byte order read on a little-endian machine, as
// the IPFilter the kit was made with reads it).
func hashWord(w uint32) uint32 {
	k := bits.ReverseBytes32(w)
	return k + k>>12
}

// addrHash is NAT_HASH_FN (IPv4) or NAT_HASH_FN6 of a masked address
// before the modulus.
func addrHash(a a128, v6 bool) uint32 {
	if !v6 {
		return hashWord(uint32(a.lo))
	}
	return hashWord(uint32(a.hi>>32)) + hashWord(uint32(a.hi)) + hashWord(uint32(a.lo>>32)) + hashWord(uint32(a.lo))
}

// ruleBucket is the bucket a rule with the masked address a is added to
// (ipf_nat_addmap/addrdr hash with a modulus of 0xffffffff first).
func ruleBucket(a a128, v6 bool) int {
	return int(addrHash(a, v6) % 0xffffffff % ruleBuckets)
}

// lookupBucket is the bucket a packet's masked address is looked up in.
func lookupBucket(a a128, v6 bool) int {
	return int(addrHash(a, v6) % ruleBuckets)
}

// prefixMask is the mask of a prefix length.
func prefixMask(n int, v6 bool) a128 {
	if !v6 {
		return a128{0, uint64(^uint32(0) << (32 - n))} // n = 0: Go shifts to 0
	}
	switch {
	case n <= 0:
		return a128{}
	case n < 64:
		return a128{^uint64(0) << (64 - n), 0}
	case n < 128:
		return a128{^uint64(0), ^uint64(0) << (128 - n)}
	}
	return a128{^uint64(0), ^uint64(0)}
}

// hashOperand is the operand whose address and mask place a rule in the
// table of one direction (rdr: inbound), as maskFor chooses it.
func (r *rule) hashOperand(rdr bool) addrOperand {
	switch {
	case r.Type == ipnat.Bimap && rdr:
		return r.newA
	case r.Filter && rdr:
		return r.dst
	case r.Filter:
		return r.src
	}
	return r.orig
}

// place computes the rule's bucket in both tables.
func (r *rule) place() {
	for i, rdr := range []bool{false, true} {
		o := r.hashOperand(rdr)
		var a a128
		if o.kind == ipnat.AddrNormal {
			a = o.a.and(o.m).trim(r.v6)
		}
		r.bucket[i] = ruleBucket(a, r.v6)
	}
}

// ruleMasks returns the masks the rules of one table use, per family
// (0 IPv4, 1 IPv6), longest first, each once.
func ruleMasks(rs []*rule, rdr bool) (m [2][]int) {
	for _, r := range rs {
		f := 0
		if r.v6 {
			f = 1
		}
		if l := r.maskFor(rdr); !slices.Contains(m[f], l) {
			m[f] = append(m[f], l)
		}
	}
	for f := range m {
		slices.Sort(m[f])
		slices.Reverse(m[f])
	}
	return m
}

package nat

import (
	"net/netip"
	"testing"
)

// TestRuleBuckets pins the rule hash table's buckets to what IPFilter's
// ipftest was seen to do (the ipftest semantics cases nat-rule-order*):
// addresses that share a bucket there share one here.
func TestRuleBuckets(t *testing.T) {
	b := func(s string) int {
		a := netip.MustParseAddr(s)
		return lookupBucket(fromAddr(a), a.Is6())
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"10.0.0.0", "10.1.38.0", true},
		{"10.0.0.0", "10.62.0.0", true},
		{"10.0.0.0", "10.1.37.0", false},
		{"10.1.101.0", "0.0.0.0", true}, // bucket 0: pool operands
		{"2001:db8::", "2001:db8:3e::", true},
		{"fd00::", "fd00:7f::", true},
		{"2001:db8::", "2001:db8:7::", false},
	} {
		if got := b(c.a) == b(c.b); got != c.same {
			t.Errorf("%s (bucket %d) and %s (bucket %d): same bucket %v, want %v", c.a, b(c.a), c.b, b(c.b), got, c.same)
		}
	}
	if got := b("10.0.0.0"); got != 10 {
		t.Errorf("10.0.0.0: bucket %d, want 10", got)
	}
	// a rule is placed with the same hash (but for a sum of 0xffffffff)
	for _, s := range []string{"10.0.0.0", "192.168.1.0", "2001:db8::"} {
		a := netip.MustParseAddr(s)
		if ruleBucket(fromAddr(a), a.Is6()) != b(s) {
			t.Errorf("%s: rule and lookup buckets differ", s)
		}
	}
	for _, c := range []struct {
		n    int
		v6   bool
		want a128
	}{
		{0, false, a128{}}, {8, false, a128{0, 0xff000000}}, {32, false, a128{0, 0xffffffff}},
		{0, true, a128{}}, {16, true, a128{0xffff << 48, 0}}, {64, true, a128{^uint64(0), 0}},
		{80, true, a128{^uint64(0), 0xffff << 48}}, {128, true, a128{^uint64(0), ^uint64(0)}},
	} {
		if got := prefixMask(c.n, c.v6); got != c.want {
			t.Errorf("prefixMask(%d, %v) = %x, want %x", c.n, c.v6, got, c.want)
		}
	}
}

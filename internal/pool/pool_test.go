package pool

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"sluice/internal/rules/ippool"
)

func mustParse(t *testing.T, src string) *ippool.File {
	t.Helper()
	f, err := ippool.Parse("t", src)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestTreeLongestMatch(t *testing.T) {
	s, err := NewSet(mustParse(t, `table role = ipf type = tree number = 100
	{ 1.1.1.1/32; !2.2.0.0/16; 2.2.2.0/24; ef00::5/128; 10.0.0.0/8; !10.1.0.0/16; };`), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		want bool
	}{
		{"1.1.1.1", true}, {"1.1.1.2", false}, {"2.2.2.9", true}, {"2.2.3.1", false},
		{"ef00::5", true}, {"ef00::6", false}, {"10.2.3.4", true}, {"10.1.3.4", false},
		{"::ffff:1.1.1.1", true},
	}
	for _, tc := range tests {
		if got := s.Contains(false, "100", netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.addr, got, tc.want)
		}
	}
	if s.Contains(false, "101", netip.MustParseAddr("1.1.1.1")) {
		t.Error("unknown pool matched")
	}
	if s.Contains(true, "100", netip.MustParseAddr("1.1.1.1")) {
		t.Error("tree answered a hash lookup")
	}
}

func randPrefix(r *rand.Rand, v6 bool) ippool.Entry {
	e := ippool.Entry{Fam: 4, Bits: r.IntN(33)}
	n := 4
	if v6 {
		e.Fam, e.Bits, n = 6, r.IntN(129), 16
	}
	// Few distinct values so that prefixes overlap often.
	for i := 0; i < n; i++ {
		e.Addr[i] = byte(r.IntN(4))
	}
	applyBits(&e)
	e.Not = r.IntN(3) == 0
	return e
}

func applyBits(e *ippool.Entry) {
	total := 32
	if e.Fam == 6 {
		total = 128
	}
	for i := e.Bits; i < total; i++ {
		e.Addr[i/8] &^= 0x80 >> (i % 8)
	}
}

func randAddr(r *rand.Rand, v6 bool) netip.Addr {
	if v6 {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.IntN(4))
		}
		return netip.AddrFrom16(b)
	}
	return netip.AddrFrom4([4]byte{byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(4))})
}

func within(e ippool.Entry, a netip.Addr) bool {
	b, n := addrBytes(a)
	if (n == 128) != (e.Fam == 6) {
		return false
	}
	for i := 0; i < e.Bits; i++ {
		if bit(&b, i) != bit(&e.Addr, i) {
			return false
		}
	}
	return true
}

// refTree is the obviously-correct tree: scan every entry, keep the
// longest (the last one for equal prefixes).
func refTree(es []ippool.Entry, a netip.Addr) bool {
	best := -1
	for i, e := range es {
		if within(e, a) && (best < 0 || e.Bits >= es[best].Bits) {
			best = i
		}
	}
	return best >= 0 && !es[best].Not
}

// refHash: the longest matching entry, the first one for equal keys.
func refHash(es []ippool.Entry, a netip.Addr) int {
	best := -1
	for i, e := range es {
		if within(e, a) && (best < 0 || e.Bits > es[best].Bits) {
			best = i
		}
	}
	return best
}

func TestAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		v6 := round%2 == 1
		def := &ippool.Table{Type: ippool.Tree}
		for i := r.IntN(20); i >= 0; i-- {
			def.Entries = append(def.Entries, randPrefix(r, v6))
		}
		tree := NewTree(def)
		hdef := &ippool.Table{Type: ippool.GroupMap, Entries: def.Entries}
		for i := range hdef.Entries {
			hdef.Entries[i].Group = strings.Repeat("g", i+1)
		}
		hash := NewHash(hdef)
		for k := 0; k < 200; k++ {
			a := randAddr(r, v6)
			if got, want := tree.Contains(a), refTree(def.Entries, a); got != want {
				t.Fatalf("tree %v %v: got %v, want %v", def.Entries, a, got, want)
			}
			want := refHash(hdef.Entries, a)
			g, ok := hash.Group(a)
			if (want >= 0) != ok || (ok && g != hdef.Entries[want].Group) {
				t.Fatalf("hash %v %v: got %q %v, want entry %d", hdef.Entries, a, g, ok, want)
			}
		}
	}
}

func TestGroupMap(t *testing.T) {
	s, err := NewSet(mustParse(t, `group-map out role = ipf number = 2010 group = 2020
	{ 2.2.2.2/32; 4.4.0.0/16; 5.0.0.0/8, group = 2040; };`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{"2.2.2.2": "2020", "4.4.9.9": "2020", "5.1.2.3": "2040", "6.0.0.1": ""} {
		g, _ := s.GroupFor("2010", netip.MustParseAddr(addr))
		if g != want {
			t.Errorf("%s: got %q, want %q", addr, g, want)
		}
	}
}

func TestLookupAllocs(t *testing.T) {
	s, err := NewSet(mustParse(t, `table role = ipf type = tree number = 1 { 1.1.1.1/32; !2.2.0.0/16; ef00::/16; };
	table role = ipf type = hash number = 2 { 1.1.1.0/24; 3.3.3.3; };`), nil)
	if err != nil {
		t.Fatal(err)
	}
	a4, a6 := netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("ef00::1")
	n := testing.AllocsPerRun(1000, func() {
		s.Contains(false, "1", a4)
		s.Contains(false, "1", a6)
		s.Contains(true, "2", a4)
	})
	if n != 0 {
		t.Errorf("got %v allocs per lookup, want 0", n)
	}
}

func TestDump(t *testing.T) {
	s, err := NewSet(mustParse(t, `group-map in role = ipf number = 1010 { 1.1.1.1/32, group = 1020; };
group-map out role = ipf number = 2010 group = 2020 { 2.2.2.2/32; };
table role = ipf type = tree number = 100 { 1.1.1.1/32; !2.2.0.0/16; };`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	s.DumpPools(&b)
	s.DumpHashes(&b)
	want := "table role=ipf type=tree number=100\n\t{ 1.1.1.1/32; ! 2.2.0.0/16; };\n" +
		"group-map out role=ipf number=2010 size=1\n\t{ 2.2.2.2/32, group=2020; };\n" +
		"group-map in role=ipf number=1010 size=1\n\t{ 1.1.1.1/32, group=1020; };\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if err := s.Add(mustParse(t, "table role = ipf type = tree number = 100 { 1.1.1.1/32; };"), nil); err == nil {
		t.Error("duplicate table accepted")
	}
}

func TestDstListPolicies(t *testing.T) {
	srcs := []string{"5.5.5.5", "5.5.5.6", "5.5.5.7", "5.5.5.8", "5.5.5.9", "5.5.6.5", "5.5.6.6", "5.5.6.7", "5.5.6.8", "5.5.6.9"}
	// Expected selections from the conformance kit (p7, p10, p12).
	tests := []struct {
		policy string
		want   string
	}{
		{"weighted connection", "2 4 5 9 2 4 5 9 2 4"},
		{"round-robin", "2 4 5 9 2 4 5 9 2 4"},
		{"hash", "5 5 2 2 5 2 2 4 9 4"},
		{"src-hash", "2 2 4 2 5 9 2 4 4 9"},
	}
	dst := netip.MustParseAddr("9.9.9.9")
	for _, tc := range tests {
		s, err := NewSet(mustParse(t, "pool nat/dstlist (name servers; policy "+tc.policy+";) { 1.1.1.2; 1.1.1.4; 1.1.1.5; 1.1.1.9; };"), nil)
		if err != nil {
			t.Fatal(err)
		}
		d := s.DstList(ippool.RoleNAT, "servers")
		var got []string
		for _, src := range srcs {
			n, _, ok := d.Select(netip.MustParseAddr(src), dst)
			if !ok {
				t.Fatal("empty list")
			}
			got = append(got, strings.TrimPrefix(n.Addr.String(), "1.1.1."))
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s: got %s, want %s", tc.policy, g, tc.want)
		}
	}
}

func BenchmarkTreeLookup(b *testing.B) {
	def := &ippool.Table{Type: ippool.Tree}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1000; i++ {
		e := ippool.Entry{Fam: 4, Bits: 8 + r.IntN(25)}
		v := r.Uint32()
		e.Addr[0], e.Addr[1], e.Addr[2], e.Addr[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		applyBits(&e)
		def.Entries = append(def.Entries, e)
	}
	tree := NewTree(def)
	a := netip.MustParseAddr("10.1.2.3")
	b.ReportAllocs()
	for b.Loop() {
		tree.Contains(a)
	}
}

func TestSelectDst(t *testing.T) {
	s, err := NewSet(mustParse(t, "pool ipf/dstlist (name out; policy round-robin;) { le0:1.1.1.1; le1:2.2.2.2; };"), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr("9.9.9.9")
	for _, want := range []string{"le0 1.1.1.1", "le1 2.2.2.2", "le0 1.1.1.1"} {
		ifc, addr, ok := s.SelectDst("out", a, a)
		if got := ifc + " " + addr.String(); !ok || got != want {
			t.Errorf("got %q %v, want %q", got, ok, want)
		}
	}
	if _, _, ok := s.SelectDst("nope", a, a); ok {
		t.Error("unknown dstlist selected something")
	}
}

package ruleset

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"sluice/internal/rules/ipf"
)

// bigRules is the kit's and the examples' rules repeated past
// parallelCompile, so that Compile takes its parallel path on every kind
// of rule (groups, accounting, collections, @N, keep state, ...).
func bigRules(t *testing.T) []*ipf.Rule {
	t.Helper()
	var paths []string
	for _, pat := range []string{"../rules/ipf/testdata/kit/i/regress/*", "../../examples/ipf/*.conf"} {
		m, _ := filepath.Glob(pat)
		paths = append(paths, m...)
	}
	var one []*ipf.Rule
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := ipf.Parse(p, src, ipf.ParseOptions{NoResolve: true})
		if err != nil {
			continue // the kit has files of errors on purpose
		}
		for _, r := range rules {
			// rules the compiler refuses stop a whole set
			if _, err := Compile([]*ipf.Rule{r}); err == nil {
				one = append(one, r)
			}
		}
	}
	if len(one) == 0 {
		t.Fatal("no rules in the corpus")
	}
	var all []*ipf.Rule
	for len(all) < 3*parallelCompile {
		all = append(all, one...)
	}
	return all
}

// serialCompile is Compile's one-rule-at-a-time path.
func serialCompile(rules []*ipf.Rule) (*Set, error) {
	s := NewSet()
	for _, r := range rules {
		if _, err := s.Add(r); err != nil {
			return nil, err
		}
	}
	s.Link()
	return s, nil
}

// TestCompileParallel checks that a set compiled on every core is the set
// compiled a rule at a time: the same lists, in the same order, the
// same compiled rules, IDs in rule order; and that a failing set reports
// the first failing rule.
func TestCompileParallel(t *testing.T) {
	rules := bigRules(t)
	got, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	want, err := serialCompile(rules)
	if err != nil {
		t.Fatal(err)
	}
	// list by list, rule by rule (cmp.Diff of the whole sets takes
	// minutes): Diff only shows the first difference
	lists := func(s *Set) map[string]*List {
		m := map[string]*List{"in": &s.In, "out": &s.Out, "acct in": &s.AcctIn, "acct out": &s.AcctOut}
		for n, l := range s.Groups {
			m["group "+n] = l
		}
		for n, l := range s.AcctGroups {
			m["acct group "+n] = l
		}
		return m
	}
	gl, wl := lists(got), lists(want)
	if len(gl) != len(wl) || !slices.Equal(got.GroupOrder, want.GroupOrder) {
		t.Fatalf("lists %d (groups %v), want %d (groups %v)", len(gl), got.GroupOrder, len(wl), want.GroupOrder)
	}
	for name, w := range wl {
		g := gl[name]
		if g == nil || len(g.Rules) != len(w.Rules) {
			t.Fatalf("list %s: got %v, want %d rules", name, g, len(w.Rules))
		}
		for i := range w.Rules {
			a, b := *w.Rules[i], *g.Rules[i]
			if (a.HeadList == nil) != (b.HeadList == nil) || a.HeadList != nil && b.HeadList.Name != a.HeadList.Name {
				t.Fatalf("list %s rule %d: head of %v, want %v", name, i, b.HeadList, a.HeadList)
			}
			a.ID, b.ID, a.Stats, b.Stats, a.HeadList, b.HeadList = 0, 0, nil, nil, nil, nil
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("list %s rule %d differs (-want +got):\n%s", name, i, cmp.Diff(a, b,
					cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpopts.IgnoreUnexported(Rule{})))
			}
		}
	}
	var ids []uint32
	for _, l := range []*List{&got.In, &got.Out, &got.AcctIn, &got.AcctOut} {
		for _, r := range l.Rules {
			if r.Stats == nil {
				t.Fatalf("rule at %+v has no Stats", r.Src.Pos)
			}
			ids = append(ids, r.ID)
		}
	}
	seen := map[uint32]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("ID %d given twice", id)
		}
		seen[id] = true
	}

	bad, err := ipf.Parse("bad.conf", []byte("pass in proto tcp from any to any with oow keep state\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{0, len(rules) / 3, len(rules) - 1} {
		withBad := append([]*ipf.Rule(nil), rules...)
		b1, b2 := *bad[0], *bad[0]
		b1.Pos.Line, b2.Pos.Line = at+1, at+2
		withBad[at] = &b1
		if at+len(rules)/2 < len(rules) {
			withBad[at+len(rules)/2] = &b2
		}
		_, err := Compile(withBad)
		if want := fmt.Sprintf("bad.conf:%d:", at+1); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("bad rule at %d: Compile error %v, want it to start %q", at, err, want)
		}
	}
}

// BenchmarkCompileBlocklist compiles a 100 000-rule blocklist a rule at a
// time (serial) and on every core (Compile): the ratio is the gain.
func BenchmarkCompileBlocklist(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 50000; i++ {
		fmt.Fprintf(&sb, "block in from 198.18.%d.%d/32 to any\nblock out from any to 198.18.%d.%d/32\n", i>>8&255, i&255, i>>8&255, i&255)
	}
	rules, err := ipf.Parse("bl.conf", []byte(sb.String()), ipf.ParseOptions{NoResolve: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    func([]*ipf.Rule) (*Set, error)
	}{{"serial", serialCompile}, {"parallel", Compile}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.f(rules); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rules)), "ns/rule")
		})
	}
}

// TestCompileLeanAndRules: CompileLean is Compile without the Hot
// prefilters (its lists presized, the rules alike); CompileRules compiles
// the rules alike too, into a caller's buffer that it leaves as long,
// keeping the buffer's Stats, and reports the first failing rule.
func TestCompileLeanAndRules(t *testing.T) {
	rules := bigRules(t)
	full, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	lean, err := CompileLean(rules)
	if err != nil {
		t.Fatal(err)
	}
	opts := []cmp.Option{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpopts.IgnoreUnexported(Rule{})}
	for i, pair := range [][2]*List{{&full.In, &lean.In}, {&full.Out, &lean.Out}, {&full.AcctIn, &lean.AcctIn}, {&full.AcctOut, &lean.AcctOut}} {
		f, l := pair[0], pair[1]
		if len(f.Hot) != len(f.Rules) || l.Hot != nil || len(l.Rules) != len(f.Rules) {
			t.Fatalf("list %d: %d rules, %d hot; lean %d rules, %d hot", i, len(f.Rules), len(f.Hot), len(l.Rules), len(l.Hot))
		}
		if len(f.Rules) > 0 && cap(l.Rules) != len(l.Rules) {
			t.Errorf("list %d: lean list of %d rules has room for %d", i, len(l.Rules), cap(l.Rules))
		}
		for k := range f.Rules {
			a, b := *f.Rules[k], *l.Rules[k]
			a.ID, b.ID, a.Stats, b.Stats, a.HeadList, b.HeadList = 0, 0, nil, nil, nil, nil
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("list %d rule %d differs:\n%s", i, k, cmp.Diff(a, b, opts...))
			}
		}
	}
	var st Stats
	buf := make([]Rule, 1000)
	buf[7].Stats = &st
	if err := CompileRules(buf, rules[:1000], 3); err != nil {
		t.Fatal(err)
	}
	if buf[7].Stats != &st {
		t.Error("CompileRules dropped the buffer's Stats")
	}
	for k := range buf {
		want := &Rule{Stats: &Stats{}}
		if err := compileInto(want, rules[k], 1); err != nil {
			t.Fatal(err)
		}
		a, b := *want, buf[k]
		a.ID, b.ID, a.Stats, b.Stats = 0, 0, nil, nil
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("rule %d differs:\n%s", k, cmp.Diff(a, b, opts...))
		}
	}
	if err := CompileRules(buf[:2], rules[:3], 2); err == nil {
		t.Error("3 rules into 2 places accepted")
	}
	bad, err := ipf.Parse("bad.conf", []byte("pass in proto tcp from any to any with oow keep state\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withBad := append([]*ipf.Rule(nil), rules[:1000]...)
	b1, b2 := *bad[0], *bad[0]
	b1.Pos.Line, b2.Pos.Line = 601, 901
	withBad[600], withBad[900] = &b1, &b2
	if err := CompileRules(buf, withBad, 3); err == nil || !strings.HasPrefix(err.Error(), "bad.conf:601:") {
		t.Errorf("CompileRules error %v, want the rule at line 601's", err)
	}
}

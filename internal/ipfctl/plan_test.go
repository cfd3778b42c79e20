package ipfctl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"sluice/internal/rules/ipf"
)

// TestWriteOrder checks writeOrder against a model of the kernel's two
// sets on every combination of staged contents: the steps must end in the
// staged sets, and after every step the active set must be either the one
// the kernel had or the one staged, never a third.
func TestWriteOrder(t *testing.T) {
	// contents: 1 = loaded active, 2 = loaded inactive, 3 and 4 new
	ids := []int{1, 2, 3, 4}
	for _, a := range ids {
		for _, i := range ids {
			if a == i && a > 2 {
				continue // one new content is never staged twice
			}
			if a == i {
				continue // a content is never in both sets
			}
			cur := [2]content{{id: a}, {id: i}}
			kv := [2]content{{id: 1}, {id: 2}}
			t.Run(fmt.Sprintf("active %d inactive %d", a, i), func(t *testing.T) {
				k := kv
				for _, st := range writeOrder(cur, kv) {
					if st.swap {
						k[0], k[1] = k[1], k[0]
					} else {
						k[st.set] = st.c
					}
					if k[0].id != kv[0].id && k[0].id != cur[0].id {
						t.Errorf("after %+v the active set is %d, neither %d nor %d", st, k[0].id, kv[0].id, cur[0].id)
					}
				}
				if k[0].id != cur[0].id || k[1].id != cur[1].id {
					t.Errorf("steps end in (%d, %d), want (%d, %d)", k[0].id, k[1].id, cur[0].id, cur[1].id)
				}
			})
		}
	}
}

func parseRules(t *testing.T, src string) []*ipf.Rule {
	t.Helper()
	rules, err := ipf.Parse("t.conf", []byte(src), ipf.ParseOptions{NoResolve: true})
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func TestFlushRules(t *testing.T) {
	rules := parseRules(t, "pass in all\nblock out all\ncount in all\npass in all head 5\nblock in from 1.1.1.1 to any group 5\npass out all head 6\n")
	for _, tc := range []struct {
		which FlushWhich
		n     int
		left  string
	}{
		{FlushIn, 4, "block out all; pass out all head 6"},
		{FlushOut, 2, "pass in all; count in all; pass in all head 5; block in inet from 1.1.1.1/32 to any group 5"},
		{FlushBoth, 6, ""},
	} {
		got, n := flushRules(rules, tc.which)
		var s []string
		for _, r := range got {
			s = append(s, ipf.FormatRule(r))
		}
		if n != tc.n || strings.Join(s, "; ") != tc.left {
			t.Errorf("flush %d: removed %d, left %q; want %d, %q", tc.which, n, strings.Join(s, "; "), tc.n, tc.left)
		}
	}
}

func TestDiffSets(t *testing.T) {
	old := parseRules(t, "pass in all\nblock in from 1.1.1.1 to any\npass out all\npass in all head 5\nblock in from 2.2.2.2 to any group 5\n")
	cur := parseRules(t, "block in from 1.1.1.1 to any\npass in all\npass out all\npass out quick all\npass in all head 5\n")
	d := diffSets([2]content{{id: 1, rules: old}, {id: 2}}, [2]content{{id: 3, rules: cur}, {id: 2}})
	want := &Diff{Lists: []ListDiff{
		{Set: SetActive, Dir: ipf.DirIn, Reordered: true},
		{Set: SetActive, Dir: ipf.DirOut, Added: []string{"pass out quick all"}},
		{Set: SetActive, Group: "5", Removed: []string{"block in inet from 2.2.2.2/32 to any group 5"}},
	}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("diff (-want +got):\n%s", diff)
	}
	// a swap of two loaded sets
	d = diffSets([2]content{{id: 1, rules: old}, {id: 2, rules: cur}}, [2]content{{id: 2, rules: cur}, {id: 1, rules: old}})
	if !d.Swapped {
		t.Errorf("swap not reported: %+v", d)
	}
}

// TestDiffListModel checks diffList against counting on random lists:
// added and removed are exactly the multiset differences.
func TestDiffListModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 500; n++ {
		gen := func() []string {
			var l []string
			for k := r.IntN(8); k > 0; k-- {
				l = append(l, string(rune('a'+r.IntN(5))))
			}
			return l
		}
		a, b := gen(), gen()
		ld := diffList(a, b)
		count := map[string]int{}
		for _, x := range a {
			count[x]--
		}
		for _, x := range b {
			count[x]++
		}
		for _, x := range ld.Added {
			count[x]--
		}
		for _, x := range ld.Removed {
			count[x]++
		}
		for x, c := range count {
			if c != 0 {
				t.Fatalf("%q -> %q: %+v leaves %q off by %d", a, b, ld, x, c)
			}
		}
		if len(ld.Added) == 0 && len(ld.Removed) == 0 && strings.Join(a, "") != strings.Join(b, "") && !ld.Reordered {
			t.Fatalf("%q -> %q: reorder not seen", a, b)
		}
	}
}

func TestGroupDepth(t *testing.T) {
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("pass in all head g1\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "pass in all head g%d group g%d\n", i+1, i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		src   string
		depth int
		cycle bool
		warn  bool
	}{
		{"pass in all\n", 0, false, false},
		{chain(3), 3, false, false},
		{chain(16), 16, false, false},
		{chain(17), 17, false, true},
		{"pass in all head a\npass in all head b group a\npass in all head a group b\n", 0, true, true},
	} {
		rules := parseRules(t, tc.src)
		n, c, cyc := groupDepth(rules)
		if n != tc.depth || cyc != tc.cycle {
			t.Errorf("%q: depth %d cycle %v (%v), want %d %v", tc.src, n, cyc, c, tc.depth, tc.cycle)
		}
		if w := depthWarning(SetActive, rules, 16); (w != "") != tc.warn {
			t.Errorf("%q: warning %q, want one: %v", tc.src, w, tc.warn)
		}
	}
}

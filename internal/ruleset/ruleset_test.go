package ruleset

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"sluice/internal/rules/ipf"
)

func compileText(t *testing.T, src string) *Set {
	t.Helper()
	rs, err := ipf.Parse("t", []byte(src), ipf.ParseOptions{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	s, err := Compile(rs)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return s
}

func lines(l *List) []int {
	var out []int
	for _, r := range l.Rules {
		out = append(out, r.Src.Pos.Line)
	}
	return out
}

// TestOrdering checks collections and @N insertion as i17 exercises them.
func TestOrdering(t *testing.T) {
	s := compileText(t, `100 pass in all
200 pass in proto tcp all
110 pass in proto udp all
110 pass in from 127.0.0.1 to any
pass in all
pass in from 127.0.0.1 to any
@0 100 pass in from 127.0.0.1 to any
@1 pass in from any to 127.0.0.1
@0 pass in from 1.1.1.1 to any
@1 110 pass in from 2.2.2.2 to any
@2 pass in from 3.3.3.3 to any
`)
	want := []int{9, 5, 11, 8, 6, 7, 1, 3, 10, 4, 2}
	if d := cmp.Diff(want, lines(&s.In)); d != "" {
		t.Errorf("in list order by source line (-want +got):\n%s", d)
	}
}

func TestGroupsAndLists(t *testing.T) {
	s := compileText(t, `block in all head 10
pass in proto tcp all group 10
count in all
count out all
pass out all
block in proto udp all group 20
`)
	if len(s.In.Rules) != 1 || len(s.Out.Rules) != 1 || len(s.AcctIn.Rules) != 1 || len(s.AcctOut.Rules) != 1 {
		t.Fatalf("list sizes: in %d out %d acct %d/%d", len(s.In.Rules), len(s.Out.Rules), len(s.AcctIn.Rules), len(s.AcctOut.Rules))
	}
	head := s.In.Rules[0]
	if head.HeadList == nil || head.HeadList != s.Groups["10"] || len(head.HeadList.Rules) != 1 {
		t.Errorf("head 10 not linked to its group")
	}
	if d := cmp.Diff([]string{"10", "20"}, s.GroupOrder); d != "" {
		t.Errorf("group order (-want +got):\n%s", d)
	}
}

func TestRuleFlags(t *testing.T) {
	tests := []struct {
		rule string
		want uint32
	}{
		{"pass in all", FRPass | FRInQue | FRCopied},
		{"block return-rst in quick proto tcp all", FRBlock | FRRetRST | FRQuick | FRInQue | FRCopied},
		{"pass out log body first proto tcp all keep state (strict)", FRPass | FROutQue | FRLog | FRLogBody | FRLogFirst | FRKeepState | FRStStrict | FRCopied},
		{"pass in from !1.1.1.1 to !2.2.2.2 keep frags (strict)", FRPass | FRInQue | FRNotSrcIP | FRNotDstIP | FRKeepFrag | FRFragStrict | FRCopied},
		{"log in all", FRLog | FRInQue | FRCopied},
		{"count out all", FRAccount | FROutQue | FRCopied},
	}
	for _, tc := range tests {
		s := compileText(t, tc.rule+"\n")
		var r *Rule
		for _, l := range []*List{&s.In, &s.Out, &s.AcctIn, &s.AcctOut} {
			if len(l.Rules) > 0 {
				r = l.Rules[0]
			}
		}
		if r == nil {
			t.Fatalf("%s: no rule compiled", tc.rule)
		}
		if r.Flags != tc.want {
			t.Errorf("%s: flags got %#x, want %#x", tc.rule, r.Flags, tc.want)
		}
	}
}

func TestCallRules(t *testing.T) {
	s := compileText(t, "call now srcgrpmap/100 in all\ncall dstgrpmap/200 out all\n")
	if r := s.In.Rules[0]; r.Flags&FRCallNow == 0 || r.Call.Func != "srcgrpmap" || r.Call.Arg != 100 {
		t.Errorf("call now rule: flags %#x call %+v", r.Flags, r.Call)
	}
	if r := s.Out.Rules[0]; r.Flags&FRCallNow != 0 || r.Flags&FRCmdMask != FRCall {
		t.Errorf("deferred call rule: flags %#x", r.Flags)
	}
	rs, err := ipf.Parse("t", []byte("pass in from pool=(1.1.1.1) to any\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(rs); err == nil {
		t.Error("inline pool compiled without a table name, want error")
	}
}

func TestSetsSwap(t *testing.T) {
	ss := NewSets()
	a := compileText(t, "pass in all\n")
	ss.Store(1, a)
	if ss.Active() == a {
		t.Fatal("inactive set is active")
	}
	if n := ss.Swap(); n != 1 || ss.Active() != a {
		t.Errorf("after swap: active index %d", n)
	}
}

func TestInlineTables(t *testing.T) {
	rules, err := ipf.Parse("t", []byte("pass in all\npass in from pool=(!1.1.1.1,2.2.0.0/16) to hash=(3.3.3.3,2001:db8::/32)\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(rules); err == nil {
		t.Fatal("Compile accepted an inline table it cannot resolve")
	}
	out, tabs, err := InlineTables(rules)
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != rules[0] || out[1] == rules[1] || rules[1].From.Addr.Inline == nil {
		t.Fatal("InlineTables must copy only the rules it changes")
	}
	if len(tabs) != 2 || tabs[0].Name != "2147483649" || tabs[1].Name != "2147483650" {
		t.Fatalf("tables %+v", tabs)
	}
	if out[1].From.Addr.Table != "2147483649" || out[1].To.Addr.Table != "2147483650" || out[1].To.Addr.Inline != nil {
		t.Fatalf("rule not pointed at the tables: %+v %+v", out[1].From.Addr, out[1].To.Addr)
	}
	if e := tabs[0].Entries[0]; !e.Not || e.Bits != 32 || e.Fam != 4 {
		t.Errorf("first entry %+v", e)
	}
	if e := tabs[1].Entries[1]; e.Fam != 6 || e.Bits != 32 || tabs[1].Size != 3 {
		t.Errorf("hash table %+v", tabs[1])
	}
	if _, err := Compile(out); err != nil {
		t.Fatal(err)
	}
}

// TestKeepLimitRestrictions: HP's keep limit only on quick inbound TCP
// rules without keep state; anything else is refused with its position.
func TestKeepLimitRestrictions(t *testing.T) {
	for _, c := range []struct {
		rule, want string
	}{
		{"pass in quick proto tcp from any to any port = 25 keep limit 2", ""},
		{"pass return-rst in log limit freq 5 quick proto tcp from 18.9.90.0/24 to any port = 25 keep limit 10 cumulative", ""},
		{"pass in proto tcp from any to any port = 25 keep limit 2", "r:1:1: keep limit: HP-UX allows it only on quick inbound proto tcp rules without keep state; this rule is not quick"},
		{"pass out quick proto tcp from any to any port = 25 keep limit 2", "this rule is not inbound"},
		{"pass in quick proto udp from any to any port = 25 keep limit 2", "this rule is not proto tcp"},
		{"pass in quick proto tcp/udp from any to any port = 25 keep limit 2", "this rule is not proto tcp"},
		{"pass in quick all keep limit 2", "this rule is not proto tcp"},
		{"pass in quick proto tcp from any to any port = 25 keep state keep limit 2", "this rule also keeps state"},
	} {
		rs, err := ipf.Parse("r", []byte(c.rule+"\n"), ipf.ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.rule, err)
		}
		_, err = Compile(rs)
		var re *ErrRule
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.rule, err)
		case c.want != "" && (!errors.As(err, &re) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an ErrRule saying %q", c.rule, err, c.want)
		}
	}
}

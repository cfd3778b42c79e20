package ipf

import (
	"strings"
	"testing"
)

// TestOptPrintNegatedSecClass: like optprint, the sec option is folded
// into sec-class on the negated side too, and sec-class follows the
// negated options after a comma.
func TestOptPrintNegatedSecClass(t *testing.T) {
	tests := []struct{ in, want string }{
		{"block in from any to any with not opt sec-class unclass",
			"block in inet from any to any with not opt sec-class unclass"},
		{"block in from any to any with not opt lsrr not opt sec-class unclass",
			"block in inet from any to any with not opt lsrr,sec-class unclass"},
		{"block in all with opt lsrr not opt sec-class secret",
			"block in inet from any to any with opt lsrr not opt sec-class secret"},
		{"block in all with opt ssrr,sec-class topsecret",
			"block in inet from any to any with opt ssrr,sec-class topsecret"},
		{"block in all with not opt sec",
			"block in inet from any to any with not opt sec"},
	}
	for _, tt := range tests {
		rs, err := Parse("t", []byte(tt.in+"\n"), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if got := FormatRule(rs[0]); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// TestRouteTargetUnresolvedMarks: with no interface looked up (ipf -n,
// ipftest -v) IPFilter's print_toif marks every route target without an
// address `(!)`, `-` and `*` too, where an `on -` stays unmarked
// (checked against ipf -Rnvf and ipftest -v).
func TestRouteTargetUnresolvedMarks(t *testing.T) {
	src := "pass in on nic0 to - all\npass in on nic0 dup-to * all\npass out on - reply-to - all\npass in on nic0 to -:1.1.1.1 all\n"
	want := []string{
		"pass in on nic0(!) to -(!) all",
		"pass in on nic0(!) dup-to *(!) all",
		"pass out on - reply-to -(!) all",
		"pass in on nic0(!) to -:1.1.1.1 inet all",
	}
	rules, err := Parse("t", []byte(src), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rules {
		if got := Format(r, PrintOptions{NoResolve: true, Verbose: true, Unresolved: MarkAllUnresolved}); got != want[i] {
			t.Errorf("rule %d: got %q, want %q", i+1, got, want[i])
		}
	}
}

// TestLogicalInterface: IPFilter takes a logical interface in `on` as its
// physical one and warns (checked against ipf -Rnvf and ipftest: a packet
// on nic0 matches `on nic0:1`).
func TestLogicalInterface(t *testing.T) {
	c, err := ParseConfig("t", []byte("pass in all\npass in on nic0:1,nic1:2 all\nblock in on {nic2:3, nic3} all\npass in on nic4:x all\n"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range c.Rules {
		got = append(got, FormatRule(r))
	}
	want := []string{"pass in all", "pass in on nic0,nic1 all", "block in on nic2 all", "block in on nic3 all", "pass in on nic4:x all"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var warns []string
	for _, w := range c.Warnings {
		warns = append(warns, w.String())
	}
	wantW := []string{
		"2: Logical interface nic0:1 unsupported, use the physical interface nic0 instead.",
		"2: Logical interface nic1:2 unsupported, use the physical interface nic1 instead.",
		"3: Logical interface nic2:3 unsupported, use the physical interface nic2 instead.",
	}
	if strings.Join(warns, "\n") != strings.Join(wantW, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warns, "\n"), strings.Join(wantW, "\n"))
	}
}

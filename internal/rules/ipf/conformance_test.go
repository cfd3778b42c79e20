package ipf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kitDir holds the copied parts of the IPFilter regression suite.
const kitDir = "testdata/kit"

// ipfRnvf renders a rule file exactly as `ipf -Rnvf FILE` prints it.
func ipfRnvf(t *testing.T, name string, src []byte, opts ParseOptions) (string, error) {
	t.Helper()
	opts.NoResolve = true
	rules, err := Parse(name, src, opts)
	var b strings.Builder
	po := PrintOptions{NoResolve: true, Verbose: true, Unresolved: MarkAllUnresolved}
	for _, r := range rules {
		b.WriteString(FormatInlineTables(r))
		b.WriteString(Format(r, po))
		b.WriteByte('\n')
	}
	return b.String(), err
}

// TestKitIFamily runs the i family of the conformance kit (ipf -Rnvf,
// parse and print) byte for byte. i17 is printed by ipftest -D, which
// belongs to the engine; here it only has to parse.
func TestKitIFamily(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(kitDir, "i", "regress", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no i tests found in %s: %v", kitDir, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ipfRnvf(t, "regress/"+name, src, ParseOptions{})
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if name == "i17" {
				t.Skip("i17 compares ipftest -D output (engine); it parses, which is all this package checks")
			}
			want, err := os.ReadFile(filepath.Join(kitDir, "i", "expected", name))
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("ipf -Rnvf regress/%s:\ngot:\n%s\nwant:\n%s", name, got, want)
			}
		})
	}
}

// TestKitRuleFilesParse checks that every ipf rule file of the other kit
// families parses (the engine loads them), and that each rule prints and
// re-parses to the same text.
func TestKitRuleFilesParse(t *testing.T) {
	var files []string
	for _, pat := range []string{"f/regress/*", "ipv6/regress/*", "l/regress/l1", "p/regress/*.ipf", "ni/regress/*.ipf"} {
		m, err := filepath.Glob(filepath.Join(kitDir, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 40 {
		t.Fatalf("found only %d rule files under %s", len(files), kitDir)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(kitDir, f)
		t.Run(rel, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			opts := ParseOptions{Inet6: strings.HasPrefix(rel, "ipv6")}
			rules, err := Parse(rel, src, opts)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if len(rules) == 0 && len(strings.TrimSpace(string(src))) > 0 {
				t.Fatalf("no rules in %s", rel)
			}
			for _, r := range rules {
				checkFixedPoint(t, r, opts)
			}
		})
	}
}

// checkFixedPoint requires print(parse(print(r))) == print(r).
func checkFixedPoint(t *testing.T, r *Rule, opts ParseOptions) {
	t.Helper()
	po := PrintOptions{Verbose: true}
	text := Format(r, po)
	again, err := Parse("printed", []byte(text), opts)
	if err != nil {
		t.Errorf("printed rule %q does not parse: %v", text, err)
		return
	}
	if len(again) != 1 {
		t.Errorf("printed rule %q parses to %d rules", text, len(again))
		return
	}
	if got := Format(again[0], po); got != text {
		t.Errorf("not a fixed point:\nfirst:  %s\nsecond: %s", text, got)
	}
}

package ipf

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// splitCorpus is the kit's and the examples' rule files and sources made
// to trip a parse in pieces: statements over several lines, variables
// defined before the cut and used after it, continuations, strings,
// `set` statements, `;` between statements, errors on either side.
func splitCorpus(t testing.TB) map[string]string {
	files := map[string]string{
		"multiline": "pass in\nfrom any\nto any\nblock in all\npass out proto tcp from any to any\nkeep state\nblock out all\n",
		"vars":      "ext = \"le0\"\nblock in on $ext all\npass in on $ext all\nblock out on $ext all\n",
		"var-later": "block in all\nnet = \"10.0.0.0/8\"\npass in from $net to any\npass out from $net to any\n",
		"predef":    "block in on $ext all\npass in on $ext all\n",
		"continued": "block in \\\nfrom any to any\npass in all\nblock \\\nin all\npass out all\n",
		"word-cont": "block in on le\\\n0 all\npass in all\n",
		"string":    "pass in all\nx = \"a\nblock in all\n\"\npass out all\n",
		"settings":  "set foo 1;\npass in all\nset bar true;\nblock in all\n",
		"semicolon": "pass in all; block in all\nblock out all;\npass out all\n",
		"collect":   "1 pass in all\n2 block in all\n@1 pass out all\nblock out all\n",
		"err-first": "pass in al\nblock in all\npass out all\n",
		"err-last":  "pass in all\nblock in all\npass out al\n",
		"err-many":  strings.Repeat("pass in bogus\n", 12) + "pass in all\n",
		"comments":  "# a\npass in all # b\n# c\nblock in all\n\n\npass out all\n",
		"crlf":      "pass in all\r\nblock in \\\r\nall\r\npass out all\r\n",
		"groups":    "block in all head 10\npass in from 1.2.3.4 to any group 10\nblock in all group 10\n",
		"expand":    "a = \"$b$b\"\nb = \"pass\"\n$a in all\n$b in all\n$b out all\n",
		"tail":      "pass in all\nkeep state\npass in all\nblock in all\n",
	}
	var paths []string
	for _, pat := range []string{"i/regress/*", "ni/regress/*", "ipv6/regress/*"} {
		m, _ := filepath.Glob(filepath.Join(kitDir, pat))
		paths = append(paths, m...)
	}
	ex, _ := filepath.Glob(filepath.Join(examplesDir, "*.conf"))
	paths = append(paths, ex...)
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = string(src)
	}
	return files
}

// checkSplit compares parseSplit at cuts with the single pass: when the
// pieces are accepted they must give the same rules and settings, and a
// file the single pass finds errors in must never be accepted.
func checkSplit(t testing.TB, name, src string, opts ParseOptions, cuts []int) {
	t.Helper()
	want, werr := parseSerial(name, src, opts)
	got, ok := parseSplit(name, src, opts, cuts)
	if werr != nil {
		if ok {
			t.Fatalf("%s cut at %v: pieces accepted, the single pass found %v", name, cuts, werr)
		}
		return
	}
	if !ok {
		return
	}
	if reflect.DeepEqual(want, got) {
		return // cmp.Diff alone made the test ten times slower
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("%s cut at %v: pieces differ from the single pass (-want +got):\n%s", name, cuts, d)
	}
}

// TestParseSplit cuts every file of the corpus at every line (in two
// pieces) and at pairs of lines (three), including the cuts splitPoints
// would never make.
func TestParseSplit(t *testing.T) {
	opts := []ParseOptions{{}, {Vars: map[string]string{"ext": "le1"}}}
	accepted := 0
	for name, src := range splitCorpus(t) {
		var lines []int
		for i := 0; i < len(src); i++ {
			if i > 0 && src[i-1] == '\n' {
				lines = append(lines, i)
			}
		}
		if len(lines) > 40 {
			// every line of the small files, 40 cuts of the big ones
			// (each cut parses the whole file twice)
			step := len(lines) / 40
			var some []int
			for i := 0; i < len(lines); i += step {
				some = append(some, lines[i])
			}
			lines = some
		}
		for _, o := range opts {
			for a, m := range lines {
				checkSplit(t, name, src, o, []int{m})
				if _, ok := parseSplit(name, src, o, []int{m}); ok {
					accepted++
				}
				if len(lines) < 30 {
					for _, m2 := range lines[a+1:] {
						checkSplit(t, name, src, o, []int{m, m2})
					}
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no cut was ever accepted: the pieces are never parsed apart")
	}
}

// TestParseSplitBlocklist is the shape ParseConfig cuts: a big blocklist
// parsed in pieces by splitPoints gives the single pass's rules, with a
// variable defined at the top and used throughout as well.
func TestParseSplitBlocklist(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 4000; i++ {
		b.WriteString("block in from 198.18.")
		b.WriteString(strings.Repeat("1", 1+i%3))
		b.WriteString(".1/32 to any\n")
	}
	src := b.String()
	for k := 2; k <= 4; k++ {
		cuts := splitPoints(src, k)
		if len(cuts) != k-1 {
			t.Fatalf("splitPoints(%d) = %v", k, cuts)
		}
		if _, ok := parseSplit("bl", src, ParseOptions{}, cuts); !ok {
			t.Errorf("a plain blocklist in %d pieces was not accepted", k)
		}
		checkSplit(t, "bl", src, ParseOptions{}, cuts)
		// a variable the pieces use, defined before the first cut: the
		// later pieces cannot know it, so the file is parsed in one pass
		vsrc := "p = \"block\"\n" + strings.ReplaceAll(src, "block in", "$p in")
		if _, ok := parseSplit("bl", vsrc, ParseOptions{}, splitPoints(vsrc, k)); ok {
			t.Errorf("a blocklist using a variable defined in the first piece was accepted in %d pieces", k)
		}
		checkSplit(t, "bl", vsrc, ParseOptions{}, splitPoints(vsrc, k))
	}
	// the error a single pass reports first is the one Parse reports
	bad := src[:len(src)/2] + "block in frum any\n" + src[len(src)/2:] + "pass in al\n"
	_, err := Parse("bl", []byte(strings.Repeat(bad, 1+bigFile/len(bad))), ParseOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "bl:2001:10: ") {
		t.Errorf("Parse of a big file with errors: %v, want the first at bl:2001:10", err)
	}
}

// FuzzParseSplit checks parseSplit against the single pass on any text
// cut at any line.
func FuzzParseSplit(f *testing.F) {
	for _, src := range splitCorpus(f) {
		f.Add(src, uint16(len(src)/2), uint16(len(src)*3/4))
	}
	f.Fuzz(func(t *testing.T, src string, a, b uint16) {
		cut := func(at uint16) int {
			i := int(at) % (len(src) + 1)
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return -1
			}
			return i + j + 1
		}
		x, y := cut(a), cut(b)
		if x <= 0 || x >= len(src) {
			return
		}
		checkSplit(t, "fuzz", src, ParseOptions{}, []int{x})
		if y > x && y < len(src) {
			checkSplit(t, "fuzz", src, ParseOptions{}, []int{x, y})
		}
	})
}

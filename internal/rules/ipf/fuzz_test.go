package ipf

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParsePrint checks that the parser never panics and that printing
// is a fixed point: a printed rule parses back to a rule that prints the
// same. The seed corpus is every line of the kit's rule files and the
// example files.
func FuzzParsePrint(f *testing.F) {
	var files []string
	for _, pat := range []string{"i/regress/*", "f/regress/*", "ipv6/regress/*", "l/regress/*", "p/regress/*", "ni/regress/*"} {
		m, _ := filepath.Glob(filepath.Join(kitDir, pat))
		files = append(files, m...)
	}
	ex, _ := filepath.Glob(filepath.Join(examplesDir, "*.conf"))
	files = append(files, ex...)
	for _, fn := range files {
		src, err := os.ReadFile(fn)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src))
		sc := bufio.NewScanner(bytes.NewReader(src))
		for sc.Scan() {
			f.Add(sc.Text())
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		for _, opts := range []ParseOptions{{}, {Inet6: true}} {
			rules, _ := Parse("fuzz", []byte(src), opts)
			for _, r := range rules {
				// rule-ttl prints as a comment (# rule-ttl N), so it is
				// the one field printing drops on purpose.
				r.RuleTTL = 0
				checkFixedPoint(t, r, opts)
				_ = FormatInlineTables(r)
			}
		}
	})
}

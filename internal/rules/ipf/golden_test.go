package ipf

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// examplesDir holds the example ipf.conf files shipped with Sluice.
const examplesDir = "../../../examples/ipf"

// TestExamplesGolden parses every example rule file, compares the
// `ipf -Rnvf` rendering with testdata/golden/NAME.out (refresh with
// -update), and checks that each printed rule round-trips.
func TestExamplesGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.conf"))
	if err != nil || len(files) < 5 {
		t.Fatalf("found %d example files in %s: %v", len(files), examplesDir, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".conf")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ipfRnvf(t, filepath.Base(f), src, ParseOptions{})
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			golden := filepath.Join("testdata", "golden", name+".out")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
			rules, _ := Parse(name, src, ParseOptions{})
			for _, r := range rules {
				r.RuleTTL = 0
				checkFixedPoint(t, r, ParseOptions{})
			}
		})
	}
}

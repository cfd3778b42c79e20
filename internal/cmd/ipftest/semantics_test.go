package ipftest

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/semantics/*/want from the current output")

// TestSemantics runs ipftest on the cases under testdata/semantics: each
// directory holds the configuration files and packets of one behaviour of
// IPFilter's beyond the regression kit (IP option lists and security
// classes with state, destination lists with keep state, IPv6 fragments,
// the rcmd proxy, NAT on interface pairs, ...), `args` (a comment line,
// then the command line, run in that directory) and `want`, the output.
// The cases were written for Sluice; their expected outputs are what
// IPFilter's own ipftest prints for them (../shared/ipf-diff/bin).
func TestSemantics(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "semantics", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, "args"))
			if err != nil {
				t.Fatal(err)
			}
			var args []string
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(l, "#") {
					args = append(args, strings.Fields(l)...)
				}
			}
			var out, errb bytes.Buffer
			open := func(name string) (io.ReadCloser, error) {
				if !filepath.IsAbs(name) {
					name = filepath.Join(dir, name)
				}
				return os.Open(name)
			}
			Main(Env{Args: args, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Open: open})
			wantFile := filepath.Join(dir, "want")
			if *update {
				if err := os.WriteFile(wantFile, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("ipftest %s:\ngot:\n%s\nwant:\n%s\nstderr: %s", strings.Join(args, " "), got, want, errb.String())
			}
		})
	}
}

// Package kittest runs one command family of the IPFilter conformance kit
// (see /work/shared/ipf-conformance/README.md) from a package's tests, the
// way the kit's reference runner does: from the family folder, with the
// case's command line, stdout compared byte for byte with expected/NAME.
package kittest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/conformance"
)

// Dir returns the kit a package tests against: its own copy of the
// families it needs in testdata/kit (so the tests run without the shared
// kit), or the complete kit named by SLUICE_IPF_KIT, which also runs the
// cases kept back from the copy.
func Dir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("SLUICE_IPF_KIT"); d != "" {
		return d
	}
	d, err := filepath.Abs("testdata/kit")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Cases returns the names of the kit's cases of the given family, in
// manifest order. It fails the test when there are none, since a run
// that checks nothing would pass silently.
func Cases(t testing.TB, kit, family string) []string {
	t.Helper()
	tests, err := conformance.LoadManifest(kit)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range tests {
		if c.Family == family {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		t.Fatalf("no %q cases in %s/manifest.tsv", family, kit)
	}
	return names
}

// MustPass reads the ratchet file (whitespace-separated case names):
// the cases that must pass, as opposed to known failures.
func MustPass(t testing.TB, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, l := range strings.Fields(string(b)) {
		m[l] = true
	}
	return m
}

// MainFunc is a command's in-process entry point (its exit status).
type MainFunc func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

// RunInProcess runs every case of the family through main, with the
// command line args(name), from the family folder, each as a subtest.
// Cases in testdata/must_pass.txt must pass; the others are reported by
// name (t.Skip) as known failures.
func RunInProcess(t *testing.T, family string, args func(name string) []string, main MainFunc) {
	t.Helper()
	kit := Dir(t)
	must := MustPass(t, "testdata/must_pass.txt")
	cases := Cases(t, kit, family)
	t.Chdir(filepath.Join(kit, family))
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("expected", name))
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			main(args(name), strings.NewReader(""), &out, &errb)
			if out.String() != string(want) {
				msg := "got:\n" + out.String() + "\nwant:\n" + string(want) + "\nstderr: " + errb.String()
				if must[name] {
					t.Fatal(msg)
				}
				t.Skip("known failure: " + msg)
			}
		})
	}
}

// RunBinary builds the command pkg (an import path such as
// "sluice/cmd/ipnat") and runs the named cases of the family through the
// binary, as the reference runner does. It is skipped with -short.
func RunBinary(t *testing.T, pkg, family string, args func(name string) []string, names ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a binary")
	}
	kit := Dir(t)
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range names {
		cmd := exec.Command(bin, args(name)...)
		cmd.Dir = filepath.Join(kit, family)
		got, _ := cmd.Output()
		want, err := os.ReadFile(filepath.Join(kit, family, "expected", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: output differs:\n%s", name, got)
		}
	}
}

package ipnatcmd

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kitDir returns the IPFilter conformance kit: the "in" family is copied
// into testdata/kit (IPFILTER.LICENCE there); SLUICE_IPF_KIT may point at
// a complete kit instead.
func kitDir(t *testing.T) string {
	if d := os.Getenv("SLUICE_IPF_KIT"); d != "" {
		return d
	}
	d, err := filepath.Abs("testdata/kit")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func kitCases(t *testing.T, kit, family string) []string {
	f, err := os.Open(filepath.Join(kit, "manifest.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) > 2 && cols[1] == family {
			names = append(names, cols[0])
		}
	}
	return names
}

// TestConformanceIN runs the kit's in_test cases in process:
// "ipnat -Rnvf regress/T" from the family folder, stdout compared byte
// for byte. Cases listed in testdata/must_pass.txt must pass; others are
// reported by name as known failures.
func TestConformanceIN(t *testing.T) {
	kit := kitDir(t)
	b, err := os.ReadFile("testdata/must_pass.txt")
	if err != nil {
		t.Fatal(err)
	}
	must := map[string]bool{}
	for _, l := range strings.Fields(string(b)) {
		must[l] = true
	}
	t.Chdir(filepath.Join(kit, "in"))
	cases := kitCases(t, kit, "in")
	if len(cases) == 0 {
		t.Fatal("no in_test cases in the manifest")
	}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("expected", name))
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			Main([]string{"-Rnvf", "regress/" + name}, strings.NewReader(""), &out, &errb)
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

// TestBinary builds cmd/ipnat and runs the kit's in_test command line
// through it, as the reference runner does.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	kit := kitDir(t)
	bin := filepath.Join(t.TempDir(), "ipnat")
	build := exec.Command("go", "build", "-o", bin, "sluice/cmd/ipnat")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"in1", "in2", "in1_6"} {
		cmd := exec.Command(bin, "-Rnvf", "regress/"+name)
		cmd.Dir = filepath.Join(kit, "in")
		got, _ := cmd.Output()
		want, err := os.ReadFile(filepath.Join(kit, "in", "expected", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: output differs:\n%s", name, got)
		}
	}
}

func TestMainFlags(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		code  int
		out   string
	}{
		{[]string{"-nvf", "-"}, "map le0 10.0.0.0/8 -> 1.2.3.4\n", 0, "map le0 10.0.0.0/8 -> 1.2.3.4/32\n"},
		{[]string{"-nf", "-"}, "map le0 10.0.0.0/8 -> 1.2.3.4\n", 0, ""},
		{[]string{"-nvf", "-"}, "map le0 10.0.0.0/8 ->\n", 1, ""},
		{[]string{"-CFn"}, "", 0, "0 entries flushed from NAT table\n0 entries flushed from NAT list\n"},
		{[]string{"-l"}, "", 1, ""},
		{[]string{"-f", "-"}, "map le0 10.0.0.0/8 -> 1.2.3.4\n", 1, ""}, // no device to load into
		{[]string{"-Q"}, "", 1, ""},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		code := Main(tc.args, strings.NewReader(tc.stdin), &out, &errb)
		if code != tc.code || out.String() != tc.out {
			t.Errorf("%v: got exit %d output %q, want %d %q (stderr %q)", tc.args, code, out.String(), tc.code, tc.out, errb.String())
		}
	}
}

package ipf

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"sluice/internal/getopt"
	"sluice/internal/rules/ipf"
)

const kitI = "../../rules/ipf/testdata/kit/i"

func run(t *testing.T, c *Command, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	code := c.Run(args)
	return out.String(), errb.String(), code
}

func TestGetopt(t *testing.T) {
	type o struct {
		Opt byte
		Arg string
	}
	tests := []struct {
		args []string
		want []o
		rest int
		err  string
	}{
		{[]string{"-Rnvf", "x"}, []o{{'R', ""}, {'n', ""}, {'v', ""}, {'f', "x"}}, 2, ""},
		{[]string{"-Fa", "-f", "x"}, []o{{'F', "a"}, {'f', "x"}}, 3, ""},
		{[]string{"-F", "a", "-I", "-s"}, []o{{'F', "a"}, {'I', ""}, {'s', ""}}, 4, ""},
		{[]string{"-n", "--", "-v"}, []o{{'n', ""}}, 2, ""},
		{[]string{"-n", "file"}, []o{{'n', ""}}, 1, ""},
		{[]string{"-q"}, nil, 0, "illegal option -- q"},
		{[]string{"-nf"}, []o{{'n', ""}}, 0, "option requires an argument -- f"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := getopt.New(tc.args, optString)
			var got []o
			var gerr error
			for {
				opt, ok, err := g.Next()
				if err != nil {
					gerr = err
					break
				}
				if !ok {
					break
				}
				got = append(got, o{opt.Flag, opt.Arg})
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("options (-want +got):\n%s", d)
			}
			if tc.err != "" {
				if gerr == nil || gerr.Error() != tc.err {
					t.Errorf("error = %v, want %q", gerr, tc.err)
				}
				return
			}
			if gerr != nil || g.Optind() != tc.rest {
				t.Errorf("optind = %d, err = %v; want %d, nil", g.Optind(), gerr, tc.rest)
			}
		})
	}
}

// TestKitIInProcess runs `ipf -Rnvf regress/T` through Command for the i
// family (i17 needs ipftest and is the engine's).
func TestKitIInProcess(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(kitI, "regress", "*"))
	if len(files) == 0 {
		t.Fatal("no i tests")
	}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "i17" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			c := &Command{ReadFile: func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(kitI, p)) }}
			out, _, code := run(t, c, "-Rnvf", "regress/"+name)
			if code != 0 {
				t.Fatalf("exit status %d", code)
			}
			want, err := os.ReadFile(filepath.Join(kitI, "expected", name))
			if err != nil {
				t.Fatal(err)
			}
			if out != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", out, want)
			}
		})
	}
}

// TestBinaryKitI builds cmd/ipf and runs it as the kit's i_test driver
// does: cwd is the family folder, stdout compared byte for byte.
func TestBinaryKitI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "ipf")
	build := exec.Command("go", "build", "-o", bin, "sluice/cmd/ipf")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir, err := filepath.Abs(kitI)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "regress", "*"))
	for _, f := range files {
		name := filepath.Base(f)
		if name == "i17" {
			continue
		}
		cmd := exec.Command(bin, "-Rnvf", "regress/"+name)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want, _ := os.ReadFile(filepath.Join(dir, "expected", name))
		if string(out) != string(want) {
			t.Errorf("%s: got:\n%s\nwant:\n%s", name, out, want)
		}
	}
	// A parse error exits non-zero with a positioned message on stderr.
	cmd := exec.Command(bin, "-nf", "-")
	cmd.Stdin = strings.NewReader("pass in from 1.2.3.4/40 to any\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Error("ipf -nf with a bad rule exited 0")
	}
	if !strings.Contains(stderr.String(), "-:1:22: expected prefix length 0-32") {
		t.Errorf("stderr = %q", stderr.String())
	}
}

func TestKernelFlagsWithoutBackend(t *testing.T) {
	for _, args := range [][]string{{"-Fa"}, {"-E"}, {"-D"}, {"-s"}, {"-y"}, {"-Z"}, {"-FS"}, {"-l", "block"}, {"-T", "list"}, {"-f", "-"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			c := &Command{Stdin: strings.NewReader("pass in all\n")}
			_, stderr, code := run(t, c, args...)
			if code == 0 || !strings.Contains(stderr, "kernel datapath not available") {
				t.Errorf("exit %d, stderr %q; want failure naming the missing datapath", code, stderr)
			}
		})
		t.Run("-n "+strings.Join(args, " "), func(t *testing.T) {
			c := &Command{Stdin: strings.NewReader("pass in all\n")}
			_, stderr, code := run(t, c, append([]string{"-n"}, args...)...)
			if code != 0 {
				t.Errorf("with -n: exit %d, stderr %q; want success", code, stderr)
			}
		})
	}
}

func TestUsageAndOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: ipf"},
		{[]string{"-q"}, "illegal option -- q"},
		{[]string{"-Fx"}, "-F x: expected i, o, a, s, S or a number"},
		{[]string{"-l", "loud"}, "-l loud: expected pass"},
		{[]string{"-m", "nonsense"}, "-m: "},
		{[]string{"-n", "extra"}, "usage: ipf"},
		{[]string{"-nf", "/nonexistent/file"}, "reading /nonexistent/file"},
		{[]string{"-n", "-T", "state_max="}, "-T state_max=: missing value for state_max"},
		{[]string{"-n", "-T", "Bad Name"}, "bad tunable name"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := run(t, &Command{}, tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want failure containing %q", code, stderr, tc.want)
			}
		})
	}
}

func TestVersionAndPredefined(t *testing.T) {
	out, _, code := run(t, &Command{}, "-nV")
	if code != 0 || !strings.HasPrefix(out, "ipf: "+Version+"\n") {
		t.Errorf("-V: exit %d, out %q", code, out)
	}
	c := &Command{
		Stdin:  strings.NewReader("pass in on $ext from $net to any\n"),
		Getenv: func(k string) string { return map[string]string{"IPF_PREDEFINED": `ext=le0; net="10.0.0.0/8"`}[k] },
	}
	out, stderr, code := run(t, c, "-Rnvf", "-")
	if want := "pass in on le0(!) inet from 10.0.0.0/8 to any\n"; code != 0 || out != want {
		t.Errorf("exit %d, out %q (stderr %q), want %q", code, out, stderr, want)
	}
}

// fakeBackend records the calls ipf makes.
type fakeBackend struct {
	calls []string
	fail  error
}

func (f *fakeBackend) log(s string) error { f.calls = append(f.calls, s); return f.fail }

func (f *fakeBackend) AddRules(set Set, rules []*ipf.Rule, remove bool) error {
	var s []string
	for _, r := range rules {
		s = append(s, ipf.FormatRule(r))
	}
	verb := "add"
	if remove {
		verb = "remove"
	}
	return f.log(verb + " set" + string('0'+rune(set)) + ": " + strings.Join(s, "; "))
}
func (f *fakeBackend) FlushRules(set Set, w FlushWhich) (int, error) {
	return 3, f.log("flush set" + string('0'+rune(set)) + " " + string('0'+rune(w)))
}
func (f *fakeBackend) FlushState(arg string, e []ipf.ExprClause) (int, error) {
	return 2, f.log("flushstate " + arg + " " + ipf.FormatExpr(e))
}
func (f *fakeBackend) Swap() (int, error) { return 1, f.log("swap") }
func (f *fakeBackend) SetEnabled(on bool) error {
	return f.log(map[bool]string{true: "enable", false: "disable"}[on])
}
func (f *fakeBackend) ZeroStats() (string, error) { return "zeroed\n", f.log("zerostats") }
func (f *fakeBackend) SetLogFlags(w string) error { return f.log("log " + w) }
func (f *fakeBackend) Tunables(a string) (string, error) {
	return "state_max\tmin 1\tmax 2147483647\tcurrent 4013\n", f.log("tune " + a)
}
func (f *fakeBackend) SyncInterfaces() error { return f.log("sync") }
func (f *fakeBackend) Status() (string, error) {
	return "Kernel: " + Version + "\nRunning: yes\n", f.log("status")
}
func (f *fakeBackend) ZeroRuleCounters(set Set, r *ipf.Rule) (uint64, uint64, error) {
	return 7, 700, f.log("zero " + ipf.FormatRule(r))
}

func TestBackendCalls(t *testing.T) {
	fb := &fakeBackend{}
	c := &Command{Backend: fb, Stdin: strings.NewReader("pass in all\nblock out all\n")}
	out, stderr, code := run(t, c, "-Fa", "-I", "-f", "-", "-s", "-m", "tcp.state=4;", "-vFS", "-E", "-T", "state_max", "-Z", "-V")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	wantCalls := []string{
		"flush set0 3", "add set1: pass in all; block out all", "swap",
		"flushstate S tcp.state = 4;", "enable", "tune state_max", "zerostats", "status",
	}
	if d := cmp.Diff(wantCalls, fb.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	// -v comes after -f and -Fa, so neither the rules nor the flush count print.
	wantOut := "Set 1 now inactive\n2 state entries removed\n" +
		"state_max\tmin 1\tmax 2147483647\tcurrent 4013\nzeroed\nipf: " + Version + "\nKernel: " + Version + "\nRunning: yes\n"
	if out != wantOut {
		t.Errorf("stdout:\n%q\nwant:\n%q", out, wantOut)
	}

	// A failing backend makes ipf fail with the wrapped reason.
	fb = &fakeBackend{fail: errors.New("map full")}
	c = &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}
	_, stderr, code = run(t, c, "-f", "-")
	if code == 0 || !strings.Contains(stderr, "loading -: map full") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}

	// -r removes, -z prints and zeroes counters.
	fb = &fakeBackend{}
	c = &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}
	if _, stderr, code = run(t, c, "-rf", "-"); code != 0 || len(fb.calls) != 1 || fb.calls[0] != "remove set0: pass in all" {
		t.Errorf("-r: exit %d %s calls %v", code, stderr, fb.calls)
	}
	fb = &fakeBackend{}
	c = &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}
	out, _, code = run(t, c, "-zf", "-")
	if code != 0 || !strings.HasPrefix(out, "hits 7 bytes 700 pass in all") {
		t.Errorf("-z: exit %d out %q", code, out)
	}
}

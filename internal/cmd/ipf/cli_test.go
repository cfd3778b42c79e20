package ipf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"sluice/internal/getopt"
	"sluice/internal/ipfctl"
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
	noPins := filepath.Join(t.TempDir(), "no-pins")
	files, _ := filepath.Glob(filepath.Join(dir, "regress", "*"))
	for _, f := range files {
		name := filepath.Base(f)
		if name == "i17" {
			continue
		}
		cmd := exec.Command(bin, "-Rnvf", "regress/"+name)
		cmd.Dir = dir
		// no loaded filter to compare with, whatever this host runs
		cmd.Env = append(os.Environ(), ipfctl.PinDirEnv+"="+noPins)
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

// fakeBackend records the operations ipf hands over and answers with
// canned results.
type fakeBackend struct {
	calls   []string
	fail    error
	diff    *ipfctl.Diff
	within  time.Duration
	confirm int
}

func (f *fakeBackend) Apply(ops []ipfctl.Op, opts ipfctl.ApplyOptions) ([]ipfctl.Result, error) {
	f.within = opts.ConfirmWithin
	res := make([]ipfctl.Result, len(ops))
	for i, op := range ops {
		var rs []string
		for _, r := range op.Rules {
			rs = append(rs, ipf.FormatRule(r))
		}
		call := fmt.Sprintf("%v set%d", op.Kind, op.Set)
		switch op.Kind {
		case ipfctl.OpAdd, ipfctl.OpRemove, ipfctl.OpZeroRules:
			call += ": " + strings.Join(rs, "; ")
		case ipfctl.OpFlush:
			call += fmt.Sprintf(" %d", op.Which)
			res[i].Count = 3
		case ipfctl.OpFlushState:
			call = fmt.Sprintf("-F %s %s", op.Arg, ipf.FormatExpr(op.Expr))
			res[i].Count = 2
		case ipfctl.OpSwap:
			res[i].SetNo = 1
		case ipfctl.OpZeroStats:
			res[i].Text = "zeroed\n"
		case ipfctl.OpTunables:
			call += " " + op.Arg
			res[i].Text = "state_max\tmin 1\tmax 2147483647\tcurrent 4013\n"
		case ipfctl.OpStatus:
			res[i].Text = "Kernel: " + Version + "\nRunning: yes\n"
		case ipfctl.OpLogFlags, ipfctl.OpDCA:
			call += " " + op.Arg
		}
		if op.Kind == ipfctl.OpZeroRules {
			for _, r := range op.Rules {
				res[i].Counters = append(res[i].Counters, ipfctl.ZeroedRule{Rule: r, Hits: 7, Bytes: 700})
			}
		}
		f.calls = append(f.calls, call)
	}
	if f.fail != nil {
		return nil, f.fail
	}
	return res, nil
}

func (f *fakeBackend) Plan(ops []ipfctl.Op) (*ipfctl.Diff, error) {
	for _, op := range ops {
		f.calls = append(f.calls, "plan "+op.Kind.String())
	}
	return f.diff, f.fail
}

func (f *fakeBackend) Confirm() error { f.confirm++; return f.fail }

func TestBackendCalls(t *testing.T) {
	fb := &fakeBackend{}
	c := &Command{Backend: fb, Stdin: strings.NewReader("pass in all\nblock out all\n")}
	out, stderr, code := run(t, c, "-Fa", "-I", "-f", "-", "-s", "-m", "tcp.state=4;", "-vFS", "-E", "-T", "state_max", "-Z", "-V")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	wantCalls := []string{
		"-F set0 3", "-f set1: pass in all; block out all", "-s set1",
		"-F S tcp.state = 4;", "-E set1", "-T set1 state_max", "-Z set1", "-V set1",
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

	// A failing backend makes ipf fail with its reason.
	fb = &fakeBackend{fail: errors.New("map full")}
	c = &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}
	_, stderr, code = run(t, c, "-f", "-")
	if code != 1 || !strings.Contains(stderr, "ipf: map full") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}

	// -r removes, -z prints and zeroes counters.
	fb = &fakeBackend{}
	c = &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}
	if _, stderr, code = run(t, c, "-rf", "-"); code != 0 || len(fb.calls) != 1 || fb.calls[0] != "-r -f set0: pass in all" {
		t.Errorf("-r: exit %d %s calls %v", code, stderr, fb.calls)
	}
	fb = &fakeBackend{}
	c = &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}
	out, _, code = run(t, c, "-zf", "-")
	if code != 0 || !strings.HasPrefix(out, "hits 7 bytes 700 pass in all") {
		t.Errorf("-z: exit %d out %q", code, out)
	}
}

// TestWholeLineCheckedFirst: a command line whose later file does not
// parse (ipf -Fa -f typo.conf) reaches the backend not at all, so the
// flush before it does not happen either.
func TestWholeLineCheckedFirst(t *testing.T) {
	files := map[string]string{"good.conf": "pass in all\n", "typo.conf": "pass in from 1.2.3.4/40 to any\n"}
	for _, args := range [][]string{
		{"-Fa", "-f", "typo.conf"},
		{"-Fa", "-f", "good.conf", "-f", "typo.conf", "-s"},
		{"-FS", "-l", "loud", "-f", "good.conf"},
		{"-Fa", "-f", "missing.conf"},
		{"-Fa", "-T", "Bad Name"},
		{"-Fa", "-m", "nonsense", "-FS"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			fb := &fakeBackend{}
			c := &Command{Backend: fb, ReadFile: func(n string) ([]byte, error) {
				if s, ok := files[n]; ok {
					return []byte(s), nil
				}
				return nil, os.ErrNotExist
			}}
			_, stderr, code := run(t, c, args...)
			if code != 1 || len(fb.calls) != 0 {
				t.Errorf("exit %d, backend calls %v (stderr %q); want 1 and none", code, fb.calls, stderr)
			}
		})
	}
}

func TestConfirmAndRollbackFlags(t *testing.T) {
	fb := &fakeBackend{}
	c := &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}
	out, stderr, code := run(t, c, "-W", "30", "-Fa", "-f", "-")
	if code != 0 || fb.within != 30*time.Second || !strings.Contains(out, "rolled back in 30 s unless confirmed with ipf -C") {
		t.Errorf("-W 30: exit %d, within %v, out %q, stderr %q", code, fb.within, out, stderr)
	}
	if _, _, code := run(t, &Command{Backend: fb}, "-C"); code != 0 || fb.confirm != 1 {
		t.Errorf("-C: exit %d, confirms %d", code, fb.confirm)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-W", "0", "-Fa"}, 2, "-W 0: expected a number of seconds"},
		{[]string{"-W", "x", "-Fa"}, 2, "-W x: expected"},
		{[]string{"-W", "10", "-FS"}, 2, "nothing to roll back"},
		{[]string{"-C", "-Fa"}, 2, "-C confirms a pending -W load"},
	} {
		_, stderr, code := run(t, &Command{Backend: &fakeBackend{}}, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	fb = &fakeBackend{fail: ipfctl.ErrNotConfirmable}
	if _, stderr, code := run(t, &Command{Backend: fb}, "-C"); code != 1 || !strings.Contains(stderr, "no load is waiting") {
		t.Errorf("-C with nothing pending: exit %d stderr %q", code, stderr)
	}
}

func TestDryRunReportsChanges(t *testing.T) {
	fb := &fakeBackend{diff: &ipfctl.Diff{Lists: []ipfctl.ListDiff{
		{Set: ipfctl.SetActive, Dir: ipf.DirIn, Added: []string{"pass in all"}, Removed: []string{"block in all"}},
		{Set: ipfctl.SetActive, Group: "100", Added: []string{"block in from 10.0.0.0/8 to any group 100"}, Reordered: true},
	}}}
	c := &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}
	out, stderr, code := run(t, c, "-n", "-Fa", "-f", "-")
	want := "# active set, main list in: 1 added, 1 removed\n- block in all\n+ pass in all\n" +
		"# active set, group 100: 1 added, 0 removed, order changed\n+ block in from 10.0.0.0/8 to any group 100\n"
	if code != 0 || out != want {
		t.Errorf("exit %d (stderr %q), out:\n%s\nwant:\n%s", code, stderr, out, want)
	}
	if d := cmp.Diff([]string{"plan -F", "plan -f"}, fb.calls); d != "" {
		t.Errorf("plan calls (-want +got):\n%s", d)
	}
	// a dry run that would fail says so
	fb = &fakeBackend{fail: errors.New("x.conf:1: rule not loaded: block in all")}
	_, stderr, code = run(t, &Command{Backend: fb, Stdin: strings.NewReader("pass in all\n")}, "-n", "-f", "-")
	if code != 1 || !strings.Contains(stderr, "rule not loaded") {
		t.Errorf("failing plan: exit %d stderr %q", code, stderr)
	}
}

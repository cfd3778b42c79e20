package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sluice/internal/testutil"
)

// Separators the upstream drivers append after each case.
var (
	sep8  = []byte("--------\n")
	sep31 = []byte(strings.Repeat("-", 31) + "\n")
)

// Tools holds the command of each tool; an empty command means the tool
// is missing and tests needing it are skipped.
type Tools struct {
	IPFTest, IPF, IPNAT, IPPool, IPMon []string
	// Timeout bounds each command (0 = 60 s).
	Timeout time.Duration
}

// Output is one compared output of a test.
type Output struct {
	// Expected is the expected file relative to the family folder.
	Expected string
	Got      []byte
}

// ErrSkip wraps the reason a test cannot run (missing tool, no IPv6).
var ErrSkip = errors.New("skip")

// ErrExit reports a command that failed where the driver checks the exit
// status (the upstream driver would stop there).
var ErrExit = errors.New("command failed")

// Result is the outcome of one test.
type Result struct {
	Test Test
	// Pass is true when every output equals its expected file.
	Pass bool
	// Skip holds the reason when the test could not run.
	Skip string
	// Err is a driver error (exit status, timeout).
	Err error
	// Diff describes the first difference of each differing output.
	Diff []string
	// Stderr is everything the commands wrote to stderr.
	Stderr []byte
}

// runner runs the commands of one test in a scratch directory.
type runner struct {
	tools  *Tools
	kit    string
	famDir string
	cwd    string
	// env is the commands' environment: this process's, with the pins
	// and the pool store pointed at empty directories (OfflineEnv).
	env    []string
	stderr bytes.Buffer
}

func (r *runner) run(argv []string, stdin []byte, env []string, check bool, what string) ([]byte, error) {
	to := r.tools.Timeout
	if to == 0 {
		to = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), to)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = r.cwd
	cmd.Stdin = bytes.NewReader(stdin)
	if env == nil {
		env = r.env
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &r.stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %s timed out after %v", ErrExit, what, to)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, fmt.Errorf("%w: cannot run %s: %v", ErrExit, argv[0], err)
	}
	if check && err != nil {
		return nil, fmt.Errorf("%w: %s exited with status %d", ErrExit, what, ee.ExitCode())
	}
	return out.Bytes(), nil
}

func (r *runner) ipftest(args []string, stdin []byte) ([]byte, error) {
	return r.run(append(append([]string(nil), r.tools.IPFTest...), args...), stdin, nil, true, "ipftest")
}

func (r *runner) tool(cmd []string, name string) ([]string, error) {
	if len(cmd) == 0 {
		return nil, fmt.Errorf("%w: no %s tool", ErrSkip, name)
	}
	return append([]string(nil), cmd...), nil
}

func (r *runner) rules(path string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(r.famDir, path))
	if err != nil {
		return nil, err
	}
	return ShReadLines(b), nil
}

func line(s string) []byte { return []byte(s + "\n") }

// Run runs one test the way the kit's run script does and compares its
// outputs byte for byte with the expected files.
func Run(kit string, tools *Tools, t Test) Result {
	res := Result{Test: t}
	if len(tools.IPFTest) == 0 {
		res.Skip = "no ipftest tool"
		return res
	}
	famDir := filepath.Join(kit, t.Family)
	tmp, err := os.MkdirTemp("", "ipfconf-")
	if err != nil {
		res.Err = err
		return res
	}
	defer os.RemoveAll(tmp)
	for _, d := range []string{"regress", "input", "expected"} {
		src := filepath.Join(famDir, d)
		if st, err := os.Stat(src); err == nil && st.IsDir() {
			if err := os.Symlink(src, filepath.Join(tmp, d)); err != nil {
				res.Err = err
				return res
			}
		}
	}
	// The kit's commands are the offline tools: on a host with a live
	// filter ipf -n would add "what would change" lines to the output
	// and ipnat -f would load into it, so they see none.
	env, err := testutil.OfflineEnv(os.Environ(), filepath.Join(tmp, ".offline"))
	if err != nil {
		res.Err = err
		return res
	}
	r := &runner{tools: tools, kit: kit, famDir: famDir, cwd: tmp, env: env}
	var outs []Output
	switch t.Driver {
	case "f_test":
		outs, err = r.fTest(t)
	case "f_m_test":
		outs, err = r.fMTest(t)
	case "n_test":
		outs, err = r.nTest(t)
	case "ni_test":
		outs, err = r.niTest(t)
	case "p_test":
		outs, err = r.pTest(t)
	case "i_test":
		outs, err = r.iTest(t)
	case "in_test":
		outs, err = r.inTest(t)
	case "ip_test":
		outs, err = r.ipTest(t)
	case "ipv6_test":
		outs, err = r.ipv6Test(t)
	case "logtest":
		outs, err = r.logTest(t)
	case "bpf_test":
		outs, err = r.bpfTest(t)
	default:
		err = fmt.Errorf("unknown driver %q", t.Driver)
	}
	res.Stderr = r.stderr.Bytes()
	if errors.Is(err, ErrSkip) {
		res.Skip = strings.TrimPrefix(err.Error(), "skip: ")
		return res
	}
	if err != nil {
		res.Err = err
		return res
	}
	res.Pass = true
	for _, o := range outs {
		want, err := os.ReadFile(filepath.Join(famDir, o.Expected))
		if err != nil {
			res.Err = err
			res.Pass = false
			return res
		}
		if !bytes.Equal(want, o.Got) {
			res.Pass = false
			res.Diff = append(res.Diff, o.Expected+": "+FirstDiff(want, o.Got))
		}
	}
	return res
}

// FirstDiff describes where got first differs from want.
func FirstDiff(want, got []byte) string {
	wl := bytes.SplitAfter(want, []byte("\n"))
	gl := bytes.SplitAfter(got, []byte("\n"))
	for k := 0; k < len(wl) || k < len(gl); k++ {
		var w, g []byte
		if k < len(wl) {
			w = wl[k]
		}
		if k < len(gl) {
			g = gl[k]
		}
		if !bytes.Equal(w, g) {
			return fmt.Sprintf("line %d: want %q, got %q", k+1, w, g)
		}
	}
	return "equal"
}

// optArgs maps option words: "-x" stays, anything else becomes "-T word".
func optArgs(words []string) []string {
	var a []string
	for _, o := range words {
		if strings.HasPrefix(o, "-") {
			a = append(a, o)
		} else {
			a = append(a, "-T", o)
		}
	}
	return a
}

func (r *runner) fTest(t Test) ([]Output, error) {
	args := optArgs(t.Options)
	rules, err := r.rules("regress/" + t.Name)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, rule := range rules {
		a := append(append([]string(nil), args...), "-F", t.InputFormat, "-Rbr", "-", "-i", "input/"+t.Name)
		b, err := r.ipftest(a, line(rule))
		if err != nil {
			return nil, err
		}
		out = append(append(out, b...), sep8...)
	}
	return []Output{{"expected/" + t.Name, out}}, nil
}

func (r *runner) fMTest(t Test) ([]Output, error) {
	a := []string{"-M", "user", "-F", t.InputFormat}
	if len(t.Options) > 0 {
		a = append(a, t.Options[0]) // the driver only passes $4
	}
	a = append(a, "-Rbr", "regress/"+t.Name, "-i", "input/"+t.Name)
	b, err := r.ipftest(a, nil)
	if err != nil {
		return nil, err
	}
	return []Output{{"expected/" + t.Name, append(b, sep8...)}}, nil
}

func fmtArgs(t Test) []string {
	if t.OutputFormat == "hex" {
		return []string{"-xF", t.InputFormat}
	}
	return []string{"-F", t.InputFormat}
}

func (r *runner) nTest(t Test) ([]Output, error) {
	f := fmtArgs(t)
	if len(t.Options) > 0 { // the driver only looks at $4
		f = append(optArgs(t.Options[:1]), f...)
	}
	rules, err := r.rules("regress/" + t.Name)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, rule := range rules {
		a := append(append([]string(nil), f...), "-M", "user", "-DRbN", "-", "-i", "input/"+t.Name)
		b, err := r.ipftest(a, line(rule))
		if err != nil {
			return nil, err
		}
		out = append(append(out, b...), sep31...)
	}
	return []Output{{"expected/" + t.Name, out}}, nil
}

func (r *runner) niTest(t Test) ([]Output, error) {
	f := fmtArgs(t)
	for _, o := range t.Options {
		if strings.HasPrefix(o, "-") {
			f = append(f, o)
		} else {
			f = append([]string{"-T", o}, f...)
		}
	}
	ipf := "regress/" + t.Name + ".ipf"
	nat := "regress/" + t.Name + ".nat"
	base := append([]string{"-M", "user", "-R"}, f...)
	var out []byte
	if t.Mode == "single" {
		rules, err := r.rules(nat)
		if err != nil {
			return nil, err
		}
		for _, rule := range rules {
			a := append(append([]string(nil), base...), "-b", "-r", ipf, "-N", "-", "-i", "input/"+t.Name)
			b, err := r.ipftest(a, line(rule))
			if err != nil {
				return nil, err
			}
			out = append(append(out, b...), sep31...)
		}
	} else {
		a := append(append([]string(nil), base...), "-b", "-r", ipf, "-N", nat, "-i", "input/"+t.Name)
		b, err := r.ipftest(a, nil)
		if err != nil {
			return nil, err
		}
		out = append(append(out, b...), sep31...)
	}
	return []Output{{"expected/" + t.Name, out}}, nil
}

func (r *runner) has(p string) bool {
	st, err := os.Stat(filepath.Join(r.famDir, p))
	return err == nil && st.Mode().IsRegular()
}

func (r *runner) pTest(t Test) ([]Output, error) {
	pool := "regress/" + t.Name + ".pool"
	ipf := "regress/" + t.Name + ".ipf"
	nat := "regress/" + t.Name + ".nat"
	var a []string
	switch {
	case r.has(pool) && r.has(ipf):
		a = []string{"-RD", "-b", "-P", pool, "-r", ipf, "-i", "input/" + t.Name}
	case r.has(pool) && r.has(nat):
		a = []string{"-RD", "-b", "-P", pool, "-N", nat, "-i", "input/" + t.Name}
	default:
		a = []string{"-RD", "-b", "-r", ipf, "-i", "input/" + t.Name}
	}
	b, err := r.ipftest(a, nil)
	if err != nil {
		return nil, err
	}
	return []Output{{"expected/" + t.Name, append(b, sep31...)}}, nil
}

func (r *runner) iTest(t Test) ([]Output, error) {
	var b []byte
	var err error
	if t.OutputFormat == "ipftest" {
		b, err = r.ipftest([]string{"-D", "-r", "regress/" + t.Name, "-i", "/dev/null"}, nil)
	} else {
		var cmd []string
		if cmd, err = r.tool(r.tools.IPF, "ipf"); err != nil {
			return nil, err
		}
		b, err = r.run(append(cmd, "-Rnvf", "regress/"+t.Name), nil, nil, true, "ipf")
	}
	if err != nil {
		return nil, err
	}
	return []Output{{"expected/" + t.Name, b}}, nil
}

func (r *runner) inTest(t Test) ([]Output, error) {
	cmd, err := r.tool(r.tools.IPNAT, "ipnat")
	if err != nil {
		return nil, err
	}
	b, err := r.run(append(cmd, "-Rnvf", "regress/"+t.Name), nil, nil, false, "ipnat")
	if err != nil {
		return nil, err
	}
	return []Output{{"expected/" + t.Name, b}}, nil
}

func (r *runner) ipTest(t Test) ([]Output, error) {
	cmd, err := r.tool(r.tools.IPPool, "ippool")
	if err != nil {
		return nil, err
	}
	b, err := r.run(append(cmd, "-f", "regress/"+t.Name, "-nRv"), nil, nil, false, "ippool")
	if err != nil {
		return nil, err
	}
	return []Output{{"expected/" + t.Name, b}}, nil
}

func (r *runner) ipv6Test(t Test) ([]Output, error) {
	if _, err := r.ipftest([]string{"-6", "-r", "/dev/null", "-i", "/dev/null"}, nil); err != nil {
		return nil, fmt.Errorf("%w: ipftest -6 not supported (\"skipping IPv6 tests\")", ErrSkip)
	}
	r.stderr.Reset()
	rules, err := r.rules("regress/" + t.Name)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, rule := range rules {
		a := []string{"-M", "user", "-F", t.InputFormat, "-6br", "-", "-i", "input/" + t.Name}
		b, err := r.ipftest(a, line(rule))
		if err != nil {
			return nil, err
		}
		out = append(append(out, b...), sep8...)
	}
	return []Output{{"expected/" + t.Name, out}}, nil
}

func (r *runner) logTest(t Test) ([]Output, error) {
	ipmon, err := r.tool(r.tools.IPMon, "ipmon")
	if err != nil {
		return nil, err
	}
	env := append(append([]string(nil), r.env...), "TZ=GMT")
	rules, err := r.rules("regress/" + t.Name)
	if err != nil {
		return nil, err
	}
	inp := "input/" + t.Name
	var res, resb []byte
	monitor := func() error {
		b, err := r.run(append(append([]string(nil), ipmon...), "-P", "/dev/null", "-f", "logout"), nil, env, false, "ipmon")
		if err != nil {
			return err
		}
		res = append(append(res, b...), sep8...)
		b, err = r.run(append(append([]string(nil), ipmon...), "-P", "/dev/null", "-bf", "logout"), nil, env, false, "ipmon")
		if err != nil {
			return err
		}
		resb = append(append(resb, b...), sep8...)
		return nil
	}
	for _, rule := range rules {
		words := strings.Join(strings.Fields(rule), " ") // echo $rule
		res = append(res, line(words)...)
		if _, err := r.ipftest([]string{"-br", "-", "-F", t.InputFormat, "-i", inp, "-l", "logout"}, line(words)); err != nil {
			return nil, err
		}
		if err := monitor(); err != nil {
			return nil, err
		}
	}
	if _, err := r.run(append(append([]string(nil), r.tools.IPFTest...), "-br", "regress/"+t.Name, "-F", t.InputFormat,
		"-i", inp, "-l", "logout"), nil, nil, false, "ipftest"); err != nil {
		return nil, err
	}
	if err := monitor(); err != nil {
		return nil, err
	}
	return []Output{{"expected/" + t.Name, res}, {"expected/" + t.Name + ".b", resb}}, nil
}

func (r *runner) bpfTest(t Test) ([]Output, error) {
	inp := "input/" + strings.TrimPrefix(t.Name, "bpf-")
	if !strings.HasPrefix(t.Name, "bpf-") {
		inp = "input/"
	}
	rules, err := r.rules("regress/" + t.Name)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, rule := range rules {
		b, err := r.ipftest([]string{"-Rbr", "-", "-i", inp}, line(rule))
		if err != nil {
			return nil, err
		}
		out = append(append(out, b...), sep8...)
	}
	return []Output{{"expected/" + t.Name, out}}, nil
}

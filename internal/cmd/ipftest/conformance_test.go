package ipftest

import (
	"bufio"
	"bytes"
	"time"

	"sluice/internal/conformance"
	"sluice/internal/ipflog"
	"sluice/internal/testutil"

	"os"
	"path/filepath"
	"strings"
	"testing"
)

type kitCase struct {
	name, family, driver, mode, inFmt, outFmt string
	options                                   []string
}

func loadManifest(t *testing.T) []kitCase {
	t.Helper()
	kit, err := conformance.KitDir()
	if err != nil {
		testutil.SkipOrFail(t, "%v", err)
	}
	kitDir = kit
	f, err := os.Open(filepath.Join(kitDir, "manifest.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []kitCase
	s := bufio.NewScanner(f)
	s.Scan() // header
	for s.Scan() {
		c := strings.Split(s.Text(), "\t")
		if len(c) < 7 {
			continue
		}
		k := kitCase{name: c[0], family: c[1], driver: c[2], mode: c[3], inFmt: c[4], outFmt: c[5]}
		if c[6] != "-" {
			k.options = strings.Fields(c[6])
		}
		cases = append(cases, k)
	}
	return cases
}

// readList reads a testdata list of test names (one per line, # comments).
func readList(t *testing.T, name string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" {
			m[l] = true
		}
	}
	return m
}

// ipftestRun runs Main in-process with stdin and returns stdout and the
// exit status.
func ipftestRun(args []string, stdin string) (string, int) {
	var out, errb bytes.Buffer
	rc := Main(Env{Args: args, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
	return out.String(), rc
}

// ruleLines splits a rule file as the drivers' `while read rule` does.
func ruleLines(b []byte) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	return lines
}

// runKitCase reproduces the upstream driver of c (kit README §4). ok is
// false when the driver is not one ipftest alone can run.
func runKitCase(t *testing.T, c kitCase) (got string, ok bool) {
	var b strings.Builder
	sep8, sep31 := "--------\n", strings.Repeat("-", 31)+"\n"
	switch c.driver {
	case "f_test":
		var args []string
		for _, o := range c.options {
			if strings.HasPrefix(o, "-") {
				args = append(args, o)
			} else {
				args = append(args, "-T", o)
			}
		}
		src, err := os.ReadFile("regress/" + c.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ruleLines(src) {
			out, rc := ipftestRun(append(append([]string{}, args...), "-F", c.inFmt, "-Rbr", "-", "-i", "input/"+c.name), r+"\n")
			b.WriteString(out)
			if rc != 0 {
				return b.String(), true
			}
			b.WriteString(sep8)
		}
	case "f_m_test":
		args := []string{"-M", "user", "-F", c.inFmt}
		if len(c.options) > 0 {
			args = append(args, c.options[0])
		}
		out, rc := ipftestRun(append(args, "-Rbr", "regress/"+c.name, "-i", "input/"+c.name), "")
		b.WriteString(out)
		if rc == 0 {
			b.WriteString(sep8)
		}
	case "ipv6_test":
		src, err := os.ReadFile("regress/" + c.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ruleLines(src) {
			out, rc := ipftestRun([]string{"-M", "user", "-F", c.inFmt, "-6br", "-", "-i", "input/" + c.name}, r+"\n")
			b.WriteString(out)
			if rc != 0 {
				return b.String(), true
			}
			b.WriteString(sep8)
		}
	case "p_test":
		_, errPool := os.Stat("regress/" + c.name + ".pool")
		_, errIPF := os.Stat("regress/" + c.name + ".ipf")
		var args []string
		switch {
		case errPool == nil && errIPF == nil:
			args = []string{"-RD", "-b", "-P", "regress/" + c.name + ".pool", "-r", "regress/" + c.name + ".ipf"}
		case errPool == nil:
			args = []string{"-RD", "-b", "-P", "regress/" + c.name + ".pool", "-N", "regress/" + c.name + ".nat"}
		default:
			args = []string{"-RD", "-b", "-r", "regress/" + c.name + ".ipf"}
		}
		out, rc := ipftestRun(append(args, "-i", "input/"+c.name), "")
		b.WriteString(out)
		if rc == 0 {
			b.WriteString(sep31)
		}
	case "n_test":
		fmtArgs := []string{"-F", c.inFmt}
		if c.outFmt == "hex" {
			fmtArgs = []string{"-xF", c.inFmt}
		}
		if len(c.options) > 0 {
			o := c.options[0]
			if strings.HasPrefix(o, "-") {
				fmtArgs = append([]string{o}, fmtArgs...)
			} else {
				fmtArgs = append([]string{"-T", o}, fmtArgs...)
			}
		}
		src, err := os.ReadFile("regress/" + c.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ruleLines(src) {
			args := append(append([]string{}, fmtArgs...), "-M", "user", "-DRbN", "-", "-i", "input/"+c.name)
			out, rc := ipftestRun(args, r+"\n")
			b.WriteString(out)
			if rc != 0 {
				return b.String(), true
			}
			b.WriteString(sep31)
		}
	case "ni_test":
		fmtArgs := []string{"-F", c.inFmt}
		if c.outFmt == "hex" {
			fmtArgs = []string{"-xF", c.inFmt}
		}
		for _, o := range c.options {
			if strings.HasPrefix(o, "-") {
				fmtArgs = append(fmtArgs, o)
			} else {
				fmtArgs = append([]string{"-T", o}, fmtArgs...)
			}
		}
		base := append(append([]string{"-M", "user", "-R"}, fmtArgs...), "-b", "-r", "regress/"+c.name+".ipf")
		if c.mode == "multi" {
			out, rc := ipftestRun(append(base, "-N", "regress/"+c.name+".nat", "-i", "input/"+c.name), "")
			b.WriteString(out)
			if rc == 0 {
				b.WriteString(sep31)
			}
			break
		}
		src, err := os.ReadFile("regress/" + c.name + ".nat")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ruleLines(src) {
			out, rc := ipftestRun(append(append([]string{}, base...), "-N", "-", "-i", "input/"+c.name), r+"\n")
			b.WriteString(out)
			if rc != 0 {
				return b.String(), true
			}
			b.WriteString(sep31)
		}
	case "logtest":
		return runLogTest(t, c), true
	case "i_test":
		if c.outFmt != "ipftest" {
			return "", false
		}
		out, _ := ipftestRun([]string{"-D", "-r", "regress/" + c.name, "-i", "/dev/null"}, "")
		b.WriteString(out)
	default:
		return "", false
	}
	return b.String(), true
}

// TestConformance runs the kit cases ipftest can run alone. Cases in
// testdata/must_pass.txt must match byte for byte; the others are run and
// reported as known failures.
func TestConformance(t *testing.T) {
	cases := loadManifest(t)
	must := readList(t, "must_pass.txt")
	var known []string
	for _, c := range cases {
		c := c
		dir := filepath.Join(kitDir, c.family)
		want, err := os.ReadFile(filepath.Join(dir, "expected", c.name))
		if err != nil {
			continue
		}
		if c.driver == "logtest" {
			wb, err := os.ReadFile(filepath.Join(dir, "expected", c.name+".b"))
			if err != nil {
				continue
			}
			want = append(want, wb...)
		}
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(dir)
			got, ok := runKitCase(t, c)
			if !ok {
				t.Skipf("%s: driver %s needs other tools", c.name, c.driver)
			}
			if got == string(want) {
				return
			}
			if must[c.name] {
				t.Errorf("%s: output differs from expected/%s:\n%s", c.name, c.name, firstDiff(string(want), got))
				return
			}
			known = append(known, c.name)
			t.Skipf("known failure (not in testdata/must_pass.txt): %s", c.name)
		})
	}
	for name := range must {
		found := false
		for _, c := range cases {
			found = found || c.name == name
		}
		if !found {
			t.Errorf("must_pass.txt names %s, which is not in the manifest", name)
		}
	}
	if len(known) > 0 {
		t.Logf("known failures: %s", strings.Join(known, " "))
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + itoa(i+1) + ":\n  want: " + w + "\n  got:  " + g
		}
	}
	return "(equal)"
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return string(b[n:])
}

// kitDir is the IPFilter conformance kit (ipf-conformance README).
var kitDir string

// ipmonText prints a binary log as "TZ=GMT ipmon -f" (body=false) or
// "ipmon -bf" (body=true) would.
func ipmonText(t *testing.T, log []byte, body bool) string {
	p := &ipflog.Printer{Opts: ipflog.FormatOptions{LogBody: body, Location: time.UTC}}
	rd := ipflog.NewReader(bytes.NewReader(log))
	var out []byte
	for {
		r, err := rd.Next()
		if err != nil {
			break
		}
		out = p.Append(out, &r)
	}
	return string(out)
}

// runLogTest is the logtest driver (kit README §4): it returns the text
// output followed by the -b output, matching expected/l1 + expected/l1.b.
func runLogTest(t *testing.T, c kitCase) string {
	src, err := os.ReadFile("regress/" + c.name)
	if err != nil {
		t.Fatal(err)
	}
	logf := filepath.Join(t.TempDir(), "logout")
	var res, resB strings.Builder
	sep := "--------\n"
	one := func(args []string, stdin string) {
		os.Remove(logf)
		ipftestRun(append(args, "-F", c.inFmt, "-i", "input/"+c.name, "-l", logf), stdin)
		b, _ := os.ReadFile(logf)
		res.WriteString(ipmonText(t, b, false) + sep)
		resB.WriteString(ipmonText(t, b, true) + sep)
	}
	for _, r := range ruleLines(src) {
		r = strings.Join(strings.Fields(r), " ")
		res.WriteString(r + "\n")
		one([]string{"-br", "-"}, r+"\n")
	}
	one([]string{"-br", "regress/" + c.name}, "")
	return res.String() + resB.String()
}

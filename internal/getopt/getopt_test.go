package getopt

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// optstrings of the commands, so that the table exercises what they need.
const (
	ipfSpec     = "46Ac:dDEf:F:Il:m:noPrRsT:vVyzZ"
	ipftestSpec = "6bCdDF:i:I:l:M:N:oP:r:RS:T:vxX"
	ipmonSpec   = "?abB:C:Df:FhL:nN:o:O:pP:sS:tvxX"
	netperfTest = "m:M:s:S:r:DP:k::o::O::R:H:L:46"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		spec string
		args []string
		want []Opt
		rest []string
		err  string
	}{
		{"cluster then separate arg", ipfSpec, []string{"-Rnvf", "x"},
			[]Opt{{'R', "", false}, {'n', "", false}, {'v', "", false}, {'f', "x", true}}, []string{}, ""},
		{"attached arg", ipfSpec, []string{"-Fa", "-f", "x"},
			[]Opt{{'F', "a", true}, {'f', "x", true}}, []string{}, ""},
		{"arg in next word", ipfSpec, []string{"-F", "a", "-I", "-s"},
			[]Opt{{'F', "a", true}, {'I', "", false}, {'s', "", false}}, []string{}, ""},
		{"dash dash ends options", ipfSpec, []string{"-n", "--", "-v"},
			[]Opt{{'n', "", false}}, []string{"-v"}, ""},
		{"first operand ends options", ipfSpec, []string{"-n", "file", "-v"},
			[]Opt{{'n', "", false}}, []string{"file", "-v"}, ""},
		{"lone dash is an operand", ipfSpec, []string{"-n", "-", "-v"},
			[]Opt{{'n', "", false}}, []string{"-", "-v"}, ""},
		{"empty word is an operand", ipfSpec, []string{"", "-v"}, nil, []string{"", "-v"}, ""},
		{"argument may start with dash", ipftestSpec, []string{"-Rbr", "-", "-i", "x"},
			[]Opt{{'R', "", false}, {'b', "", false}, {'r', "-", true}, {'i', "x", true}}, []string{}, ""},
		{"argument may be dash dash", ipftestSpec, []string{"-r", "--", "-b"},
			[]Opt{{'r', "--", true}, {'b', "", false}}, []string{}, ""},
		{"attached dash", ipftestSpec, []string{"-6br-", "extra"},
			[]Opt{{'6', "", false}, {'b', "", false}, {'r', "-", true}}, []string{"extra"}, ""},
		{"ipftest conformance line", ipftestSpec, []string{"-T", "a=1", "-xF", "hex", "-DRbN", "-"},
			[]Opt{{'T', "a=1", true}, {'x', "", false}, {'F', "hex", true}, {'D', "", false}, {'R', "", false}, {'b', "", false}, {'N', "-", true}},
			[]string{}, ""},
		{"question mark as a letter", ipmonSpec, []string{"-?"}, []Opt{{'?', "", false}}, []string{}, ""},
		{"ipmon line", ipmonSpec, []string{"-bf", "logout", "-P/dev/null", "-o", "NI", "-x", "out.txt", "-v"},
			[]Opt{{'b', "", false}, {'f', "logout", true}, {'P', "/dev/null", true}, {'o', "NI", true}, {'x', "", false}},
			[]string{"out.txt", "-v"}, ""},
		{"optional arg attached", netperfTest, []string{"-oA,B"}, []Opt{{'o', "A,B", true}}, []string{}, ""},
		{"optional arg next word", netperfTest, []string{"-o", "A", "-D"},
			[]Opt{{'o', "A", true}, {'D', "", false}}, []string{}, ""},
		{"optional arg absent before option", netperfTest, []string{"-o", "-D"},
			[]Opt{{'o', "", false}, {'D', "", false}}, []string{}, ""},
		{"optional arg absent at end", netperfTest, []string{"-k"}, []Opt{{'k', "", false}}, []string{}, ""},
		{"optional arg empty word", netperfTest, []string{"-k", ""}, []Opt{{'k', "", true}}, []string{}, ""},
		{"optional arg not dash dash", netperfTest, []string{"-k", "--", "x"}, []Opt{{'k', "", false}}, []string{"x"}, ""},
		{"illegal option", ipfSpec, []string{"-q"}, nil, nil, "illegal option -- q"},
		{"colon is never an option", ipfSpec, []string{"-n:"}, []Opt{{'n', "", false}}, nil, "illegal option -- :"},
		{"missing argument", ipfSpec, []string{"-nf"}, []Opt{{'n', "", false}}, nil, "option requires an argument -- f"},
		{"missing argument separate", ipfSpec, []string{"-n", "-f"}, []Opt{{'n', "", false}}, nil, "option requires an argument -- f"},
		{"no args", ipfSpec, nil, nil, []string{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, rest, err := Parse(tc.args, tc.spec)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("options (-want +got):\n%s", d)
			}
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("error = %v, want %q", err, tc.err)
				}
				if rest != nil {
					t.Errorf("operands after error: got %q, want none", rest)
				}
				return
			}
			if err != nil {
				t.Fatalf("error = %v, want none", err)
			}
			if len(tc.rest) != len(rest) || (len(rest) > 0 && cmp.Diff(tc.rest, rest) != "") {
				t.Errorf("operands: got %q, want %q", rest, tc.rest)
			}
		})
	}
}

func TestErrorTexts(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{IllegalOption, 'x', false}, "illegal option -- x"},
		{Error{MissingArgument, 'f', false}, "option requires an argument -- f"},
		{Error{IllegalOption, 'x', true}, "invalid option -- 'x'"},
		{Error{MissingArgument, 'f', true}, "option requires an argument -- 'f'"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	p := New([]string{"-q"}, "f:")
	p.GNU = true
	_, ok, err := p.Next()
	var e *Error
	if ok || !errors.As(err, &e) || e.Kind != IllegalOption || e.Flag != 'q' || err.Error() != "invalid option -- 'q'" {
		t.Errorf("GNU parser: got ok=%v err=%v", ok, err)
	}
}

// TestIterate checks the state a command sees while it acts on each option
// in turn, as ipf does: Optind, DashDash and going on after an error.
func TestIterate(t *testing.T) {
	p := New([]string{"-nq", "-Fa", "--", "op"}, ipfSpec)
	var seen []string
	var errs []string
	for {
		o, ok, err := p.Next()
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if !ok {
			break
		}
		seen = append(seen, string(o.Flag)+"="+o.Arg)
	}
	if got, want := strings.Join(seen, " "), "n= F=a"; got != want {
		t.Errorf("options: got %q, want %q", got, want)
	}
	if d := cmp.Diff([]string{"illegal option -- q"}, errs); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
	if p.Optind() != 3 || !p.DashDash() || cmp.Diff([]string{"op"}, p.Operands()) != "" {
		t.Errorf("after options: optind %d, dashdash %v, operands %q; want 3, true, [op]", p.Optind(), p.DashDash(), p.Operands())
	}

	p = New([]string{"-n", "op", "--"}, ipfSpec)
	for _, err := range p.All() {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p.Optind() != 1 || p.DashDash() {
		t.Errorf("stopped at operand: optind %d, dashdash %v; want 1, false", p.Optind(), p.DashDash())
	}

	// Breaking out of All leaves the parser where the command stopped.
	p = New([]string{"-nvR", "x"}, ipfSpec)
	for o := range p.All() {
		if o.Flag == 'v' {
			break
		}
	}
	if o, ok, _ := p.Next(); !ok || o.Flag != 'R' {
		t.Errorf("after break: got %+v %v, want -R", o, ok)
	}
}

// reference is getopt written the obvious way, word by word, with no
// shared state: the fuzz target checks Parse against it.
func reference(args []string, spec string) ([]Opt, []string, string) {
	kind := func(c byte) int {
		if c == ':' {
			return -1
		}
		i := strings.IndexByte(spec, c)
		switch {
		case i < 0:
			return -1
		case strings.HasPrefix(spec[i+1:], "::"):
			return 2
		case strings.HasPrefix(spec[i+1:], ":"):
			return 1
		}
		return 0
	}
	var opts []Opt
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w == "--" {
			return opts, args[i+1:], ""
		}
		if len(w) < 2 || w[0] != '-' {
			return opts, args[i:], ""
		}
		for j := 1; j < len(w); j++ {
			c := w[j]
			k := kind(c)
			if k < 0 {
				return opts, nil, "illegal option -- " + string(rune(c))
			}
			if k == 0 {
				opts = append(opts, Opt{Flag: c})
				continue
			}
			switch {
			case j+1 < len(w):
				opts = append(opts, Opt{c, w[j+1:], true})
			case i+1 < len(args) && (k == 1 || !strings.HasPrefix(args[i+1], "-")):
				i++
				opts = append(opts, Opt{c, args[i], true})
			case k == 2:
				opts = append(opts, Opt{Flag: c})
			default:
				return opts, nil, "option requires an argument -- " + string(rune(c))
			}
			break
		}
	}
	return opts, args[len(args):], ""
}

// FuzzParse feeds any optstring and argv (words separated by NUL) to the
// parser: it must not panic, must agree with the reference, and stepping
// with Next past errors must end.
func FuzzParse(f *testing.F) {
	for _, s := range []struct{ spec, argv string }{
		{ipfSpec, "-Rnvf x"}, {ipfSpec, "-Fa -f x -- -v"}, {ipfSpec, "-nf"}, {ipfSpec, "-q"},
		{ipftestSpec, "-6br- extra"}, {ipmonSpec, "-? -bf logout out"}, {netperfTest, "-o -D -k -- x"},
		{":a::b:", "-a -b - -"}, {"", "-"}, {"x", "---x"},
	} {
		f.Add(s.spec, strings.ReplaceAll(s.argv, " ", "\x00"))
	}
	f.Fuzz(func(t *testing.T, spec, argv string) {
		var args []string
		if argv != "" {
			args = strings.Split(argv, "\x00")
		}
		got, rest, err := Parse(args, spec)
		want, wrest, werr := reference(args, spec)
		gerr := ""
		if err != nil {
			gerr = err.Error()
		}
		if gerr != werr {
			t.Fatalf("error %q, reference %q", gerr, werr)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("options differ from reference (-want +got):\n%s", d)
		}
		if len(rest) != len(wrest) || (len(rest) > 0 && &rest[0] != &wrest[0]) {
			t.Fatalf("operands %q, reference %q", rest, wrest)
		}
		// Going on after errors, as getopt(3) does, ends within one step
		// per byte of argv.
		p := New(args, spec)
		steps := 0
		for {
			_, ok, err := p.Next()
			if !ok && err == nil {
				break
			}
			if steps++; steps > len(argv)+len(args)+1 {
				t.Fatalf("Next did not finish after %d steps", steps)
			}
		}
		if p.Optind() < 0 || p.Optind() > len(args) {
			t.Fatalf("optind %d out of [0,%d]", p.Optind(), len(args))
		}
	})
}

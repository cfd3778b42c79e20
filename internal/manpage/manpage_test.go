package manpage

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sluice/internal/testutil"
)

const srcDir = "../../docs/man"

// The pages issue 16 asks for; each must exist.
var wantPages = []string{
	"man8/ipf.8", "man5/ipf.5", "man8/ipfstat.8", "man8/ipmon.8", "man8/ipnat.8", "man5/ipnat.5",
	"man8/ippool.8", "man5/ippool.5", "man1/ipftest.1", "man8/ipqosadmin.8", "man5/ipqos.conf.5",
	"man1/netperf.1", "man8/netserver.8", "man8/sluice.8",
}

func TestPagesUpToDate(t *testing.T) {
	pages, err := Generate(srcDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range wantPages {
		if _, ok := pages[p]; !ok {
			t.Errorf("no source for %s", p)
		}
	}
	stale, err := Stale(srcDir, pages)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		t.Errorf("docs/man/%s is stale, missing or has no source: run `go run ./internal/manpage/mangen` and commit", s)
	}
}

// TestManRenders renders every generated page with man -l and groff's
// warnings all on (-ww): any warning fails.
func TestManRenders(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		testutil.SkipOrFail(t, "man not installed (apt-get install man-db groff-base): %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(srcDir, "man[0-9]", "*"))
	if len(files) < len(wantPages) {
		t.Fatalf("%d generated pages, want at least %d", len(files), len(wantPages))
	}
	for _, f := range files {
		cmd := exec.Command("man", "--warnings=w", "-l", f)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "LC_ALL=C.UTF-8", "MANPAGER=cat", "PAGER=cat")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Errorf("man -l %s: %v\n%s", f, err, errb.String())
			continue
		}
		if errb.Len() > 0 {
			t.Errorf("man -l %s warns:\n%s", f, errb.String())
		}
		name := strings.ToUpper(strings.SplitN(filepath.Base(f), ".", 2)[0])
		if !bytes.Contains(out.Bytes(), []byte("NAME")) || !bytes.Contains(out.Bytes(), []byte(name)) {
			t.Errorf("%s: rendered page lacks NAME or %s:\n%.300s", f, name, out.String())
		}
	}
}

// optionSource says where a command's options are defined: the getopt
// option strings (string constants or literals passed to getopt.New or
// getopt.Parse) or the flag names (flag.FlagSet calls) of a package.
type optionSource struct {
	page    string   // source file under docs/man
	pkg     string   // package directory
	consts  []string // named option-string constants; empty: every getopt call
	flags   bool     // flag package names instead of getopt letters
	section string   // the options must be terms under this section ("" anywhere)
	// synopsis: the page's SYNOPSIS must name every option (false where
	// it says "[flags]" or "[global options]" and the options are listed
	// under headings of their own)
	synopsis bool
	// usage names the package's string constant that `-h` prints, which
	// must name every option too ("" where -h prints none of its own)
	usage string
	// usageLacks are options the usage text may leave out, with the
	// reason in a comment
	usageLacks []string
}

var optionSources = []optionSource{
	{page: "ipf.8.md", pkg: "internal/cmd/ipf", synopsis: true, usage: "Usage"},
	{page: "ipfstat.8.md", pkg: "internal/cmd/ipfstat", synopsis: true, usage: "Usage"},
	{page: "ipmon.8.md", pkg: "internal/cmd/ipmon", synopsis: true, usage: "Usage"},
	{page: "ipnat.8.md", pkg: "internal/cmd/ipnat", synopsis: true, usage: "Usage"},
	{page: "ippool.8.md", pkg: "internal/cmd/ippool", synopsis: true, usage: "Usage"},
	{page: "ipftest.1.md", pkg: "internal/cmd/ipftest", synopsis: true, usage: "Usage"},
	{page: "netperf.1.md", pkg: "internal/cmd/netperf", consts: []string{"globalSpec"}, section: "GLOBAL OPTIONS"},
	{page: "netperf.1.md", pkg: "internal/cmd/netperf", consts: []string{"testSpec"}, section: "TEST-SPECIFIC OPTIONS"},
	// netserver -h prints netperf 2.7.1's own text byte for byte, which
	// does not mention the -n its getopt string takes
	{page: "netserver.8.md", pkg: "internal/cmd/netserver", consts: []string{"spec"}, synopsis: true, usage: "usage", usageLacks: []string{"-n"}},
	{page: "ipqosadmin.8.md", pkg: "internal/cmd/ipqosadmin", flags: true, synopsis: true, usage: "Usage"},
	{page: "sluice.8.md", pkg: "internal/cmd/sluice", flags: true},
}

// TestOptionsDocumented checks that every option a command accepts (read
// from its source, so a new option fails this test until the page has it)
// is a definition term of its page.
func TestOptionsDocumented(t *testing.T) {
	for _, s := range optionSources {
		src, err := os.ReadFile(filepath.Join(srcDir, s.page))
		if err != nil {
			t.Fatal(err)
		}
		terms := definitionTerms(string(src), s.section)
		if len(terms) == 0 {
			t.Errorf("%s: no option terms (section %q)", s.page, s.section)
			continue
		}
		var opts []string
		if s.flags {
			opts = flagNames(t, filepath.Join("../..", s.pkg))
		} else {
			for _, l := range optionLetters(t, filepath.Join("../..", s.pkg), s.consts) {
				opts = append(opts, "-"+string(l))
			}
		}
		if len(opts) == 0 {
			t.Errorf("%s: found no options in %s", s.page, s.pkg)
		}
		accepted := map[string]bool{}
		for _, o := range opts {
			accepted[o] = true
			if !terms[o] && !(s.flags && terms[strings.TrimPrefix(o, "-")]) {
				t.Errorf("%s: option %s of %s is not documented (section %q)", s.page, o, s.pkg, s.section)
			}
		}
		// and the reverse: a page that documents an option the command
		// does not take (renamed, or never there) sends its reader to a
		// usage error
		for term := range terms {
			if !accepted[term] && !(s.flags && accepted["--"+strings.TrimLeft(term, "-")]) {
				t.Errorf("%s: documents %s, which %s does not accept (section %q)", s.page, term, s.pkg, s.section)
			}
		}
	}
}

// TestSynopsisAndUsage checks that every option a command accepts is in
// its page's SYNOPSIS and in the usage text its -h prints, so that the
// three (the getopt string or flags, the page, -h) stay in step.
func TestSynopsisAndUsage(t *testing.T) {
	for _, s := range optionSources {
		if !s.synopsis && s.usage == "" {
			continue
		}
		dir := filepath.Join("../..", s.pkg)
		var opts []string
		if s.flags {
			opts = flagNames(t, dir)
		} else {
			for _, l := range optionLetters(t, dir, s.consts) {
				opts = append(opts, "-"+string(l))
			}
		}
		if s.synopsis {
			src, err := os.ReadFile(filepath.Join(srcDir, s.page))
			if err != nil {
				t.Fatal(err)
			}
			named := synopsisOptions(string(src), s.flags)
			if len(named) == 0 {
				t.Errorf("%s: no options in its SYNOPSIS", s.page)
			}
			for _, o := range opts {
				if !named[o] && !named["-"+strings.TrimLeft(o, "-")] {
					t.Errorf("%s: SYNOPSIS lacks %s, which %s accepts", s.page, o, s.pkg)
				}
			}
			for o := range named {
				if !slices.Contains(opts, o) && !slices.Contains(opts, "-"+o) {
					t.Errorf("%s: SYNOPSIS names %s, which %s does not accept", s.page, o, s.pkg)
				}
			}
		}
		if s.usage != "" {
			text, ok := stringConsts(t, dir)[s.usage]
			if !ok {
				t.Fatalf("%s: no string constant %s", s.pkg, s.usage)
			}
			named := usageOptions(text, s.flags)
			for _, o := range opts {
				if !named[o] && !named["-"+strings.TrimLeft(o, "-")] && !slices.Contains(s.usageLacks, o) {
					t.Errorf("%s: its usage (-h) lacks %s", s.pkg, o)
				}
			}
			for _, o := range s.usageLacks {
				if named[o] {
					t.Errorf("%s: its usage names %s now: drop it from usageLacks", s.pkg, o)
				}
			}
		}
	}
}

// TestUsageAndPageAgree: an option whose usage (-h) says it has no effect
// or is not supported must not be described as working by its page (a
// reader would rely on it), and the page must say so too. ippool(8)
// described -z as zeroing the statistics (refused: unsupported) and -O as
// choosing the fields (ignored); ipftest(1) its ignored -d, -o and -X as
// features, and ipnat(8) its ignored -X.
func TestUsageAndPageAgree(t *testing.T) {
	for _, s := range optionSources {
		if s.usage == "" || s.flags {
			continue
		}
		src, err := os.ReadFile(filepath.Join(srcDir, s.page))
		if err != nil {
			t.Fatal(err)
		}
		defs := definitions(string(src))
		text := stringConsts(t, filepath.Join("../..", s.pkg))[s.usage]
		for _, seg := range usageSegments(text) {
			var want []string
			switch {
			case strings.Contains(seg, "no effect"), strings.Contains(seg, "ignored"):
				want = []string{"no effect", "ignored"}
			case strings.Contains(seg, "not supported"):
				want = []string{"not supported"}
			default:
				continue
			}
			for o := range usageOptions(seg, false) {
				d, ok := defs[o]
				if !ok {
					continue // TestOptionsDocumented reports it
				}
				if !slices.ContainsFunc(want, func(w string) bool { return strings.Contains(strings.ToLower(d), w) }) {
					t.Errorf("%s: %s is %q in %s's usage, but the page says %q", s.page, o, strings.TrimSpace(seg), s.pkg, d)
				}
			}
		}
	}
}

// usageSegments splits a usage text into its statements: continuation
// lines (indented deeper than an option's) joined to their line, then
// split at semicolons.
func usageSegments(text string) []string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "      ") && len(lines) > 0 && !strings.HasPrefix(strings.TrimSpace(l), "ip") {
			lines[len(lines)-1] += " " + strings.TrimSpace(l)
			continue
		}
		lines = append(lines, l)
	}
	var out []string
	for _, l := range lines {
		out = append(out, strings.Split(l, ";")...)
	}
	return out
}

// definitions returns, for each option of a definition term ("-X"), the
// text of its definition (the ":   " line and those after it up to a
// blank line).
func definitions(src string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(src, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i+1], ":   ") {
			continue
		}
		var d []string
		for j := i + 1; j < len(lines) && strings.TrimSpace(lines[j]) != ""; j++ {
			d = append(d, strings.TrimPrefix(lines[j], ":   "))
		}
		for _, m := range termOptRE.FindAllStringSubmatch(lines[i], -1) {
			out[m[1]] = strings.Join(d, " ")
		}
	}
	return out
}

var boldRE = regexp.MustCompile(`\*\*([^*]+)\*\*`)

// synopsisOptions returns the options named in bold in a page's SYNOPSIS:
// "-X" for each letter of a getopt cluster (**-46AdD**, **ipf -C**), or
// "-word" for a flag (**-pindir**, **--listen**, normalised to one dash).
func synopsisOptions(src string, flags bool) map[string]bool {
	out := map[string]bool{}
	lines := strings.Split(src, "\n")
	in := false
	for _, l := range lines {
		if strings.HasPrefix(l, "## ") {
			in = strings.TrimSpace(strings.TrimPrefix(l, "## ")) == "SYNOPSIS"
			continue
		}
		if !in {
			continue
		}
		for _, m := range boldRE.FindAllStringSubmatch(l, -1) {
			for _, w := range strings.Fields(m[1]) {
				addOption(out, w, flags)
			}
		}
	}
	return out
}

var usageOptRE = regexp.MustCompile(`(?:^|[\s\[|(,/])(--?[A-Za-z0-9?][A-Za-z0-9-]*)`)

// usageOptions returns the options a usage text names, as synopsisOptions
// does: an option is a word that starts with a dash after a space, a
// bracket, a bar, a comma or a slash (not "re-read" or "non-loopback").
func usageOptions(text string, flags bool) map[string]bool {
	out := map[string]bool{}
	for _, m := range usageOptRE.FindAllStringSubmatch(text, -1) {
		addOption(out, m[1], flags)
	}
	return out
}

func addOption(out map[string]bool, w string, flags bool) {
	if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
		return
	}
	name := strings.TrimRight(strings.TrimLeft(w, "-"), ".,;:")
	if name == "" {
		return
	}
	if flags {
		out["-"+name] = true
		return
	}
	for _, c := range name {
		out["-"+string(c)] = true
	}
}

// stringConsts returns the string constants (and variables) of a package.
func stringConsts(t *testing.T, dir string) map[string]string {
	t.Helper()
	consts := map[string]string{}
	for _, f := range parsePkg(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					if v, ok := stringValue(vs.Values[i]); ok {
						consts[id.Name] = v
					}
				}
			}
			return true
		})
	}
	return consts
}

// stringValue returns a string literal's value, or a concatenation's
// literal parts (what other constants it names add no options).
func stringValue(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(e.Value)
		return v, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, okx := stringValue(e.X)
		y, oky := stringValue(e.Y)
		return x + y, okx || oky
	}
	return "", false
}

var termOptRE = regexp.MustCompile("`(--?[A-Za-z0-9?][A-Za-z0-9-]*)`")

// definitionTerms returns the options named in the definition terms
// (lines followed by a ":   " definition) of a source, within the section
// (a ## or ### heading) when one is given.
func definitionTerms(src, section string) map[string]bool {
	out := map[string]bool{}
	lines := strings.Split(src, "\n")
	in := section == ""
	for i, l := range lines {
		if strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "### ") {
			h := strings.TrimLeft(l, "# ")
			if section != "" {
				in = h == section
			}
			continue
		}
		if !in || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], ":   ") {
			continue
		}
		for _, m := range termOptRE.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// parsePkg parses the non-test Go files of a directory.
func parsePkg(t *testing.T, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("%s: no Go files (%v)", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// optionLetters returns the option letters of a package: of the named
// constants, or else of every option string given to getopt.
func optionLetters(t *testing.T, dir string, names []string) []byte {
	t.Helper()
	files := parsePkg(t, dir)
	consts := stringConsts(t, dir)
	var specs []string
	if len(names) > 0 {
		for _, n := range names {
			s, ok := consts[n]
			if !ok {
				t.Fatalf("%s: no constant %s", dir, n)
			}
			specs = append(specs, s)
		}
	} else {
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "New" && sel.Sel.Name != "Parse" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "getopt" {
					return true
				}
				switch a := call.Args[1].(type) {
				case *ast.BasicLit:
					s, _ := strconv.Unquote(a.Value)
					specs = append(specs, s)
				case *ast.Ident:
					if s, ok := consts[a.Name]; ok {
						specs = append(specs, s)
					} else {
						t.Errorf("%s: getopt option string %s not resolved", dir, a.Name)
					}
				}
				return true
			})
		}
	}
	seen := map[byte]bool{}
	var out []byte
	for _, s := range specs {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == ':' || c == '?' || seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// flagNames returns "--name" for every flag a package defines with the
// flag package (FlagSet.Bool("name", ...) and the like).
func flagNames(t *testing.T, dir string) []string {
	t.Helper()
	kinds := map[string]bool{"Bool": true, "String": true, "Int": true, "Int64": true, "Uint": true,
		"Uint64": true, "Float64": true, "Duration": true, "BoolVar": true, "StringVar": true,
		"IntVar": true, "DurationVar": true, "Func": true, "Var": true}
	seen := map[string]bool{}
	var out []string
	for _, f := range parsePkg(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !kinds[sel.Sel.Name] {
				return true
			}
			arg := call.Args[0]
			if strings.HasSuffix(sel.Sel.Name, "Var") {
				arg = call.Args[1]
			}
			if bl, ok := arg.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				name, _ := strconv.Unquote(bl.Value)
				if !seen[name] {
					seen[name] = true
					out = append(out, "--"+name)
				}
			}
			return true
		})
	}
	sort.Strings(out)
	return out
}

func TestRender(t *testing.T) {
	src := "# demo(8) -- a *demo* page\n\n## SYNOPSIS\n\n**demo** [**-a**] *file*\n\n## OPTIONS\n\n" +
		"`-a` *n*\n:   Do a - with \\*stars\\* and `.dots`.\n    More.\n\n    Second paragraph.\n\n" +
		"- item one\n  continued\n\n```\n.starts with a dot\nback\\slash -x\n```\n\n### Sub heading\n\nText — done.\n"
	got, p, err := Render("demo.8.md", src)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "demo" || p.Section != "8" || p.Summary != "a *demo* page" {
		t.Errorf("page %+v", p)
	}
	for _, want := range []string{
		".TH DEMO 8 \"\" \"Sluice\" \"System Manager's Manual\"\n",
		".SH NAME\ndemo \\- a \\fIdemo\\fR page\n",
		".SH SYNOPSIS\n.PP\n\\fBdemo\\fR [\\fB\\-a\\fR] \\fIfile\\fR\n",
		".TP\n\\fB\\-a\\fR \\fIn\\fR\nDo a \\- with *stars* and \\fB.dots\\fR.\nMore.\n.IP\nSecond paragraph.\n",
		".IP \\(bu 2\nitem one\ncontinued\n",
		".nf\n\\&.starts with a dot\nback\\eslash \\-x\n.fi\n",
		".SS \"Sub heading\"\n",
		"Text \\(em done.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"", ":1: the first line"},
		{"ipf(8) -- x", ":1: the first line"},
		{"# ipf(8) -- x\n\tindented", ":2: tab"},
		{"# ipf(8) -- x\nsnow \u2603", ":2: character"},
		{"# ipf(8) -- x\n## lower case", ":2: section heading"},
		{"# ipf(8) -- x\n# again", ":2: only the first line"},
		{"# ipf(8) -- x\n```\nopen", ":2: literal block not closed"},
		{"# ipf(8) -- x\n:   no term", ":2: definition without"},
		{"# ipf(8) -- x\nunclosed `code", ":2: unclosed `"},
		{"# ipf(8) -- x\n**bold", ":2: unclosed *"},
		{"# ipf(8) -- *x", ":1: unclosed *"},
	} {
		_, _, err := Render("t.md", c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}

// FuzzRender: any input either fails with a positioned error or renders a
// page that starts with the header and has no line troff would take for
// an unintended request.
func FuzzRender(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join(srcDir, "*.md"))
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			f.Add(string(b))
		}
	}
	f.Add("# a(1) -- b\n`-x`\n:   y\n")
	f.Fuzz(func(t *testing.T, src string) {
		out, _, err := Render("f.md", src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.md:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		if !strings.HasPrefix(out, ".\\\" Generated") {
			t.Fatalf("no header: %q", out)
		}
		allowed := regexp.MustCompile(`^\.(\\"|TH|SH|SS|PP|TP|IP|RS|RE|nf|fi)( |$)`)
		for _, l := range strings.Split(out, "\n") {
			if (strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'")) && !allowed.MatchString(l) {
				t.Fatalf("unexpected request line %q", l)
			}
		}
	})
}

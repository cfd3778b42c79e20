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
}

var optionSources = []optionSource{
	{page: "ipf.8.md", pkg: "internal/cmd/ipf"},
	{page: "ipfstat.8.md", pkg: "internal/cmd/ipfstat"},
	{page: "ipmon.8.md", pkg: "internal/cmd/ipmon"},
	{page: "ipnat.8.md", pkg: "internal/cmd/ipnat"},
	{page: "ippool.8.md", pkg: "internal/cmd/ippool"},
	{page: "ipftest.1.md", pkg: "internal/cmd/ipftest"},
	{page: "netperf.1.md", pkg: "internal/cmd/netperf", consts: []string{"globalSpec"}, section: "GLOBAL OPTIONS"},
	{page: "netperf.1.md", pkg: "internal/cmd/netperf", consts: []string{"testSpec"}, section: "TEST-SPECIFIC OPTIONS"},
	{page: "netserver.8.md", pkg: "internal/cmd/netserver", consts: []string{"spec"}},
	{page: "ipqosadmin.8.md", pkg: "internal/cmd/ipqosadmin", flags: true},
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
		for _, o := range opts {
			if !terms[o] && !(s.flags && terms[strings.TrimPrefix(o, "-")]) {
				t.Errorf("%s: option %s of %s is not documented (section %q)", s.page, o, s.pkg, s.section)
			}
		}
	}
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
	consts := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					if bl, ok := vs.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
						consts[id.Name], _ = strconv.Unquote(bl.Value)
					}
				}
			}
			return true
		})
	}
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

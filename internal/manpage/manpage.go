// Package manpage turns Sluice's manual page sources (docs/man/*.md, a
// small Markdown-like language) into troff for man(1). One source makes
// one page; the generated pages are committed under docs/man/manN and a
// test fails when they are stale (regenerate with
// `go run ./internal/manpage/mangen`).
//
// The source language, line by line:
//
//	# ipf(8) -- alter packet filtering lists     first line: name, section, summary
//	## HEADING                                   .SH
//	### Subheading                               .SS
//	`-f` *file*                                  a definition term, when the next line
//	:   What -f does.                            starts with ":   " (the definition; its
//	    more of it, indented four spaces         continuation lines are indented 4)
//	- an item                                    a bullet item (continuation indented 2)
//	```                                          a literal block, to the closing fence
//	text                                         a paragraph (blank lines separate them)
//
// Inline: **bold**, *italic*, `literal` (bold, nothing inside is
// interpreted), and \* \` \\ for the characters themselves. Only ASCII
// and a few typographic characters (listed in specialChars) are allowed,
// so a page renders the same on every man implementation.
package manpage

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Page is a parsed source.
type Page struct {
	Name    string // ipf
	Section string // 8
	Summary string // the NAME line's text after the dash
}

// specialChars are the non-ASCII characters a source may use, with their
// troff names.
var specialChars = map[rune]string{
	'—': `\(em`, '–': `\(en`, '×': `\(mu`, '→': `\(->`, '≤': `\(<=`, '≥': `\(>=`,
	'’': `\(aq`, '…': `.\|.\|.`, '±': `\(+-`, '·': `\(pc`, 'µ': `\(mc`,
}

var titleRE = regexp.MustCompile(`^# ([a-z0-9][a-z0-9._-]*)\(([1-9][a-z]*)\) -- (.+)$`)

// Error is a source error at a line.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Render converts a source to troff. file names the source in errors and
// in the generated header comment.
func Render(file, src string) (string, *Page, error) {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	errAt := func(i int, format string, args ...any) error {
		return &Error{file, i + 1, fmt.Sprintf(format, args...)}
	}
	for i, l := range lines {
		for _, r := range l {
			if r == '\t' {
				return "", nil, errAt(i, "tab character (indent with spaces)")
			}
			if (r < 0x20 || r > 0x7e) && specialChars[r] == "" {
				return "", nil, errAt(i, "character %q is not allowed (ASCII, or one of the special characters)", r)
			}
		}
	}
	if len(lines) == 0 {
		return "", nil, errAt(0, "empty source")
	}
	m := titleRE.FindStringSubmatch(lines[0])
	if m == nil {
		return "", nil, errAt(0, "the first line must be `# name(section) -- summary`")
	}
	p := &Page{Name: m[1], Section: m[2], Summary: m[3]}
	var w strings.Builder
	fmt.Fprintf(&w, ".\\\" Generated from %s by internal/manpage/mangen; do not edit.\n", file)
	fmt.Fprintf(&w, ".TH %s %s \"\" \"Sluice\" \"%s\"\n", strings.ToUpper(p.Name), p.Section, sectionTitle(p.Section))
	summary, err := inline(p.Summary)
	if err != nil {
		return "", nil, errAt(0, "%v", err)
	}
	fmt.Fprintf(&w, ".SH NAME\n%s\n", lineStart(escape(p.Name)+` \- `+summary))

	i := 1
	para := false // text written since the last paragraph macro
	emitText := func(s string) error {
		t, err := inline(s)
		if err != nil {
			return err
		}
		w.WriteString(lineStart(t) + "\n")
		return nil
	}
	for i < len(lines) {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			para = false
			i++
		case strings.HasPrefix(l, "### "):
			fmt.Fprintf(&w, ".SS %s\n", quoteArg(strings.TrimPrefix(l, "### ")))
			para = true
			i++
		case strings.HasPrefix(l, "## "):
			h := strings.TrimPrefix(l, "## ")
			if h != strings.ToUpper(h) {
				return "", nil, errAt(i, "section heading %q must be upper case", h)
			}
			fmt.Fprintf(&w, ".SH %s\n", quoteArg(h))
			para = true
			i++
		case strings.HasPrefix(l, "# "):
			return "", nil, errAt(i, "only the first line may be a `# ` title")
		case strings.HasPrefix(l, "```"):
			j := i + 1
			for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
				j++
			}
			if j == len(lines) {
				return "", nil, errAt(i, "literal block not closed")
			}
			w.WriteString(".PP\n.RS 4\n.nf\n")
			for _, cl := range lines[i+1 : j] {
				w.WriteString(lineStart(escape(cl)) + "\n")
			}
			w.WriteString(".fi\n.RE\n")
			para = false
			i = j + 1
		case i+1 < len(lines) && strings.HasPrefix(lines[i+1], ":   "):
			term, err := inline(l)
			if err != nil {
				return "", nil, errAt(i, "%v", err)
			}
			fmt.Fprintf(&w, ".TP\n%s\n", lineStart(term))
			i++
			first := true
			for i < len(lines) {
				dl := lines[i]
				switch {
				case first:
					dl = strings.TrimPrefix(dl, ":   ")
					first = false
				case strings.HasPrefix(dl, "    "):
					dl = dl[4:]
				case strings.TrimSpace(dl) == "" && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    "):
					w.WriteString(".IP\n")
					i++
					continue
				default:
					goto doneDef
				}
				if err := emitText(dl); err != nil {
					return "", nil, errAt(i, "%v", err)
				}
				i++
			}
		doneDef:
			para = true
		case strings.HasPrefix(l, "- "):
			w.WriteString(".IP \\(bu 2\n")
			if err := emitText(l[2:]); err != nil {
				return "", nil, errAt(i, "%v", err)
			}
			i++
			for i < len(lines) && strings.HasPrefix(lines[i], "  ") && strings.TrimSpace(lines[i]) != "" {
				if err := emitText(strings.TrimSpace(lines[i])); err != nil {
					return "", nil, errAt(i, "%v", err)
				}
				i++
			}
			para = true
		case strings.HasPrefix(l, ":   "):
			return "", nil, errAt(i, "definition without a term line before it")
		default:
			if !para {
				w.WriteString(".PP\n")
				para = true
			}
			if err := emitText(strings.TrimLeft(l, " ")); err != nil {
				return "", nil, errAt(i, "%v", err)
			}
			i++
		}
	}
	return w.String(), p, nil
}

func sectionTitle(s string) string {
	switch s[0] {
	case '1':
		return "General Commands Manual"
	case '5':
		return "File Formats Manual"
	case '8':
		return "System Manager's Manual"
	}
	return "Sluice Manual"
}

// escape makes plain text safe for troff: backslashes, minus signs (so
// options copy and search as ASCII hyphen-minus) and special characters.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\e`)
		case '-':
			b.WriteString(`\-`)
		default:
			if t, ok := specialChars[r]; ok {
				b.WriteString(t)
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// lineStart protects a line that troff would read as a request.
func lineStart(s string) string {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		return `\&` + s
	}
	return s
}

// quoteArg makes s one macro argument.
func quoteArg(s string) string {
	t := escape(s)
	if strings.ContainsAny(t, " \t") {
		return `"` + strings.ReplaceAll(t, `"`, `\(dq`) + `"`
	}
	return t
}

// inline converts **bold**, *italic* and `literal` spans.
func inline(s string) (string, error) {
	var b strings.Builder
	bold, ital := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("*`\\", s[i+1]) >= 0:
			b.WriteString(escape(string(s[i+1])))
			i++
		case c == '`':
			j := strings.IndexByte(s[i+1:], '`')
			if j < 0 {
				return "", fmt.Errorf("unclosed ` in %q", s)
			}
			lit := s[i+1 : i+1+j]
			b.WriteString(`\fB` + escape(lit) + font(bold, ital))
			i += j + 1
		case c == '*' && i+1 < len(s) && s[i+1] == '*':
			bold = !bold
			b.WriteString(font(bold, ital))
			i++
		case c == '*':
			ital = !ital
			b.WriteString(font(bold, ital))
		default:
			_, n := utf8.DecodeRuneInString(s[i:])
			b.WriteString(escape(s[i : i+n]))
			i += n - 1
		}
	}
	if bold || ital {
		return "", fmt.Errorf("unclosed * or ** in %q", s)
	}
	return b.String(), nil
}

func font(bold, ital bool) string {
	switch {
	case bold && ital:
		return `\f(BI`
	case bold:
		return `\fB`
	case ital:
		return `\fI`
	}
	return `\fR`
}

// Generate renders every docs/man source (*.md) in srcDir and returns the
// pages by their path relative to srcDir: man8/ipf.8 and so on.
func Generate(srcDir string) (map[string]string, error) {
	srcs, err := filepath.Glob(filepath.Join(srcDir, "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(srcs)
	out := map[string]string{}
	for _, f := range srcs {
		if filepath.Base(f) == "README.md" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		text, p, err := Render("docs/man/"+filepath.Base(f), string(b))
		if err != nil {
			return nil, err
		}
		want := p.Name + "." + p.Section + ".md"
		if filepath.Base(f) != want {
			return nil, fmt.Errorf("%s: the page is %s(%s): name the file %s", f, p.Name, p.Section, want)
		}
		out[filepath.Join("man"+p.Section[:1], p.Name+"."+p.Section)] = text
	}
	return out, nil
}

// Stale lists the generated pages under dir that differ from pages, are
// missing, or have no source any more.
func Stale(dir string, pages map[string]string) ([]string, error) {
	var out []string
	for n, text := range pages {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || string(b) != text {
			out = append(out, n)
		}
	}
	have, err := filepath.Glob(filepath.Join(dir, "man[0-9]", "*"))
	if err != nil {
		return nil, err
	}
	for _, h := range have {
		rel, _ := filepath.Rel(dir, h)
		if _, ok := pages[rel]; !ok {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out, nil
}

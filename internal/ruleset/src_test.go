package ruleset

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDatapathsReadOnlyCompiledRule enforces the package's contract: the
// Go engine and the eBPF compiler read a Rule's compiled fields, never
// the parsed rule behind Rule.Src, except to print it. It type-checks
// both packages and fails on every use of Rule.Src that is not a whole
// argument of a printing call (a function whose name says Format, Text,
// Print or Write).
func TestDatapathsReadOnlyCompiledRule(t *testing.T) {
	exports := exportData(t, "../engine", "../bpf")
	printing := regexp.MustCompile(`Format|Text|Print|Write`)
	for _, dir := range []string{"../engine", "../bpf"} {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var parsed []*ast.File
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, af)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			f, ok := exports[path]
			if !ok {
				return nil, fmt.Errorf("no export data for %s", path)
			}
			return os.Open(f)
		})}
		if _, err := conf.Check(filepath.Base(dir), fset, parsed, info); err != nil {
			t.Fatalf("type-checking %s: %v", dir, err)
		}
		for _, af := range parsed {
			allowed := map[*ast.SelectorExpr]bool{}
			ast.Inspect(af, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				name := ""
				switch fn := call.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				}
				if !printing.MatchString(name) {
					return true
				}
				for _, a := range call.Args {
					if sel, ok := a.(*ast.SelectorExpr); ok {
						allowed[sel] = true
					}
				}
				return true
			})
			ast.Inspect(af, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Src" || allowed[sel] {
					return true
				}
				s := info.Selections[sel]
				if s == nil || s.Kind() != types.FieldVal {
					return true
				}
				recv := s.Recv()
				if p, ok := recv.(*types.Pointer); ok {
					recv = p.Elem()
				}
				if named, ok := recv.(*types.Named); ok && named.Obj().Name() == "Rule" &&
					named.Obj().Pkg().Path() == "sluice/internal/ruleset" {
					t.Errorf("%s: reads ruleset.Rule.Src for more than printing: use the compiled fields",
						fset.Position(sel.Pos()))
				}
				return true
			})
		}
	}
}

// exportData returns the compiler's export data files of every dependency
// of the packages in dirs (go list -export builds them into the cache).
func exportData(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}"}, dirs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), " "); ok && file != "" {
			m[path] = file
		}
	}
	return m
}

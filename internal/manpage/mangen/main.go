// Command mangen regenerates the manual pages under docs/man/manN from
// their sources docs/man/*.md (run from the repository root:
// `go run ./internal/manpage/mangen`). With -check it writes nothing and
// fails when a generated page is missing, stale or left over.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"sluice/internal/manpage"
)

func main() {
	dir := flag.String("dir", "docs/man", "the sources' directory; pages go to DIR/manN")
	check := flag.Bool("check", false, "only check that the pages are up to date")
	flag.Parse()
	pages, err := manpage.Generate(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(1)
	}
	stale, err := manpage.Stale(*dir, pages)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(1)
	}
	if *check {
		for _, s := range stale {
			fmt.Fprintf(os.Stderr, "mangen: %s is stale: run go run ./internal/manpage/mangen and commit\n", s)
		}
		if len(stale) > 0 {
			os.Exit(1)
		}
		return
	}
	var names []string
	for n := range pages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(*dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "mangen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(p, []byte(pages[n]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mangen:", err)
			os.Exit(1)
		}
	}
	// pages whose source is gone
	for _, s := range stale {
		if _, ok := pages[s]; !ok {
			os.Remove(filepath.Join(*dir, s))
		}
	}
}

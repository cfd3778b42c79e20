// Package cli implements the netperf and netserver command lines with the
// C tools' getopt conventions: bundled flags (-cC), attached or separate
// arguments (-l1, -l 1), and test-specific options after "--".
package cli

import (
	"fmt"
	"strings"
)

// opt describes one option letter: arg is 0 (none), 1 (required) or 2
// (optional: taken from the next word unless it starts with '-').
type optSpec map[byte]int

type parsed struct {
	letter byte
	arg    string
	hasArg bool
}

// getopt parses args until "--" and returns the options and whatever
// follows "--".
func getopt(args []string, spec optSpec) (opts []parsed, rest []string, err error) {
	for k := 0; k < len(args); k++ {
		a := args[k]
		if a == "--" {
			return opts, args[k+1:], nil
		}
		if len(a) < 2 || a[0] != '-' {
			return nil, nil, fmt.Errorf("unexpected argument %q", a)
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			kind, ok := spec[c]
			if !ok {
				return nil, nil, fmt.Errorf("invalid option -- '%c'", c)
			}
			if kind == 0 {
				opts = append(opts, parsed{letter: c})
				continue
			}
			if j+1 < len(a) {
				opts = append(opts, parsed{c, a[j+1:], true})
				break
			}
			if k+1 < len(args) && (kind == 1 || !strings.HasPrefix(args[k+1], "-")) && args[k+1] != "--" {
				k++
				opts = append(opts, parsed{c, args[k], true})
				break
			}
			if kind == 1 {
				return nil, nil, fmt.Errorf("option requires an argument -- '%c'", c)
			}
			opts = append(opts, parsed{letter: c})
		}
	}
	return opts, nil, nil
}

// splitPair parses netperf's "a,b" arguments: "a" sets both, ",b" only the
// second, "a," only the first.
func splitPair(s string) (a, b string) {
	if i := strings.IndexByte(s, ','); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, s
}

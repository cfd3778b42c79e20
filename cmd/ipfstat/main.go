// Command ipfstat reports on the kernel filter datapath: statistics, the
// loaded rules with their counters, and the state table (see ipfstat(8)).
//
// It reads the datapath pinned under /sys/fs/bpf/sluice (or $SLUICE_BPF_DIR),
// so it needs no daemon.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"sluice/internal/rules/ipf"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: ipfstat [-6aAdfghIilnoRsv]\n"

// flags are ipfstat's single-letter options (combinable, as with getopt).
type flags struct {
	six, acct, auth, debug, frags, groups, hits bool
	inactive, in, list, numbers, out, noresolve bool
	state, verbose                              bool
}

func parseFlags(args []string) (flags, error) {
	var f flags
	for _, a := range args {
		if len(a) < 2 || a[0] != '-' {
			return f, fmt.Errorf("unexpected argument %q", a)
		}
		for _, c := range a[1:] {
			switch c {
			case '6':
				f.six = true
			case 'a':
				f.acct = true
			case 'A':
				f.auth = true
			case 'd':
				f.debug = true
			case 'f':
				f.frags = true
			case 'g':
				f.groups = true
			case 'h':
				f.hits = true
			case 'I':
				f.inactive = true
			case 'i':
				f.in = true
			case 'l':
				f.list = true
			case 'n':
				f.numbers = true
			case 'o':
				f.out = true
			case 'R':
				f.noresolve = true
			case 's':
				f.state = true
			case 'v':
				f.verbose = true
			default:
				return f, fmt.Errorf("unknown option -%c", c)
			}
		}
	}
	return f, nil
}

func dirOf(out bool) ipf.Direction {
	if out {
		return ipf.DirOut
	}
	return ipf.DirIn
}

func pinDir() string {
	if d := os.Getenv("SLUICE_BPF_DIR"); d != "" {
		return d
	}
	return ""
}

func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "ipfstat: %v\n%s", err, usage)
		return 2
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if err := report(w, stderr, f); err != nil {
		w.Flush()
		fmt.Fprintf(stderr, "ipfstat: %v\n", err)
		return 1
	}
	return 0
}

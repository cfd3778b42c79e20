// Package ipnatcmd implements the ipnat command line: checking, printing
// and (where a kernel is attached) loading ipnat.conf rules.
package ipnat

import (
	"errors"
	"fmt"
	"io"
	"os"

	"sluice/internal/getopt"
	"sluice/internal/rules/ipnat"
)

// ErrNoDevice is returned by commands that need the NAT device, which
// this build does not have.
var ErrNoDevice = fmt.Errorf("/dev/ipnat: no kernel NAT device (use -n to check rules offline): %w", errors.ErrUnsupported)

// Usage is ipnat's complete usage text (ipnat -h alone).
const Usage = `usage: ipnat [-CdFhlnrRsv] [-p] [-m expr] [-O fields] -f filename
  -f file  read NAT rules from file ("-": standard input) and load them
  -r       remove the rules of the following -f files instead
  -C       clear (flush) the NAT rules;  -F  flush the active sessions
  -l       list the rules and sessions;  -h  with -l: each rule's hit count
  -s       statistics;  -p  with -r: purge the rules' sessions too
  -n       check the files only, change nothing;  -v  verbose;  -d  debug
  -R       do not resolve names;  -m expr, -O fields: select and format -l
  -M core, -N namelist, -X  accepted for IPFilter compatibility, no effect
ipnat -h alone prints this help.
`

const optString = "CdFf:hlm:M:N:nO:prRsvX"

// Main runs ipnat with args (without the program name) and returns the
// exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		// -h alone: with -l it keeps its IPFilter meaning (hits)
		fmt.Fprint(stdout, Usage)
		return 0
	}
	opts, rest, err := getopt.Parse(args, optString)
	if err != nil || len(rest) > 0 {
		if err != nil {
			fmt.Fprintf(stderr, "ipnat: %v\n", err)
		}
		fmt.Fprint(stderr, Usage)
		return 2
	}
	var noLoad, verbose, clear, flush, list, stats, remove bool
	var files []string
	for _, o := range opts {
		switch o.Flag {
		case 'n':
			noLoad = true
		case 'v':
			verbose = true
		case 'C':
			clear = true
		case 'F':
			flush = true
		case 'l':
			list = true
		case 's':
			stats = true
		case 'r':
			remove = true
		case 'f':
			files = append(files, o.Arg)
		}
	}
	if len(opts) == 0 {
		fmt.Fprint(stderr, Usage)
		return 2
	}
	if !noLoad && (clear || flush || list || stats || len(files) > 0) {
		// Parse anyway so that errors in the file are still reported.
		for _, fn := range files {
			if parseOne(fn, remove, false, stdin, stdout, stderr) != 0 {
				return 1
			}
		}
		fmt.Fprintf(stderr, "ipnat: %v\n", ErrNoDevice)
		return 1
	}
	if flush {
		fmt.Fprintln(stdout, "0 entries flushed from NAT table")
	}
	if clear {
		fmt.Fprintln(stdout, "0 entries flushed from NAT list")
	}
	status := 0
	for _, fn := range files {
		if s := parseOne(fn, remove, verbose, stdin, stdout, stderr); s != 0 {
			status = s
		}
	}
	return status
}

func parseOne(fn string, remove, verbose bool, stdin io.Reader, stdout, stderr io.Writer) int {
	var src []byte
	var err error
	if fn == "-" {
		src, err = io.ReadAll(stdin)
	} else {
		src, err = os.ReadFile(fn)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ipnat: %v\n", err)
		return 1
	}
	f, perr := ipnat.Parse(fn, string(src), stderr)
	if verbose && f != nil {
		for _, r := range f.Rules {
			io.WriteString(stdout, r.String())
		}
	}
	if perr != nil {
		fmt.Fprintln(stderr, perr)
		return 1
	}
	return 0
}

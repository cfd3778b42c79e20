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
var ErrNoDevice = errors.New("/dev/ipnat: no kernel NAT device (use -n to check rules offline)")

const usage = "usage: ipnat [-CdFhlnrRsv] [-f filename]\n"

// Main runs ipnat with args (without the program name) and returns the
// exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	opts, rest, err := getopt.Parse(args, "CdFf:hlm:M:N:nO:prRsvX")
	if err != nil || len(rest) > 0 {
		if err != nil {
			fmt.Fprintf(stderr, "ipnat: %v\n", err)
		}
		fmt.Fprint(stderr, usage)
		return 1
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
		fmt.Fprint(stderr, usage)
		return 1
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

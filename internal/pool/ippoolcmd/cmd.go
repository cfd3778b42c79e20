// Package ippoolcmd implements the ippool command line: loading,
// checking and printing ippool.conf files, and the table management
// commands of IPFilter's ippool(8).
package ippoolcmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"sluice/internal/getopt"
	"sluice/internal/pool/netfmt"
	"sluice/internal/rules/ippool"
)

// ErrNoDevice is returned by commands that need a loaded packet filter
// (the IPFilter /dev/iplookup device), which this build does not have.
var ErrNoDevice = errors.New("/dev/iplookup: no kernel lookup device (use -n to check a file offline)")

const usage = `usage: ippool [-dnv] -f <file> [-R] [-u]
       ippool [-dnv] -a [-i <ipaddr>[/netmask]] [-m <name>] [-o <role>] [-t <type>] [-T ttl]
       ippool [-dnv] -A [-m <name>] [-o <role>] [-S <seed>] [-t <type>]
       ippool [-dnv] -F [-o <role>] [-t <type>]
       ippool [-dnv] -l [-m <name>] [-o <role>] [-t <type>]
       ippool [-dnv] -r [-i <ipaddr>[/netmask]] [-m <name>] [-o <role>]
       ippool [-dnv] -R [-m <name>] [-o <role>] [-t <type>]
       ippool [-dnv] -s [-m <name>] [-o <role>] [-t <type>]
`

// Main runs ippool with args (without the program name) and returns the
// exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 1
	}
	// The first command letter picks the mode, as in the original; all
	// options share one getopt pass here.
	opts, _, err := getopt.Parse(args, "aAdf:Fi:lm:M:nN:o:O:rRsS:t:T:uvz")
	if err != nil {
		fmt.Fprintf(stderr, "ippool: %v\n", err)
		fmt.Fprint(stderr, usage)
		return 1
	}
	var cmd byte
	var noLoad, verbose bool
	var files []string
	for _, o := range opts {
		switch o.Flag {
		case 'a', 'A', 'F', 'l', 'r', 's', 'z':
			if cmd == 0 {
				cmd = o.Flag
			}
		case 'R':
			// -R is "no name resolution" after -f, "remove pool" as a command.
			if cmd == 0 {
				cmd = 'R'
			}
		case 'f':
			if cmd == 0 || cmd == 'R' {
				cmd = 'f'
			}
			files = append(files, o.Arg)
		case 'n':
			noLoad = true
		case 'v':
			verbose = true
		}
	}
	switch cmd {
	case 0:
		fmt.Fprint(stderr, usage)
		return 1
	case 'f':
		return loadFiles(files, noLoad, verbose, stdin, stdout, stderr)
	}
	if err := checkArgs(cmd, opts); err != nil {
		fmt.Fprintf(stderr, "ippool: %v\n", err)
		return 1
	}
	if noLoad {
		// Offline: the arguments are valid and there is no table to
		// add to, remove from, list or flush.
		return 0
	}
	fmt.Fprintf(stderr, "ippool: %v\n", ErrNoDevice)
	return 1
}

func loadFiles(files []string, noLoad, verbose bool, stdin io.Reader, stdout, stderr io.Writer) int {
	var err error
	status := 0
	for _, fn := range files {
		var src []byte
		if fn == "-" {
			src, err = io.ReadAll(stdin)
		} else {
			src, err = os.ReadFile(fn)
		}
		if err != nil {
			fmt.Fprintf(stderr, "ippool: %v\n", err)
			return 1
		}
		f, perr := ippool.Parse(fn, string(src))
		if verbose && f != nil {
			f.Print(stdout)
		}
		if perr != nil {
			fmt.Fprintln(stderr, perr)
			status = 1
			continue
		}
		if !noLoad {
			fmt.Fprintf(stderr, "ippool: %v\n", ErrNoDevice)
			status = 1
		}
	}
	return status
}

// checkArgs validates the operands of the table commands as the
// original does before it opens the device.
func checkArgs(cmd byte, opts []getopt.Opt) error {
	var name, addr string
	for _, o := range opts {
		switch o.Flag {
		case 'm':
			name = o.Arg
		case 'i':
			addr = o.Arg
		case 'o':
			switch o.Arg {
			case "ipf", "nat", "auth", "count", "all":
			default:
				return fmt.Errorf("unknown role %q", o.Arg)
			}
		case 't':
			switch o.Arg {
			case "tree", "hash", "dstlist", "group-map":
			default:
				return fmt.Errorf("unknown type %q", o.Arg)
			}
		case 'S', 'T':
			if !netfmt.IsNumber(o.Arg) {
				return fmt.Errorf("-%c needs a number, not %q", o.Flag, o.Arg)
			}
		}
	}
	switch cmd {
	case 'a', 'r':
		if addr == "" {
			return errors.New("no IP address given with -i")
		}
		host, bits, hasBits := strings.Cut(addr, "/")
		h, err := netfmt.ParseHost(host, 0)
		if err != nil {
			return err
		}
		if hasBits {
			max := 32
			if h.Fam == 6 {
				max = 128
			}
			if n, err := strconv.Atoi(bits); err != nil || n < 0 || n > max {
				if _, ok := netfmt.ParseDotted(bits); !ok || h.Fam == 6 {
					return fmt.Errorf("bad netmask %q", bits)
				}
			}
		}
		fallthrough
	case 'A', 'R':
		if name == "" {
			return errors.New("no pool name given with -m")
		}
	}
	return nil
}

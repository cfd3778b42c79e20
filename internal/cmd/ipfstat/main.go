// Package ipfstat is the ipfstat command: it reports on the kernel filter
// datapath (statistics, the loaded rules with their counters, the state
// table; see ipfstat(8)). It reads the datapath pinned under
// /sys/fs/bpf/sluice (or $SLUICE_BPF_DIR) through an ipfctl.Reader, so it
// needs no daemon.
package ipfstat

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"

	"sluice/internal/getopt"
)

// Usage is ipfstat's complete usage text (ipfstat -h alone, or --help).
const Usage = `usage: ipfstat [-6aAdfghIilnoRsv]
       ipfstat -t [-C] [-T refreshtime]
  (none)  statistics
  -i, -o  the input / output rules;  -a  the accounting rules
  -h      with -i/-o/-a: each rule's hit count (alone: this help)
  -n      with -i/-o: rule numbers;  -I  the inactive set
  -s      state statistics;  -sl  the state entries
  -g      the groups;  -f  fragment statistics;  -A  authentication
  -t      top-like state listing, every -T seconds; -C with closed entries
  -6 -d -R -v  accepted: IPv6 included, debug, no resolving, verbose
`

const optString = "tCT:6aAdfghIilnoRsv"

// flags are ipfstat's single-letter options (combinable, as with getopt).
type flags struct {
	six, acct, auth, debug, frags, groups, hits bool
	inactive, in, list, numbers, out, noresolve bool
	state, verbose                              bool
	// top is -t: a refreshing state listing every topSecs (-T) seconds;
	// closed (-C) also lists closed TCP entries.
	top, closed bool
	topSecs     int
	tty         bool // stdout is a terminal: -t redraws
}

func parseFlags(args []string) (flags, error) {
	f := flags{topSecs: 1}
	p := getopt.New(args, optString)
	for o, err := range p.All() {
		if err != nil {
			return f, err
		}
		switch o.Flag {
		case 't':
			f.top = true
		case 'C':
			f.closed = true
		case 'T':
			n, err := strconv.Atoi(o.Arg)
			if err != nil || n < 1 {
				return f, fmt.Errorf("-T %s: expected a number of seconds", o.Arg)
			}
			f.topSecs = n
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
		}
	}
	if rest := p.Operands(); len(rest) > 0 {
		return f, fmt.Errorf("unexpected argument %q", rest[0])
	}
	return f, nil
}

// Main runs ipfstat with args (without the program name) on the datapath
// ipfctl finds and returns the exit status: 0 done, 1 an error, 2 a usage
// error.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(args, stdout, stderr, kernel)
}

// run is Main with the datapath to read from (tests pass their own).
func run(args []string, stdout, stderr io.Writer, src source) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		// -h alone: with -i/-o it keeps its IPFilter meaning (hits)
		fmt.Fprint(stdout, Usage)
		return 0
	}
	f, err := parseFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "ipfstat: %v\n%s", err, Usage)
		return 2
	}
	if fi, ok := stdout.(*os.File); ok {
		if st, err := fi.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			f.tty = true
		}
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if err := report(w, stderr, f, src); err != nil {
		w.Flush()
		fmt.Fprintf(stderr, "ipfstat: %v\n", err)
		return 1
	}
	return 0
}

// Package ipnatcmd implements the ipnat command line: checking, printing
// and (where a kernel is attached) loading ipnat.conf rules.
package ipnat

import (
	"errors"
	"fmt"
	"io"

	"sluice/internal/getopt"
	"sluice/internal/ipfctl"
	"sluice/internal/rulefile"
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

// Device is the kernel NAT ipnat drives (the eBPF datapath through
// sluice/internal/ipfctl on Linux).
type Device interface {
	// Apply makes the command line's change (-F, -C, -f, -r, -p) as one
	// transaction under the lock ipf takes too, and returns how many
	// sessions were flushed and rules cleared. A failed call changes
	// nothing.
	Apply(ch ipfctl.NATChange) (flushed, cleared int, err error)
	// List writes the rules (with hit counts when hits is set), the
	// sessions and, verbose, the host map (ipnat -l).
	List(w io.Writer, hits, verbose bool) error
	// Stats writes the statistics (ipnat -s).
	Stats(w io.Writer, verbose bool) error
}

// Command is one ipnat run.
type Command struct {
	// Device is the kernel NAT; nil means there is none (only -n works).
	Device Device
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Main runs ipnat with args (without the program name) against the
// kernel NAT pinned under $SLUICE_BPF_DIR-nat (default
// /sys/fs/bpf/sluice-nat) and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &Command{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if d := ipfctl.NATDevice(ipfctl.PinDir()); d != nil {
		c.Device = d
	}
	return c.Run(args)
}

// Run runs ipnat with args and returns the exit status. As IPFilter's
// ipnat does, it flushes (-F, -C) first, then loads or removes the
// files' rules (-f, -r), then lists (-l) and prints statistics (-s).
// Every file is parsed (and checked) before anything is changed, and the
// changes are made as one transaction (Device.Apply).
func (c *Command) Run(args []string) int {
	stdin, stdout, stderr := c.Stdin, c.Stdout, c.Stderr
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
	var noLoad, verbose, clear, flush, list, stats, remove, purge, hits bool
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
		case 'p':
			purge = true
		case 'h':
			hits = true
		case 'f':
			files = append(files, o.Arg)
		}
	}
	if len(opts) == 0 {
		fmt.Fprint(stderr, Usage)
		return 2
	}
	if purge && !remove {
		fmt.Fprintln(stderr, "ipnat: -p must be used with -r")
		return 1
	}
	// Every file is read and parsed before anything changes, so a typo
	// leaves the loaded rules as they were.
	parsed := make([]*ipnat.File, len(files))
	for i, fn := range files {
		f, status := parseOne(fn, verbose, stdin, stdout, stderr)
		if status != 0 {
			return status
		}
		parsed[i] = f
	}
	if noLoad {
		if flush {
			fmt.Fprintln(stdout, "0 entries flushed from NAT table")
		}
		if clear {
			fmt.Fprintln(stdout, "0 entries flushed from NAT list")
		}
		return 0
	}
	if !clear && !flush && !list && !stats && len(files) == 0 {
		return 0
	}
	if c.Device == nil {
		fmt.Fprintf(stderr, "ipnat: %v\n", ErrNoDevice)
		return 1
	}
	ch := ipfctl.NATChange{Flush: flush, Clear: clear, Remove: remove, Purge: purge}
	for i, f := range parsed {
		ch.Files = append(ch.Files, ipfctl.NATFile{Name: files[i], Rules: f.Rules})
	}
	var flushed, cleared int
	if flush || clear || len(files) > 0 {
		if flushed, cleared, err = c.Device.Apply(ch); err != nil {
			fmt.Fprintf(stderr, "ipnat: %v\n", err)
			return 1
		}
	}
	if flush {
		fmt.Fprintf(stdout, "%d entries flushed from NAT table\n", flushed)
	}
	if clear {
		fmt.Fprintf(stdout, "%d entries flushed from NAT list\n", cleared)
	}
	if nw, ok := c.Device.(interface{ NetNSWarning() string }); ok && (list || stats) {
		// another namespace's NAT is read, not changed: said, as ipf -V
		// and ipfstat say it of the filter
		if msg := nw.NetNSWarning(); msg != "" {
			fmt.Fprintf(stderr, "ipnat: warning: %s\n", msg)
		}
	}
	if list {
		if err := c.Device.List(stdout, hits, verbose); err != nil {
			fmt.Fprintf(stderr, "ipnat: %v\n", err)
			return 1
		}
	}
	if stats {
		if err := c.Device.Stats(stdout, verbose); err != nil {
			fmt.Fprintf(stderr, "ipnat: %v\n", err)
			return 1
		}
	}
	return 0
}

// maxFileSize bounds an ipnat.conf: far beyond any NAT rule set, it stops
// a FIFO or device that never ends (`ipnat -f /dev/zero`) from growing
// ipnat until the host's memory is gone. A variable so that a test can
// bound an endless source cheaply.
var maxFileSize int64 = 64 << 20

func parseOne(fn string, verbose bool, stdin io.Reader, stdout, stderr io.Writer) (*ipnat.File, int) {
	src, err := rulefile.Read(fn, stdin, maxFileSize)
	if err != nil {
		fmt.Fprintf(stderr, "ipnat: %v\n", err)
		return nil, 1
	}
	f, perr := ipnat.Parse(fn, string(src), stderr)
	if verbose && f != nil {
		for _, r := range f.Rules {
			io.WriteString(stdout, r.String())
		}
	}
	if perr != nil {
		fmt.Fprintln(stderr, perr)
		return nil, 1
	}
	return f, 0
}

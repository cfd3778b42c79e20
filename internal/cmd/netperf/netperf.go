// Package cli implements the netperf and netserver command lines with the
// C tools' getopt conventions: bundled flags (-cC), attached or separate
// arguments (-l1, -l 1), and test-specific options after "--".
package netperf

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"sluice/internal/getopt"
	"sluice/internal/netperf"
	"sluice/internal/netperf/output"
)

// Options is a parsed netperf command line.
type Options struct {
	Config    netperf.Config
	Host      string
	Units     byte
	Verbosity int
	NoHeaders bool
	Brand     string
	Style     output.Style
	Selectors []string // nil: classic output
	ListNames bool     // "?" given to -o/-O/-k
}

// The optstrings of netperf's global options and of the test options
// after "--" (-k, -o and -O take an optional output selector list).
const (
	globalSpec = "H:p:l:t:cCf:P:v:i:I:B:L:46T:Z:o:O:hdn:N"
	testSpec   = "m:M:s:S:r:DP:k::o::O::R:H:L:46"
)

func atoi(opt byte, s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("option -%c: bad number %q", opt, s)
	}
	return v, nil
}

// sizeArg parses netperf sizes, which accept k/m/g (1024-based) suffixes.
func sizeArg(opt byte, s string) (int, error) {
	mult, arg := 1, s
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult, s = 1024, s[:n-1]
		case 'm', 'M':
			mult, s = 1<<20, s[:n-1]
		case 'g', 'G':
			mult, s = 1<<30, s[:n-1]
		}
	}
	v, err := atoi(opt, s)
	if err != nil {
		return 0, err
	}
	// The control protocol carries sizes as 32-bit ints, and an
	// unrepresentable size would make the data loop's buffer allocation panic.
	if v > math.MaxInt32/mult || v < math.MinInt32/mult {
		return 0, fmt.Errorf("option -%c: size %q out of range", opt, arg)
	}
	return v * mult, nil
}

// ParseNetperf parses netperf's arguments (without the program name).
func ParseNetperf(args []string) (*Options, error) {
	o := &Options{Host: "localhost", Verbosity: 1}
	c := &o.Config
	c.Test, c.Port, c.Duration = netperf.TCPStream, netperf.DefaultPort, 10*time.Second
	opts, rest, err := parseOpts(args, globalSpec)
	if err != nil {
		return nil, err
	}
	for _, p := range opts {
		var err error
		switch p.Flag {
		case 'H':
			o.Host, _ = splitPair(p.Arg)
		case 'p':
			c.Port, err = atoi('p', strings.Split(p.Arg, ",")[0])
			if err == nil && (c.Port <= 0 || c.Port > 65535) {
				err = fmt.Errorf("option -p: port %d out of range", c.Port)
			}
		case 'l':
			var n int
			n, err = atoi('l', p.Arg)
			switch {
			case n > 0:
				c.Duration, c.Transactions = time.Duration(n)*time.Second, 0
			case n < 0:
				c.Transactions = int64(-n)
			default:
				err = fmt.Errorf("option -l: test length must not be 0")
			}
		case 't':
			c.Test = strings.ToUpper(p.Arg)
		case 'c':
			c.LocalCPU = true
		case 'C':
			c.RemoteCPU = true
		case 'f':
			if len(p.Arg) != 1 || !strings.ContainsRune("kmgKMGx", rune(p.Arg[0])) {
				err = fmt.Errorf("option -f: units must be one of k m g K M G")
			} else {
				o.Units = p.Arg[0]
			}
		case 'P':
			o.NoHeaders = p.Arg == "0"
		case 'v':
			o.Verbosity, err = atoi('v', p.Arg)
		case 'i':
			a, b := splitPair(p.Arg)
			if c.ConfMax, err = atoi('i', a); err == nil {
				c.ConfMin, err = atoi('i', b)
			}
		case 'I':
			a, b := splitPair(p.Arg)
			if c.ConfLevel, err = atoi('I', a); err == nil {
				c.ConfWidth, err = strconv.ParseFloat(b, 64)
			}
			if c.ConfMax == 0 {
				c.ConfMax, c.ConfMin = 10, 3 // -I alone implies -i 10,3
			}
		case 'B':
			o.Brand = p.Arg
		case 'L':
			c.LocalAddr, _ = splitPair(p.Arg)
		case '4':
			c.Family = 4
		case '6':
			c.Family = 6
		case 'T':
			a, b := splitPair(p.Arg)
			if a != "" {
				c.BindLocalCPU = true
				if c.LocalCPUAffinity, err = atoi('T', a); err != nil {
					break
				}
			}
			if b != "" {
				c.BindRemoteCPU = true
				c.RemoteCPUAffinity, err = atoi('T', b)
			}
		case 'Z':
			c.Passphrase = p.Arg
		case 'o', 'O', 'n', 'd', 'N':
			// Buffer offsets, CPU count and debug: accepted, not used.
		case 'h':
			return nil, fmt.Errorf("usage: netperf [global options] -- [test options]")
		}
		if err != nil {
			return nil, err
		}
	}
	topts, extra, err := parseOpts(rest, testSpec)
	if err != nil {
		return nil, fmt.Errorf("test option: %w", err)
	}
	if len(extra) > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", extra)
	}
	for _, p := range topts {
		var err error
		switch p.Flag {
		case 'm':
			c.SendSize, err = sizeArg('m', strings.Split(p.Arg, ",")[0])
		case 'M':
			c.RecvSize, err = sizeArg('M', strings.Split(p.Arg, ",")[0])
		case 's':
			a, _ := splitPair(p.Arg)
			c.LocalSockBuf, err = sizeArg('s', a)
		case 'S':
			a, _ := splitPair(p.Arg)
			c.RemoteSockBuf, err = sizeArg('S', a)
		case 'r':
			a, b := splitPair(p.Arg)
			if a != "" {
				c.ReqSize, err = sizeArg('r', a)
			}
			if err == nil && b != "" {
				c.RespSize, err = sizeArg('r', b)
			}
		case 'D':
			c.NoDelay = true
		case 'P':
			a, b := splitPair(p.Arg)
			if a != "" {
				c.LocalDataPort, err = atoi('P', a)
			}
			if err == nil && b != "" {
				c.RemoteDataPort, err = atoi('P', b)
			}
		case 'k', 'o', 'O':
			o.Style = map[byte]output.Style{'o': output.CSV, 'O': output.Columns, 'k': output.KeyValue}[p.Flag]
			switch {
			case p.Arg == "?":
				o.ListNames = true
			case p.HasArg:
				o.Selectors, err = output.ParseFieldList(p.Arg)
			default:
				o.Selectors = []string{} // defaults, filled in once the test is known
			}
		case 'H':
			o.Host, _ = splitPair(p.Arg)
		case 'L':
			c.LocalAddr, _ = splitPair(p.Arg)
		case '4':
			c.Family = 4
		case '6':
			c.Family = 6
		}
		if err != nil {
			return nil, err
		}
	}
	c.Host = o.Host
	if !netperf.KnownTest(c.Test) {
		return nil, fmt.Errorf("option -t: unsupported test %q (want TCP_STREAM, TCP_MAERTS, TCP_RR, TCP_CRR, UDP_STREAM or UDP_RR)", c.Test)
	}
	if o.Selectors != nil && len(o.Selectors) == 0 {
		o.Selectors = output.DefaultFields(c.Test, c.LocalCPU || c.RemoteCPU)
	}
	for _, s := range o.Selectors {
		if strings.HasSuffix(s, "_LATENCY") {
			c.Latency = true
		}
	}
	return o, nil
}

// Report builds the printable report for a result.
func (o *Options) Report(r *netperf.Result, cmdline string) *output.Report {
	return &output.Report{
		Result: r, Host: o.Host, IPv6: o.Config.Family == 6,
		Units: o.Units, Verbosity: o.Verbosity, NoHeaders: o.NoHeaders, Brand: o.Brand,
		ShowLocalCPU: o.Config.LocalCPU, ShowRemoteCPU: o.Config.RemoteCPU,
		ConfActive: o.Config.ConfMax > 1, ConfLevel: confLevel(o.Config.ConfLevel), ConfWidth: confWidth(o.Config.ConfWidth),
		CommandLine: cmdline,
	}
}

func confLevel(l int) int {
	if l == 95 {
		return 95
	}
	return 99
}

func confWidth(w float64) float64 {
	if w <= 0 {
		return 5
	}
	return w
}

// Print writes the result in the style the options ask for.
func (o *Options) Print(w io.Writer, rep *output.Report) {
	if o.Selectors == nil {
		output.Classic(w, rep)
		return
	}
	if !o.NoHeaders {
		output.Banner(w, rep)
	}
	output.ConfidenceWarning(w, rep)
	output.Selected(w, rep, o.Style, o.Selectors)
}

// NetperfMain runs the netperf command and returns its exit status.
func NetperfMain(args []string, stdout, stderr io.Writer) int {
	o, err := ParseNetperf(args)
	if err != nil {
		fmt.Fprintf(stderr, "netperf: %v\n", err)
		return 2
	}
	if o.ListNames {
		fmt.Fprintln(stdout, strings.Join(output.FieldNames(), "\n"))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := netperf.Run(ctx, o.Config)
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "netperf: ") {
			msg = "netperf: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return 1
	}
	o.Print(stdout, o.Report(r, "netperf "+strings.Join(args, " ")))
	return 0
}

// parseOpts parses netperf-style options: every word before "--" must be
// an option (the C tools take no operands), and the words after "--" are
// returned. As in the C tools, "--" is never taken as an option's
// argument.
func parseOpts(args []string, optstring string) ([]getopt.Opt, []string, error) {
	p := getopt.New(args, optstring)
	p.GNU = true
	var opts []getopt.Opt
	for o, err := range p.All() {
		if err != nil {
			return nil, nil, err
		}
		if o.HasArg && o.Arg == "--" && args[p.Optind()-1] == "--" {
			return nil, nil, &getopt.Error{Kind: getopt.MissingArgument, Flag: o.Flag, GNU: true}
		}
		opts = append(opts, o)
	}
	if !p.DashDash() {
		if rest := p.Operands(); len(rest) > 0 {
			return nil, nil, fmt.Errorf("unexpected argument %q", rest[0])
		}
		return opts, nil, nil
	}
	return opts, p.Operands(), nil
}

// splitPair parses netperf's "a,b" arguments: "a" sets both, ",b" only the
// second, "a," only the first.
func splitPair(s string) (a, b string) {
	if i := strings.IndexByte(s, ','); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, s
}

// Package netperf is the netperf command: netperf 2.7.1's command line
// (global options, then test options after "--", read with getopt as the C
// tool reads them), its output and its exit statuses, over the Go client
// in sluice/internal/netperf.
//
// Options the C tool accepts but that change nothing in this
// implementation (buffer alignments and offsets -a -A -o -O, -F fill
// files, -n, -S, -s, -W, -y, -Y, -b, -w, -d; test options -C -c -d -e -f
// -F -g -G -I -j -K -l -n -N -p -q -t -T -U -V -w -W -a -B -b) are
// accepted and ignored. Where this netperf knowingly differs from C:
// an unknown test option, a malformed number (C's atoi reads "abc" as 0,
// so "-l abc" runs forever), an unknown -f letter and an unknown output
// selector in a list are errors here; -N (no control connection) is not
// supported.
package netperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/getopt"
	"sluice/internal/netperf"
	"sluice/internal/netperf/output"
)

// Options is a parsed netperf command line.
type Options struct {
	Config netperf.Config
	// Host is -H as given ("localhost" by default).
	Host      string
	hostGiven bool
	Units     byte // -f, 0 = the test's default
	Verbosity int
	NoHeaders bool
	Brand     string
	// ConfActive is set by -i or -I.
	ConfActive bool
	// Selector output (-o, -O, -k after "--"); Legacy is the classic
	// output.
	Legacy    bool
	Style     output.Style
	Selection output.Selection
	selSpec   string
	// ListNames is "?" given to -o, -O or -k.
	ListNames bool
	CPUBind   bool
	// LocalCPUBind and RemoteCPUBind are -T's CPUs, -1 for none.
	LocalCPUBind, RemoteCPUBind    int
	LSSReq, LSRReq, RSSReq, RSRReq int
	SourcePort, DestPort           string
	SourceAddr, DestAddr           string
	SourceFamily, DestFamily       int
	UUID                           string
	CommandLine                    string
	localFamily                    int // -L ,fam / -4 / -6 for the control connection
}

// The getopt strings of netperf's global options (netsh.c) and of the
// omni test options after "--" (nettest_omni.c).
const (
	globalSpec = "A:a:b:B:CcdD:f:F:H:hi:I:jk:K:l:L:n:NO:o:P:p:rSs:t:T:v:VW:w:y:Y:Z:46"
	testSpec   = "aBb:cCd:De:fFgG:hH:i:Ij:kK:l:L:m:M:nNoOp:P:q:r:R:s:S:t:T:u:UVw:W:46"
)

// exitError ends netperf before any test with netperf's own text and
// status.
type exitError struct {
	code           int
	stdout, stderr string
}

func (e *exitError) Error() string { return strings.TrimSpace(e.stdout + e.stderr) }

// Linux address family numbers, as netperf prints them in the omni
// output.
const (
	afUnspec = 0
	afInet   = 2
	afInet6  = 10
)

// convert is netperf's convert() made strict: a decimal number with an
// optional K, M, G (2^10, 2^20, 2^30) or k, m, g (10^3, 10^6, 10^9)
// suffix. netperf reads junk as 0; here it is an error.
func convert(opt, s string, signed bool) (int, error) {
	arg := s
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'k':
			mult = 1e3
		case 'm':
			mult = 1e6
		case 'g':
			mult = 1e9
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || (!signed && v < 0) {
		kind := "a number"
		if !signed {
			kind = "a non-negative number"
		}
		return 0, fmt.Errorf("option %s: %q is not %s (with an optional K, M, G, k, m or g)", opt, arg, kind)
	}
	v *= mult
	if v > 1<<31-1 || v < -(1<<31) {
		return 0, fmt.Errorf("option %s: %q is out of range", opt, arg)
	}
	return int(v), nil
}

// breakArgs is netperf's break_args: "a" sets both values, "a," only the
// first, ",b" only the second.
func breakArgs(s string) (a, b string) {
	if i := strings.IndexByte(s, ','); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, s
}

// breakArgsExplicit is break_args_explicit: without a comma only the first
// value is set.
func breakArgsExplicit(s string, sep byte) (a, b string) {
	if i := strings.IndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

func afNumber(fam int) int {
	switch fam {
	case 4:
		return afInet
	case 6:
		return afInet6
	}
	return afUnspec
}

func afName(fam int) string {
	switch fam {
	case 4:
		return "AF_INET"
	case 6:
		return "AF_INET6"
	}
	return "AF_UNSPEC"
}

// takeCPURates removes the optional rate netperf's -c and -C take as the
// next word when it starts with a digit (getopt does not know about it).
// It walks the words as getopt will, so a digit word that is another
// option's argument is left alone.
func takeCPURates(args []string) []string {
	takes := func(c byte) bool {
		i := strings.IndexByte(globalSpec, c)
		return i >= 0 && i+1 < len(globalSpec) && globalSpec[i+1] == ':'
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if a == "--" || len(a) < 2 || a[0] != '-' {
			out = append(out, args[i+1:]...)
			break
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if takes(c) {
				if j == len(a)-1 && i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
				break
			}
			if (c == 'c' || c == 'C') && j == len(a)-1 && i+1 < len(args) {
				if n := args[i+1]; n != "" && n[0] >= '0' && n[0] <= '9' {
					i++ // the calibrated CPU rate: /proc/stat needs none
				}
			}
		}
	}
	return out
}

// Parse parses netperf's arguments (without the program name).
func Parse(args []string) (*Options, error) {
	o := &Options{Verbosity: 1, Legacy: true, LocalCPUBind: -1, RemoteCPUBind: -1,
		LSSReq: -1, LSRReq: -1, RSSReq: -1, RSRReq: -1, SourcePort: "0", DestPort: "0"}
	c := &o.Config
	c.Test, c.Port, c.Duration = netperf.TCPStream, netperf.DefaultPort, 10*time.Second
	o.CommandLine = strings.Join(append([]string{"netperf"}, args...), " ")
	args = takeCPURates(args)

	p := getopt.New(args, globalSpec)
	p.GNU = true
	for {
		opt, ok, err := p.Next()
		if err != nil {
			return nil, &exitError{code: 1, stderr: "netperf: " + err.Error() + "\n" + usage}
		}
		if !ok {
			break
		}
		if err := o.global(opt); err != nil {
			return nil, err
		}
	}
	rest := p.Operands()
	if !p.DashDash() && len(rest) > 0 {
		return nil, fmt.Errorf("unexpected argument %q (test options go after --)", rest[0])
	}
	if !o.hostGiven {
		o.Host = "localhost"
		if c.Family == 6 || c.Family == 0 && o.localFamily == 6 {
			o.Host = "::1"
		}
	}
	c.Host = o.Host
	if !netperf.KnownTest(c.Test) {
		return nil, &exitError{code: 1, stdout: fmt.Sprintf("The test you requested (%s) is unknown to this netperf.\n"+
			"Please verify that you have the correct test name, \n"+
			"and that test family has been compiled into this netperf.\n", c.Test)}
	}
	if err := o.testOptions(rest); err != nil {
		return nil, err
	}
	if o.UUID == "" {
		o.UUID = newUUID()
	}
	o.DestAddr = o.Host
	if c.DataHost != "" {
		o.DestAddr = c.DataHost
	}
	if o.DestFamily == afUnspec {
		o.DestFamily = afInet
		if a, err := netip.ParseAddr(o.DestAddr); err == nil && a.Is6() && !a.Is4In6() || c.Family == 6 {
			o.DestFamily = afInet6
		}
	}
	if o.SourceAddr == "" {
		o.SourceAddr = "0.0.0.0"
		if o.DestFamily == afInet6 {
			o.SourceAddr = "::0"
		}
	}
	o.Units = output.ResolveUnits(c.Test, o.Units)
	if !o.Legacy && !o.ListNames {
		if o.selSpec == "" {
			o.Selection = output.DefaultSelection(c.Test, c.LocalCPU || c.RemoteCPU)
		} else {
			sel, err := output.ParseSelection(o.selSpec)
			if err != nil {
				return nil, err
			}
			o.Selection = sel
		}
		if o.Selection.WantsStats() {
			c.Latency = true
		}
	}
	return o, nil
}

func (o *Options) global(p getopt.Opt) error {
	c := &o.Config
	var err error
	switch p.Flag {
	case 'h':
		return &exitError{code: 1, stderr: usage}
	case 'V':
		return &exitError{code: 0, stdout: "Netperf version " + netperf.Version + "\n"}
	case 'c':
		c.LocalCPU = true
	case 'C':
		c.RemoteCPU = true
	case 'D':
		a, b := breakArgsExplicit(p.Arg, ',')
		if a != "" {
			secs, perr := strconv.ParseFloat(a, 64)
			if perr != nil || secs == 0 {
				return fmt.Errorf("option -D: %q is not a non-zero number of seconds", a)
			}
			if secs < 0 {
				secs, c.DemoAlways = -secs, true
			}
			c.DemoInterval = time.Duration(secs * float64(time.Second))
		} else {
			c.DemoInterval = time.Second
		}
		if b != "" {
			var u int
			if u, err = convert("-D", b, false); err == nil {
				c.DemoUnits = float64(u)
			}
		}
	case 'f':
		if p.Arg == "" || !output.ValidUnits(p.Arg[0]) {
			return fmt.Errorf("option -f: %q is not one of the units %s", p.Arg, output.UnitLetters)
		}
		o.Units = p.Arg[0]
	case 'H':
		a, b := breakArgsExplicit(p.Arg, ',')
		if a != "" {
			o.Host, o.hostGiven = a, true
		}
		if b != "" {
			c.Family = netperf.ParseFamily(b)
		}
	case 'i':
		a, b := breakArgs(p.Arg)
		imax, imin := 1, 1
		if a != "" {
			if imax, err = convert("-i", a, false); err != nil {
				return err
			}
		}
		if b != "" {
			if imin, err = convert("-i", b, false); err != nil {
				return err
			}
		}
		// netperf's limits: at least 3 iterations, at most 30.
		imax = min(max(imax, imin, 3), 30)
		imin = min(max(imin, 3), 30)
		c.ConfMax, c.ConfMin, o.ConfActive = imax, imin, true
		if c.ConfLevel == 0 {
			c.ConfLevel = 99
		}
		if c.ConfWidth == 0 {
			c.ConfWidth = 5
		}
	case 'I':
		a, b := breakArgs(p.Arg)
		if a != "" {
			lvl, cerr := convert("-I", a, true)
			if cerr != nil {
				return cerr
			}
			c.ConfLevel = lvl
		}
		if c.ConfLevel != 95 && c.ConfLevel != 99 {
			return &exitError{code: 255, stdout: "Only 95% and 99% confidence level is supported\n"}
		}
		if b != "" {
			w, perr := strconv.ParseFloat(b, 64)
			if perr != nil || w <= 0 {
				return fmt.Errorf("option -I: %q is not a positive interval width (percent)", b)
			}
			c.ConfWidth = w
		}
		if c.ConfMin <= 1 {
			c.ConfMin = 3
		}
		if c.ConfMax <= 1 {
			c.ConfMax = 10
		}
		if c.ConfWidth == 0 {
			c.ConfWidth = 5
		}
		o.ConfActive = true
	case 'j':
		c.Latency = true
	case 'l':
		var n int
		if n, err = convert("-l", p.Arg, true); err != nil {
			return err
		}
		switch {
		case n > 0:
			c.Duration, c.Transactions = time.Duration(n)*time.Second, 0
		case n < 0:
			c.Transactions = int64(-n)
		default:
			return fmt.Errorf("option -l: a test length of 0 (run until interrupted) is not supported")
		}
	case 'L':
		a, b := breakArgsExplicit(p.Arg, ',')
		if a != "" {
			c.LocalAddr = a
		}
		if b != "" {
			o.localFamily = netperf.ParseFamily(b)
		}
	case 'N':
		return fmt.Errorf("option -N: running without a control connection is not supported: %w", errors.ErrUnsupported)
	case 'p':
		a, b := breakArgsExplicit(p.Arg, ',')
		if a != "" {
			if c.Port, err = port("-p", a); err != nil {
				return err
			}
			if c.Port == 0 {
				return fmt.Errorf("option -p: port 0")
			}
		}
		if b != "" {
			if _, err = port("-p", b); err != nil {
				return err
			}
		}
	case 'P':
		var v int
		if v, err = convert("-P", p.Arg, true); err == nil {
			o.NoHeaders = v == 0
		}
	case 'r':
		c.ConfResultOnly = true
	case 't':
		c.Test = strings.ToUpper(p.Arg)
	case 'T':
		a, b := breakArgs(p.Arg)
		if a != "" {
			if c.LocalCPUAffinity, err = convert("-T", a, false); err != nil {
				return err
			}
			c.BindLocalCPU, o.LocalCPUBind = true, c.LocalCPUAffinity
		}
		if b != "" {
			if c.RemoteCPUAffinity, err = convert("-T", b, false); err != nil {
				return err
			}
			c.BindRemoteCPU, o.RemoteCPUBind = true, c.RemoteCPUAffinity
		}
		o.CPUBind = true
	case 'v':
		o.Verbosity, err = convert("-v", p.Arg, true)
	case 'B':
		o.Brand = p.Arg
	case 'Z':
		c.Passphrase = p.Arg
	case '4':
		c.Family, o.localFamily = 4, 4
	case '6':
		c.Family, o.localFamily = 6, 6
	}
	return err
}

func port(opt, s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > 65535 {
		return 0, fmt.Errorf("option %s: %q is not a port number", opt, s)
	}
	return v, nil
}

// testOptions parses the options after "--".
func (o *Options) testOptions(args []string) error {
	if len(args) == 0 {
		return nil
	}
	c := &o.Config
	p := getopt.New(args, testSpec)
	p.GNU = true
	// -k, -o and -O take the next word as their argument when it does
	// not start with '-' (getopt knows them as flags).
	selector := func(style output.Style) {
		o.Legacy, o.Style, o.selSpec = false, style, ""
		rest := p.Operands()
		if len(rest) > 0 && (rest[0] == "" || rest[0][0] != '-') {
			o.selSpec = rest[0]
			p = getopt.New(rest[1:], testSpec)
			p.GNU = true
			if o.selSpec == "?" {
				o.ListNames = true
			}
		}
	}
	size := func(opt, s string) (int, error) { return convert(opt, s, false) }
	for {
		opt, ok, err := p.Next()
		if err != nil {
			return &exitError{code: 1, stderr: "netperf: " + err.Error() + "\n", stdout: testUsage}
		}
		if !ok {
			break
		}
		switch opt.Flag {
		case 'h':
			return &exitError{code: 1, stdout: testUsage}
		case 'k':
			selector(output.KeyValue)
		case 'o':
			selector(output.CSV)
		case 'O':
			selector(output.Columns)
		case 'm':
			a, b := breakArgsExplicit(opt.Arg, ',')
			if a != "" {
				if c.LocalSendSize, err = size("-m", a); err != nil {
					return err
				}
			}
			if b != "" {
				if c.RemoteSendSize, err = size("-m", b); err != nil {
					return err
				}
			}
		case 'M':
			a, b := breakArgsExplicit(opt.Arg, ',')
			if a != "" {
				if c.RemoteRecvSize, err = size("-M", a); err != nil {
					return err
				}
			}
			if b != "" {
				if c.LocalRecvSize, err = size("-M", b); err != nil {
					return err
				}
			}
		case 'r':
			a, b := breakArgs(opt.Arg)
			if a != "" {
				if c.ReqSize, err = size("-r", a); err != nil {
					return err
				}
			}
			if b != "" {
				if c.RespSize, err = size("-r", b); err != nil {
					return err
				}
			}
		case 's':
			a, b := breakArgs(opt.Arg)
			if a != "" {
				if c.LocalSendBuf, err = size("-s", a); err != nil {
					return err
				}
				o.LSSReq = c.LocalSendBuf
			}
			if b != "" {
				if c.LocalRecvBuf, err = size("-s", b); err != nil {
					return err
				}
				o.LSRReq = c.LocalRecvBuf
			}
		case 'S':
			a, b := breakArgs(opt.Arg)
			if a != "" {
				if c.RemoteSendBuf, err = size("-S", a); err != nil {
					return err
				}
				o.RSSReq = c.RemoteSendBuf
			}
			if b != "" {
				if c.RemoteRecvBuf, err = size("-S", b); err != nil {
					return err
				}
				o.RSRReq = c.RemoteRecvBuf
			}
		case 'D':
			c.NoDelay = true
		case 'P':
			a, b := breakArgs(opt.Arg)
			if a != "" {
				if c.LocalDataPort, err = port("-P", a); err != nil {
					return err
				}
				o.SourcePort = a
			}
			if b != "" {
				if c.RemoteDataPort, err = port("-P", b); err != nil {
					return err
				}
				o.DestPort = b
			}
		case 'H':
			a, b := breakArgsExplicit(opt.Arg, ',')
			if host, _ := breakArgsExplicit(a, '/'); host != "" {
				c.DataHost = host
			}
			if b != "" {
				o.DestFamily = afNumber(netperf.ParseFamily(b))
			}
		case 'L':
			a, b := breakArgsExplicit(opt.Arg, ',')
			if host, _ := breakArgsExplicit(a, '/'); host != "" {
				c.LocalAddr, o.SourceAddr = host, host
			}
			if b != "" {
				o.SourceFamily = afNumber(netperf.ParseFamily(b))
			}
		case 'R':
			v, cerr := convert("-R", opt.Arg, true)
			if cerr != nil {
				return cerr
			}
			c.AllowRouting = v != 0
		case 'u':
			o.UUID = opt.Arg
		case '4':
			o.SourceFamily, o.DestFamily = afInet, afInet
		case '6':
			o.SourceFamily, o.DestFamily = afInet6, afInet6
		}
	}
	if rest := p.Operands(); len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q after the test options", rest[0])
	}
	return nil
}

// newUUID returns a random UUID in the form netperf prints its test
// UUIDs.
func newUUID() string {
	var b [16]byte
	// getrandom(2), not crypto/rand: its package initialisation (the FIPS
	// self-checks' tables) cost every client start-up about half a millisecond.
	_, _ = unix.Getrandom(b[:], 0)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Report builds the printable report for a result (nil before the test,
// for the banner).
func (o *Options) Report(r *netperf.Result) *output.Report {
	if r == nil {
		r = &netperf.Result{Test: o.Config.Test}
	}
	ipv6 := o.Config.Family == 6
	if a, err := netip.ParseAddr(o.Host); err == nil && a.Is6() && !a.Is4In6() {
		ipv6 = true
	}
	return &output.Report{
		Result: r, Host: o.Host, IPv6: ipv6,
		Units: o.Units, Verbosity: o.Verbosity, NoHeaders: o.NoHeaders, Brand: o.Brand,
		ShowLocalCPU: o.Config.LocalCPU, ShowRemoteCPU: o.Config.RemoteCPU,
		ConfActive: o.ConfActive, ConfLevel: o.Config.ConfLevel, ConfWidth: o.Config.ConfWidth,
		ResultOnly:  o.Config.ConfResultOnly,
		CommandLine: o.CommandLine, NoDelay: o.Config.NoDelay, CPUBind: o.CPUBind,
		LocalCPUBind: o.LocalCPUBind, RemoteCPUBind: o.RemoteCPUBind, UUID: o.UUID,
		LSSReq: o.LSSReq, LSRReq: o.LSRReq, RSSReq: o.RSSReq, RSRReq: o.RSRReq,
		SourcePort: o.SourcePort, DestPort: o.DestPort, SourceAddr: o.SourceAddr, DestAddr: o.DestAddr,
		SourceFamily: o.SourceFamily, DestFamily: o.DestFamily,
	}
}

// Print writes the result after the banner: the classic table, or the
// selected output fields.
func (o *Options) Print(w io.Writer, rep *output.Report) {
	if o.Legacy {
		output.Table(w, rep)
		return
	}
	output.Selected(w, rep, o.Style, o.Selection)
}

// interimMode is netperf's output mode for demo mode's interim results.
func (o *Options) interimMode() output.InterimMode {
	switch {
	case o.Legacy || o.Style == output.Columns:
		return output.InterimHuman
	case o.Style == output.CSV:
		return output.InterimCSV
	}
	return output.InterimKeyVal
}

// Main runs the netperf command and returns its exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	netperf.SpareProc()
	o, err := Parse(args)
	if err != nil {
		var ex *exitError
		if errors.As(err, &ex) {
			fmt.Fprint(stdout, ex.stdout)
			fmt.Fprint(stderr, ex.stderr)
			return ex.code
		}
		fmt.Fprintf(stderr, "netperf: %v\n", err)
		return 1
	}
	if o.ListNames {
		// netperf lists the names and exits with status 1.
		output.ListNames(stdout, o.Style)
		return 1
	}
	cfg := o.Config
	if !o.NoHeaders {
		banner := output.BannerLine(o.Report(nil))
		cfg.Connected = func() { fmt.Fprint(stdout, banner) }
	}
	if cfg.DemoInterval > 0 {
		mode, units, n := o.interimMode(), o.Units, 0
		cfg.Interim = func(in netperf.Interim) {
			output.Interim(stdout, in, units, mode, n)
			n++
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := netperf.Run(ctx, cfg)
	if err != nil {
		return o.failed(err, stdout, stderr)
	}
	o.Print(stdout, o.Report(r))
	return 0
}

// failed reports a failed run the way netperf does, with its status.
func (o *Options) failed(err error, stdout, stderr io.Writer) int {
	switch {
	case errors.Is(err, netperf.ErrNoControl):
		localFam, local := o.localFamily, "0.0.0.0"
		remoteFam := "AF_UNSPEC"
		if o.hostGiven || o.Config.Family != 0 {
			remoteFam = "AF_INET"
			if o.Report(nil).IPv6 {
				remoteFam = "AF_INET6"
			}
		}
		if remoteFam == "AF_INET6" || localFam == 6 {
			local = "::0"
		}
		fmt.Fprintf(stdout, "establish control: are you sure there is a netserver listening on %s at port %d?\n"+
			"establish_control could not establish the control connection from %s port 0 address family %s to %s port %d address family %s\n",
			o.Host, o.Config.Port, local, afName(localFam), o.Host, o.Config.Port, remoteFam)
		fmt.Fprintf(stderr, "%v\n", err)
		return 255
	case errors.Is(err, netperf.ErrRemote):
		fmt.Fprintln(stderr, err)
		return 255
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "netperf: interrupted")
		return 1
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "netperf: ") {
		msg = "netperf: " + msg
	}
	fmt.Fprintln(stderr, msg)
	return 1
}

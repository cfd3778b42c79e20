// Package ipqosadmin is the ipqosadmin command, HP-UX IPQoS's
// administration tool, with HP's single-dash options. The kernel datapath
// is reached through an ipfctl.QoS; Main is the whole program so it can
// be tested without building a binary.
package ipqosadmin

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"sluice/internal/ipfctl"
	"sluice/internal/qos"
	"sluice/internal/qos/engine"
	"sluice/internal/rulefile"
	"sluice/internal/rules/ipqos"
)

// Usage is ipqosadmin's complete usage text (-h).
const Usage = `usage:
  ipqosadmin -state [-s]                      exit 0 disabled, 1 error, 2 enabled not filtering, 3 filtering
  ipqosadmin -verify -f FILE                  check a configuration
  ipqosadmin -load -f FILE|- [-verbose] [-abort|-continue]
  ipqosadmin -unload
  ipqosadmin -resync [-verbose]               mark the adapters of the active configuration
                                              that appeared since it was loaded (Sluice; udev
                                              runs it through ipfboot resync)
  ipqosadmin -showconfig
  ipqosadmin -showstats [ADAPTER[/POLICY[/FILTER]]]
  ipqosadmin -showstats -reset
  ipqosadmin -loglevel LEVEL                  0-4 or none, error, warning, info, debug
  ipqosadmin -test -f FILE -i PACKETS [-F text|hex] [-a ADAPTER]
  ipqosadmin -h                               this help
common: -pindir DIR (default $SLUICE_QOS_DIR, else ` + ipfctl.DefaultQoSPinDir + `)
A load is checked whole first (the file, every adapter); with -abort (the
default) any failure keeps the previous configuration.
`

var levels = []string{"none", "error", "warning", "info", "debug"}

// Main runs ipqosadmin with args (without the program name) on the kernel
// datapath and returns the exit status (see Usage for -state's).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(args, stdin, stdout, stderr, ipfctl.QoSBackend)
}

// command is one run: the options and where it reads and writes.
type command struct {
	state, silent, verify, load, unload, showconfig bool
	resync                                          bool
	showstats, reset, test, verbose, abort, cont    bool
	loglevel, file, input, format, adapter, pindir  string
	// rest are the operands (the -showstats selector)
	rest []string

	q              ipfctl.QoS
	stdin          io.Reader
	stdout, stderr io.Writer
}

// run is Main with the datapath to use (tests pass their own).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, backend func(pindir string) ipfctl.QoS) int {
	c := &command{stdin: stdin, stdout: stdout, stderr: stderr}
	if code, ok := c.parse(args); !ok {
		return code
	}
	c.q = backend(c.pindir)
	switch {
	case c.state:
		return c.doState()
	case c.verify:
		return c.doVerify()
	case c.load:
		return c.doLoad()
	case c.unload:
		return c.result(c.q.Unload(c.logWriter()))
	case c.resync:
		return c.doResync()
	case c.showconfig:
		return c.doShowconfig()
	case c.showstats:
		return c.doShowstats()
	case c.loglevel != "":
		return c.doLoglevel()
	case c.test:
		return c.doTest()
	}
	return c.fail("internal error: no action")
}

// parse reads the options; ok is false when the run ends there (help or
// a usage error) with exit status code.
func (c *command) parse(args []string) (code int, ok bool) {
	fs := flag.NewFlagSet("ipqosadmin", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&c.state, "state", false, "")
	fs.BoolVar(&c.silent, "s", false, "")
	fs.BoolVar(&c.verify, "verify", false, "")
	fs.BoolVar(&c.load, "load", false, "")
	fs.BoolVar(&c.unload, "unload", false, "")
	fs.BoolVar(&c.resync, "resync", false, "")
	fs.BoolVar(&c.showconfig, "showconfig", false, "")
	fs.BoolVar(&c.showstats, "showstats", false, "")
	fs.BoolVar(&c.reset, "reset", false, "")
	fs.StringVar(&c.loglevel, "loglevel", "", "")
	fs.BoolVar(&c.test, "test", false, "")
	fs.StringVar(&c.file, "f", "", "")
	fs.StringVar(&c.input, "i", "", "")
	fs.StringVar(&c.format, "F", "", "")
	fs.StringVar(&c.adapter, "a", "", "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	fs.BoolVar(&c.abort, "abort", false, "")
	fs.BoolVar(&c.cont, "continue", false, "")
	fs.StringVar(&c.pindir, "pindir", ipfctl.QoSPinDir(), "")
	// Options may follow the -showstats selector, so parsing resumes
	// after each positional argument.
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(c.stdout, Usage)
				return 0, false
			}
			fmt.Fprintf(c.stderr, "ipqosadmin: %v\n%s", err, Usage)
			return 2, false
		}
		if fs.NArg() == 0 {
			break
		}
		c.rest = append(c.rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	actions := 0
	for _, b := range []bool{c.state, c.verify, c.load, c.unload, c.resync, c.showconfig, c.showstats, c.loglevel != "", c.test} {
		if b {
			actions++
		}
	}
	if actions != 1 {
		fmt.Fprintf(c.stderr, "ipqosadmin: exactly one of -state, -verify, -load, -unload, -resync, -showconfig, -showstats, -loglevel, -test is needed\n%s", Usage)
		return 2, false
	}
	if c.abort && c.cont {
		fmt.Fprintf(c.stderr, "ipqosadmin: -abort and -continue exclude each other\n")
		return 2, false
	}
	if !c.showstats && len(c.rest) > 0 {
		fmt.Fprintf(c.stderr, "ipqosadmin: unexpected argument %q\n", c.rest[0])
		return 2, false
	}
	return 0, true
}

func (c *command) fail(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "ipqosadmin: "+format+"\n", args...)
	return 1
}

func (c *command) result(err error) int {
	if err != nil {
		return c.fail("%v", err)
	}
	return 0
}

// failConfig reports a configuration error; parse errors are already
// file:line:col: messages.
func (c *command) failConfig(err error) int {
	var el ipqos.ErrorList
	if errors.As(err, &el) {
		fmt.Fprintln(c.stderr, err)
		return 1
	}
	return c.fail("%v", err)
}

// logWriter is where progress goes: stdout with -verbose or at log level
// info and above, nowhere otherwise.
func (c *command) logWriter() io.Writer {
	level, _ := c.q.LogLevel()
	if c.verbose || level >= 3 {
		return c.stdout
	}
	return nil
}

func (c *command) doState() int {
	si, err := c.q.State()
	if err != nil {
		if !c.silent {
			fmt.Fprintf(c.stderr, "ipqosadmin: %v\n", err)
		}
		return int(ipfctl.QoSError)
	}
	if !c.silent {
		fmt.Fprintf(c.stdout, "IPQoS state: %s\n", si.State)
		if len(si.Attached) > 0 {
			fmt.Fprintf(c.stdout, "adapters filtering: %s\n", strings.Join(si.Attached, " "))
		}
		if len(si.Missing) > 0 {
			fmt.Fprintf(c.stdout, "adapters not attached: %s\n", strings.Join(si.Missing, " "))
		}
	}
	return int(si.State)
}

func (c *command) doVerify() int {
	rs, err := readConfig(c.file, c.stdin)
	if err != nil {
		return c.failConfig(err)
	}
	fmt.Fprintf(c.stdout, "%s: configuration is valid (%d adapters)\n", c.file, len(rs.Adapters))
	return 0
}

func (c *command) doLoad() int {
	rs, err := readConfig(c.file, c.stdin)
	if err != nil {
		return c.failConfig(err)
	}
	logw := c.logWriter()
	rep, err := c.q.Load(rs, ipfctl.QoSLoadOptions{Continue: c.cont, Log: logw})
	if err != nil {
		return c.fail("load failed, previous configuration kept: %v", err)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(c.stderr, "ipqosadmin: warning: %s\n", s)
	}
	if logw != nil {
		fmt.Fprintf(logw, "configuration loaded on %s\n", strings.Join(rep.Attached, " "))
	}
	if len(rep.Skipped) > 0 {
		return 1
	}
	return 0
}

// doResync is -resync: adapters that appeared get the marker; an adapter
// that cannot be attached is a warning and exit status 1.
func (c *command) doResync() int {
	logw := c.logWriter()
	rep, err := c.q.Resync(logw)
	if rep != nil {
		if logw != nil && len(rep.Attached) > 0 {
			fmt.Fprintf(logw, "configuration attached to %s\n", strings.Join(rep.Attached, " "))
		}
		for _, s := range rep.Skipped {
			fmt.Fprintf(c.stderr, "ipqosadmin: warning: %s\n", s)
		}
	}
	if err != nil {
		if rep == nil {
			return c.fail("%v", err)
		}
		return 1
	}
	return 0
}

func (c *command) doShowconfig() int {
	text, err := c.q.Config()
	if err != nil {
		return c.fail("%v", err)
	}
	if text == "" {
		return c.fail("no configuration loaded")
	}
	fmt.Fprint(c.stdout, text)
	return 0
}

func (c *command) doShowstats() int {
	if c.reset {
		if len(c.rest) > 0 {
			return c.fail("-showstats -reset takes no adapter")
		}
		return c.result(c.q.ResetStats())
	}
	if len(c.rest) > 1 {
		return c.fail("unexpected argument %q", c.rest[1])
	}
	sel := ""
	if len(c.rest) == 1 {
		sel = c.rest[0]
	}
	stats, err := c.q.Stats()
	if err != nil {
		return c.fail("%v", err)
	}
	if stats == nil {
		return c.fail("no configuration loaded")
	}
	return c.result(PrintStats(c.stdout, stats, sel))
}

func (c *command) doLoglevel() int {
	n, err := parseLevel(c.loglevel)
	if err != nil {
		return c.fail("%v", err)
	}
	return c.result(c.q.SetLogLevel(n))
}

func (c *command) doTest() int {
	if c.file == "" || c.input == "" {
		return c.fail("-test needs -f FILE and -i PACKETS")
	}
	rs, err := readConfig(c.file, c.stdin)
	if err != nil {
		return c.failConfig(err)
	}
	data, err := readLimited(c.input, nil)
	if err != nil {
		return c.fail("%v", err)
	}
	f := c.format
	if f == "" {
		f = guessFormat(string(data))
	}
	pkts, err := engine.ReadPackets(strings.NewReader(string(data)), f)
	if err != nil {
		return c.fail("%s: %v", c.input, err)
	}
	w := bufio.NewWriter(c.stdout)
	if err := engine.RunTest(w, rs, c.adapter, pkts); err != nil {
		return c.fail("%v", err)
	}
	return c.result(w.Flush())
}

// maxFileSize bounds a configuration or packet file: beyond it a file is
// a mistake and reading it would only exhaust memory.
const maxFileSize = 64 << 20

// readLimited reads a file ("-": r) of at most maxFileSize bytes.
func readLimited(name string, r io.Reader) ([]byte, error) {
	return rulefile.Read(name, r, maxFileSize)
}

func parseLevel(s string) (uint32, error) {
	for i, n := range levels {
		if s == n {
			return uint32(i), nil
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n >= uint64(len(levels)) {
		return 0, fmt.Errorf("log level %q: want 0-%d or one of %s", s, len(levels)-1, strings.Join(levels, ", "))
	}
	return uint32(n), nil
}

// guessFormat picks hex when the first data line looks like hex input.
func guessFormat(data string) string {
	for _, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			return "hex"
		}
		if _, err := strconv.ParseUint(strings.Fields(line)[0], 16, 64); err == nil {
			return "hex"
		}
		return "text"
	}
	return "text"
}

func readConfig(file string, stdin io.Reader) (*qos.Ruleset, error) {
	if file == "" {
		return nil, errors.New("no configuration file (-f FILE or -f -)")
	}
	name := file
	if file == "-" {
		name = "<stdin>"
	}
	src, err := readLimited(file, stdin)
	if err != nil {
		return nil, err
	}
	cfg, err := ipqos.Parse(name, src)
	if err != nil {
		return nil, err
	}
	return qos.Compile(cfg)
}

// PrintStats writes counters in ipqosadmin -showstats form, restricted to
// sel = "" | ADAPTER | ADAPTER/POLICY | ADAPTER/POLICY/FILTER.
func PrintStats(w io.Writer, stats []qos.Stats, sel string) error {
	parts := strings.Split(sel, "/")
	if sel == "" {
		parts = nil
	}
	if len(parts) > 3 {
		return fmt.Errorf("bad selector %q: want ADAPTER[/POLICY[/FILTER]]", sel)
	}
	found := false
	for _, s := range stats {
		if len(parts) > 0 && parts[0] != s.Adapter {
			continue
		}
		fmt.Fprintf(w, "Adapter: %s\n", s.Adapter)
		for _, p := range s.Policies {
			if len(parts) > 1 && parts[1] != p.Name {
				continue
			}
			fmt.Fprintf(w, "  Policy: %s\n", p.Name)
			fmt.Fprintf(w, "    packets %d bytes %d dropped_packets %d dropped_bytes %d\n", p.Packets, p.Bytes, p.DroppedPackets, p.DroppedBytes)
			for _, f := range p.Filters {
				if len(parts) > 2 && parts[2] != f.Name {
					continue
				}
				found = true
				fmt.Fprintf(w, "    Filter: %s packets %d bytes %d\n", f.Name, f.Packets, f.Bytes)
			}
			if len(parts) <= 2 {
				found = true
			}
		}
		if len(parts) <= 1 {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%s: no such adapter, policy or filter in the active configuration", sel)
	}
	return nil
}

// Package admin implements ipqosadmin, HP-UX IPQoS's administration
// command, with HP's single-dash options. Main is the whole program so it
// can be tested without building a binary.
package ipqosadmin

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"sluice/internal/bpf/qosmark"
	"sluice/internal/qos"
	"sluice/internal/qos/engine"
	"sluice/internal/rules/ipqos"
)

const usage = `usage:
  ipqosadmin -state [-s]                      exit 0 disabled, 1 error, 2 enabled not filtering, 3 filtering
  ipqosadmin -verify -f FILE                  check a configuration
  ipqosadmin -load -f FILE|- [-verbose] [-abort|-continue]
  ipqosadmin -unload
  ipqosadmin -showconfig
  ipqosadmin -showstats [ADAPTER[/POLICY[/FILTER]]]
  ipqosadmin -showstats -reset
  ipqosadmin -loglevel LEVEL                  0-4 or none, error, warning, info, debug
  ipqosadmin -test -f FILE -i PACKETS [-F text|hex] [-a ADAPTER]
common: -pindir DIR (default ` + qosmark.DefaultPinDir + `)
`

var levels = []string{"none", "error", "warning", "info", "debug"}

// Main runs ipqosadmin with args (without the program name) and returns
// the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ipqosadmin", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		state      = fs.Bool("state", false, "")
		silent     = fs.Bool("s", false, "")
		verify     = fs.Bool("verify", false, "")
		load       = fs.Bool("load", false, "")
		unload     = fs.Bool("unload", false, "")
		showconfig = fs.Bool("showconfig", false, "")
		showstats  = fs.Bool("showstats", false, "")
		reset      = fs.Bool("reset", false, "")
		loglevel   = fs.String("loglevel", "", "")
		test       = fs.Bool("test", false, "")
		file       = fs.String("f", "", "")
		input      = fs.String("i", "", "")
		format     = fs.String("F", "", "")
		adapter    = fs.String("a", "", "")
		verbose    = fs.Bool("verbose", false, "")
		abort      = fs.Bool("abort", false, "")
		cont       = fs.Bool("continue", false, "")
		pindir     = fs.String("pindir", qosmark.DefaultPinDir, "")
	)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "ipqosadmin: "+format+"\n", args...)
		return 1
	}
	// Configuration errors are already file:line:col: messages.
	failConfig := func(err error) int {
		var el ipqos.ErrorList
		if errors.As(err, &el) {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return fail("%v", err)
	}
	// Options may follow the -showstats selector, so parsing resumes
	// after each positional argument.
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			fmt.Fprint(stderr, usage)
			return fail("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	actions := 0
	for _, b := range []bool{*state, *verify, *load, *unload, *showconfig, *showstats, *loglevel != "", *test} {
		if b {
			actions++
		}
	}
	if actions != 1 {
		fmt.Fprint(stderr, usage)
		return fail("exactly one of -state, -verify, -load, -unload, -showconfig, -showstats, -loglevel, -test is needed")
	}
	if *abort && *cont {
		return fail("-abort and -continue exclude each other")
	}
	if !*showstats && len(rest) > 0 {
		return fail("unexpected argument %q", rest[0])
	}
	level, _ := qosmark.LogLevel(*pindir)
	logw := io.Writer(nil)
	if *verbose || level >= 3 {
		logw = stdout
	}

	switch {
	case *state:
		si, err := qosmark.GetState(*pindir)
		if err != nil {
			if !*silent {
				fmt.Fprintf(stderr, "ipqosadmin: %v\n", err)
			}
			return int(qosmark.Error)
		}
		if !*silent {
			fmt.Fprintf(stdout, "IPQoS state: %s\n", si.State)
			if len(si.Attached) > 0 {
				fmt.Fprintf(stdout, "adapters filtering: %s\n", strings.Join(si.Attached, " "))
			}
			if len(si.Missing) > 0 {
				fmt.Fprintf(stdout, "adapters not attached: %s\n", strings.Join(si.Missing, " "))
			}
		}
		return int(si.State)

	case *verify:
		rs, err := readConfig(*file, stdin)
		if err != nil {
			return failConfig(err)
		}
		fmt.Fprintf(stdout, "%s: configuration is valid (%d adapters)\n", *file, len(rs.Adapters))
		return 0

	case *load:
		rs, err := readConfig(*file, stdin)
		if err != nil {
			return failConfig(err)
		}
		rep, err := qosmark.Load(rs, qosmark.Options{PinDir: *pindir, Continue: *cont, Log: logw})
		if err != nil {
			return fail("load failed, previous configuration kept: %v", err)
		}
		for _, s := range rep.Skipped {
			fmt.Fprintf(stderr, "ipqosadmin: warning: %s\n", s)
		}
		if logw != nil {
			fmt.Fprintf(logw, "configuration loaded on %s\n", strings.Join(rep.Attached, " "))
		}
		if len(rep.Skipped) > 0 {
			return 1
		}
		return 0

	case *unload:
		if err := qosmark.Unload(*pindir, logw); err != nil {
			return fail("%v", err)
		}
		return 0

	case *showconfig:
		text, err := qosmark.ActiveConfig(*pindir)
		if err != nil {
			return fail("%v", err)
		}
		if text == "" {
			return fail("no configuration loaded")
		}
		fmt.Fprint(stdout, text)
		return 0

	case *showstats:
		if *reset {
			if len(rest) > 0 {
				return fail("-showstats -reset takes no adapter")
			}
			if err := qosmark.ResetStats(*pindir); err != nil {
				return fail("%v", err)
			}
			return 0
		}
		if len(rest) > 1 {
			return fail("unexpected argument %q", rest[1])
		}
		sel := ""
		if len(rest) == 1 {
			sel = rest[0]
		}
		stats, err := qosmark.ReadStats(*pindir)
		if err != nil {
			return fail("%v", err)
		}
		if stats == nil {
			return fail("no configuration loaded")
		}
		if err := PrintStats(stdout, stats, sel); err != nil {
			return fail("%v", err)
		}
		return 0

	case *loglevel != "":
		n, err := parseLevel(*loglevel)
		if err != nil {
			return fail("%v", err)
		}
		if err := qosmark.SetLogLevel(*pindir, n); err != nil {
			return fail("%v", err)
		}
		return 0

	case *test:
		if *file == "" || *input == "" {
			return fail("-test needs -f FILE and -i PACKETS")
		}
		rs, err := readConfig(*file, stdin)
		if err != nil {
			return failConfig(err)
		}
		data, err := os.ReadFile(*input)
		if err != nil {
			return fail("%v", err)
		}
		f := *format
		if f == "" {
			f = guessFormat(string(data))
		}
		pkts, err := engine.ReadPackets(strings.NewReader(string(data)), f)
		if err != nil {
			return fail("%s: %v", *input, err)
		}
		w := bufio.NewWriter(stdout)
		if err := engine.RunTest(w, rs, *adapter, pkts); err != nil {
			return fail("%v", err)
		}
		if err := w.Flush(); err != nil {
			return fail("%v", err)
		}
		return 0
	}
	return fail("internal error: no action")
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
	var src []byte
	var err error
	name := file
	if file == "-" {
		name = "<stdin>"
		src, err = io.ReadAll(stdin)
	} else {
		src, err = os.ReadFile(file)
	}
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

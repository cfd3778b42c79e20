// Package ipmon is the ipmon command: it prints the records of the ipf
// packet log, as IPFilter's ipmon does. It reads log files of ipflog records: the packet log (-f
// FILE, as written by "ipftest -l FILE"), the NAT log (-N FILE) and the
// state log (-S FILE); -t keeps reading as they grow. Without -f (and with
// no /dev/ipl) it reads the live log ring of the eBPF datapath pinned under
// /sys/fs/bpf/sluice or $SLUICE_BPF_DIR, until killed.
//
//	ipmon [-abBDFhnpstvxX] [-N dev] [-S dev] [-f dev] [-L fac] [-o NSI] [-O NSI] [-P pidfile] [-C conf] [outfile]
package ipmon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"sluice/internal/getopt"
	"sluice/internal/ipflog"
)

const optstring = "?abB:C:Df:FhL:nN:o:O:pP:sS:tvxX"

// config is the parsed command line.
type config struct {
	fmt       ipflog.FormatOptions
	ipfFile   string
	natFile   string
	stateFile string
	binFile   string
	pidFile   string
	facility  string
	confFile  string
	outFile   string
	daemon    bool
	flush     bool
	tail      bool
	logs      map[byte]bool // 'I', 'N', 'S'
}

// Usage is ipmon's complete usage text (-h).
const Usage = `usage: ipmon [-abBDFhnpstvxX] [-N device] [-S device] [-f device] [-L facility]
	[-o [NSI]] [-O [NSI]] [-P pidfile] [-C configfile] [outfile]
  (none)      print the kernel datapath's log records as they come, until killed
  -f, -I file read ipf log records from file (ipftest -l) instead
  -N file     NAT log file;  -S file  state log file;  -a  all three logs
  -o NSI      read these logs (N NAT, S state, I ipf);  -O NSI  not these
  -t          keep reading the files as they grow (tail)
  -F          flush the kernel log and exit (prints the bytes flushed)
  -s          log to syslog (facility -L, default local0) instead of outfile
  -B file     also append the raw records to file
  -D          run as a daemon;  -P file  write the process id to file
  -b          hex dump of the logged body;  -x  of the whole packet;  -X  of the header
  -n          resolve names;  -p  numeric ports;  -v  TCP sequence numbers and window
  -C file     action configuration (not supported: ignored)
  -h, -?      print this help
Records the datapath could not log (its ring was full) show as
"missed N ipf log entries: A B", as in IPFilter's ipmon.
`

func usage(w io.Writer) { fmt.Fprint(w, Usage) }

func parseArgs(args []string) (*config, error) {
	c := &config{ipfFile: defaultIPFDevice, natFile: "/dev/ipnat", stateFile: "/dev/ipstate",
		facility: "local0", logs: map[byte]bool{}}
	selected := false
	option := func(o byte, arg string) error {
		switch o {
		case 'a':
			c.logs['I'], c.logs['N'], c.logs['S'] = true, true, true
			selected = true
		case 'b':
			c.fmt.LogBody = true
		case 'B':
			c.binFile = arg
		case 'C':
			c.confFile = arg
		case 'D':
			c.daemon = true
		case 'f', 'I':
			c.ipfFile = arg
			c.logs['I'] = true
			selected = true
		case 'F':
			c.flush = true
		case 'h', '?':
			return errHelp
		case 'L':
			c.facility = arg
		case 'n':
			c.fmt.Resolve = true
		case 'N':
			c.natFile = arg
			c.logs['N'] = true
			selected = true
		case 'o', 'O':
			for k := 0; k < len(arg); k++ {
				l := arg[k] &^ 0x20
				if l != 'N' && l != 'S' && l != 'I' {
					return fmt.Errorf("unknown log device letter %q", arg[k])
				}
				c.logs[l] = o == 'o'
			}
			selected = true
		case 'p':
			c.fmt.PortNum = true
		case 'P':
			c.pidFile = arg
		case 's':
			c.fmt.Syslog = true
		case 'S':
			c.stateFile = arg
			c.logs['S'] = true
			selected = true
		case 't':
			c.tail = true
		case 'v':
			c.fmt.Verbose = true
		case 'x':
			c.fmt.HexPacket = true
		case 'X':
			c.fmt.HexHeader = true
		}
		return nil
	}
	p := getopt.New(args, optstring)
	for o, err := range p.All() {
		if err == nil {
			err = option(o.Flag, o.Arg)
		}
		if err != nil {
			return nil, err
		}
	}
	rest := p.Operands()
	if !selected {
		c.logs['I'] = true // with no selection only the ipf log is read
	}
	switch len(rest) {
	case 0:
	case 1:
		c.outFile = rest[0]
	default:
		return nil, errors.New("too many arguments")
	}
	return c, nil
}

var errHelp = errors.New("help")

// Main runs ipmon with args (without the program name) and returns its
// exit status: 0 done, 1 an error, 2 a usage error. Without -f it reads
// the kernel datapath's log through ipfctl until killed.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, err := parseArgs(args)
	if err == errHelp {
		usage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ipmon: %v\n", err)
		usage(stderr)
		return 2
	}
	if c.confFile != "" {
		fmt.Fprintf(stderr, "ipmon: -C %s: action configuration files are not supported; ignored\n", c.confFile)
	}
	if c.daemon {
		if done, err := daemonize(args); err != nil {
			fmt.Fprintf(stderr, "ipmon: -D: %v\n", err)
			return 1
		} else if done {
			return 0
		}
	}
	if c.pidFile != "" {
		if err := os.WriteFile(c.pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil &&
			c.pidFile != "/dev/null" {
			fmt.Fprintf(stderr, "ipmon: writing pid file: %v\n", err)
		}
	}
	if c.flush {
		return flushLive(c, stdout, stderr)
	}
	e, err := c.openOutputs(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "ipmon: %v\n", err)
		return 1
	}
	defer e.close()
	e.stderr = stderr
	if c.readsLive() {
		err = readLive(e)
	} else {
		err = readFiles(c, e)
	}
	if err != nil {
		e.out.Flush()
		fmt.Fprintf(stderr, "ipmon: %v\n", err)
		return 1
	}
	return 0
}

// readsLive reports whether the ipf log comes from the kernel datapath:
// no log device and no file given (IPFilter's /dev/ipl does not exist
// here). The NAT and state logs have no separate live source.
func (c *config) readsLive() bool {
	return c.logs['I'] && c.ipfFile == defaultIPFDevice && !exists(c.ipfFile)
}

// flushLive is -F: it empties the kernel log and exits.
func flushLive(c *config, stdout, stderr io.Writer) int {
	if !c.readsLive() {
		fmt.Fprintf(stderr, "ipmon: -F: only the kernel log can be flushed\n")
		return 1
	}
	src, err := openLive()
	if err != nil {
		fmt.Fprintf(stderr, "ipmon: %v\n", err)
		return 1
	}
	defer src.Close()
	n, err := src.Flush()
	if err != nil {
		fmt.Fprintf(stderr, "ipmon: -F: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%d bytes flushed from log buffer\n", n)
	return 0
}

// emitter writes records where the options say: the output (a file or
// stdout) or syslog, and the binary copy of -B.
type emitter struct {
	p      ipflog.Printer
	out    *bufio.Writer
	sl     sysLogger
	bin    io.Writer
	stderr io.Writer
	line   []byte
	// closers run in reverse by close
	closers []func()
}

// openOutputs opens the output file, syslog and the -B file.
func (c *config) openOutputs(stdout io.Writer) (*emitter, error) {
	e := &emitter{p: ipflog.Printer{Opts: c.fmt}, out: bufio.NewWriter(stdout)}
	fail := func(err error) (*emitter, error) {
		e.close()
		return nil, err
	}
	if c.outFile != "" && !c.fmt.Syslog {
		f, err := os.OpenFile(c.outFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fail(err)
		}
		e.closers = append(e.closers, func() { f.Close() })
		e.out = bufio.NewWriter(f)
	}
	if c.fmt.Syslog {
		sl, err := openSyslog(c.facility)
		if err != nil {
			return fail(fmt.Errorf("syslog: %w", err))
		}
		e.sl = sl
		e.closers = append(e.closers, func() { sl.Close() })
	}
	if c.binFile != "" {
		f, err := os.OpenFile(c.binFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fail(err)
		}
		e.closers = append(e.closers, func() { f.Close() })
		e.bin = f
	}
	return e, nil
}

func (e *emitter) close() {
	e.out.Flush()
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}

// emit writes one record (and the "missed N ... log entries" line the
// printer puts before it when sequence numbers were skipped).
func (e *emitter) emit(r *ipflog.Record) error {
	if e.bin != nil {
		if _, err := e.bin.Write(r.AppendBinary(nil)); err != nil {
			return fmt.Errorf("-B: %w", err)
		}
	}
	e.line = e.p.Append(e.line[:0], r)
	if e.sl != nil {
		lvl := 6 // NAT and state records are logged at INFO
		if r.Type == ipflog.TypeIPF {
			lvl = ipflog.Level(r)
		}
		if err := e.sl.Log(lvl, string(e.line)); err != nil {
			fmt.Fprintf(e.stderr, "ipmon: syslog: %v\n", err)
		}
		return nil
	}
	_, err := e.out.Write(e.line)
	return err
}

// readLive prints the kernel datapath's log records as they come, until
// an error.
func readLive(e *emitter) error {
	src, err := openLive()
	if err != nil {
		return err
	}
	defer src.Close()
	for {
		r, err := src.Next()
		if err != nil {
			return fmt.Errorf("reading the kernel log: %w", err)
		}
		if err := e.emit(&r); err != nil {
			return err
		}
		// a live monitor shows each record as it comes
		if err := e.out.Flush(); err != nil {
			return err
		}
	}
}

// fileSource is one log file being read.
type fileSource struct {
	path string
	f    *os.File
	rd   *ipflog.Reader
	done bool
}

// readFiles prints the records of the selected log files; with -t it
// keeps reading as they grow, until killed.
func readFiles(c *config, e *emitter) error {
	var srcs []*fileSource
	for _, d := range []struct {
		letter byte
		path   string
	}{{'I', c.ipfFile}, {'N', c.natFile}, {'S', c.stateFile}} {
		if !c.logs[d.letter] {
			continue
		}
		f, err := os.Open(d.path)
		if err != nil {
			return err
		}
		defer f.Close()
		srcs = append(srcs, &fileSource{path: d.path, f: f, rd: ipflog.NewReader(f)})
	}
	for {
		active := false
		for _, src := range srcs {
			if src.done {
				continue
			}
			active = true
			if err := readAvailable(src, c.tail, e); err != nil {
				return err
			}
		}
		if !active {
			return nil
		}
		if c.tail {
			e.out.Flush()
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// readAvailable prints the complete records src has now. Without tail it
// marks src done at its end; with tail it leaves a partial record for the
// next round.
func readAvailable(src *fileSource, tail bool, e *emitter) error {
	for {
		pos, _ := src.f.Seek(0, io.SeekCurrent)
		r, err := src.rd.Next()
		if err == io.EOF || (tail && err == io.ErrUnexpectedEOF) {
			if !tail {
				src.done = true
				return nil
			}
			// come back to the start of the partial record later
			if _, err := src.f.Seek(pos, io.SeekStart); err != nil {
				return fmt.Errorf("%s: %w", src.path, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", src.path, err)
		}
		if err := e.emit(&r); err != nil {
			return err
		}
	}
}

// defaultIPFDevice is IPFilter's packet log device; when it does not exist
// (no IPFilter kernel module) ipmon reads the eBPF datapath's log instead.
const defaultIPFDevice = "/dev/ipl"

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// recordSource is a live log.
type recordSource interface {
	Next() (ipflog.Record, error)
	// Flush discards what is waiting and returns its size in bytes.
	Flush() (int, error)
	Close() error
}

// sysLogger sends records to syslog (-s).
type sysLogger interface {
	Log(level int, msg string) error
	Close() error
}

// Command ipmon prints the records of the ipf packet log, as IPFilter's
// ipmon does. It reads log files of ipflog records: the packet log (-f
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

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: ipmon [-abBDFhnpstvxX] [-N device] [-S device] [-f device] [-L facility]\n"+
		"\t[-o [NSI]] [-O [NSI]] [-P pidfile] [-C configfile] [outfile]\n")
}

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

// Main runs the command with args (without the program name) and returns
// its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	c, err := parseArgs(args)
	if err == errHelp {
		usage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ipmon: %v\n", err)
		usage(stderr)
		return 1
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
		// -F empties the kernel log and exits
		if !c.logs['I'] || c.ipfFile != defaultIPFDevice || exists(c.ipfFile) {
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

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if c.outFile != "" && !c.fmt.Syslog {
		f, err := os.OpenFile(c.outFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "ipmon: %v\n", err)
			return 1
		}
		defer f.Close()
		out = bufio.NewWriter(f)
		defer out.Flush()
	}
	var sl sysLogger
	if c.fmt.Syslog {
		sl, err = openSyslog(c.facility)
		if err != nil {
			fmt.Fprintf(stderr, "ipmon: syslog: %v\n", err)
			return 1
		}
		defer sl.Close()
	}
	var bin io.Writer
	if c.binFile != "" {
		f, err := os.OpenFile(c.binFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "ipmon: %v\n", err)
			return 1
		}
		defer f.Close()
		bin = f
	}

	p := &ipflog.Printer{Opts: c.fmt}
	var line []byte
	emit := func(r *ipflog.Record) error {
		if bin != nil {
			if _, err := bin.Write(r.AppendBinary(nil)); err != nil {
				return fmt.Errorf("-B: %w", err)
			}
		}
		line = p.Append(line[:0], r)
		if sl != nil {
			lvl := 6 // NAT and state records are logged at INFO
			if r.Type == ipflog.TypeIPF {
				lvl = ipflog.Level(r)
			}
			if err := sl.Log(lvl, string(line)); err != nil {
				fmt.Fprintf(stderr, "ipmon: syslog: %v\n", err)
			}
			return nil
		}
		_, err := out.Write(line)
		return err
	}

	if c.logs['I'] && c.ipfFile == defaultIPFDevice && !exists(c.ipfFile) {
		// No log device: read the kernel datapath's log ring. The NAT and
		// state logs have no separate source there.
		src, err := openLive()
		if err != nil {
			fmt.Fprintf(stderr, "ipmon: %v\n", err)
			return 1
		}
		defer src.Close()
		for {
			r, err := src.Next()
			if err != nil {
				out.Flush()
				fmt.Fprintf(stderr, "ipmon: reading the kernel log: %v\n", err)
				return 1
			}
			if err := emit(&r); err != nil {
				fmt.Fprintf(stderr, "ipmon: %v\n", err)
				return 1
			}
			// a live monitor shows each record as it comes
			if err := out.Flush(); err != nil {
				fmt.Fprintf(stderr, "ipmon: %v\n", err)
				return 1
			}
		}
	}

	type source struct {
		path string
		f    *os.File
		rd   *ipflog.Reader
		done bool
	}
	var srcs []*source
	for _, d := range []struct {
		letter byte
		path   string
	}{{'I', c.ipfFile}, {'N', c.natFile}, {'S', c.stateFile}} {
		if !c.logs[d.letter] {
			continue
		}
		f, err := os.Open(d.path)
		if err != nil {
			fmt.Fprintf(stderr, "ipmon: %v\n", err)
			return 1
		}
		defer f.Close()
		srcs = append(srcs, &source{path: d.path, f: f, rd: ipflog.NewReader(f)})
	}
	for {
		active := false
		for _, src := range srcs {
			if src.done {
				continue
			}
			active = true
			for {
				pos, _ := src.f.Seek(0, io.SeekCurrent)
				r, err := src.rd.Next()
				if err == io.EOF || (c.tail && err == io.ErrUnexpectedEOF) {
					if c.tail {
						// Come back to the start of the partial record later.
						if _, err := src.f.Seek(pos, io.SeekStart); err != nil {
							fmt.Fprintf(stderr, "ipmon: %s: %v\n", src.path, err)
							return 1
						}
					} else {
						src.done = true
					}
					break
				}
				if err != nil {
					out.Flush()
					fmt.Fprintf(stderr, "ipmon: %s: %v\n", src.path, err)
					return 1
				}
				if err := emit(&r); err != nil {
					fmt.Fprintf(stderr, "ipmon: %v\n", err)
					return 1
				}
			}
		}
		if !active {
			return 0
		}
		if c.tail {
			out.Flush()
			time.Sleep(200 * time.Millisecond)
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

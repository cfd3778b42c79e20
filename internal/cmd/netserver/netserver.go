// Package netserver is the netserver command: netperf 2.7.1's netserver
// command line, startup messages and exit statuses over the Go server in
// sluice/internal/netperf.
//
// As the C netserver, it listens on the control port (12865 unless -p) on
// every address unless -L names one, and detaches itself unless -D; when
// started by inetd (no -D, -f, -L or -p, and a socket on standard input)
// it serves that one connection and exits. Tests always run concurrently
// in goroutines, so -f (serve tests one after another without forking) is
// accepted and changes nothing; -d, -n, -N and -v are accepted and
// ignored apart from -d and -v turning on diagnostics on stderr.
package netserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"sluice/internal/getopt"
	"sluice/internal/netperf"
)

const usage = `
Usage: netserver [options] 

Options:
    -h                Display this text
    -D                Do not daemonize
    -d                Increase debugging output
    -f                Do not spawn chilren for each test, run serially
    -L name,family    Use name to pick listen address and family for family
    -N                No debugging output, even if netperf asks
    -p portnum        Listen for connect requests on portnum.
    -4                Do IPv4
    -6                Do IPv6
    -v verbosity      Specify the verbosity level
    -V                Display version information and exit
    -Z passphrase     Expect passphrase as the first thing received

`

// Options is a parsed netserver command line.
type Options struct {
	Port       int
	Addr       string // -L
	Family     int    // -4 / -6 / -L ,fam
	Foreground bool   // -D
	Passphrase string // -Z
	Verbose    bool
	// NotInetd is set by any of -D, -f, -L and -p: netserver then never
	// looks for a connection on its standard input.
	NotInetd bool
	portText string
}

// spec is netserver's getopt string.
const spec = "DdfhL:n:Np:v:VZ:46"

// exitError ends netserver at once with its text and status.
type exitError struct {
	code           int
	stdout, stderr string
}

func (e *exitError) Error() string { return e.stdout + e.stderr }

// Parse parses netserver's arguments (without the program name).
func Parse(args []string) (*Options, error) {
	o := &Options{Port: netperf.DefaultPort, portText: strconv.Itoa(netperf.DefaultPort)}
	p := getopt.New(args, spec)
	p.GNU = true
	for {
		opt, ok, err := p.Next()
		if err != nil {
			return nil, &exitError{code: 1, stderr: "netserver: " + err.Error() + "\n" + usage}
		}
		if !ok {
			break
		}
		switch opt.Flag {
		case 'h':
			return nil, &exitError{code: 1, stderr: usage}
		case 'V':
			return nil, &exitError{code: 0, stdout: "Netperf version " + netperf.Version + "\n"}
		case 'D':
			o.Foreground, o.NotInetd = true, true
		case 'f':
			o.NotInetd = true
		case 'd', 'v':
			o.Verbose = true
		case 'L':
			o.NotInetd = true
			a, b := opt.Arg, ""
			for i := 0; i < len(opt.Arg); i++ {
				if opt.Arg[i] == ',' {
					a, b = opt.Arg[:i], opt.Arg[i+1:]
					break
				}
			}
			if a != "" {
				o.Addr = a
			}
			if b != "" {
				o.Family = netperf.ParseFamily(b)
			}
		case 'p':
			v, err := strconv.Atoi(opt.Arg)
			if err != nil || v <= 0 || v > 65535 {
				return nil, fmt.Errorf("option -p: %q is not a port number", opt.Arg)
			}
			o.Port, o.portText, o.NotInetd = v, opt.Arg, true
		case 'Z':
			o.Passphrase = opt.Arg
		case '4':
			o.Family = 4
		case '6':
			o.Family = 6
		}
	}
	if rest := p.Operands(); len(rest) > 0 {
		return nil, fmt.Errorf("unexpected argument %q", rest[0])
	}
	return o, nil
}

func famName(f int) string {
	switch f {
	case 4:
		return "AF_INET"
	case 6:
		return "AF_INET6"
	}
	return "AF_UNSPEC"
}

// Listen opens the control listener exactly where the options say: the
// -L address, or every address (IPv4 and IPv6) of the family.
func (o *Options) Listen() (*netperf.Server, error) {
	network := "tcp"
	switch o.Family {
	case 4:
		network = "tcp4"
	case 6:
		network = "tcp6"
	}
	return netperf.NewServerNetwork(network, net.JoinHostPort(o.Addr, strconv.Itoa(o.Port)))
}

// startMessage is netserver's line once it listens.
func (o *Options) startMessage() string {
	host := o.Addr
	if host == "" {
		host = "IN(6)ADDR_ANY"
	}
	return fmt.Sprintf("Starting netserver with host '%s' port '%s' and family %s\n", host, o.portText, famName(o.Family))
}

// inetdConn returns the connection on standard input when stdin is a
// socket, as netserver's check_if_inetd does.
func inetdConn(stdin io.Reader) net.Conn {
	f, ok := stdin.(*os.File)
	if !ok {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	isSock := false
	_ = rc.Control(func(fd uintptr) {
		_, err := unix.Getsockname(int(fd))
		isSock = err == nil
	})
	if !isSock {
		return nil
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil
	}
	return c
}

// inheritedFD is how a detaching netserver hands its bound socket to the
// detached copy of itself.
const inheritedFD = "NETSERVER_INHERITED_FD"

// Main runs netserver and returns its exit status. Without -D it starts a
// detached copy of itself and returns at once.
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
		fmt.Fprintf(stderr, "netserver: %v\n", err)
		return 1
	}
	logf := func(string, ...any) {}
	if o.Verbose {
		logf = log.New(stderr, "", log.LstdFlags).Printf
	}
	if !o.NotInetd {
		if c := inetdConn(stdin); c != nil {
			// Started by inetd: serve this connection and exit.
			srv := &netperf.Server{Passphrase: o.Passphrase, Logf: logf}
			srv.ServeConn(c)
			return 0
		}
	}
	child := os.Getenv(inheritedFD) == "3" && o.Foreground
	var srv *netperf.Server
	if child {
		os.Unsetenv(inheritedFD)
		f := os.NewFile(3, "netserver-listener")
		ln, lerr := net.FileListener(f)
		f.Close() // FileListener holds its own duplicate
		if lerr == nil {
			srv = netperf.NewServerFromListener(ln)
		}
		err = lerr
	} else {
		srv, err = o.Listen()
	}
	if err != nil {
		host := o.Addr
		if host == "" {
			host = "IN(6)ADDR_ANY"
		}
		fmt.Fprintf(stderr, "Unable to start netserver with  '%s' port '%s' and family %s\n", host, o.portText, famName(o.Family))
		logf("netserver: %v", err)
		return 1
	}
	if !child {
		fmt.Fprint(stdout, o.startMessage())
	}
	if !o.Foreground {
		// Hand the bound socket to a detached child, so that errors such
		// as "address in use" still reach this terminal.
		if err := detach(srv, args); err != nil {
			fmt.Fprintf(stderr, "netserver: %v\n", err)
			return 1
		}
		return 0
	}
	srv.Passphrase = o.Passphrase
	srv.Logf = logf
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(stderr, "netserver: %v\n", err)
		return 1
	}
	return 0
}

func detach(srv *netperf.Server, args []string) error {
	defer srv.Close()
	f, err := srv.ListenerFile()
	if err != nil {
		return err
	}
	defer f.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, append([]string{"-D"}, args...)...)
	cmd.Env = append(os.Environ(), inheritedFD+"=3")
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("daemonizing: %w", err)
	}
	return cmd.Process.Release()
}

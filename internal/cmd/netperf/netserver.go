package netperf

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"sluice/internal/netperf"
)

// ServerOptions is a parsed netserver command line.
type ServerOptions struct {
	Port       int
	Addr       string // -L
	Family     int    // -4 / -6
	Foreground bool   // -D
	Passphrase string // -Z
	Verbose    bool
}

const serverSpec = "p:L:D46fZ:v:dhN"

// ParseNetserver parses netserver's arguments.
func ParseNetserver(args []string) (*ServerOptions, error) {
	o := &ServerOptions{Port: netperf.DefaultPort}
	opts, rest, err := parseOpts(args, serverSpec)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", rest)
	}
	for _, p := range opts {
		switch p.Flag {
		case 'p':
			if o.Port, err = atoi('p', p.Arg); err != nil {
				return nil, err
			}
			if o.Port <= 0 || o.Port > 65535 {
				return nil, fmt.Errorf("option -p: port %d out of range", o.Port)
			}
		case 'L':
			o.Addr, _ = splitPair(p.Arg)
		case 'D':
			o.Foreground = true
		case '4':
			o.Family = 4
		case '6':
			o.Family = 6
		case 'f':
			// "Do not fork": every test already runs in a goroutine.
		case 'Z':
			o.Passphrase = p.Arg
		case 'v', 'd':
			o.Verbose = true
		case 'h':
			return nil, fmt.Errorf("usage: netserver [-p port] [-L addr] [-D] [-4|-6] [-f] [-Z phrase]")
		}
	}
	return o, nil
}

// Listen opens the control listener exactly where the options say.
func (o *ServerOptions) Listen() (*netperf.Server, error) {
	network := "tcp"
	switch o.Family {
	case 4:
		network = "tcp4"
	case 6:
		network = "tcp6"
	}
	host := o.Addr
	if host == "" && o.Family == 6 {
		host = "::"
	} else if host == "" && o.Family == 4 {
		host = "0.0.0.0"
	}
	return netperf.NewServerNetwork(network, net.JoinHostPort(host, strconv.Itoa(o.Port)))
}

// NetserverMain runs netserver. Without -D it re-executes itself detached
// (the Go way to daemonize) and returns at once.
func NetserverMain(args []string, stdout, stderr io.Writer) int {
	o, err := ParseNetserver(args)
	if err != nil {
		fmt.Fprintf(stderr, "netserver: %v\n", err)
		return 2
	}
	var srv *netperf.Server
	if os.Getenv("NETSERVER_INHERITED_FD") == "3" && o.Foreground {
		os.Unsetenv("NETSERVER_INHERITED_FD")
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
		fmt.Fprintf(stderr, "netserver: %v\n", err)
		return 1
	}
	if !o.Foreground {
		// Hand the bound socket to a detached child so errors such as
		// "address in use" still reach this terminal.
		f, err := srv.ListenerFile()
		if err != nil {
			fmt.Fprintf(stderr, "netserver: %v\n", err)
			return 1
		}
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "netserver: %v\n", err)
			return 1
		}
		cmd := exec.Command(exe, append([]string{"-D"}, args...)...)
		cmd.Env = append(os.Environ(), "NETSERVER_INHERITED_FD=3")
		cmd.ExtraFiles = []*os.File{f}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(stderr, "netserver: daemonizing: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "Starting netserver with host '%s' port '%d' and family %s\n", hostOr(o.Addr), o.Port, famName(o.Family))
		return 0
	}
	srv.Passphrase = o.Passphrase
	if o.Verbose {
		srv.Logf = log.New(stderr, "", log.LstdFlags).Printf
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(stderr, "netserver: %v\n", err)
		return 1
	}
	return 0
}

func hostOr(a string) string {
	if a == "" {
		return "IN(6)ADDR_ANY"
	}
	return a
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

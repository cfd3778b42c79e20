package netserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/internal/netperf"
	"sluice/internal/testutil/netperfc"
)

func TestParse(t *testing.T) {
	o, err := Parse([]string{"-p", "12000", "-L", "127.0.0.1,inet", "-D", "-f", "-Z", "pw"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 12000 || o.Addr != "127.0.0.1" || !o.Foreground || o.Family != 4 || o.Passphrase != "pw" || !o.NotInetd {
		t.Errorf("got %+v", o)
	}
	if o, _ := Parse([]string{"-6"}); o.Family != 6 || o.NotInetd {
		t.Errorf("-6: got %+v", o)
	}
	for _, bad := range [][]string{{"-p"}, {"-x"}, {"-p", "0"}, {"-p", "x"}, {"extra"}} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Listens only where told.
	o = &Options{Addr: "127.0.0.1"}
	s, err := o.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a := s.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("listening on %v", a)
	}
}

type outcome struct {
	stdout, stderr string
	code           int
}

func cRun(t *testing.T, bin string, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return outcome{out.String(), errb.String(), code}
}

func goRun(args ...string) outcome {
	var out, errb bytes.Buffer
	code := Main(args, nil, &out, &errb)
	return outcome{out.String(), errb.String(), code}
}

// TestMatchesCNetserver compares what netserver prints, and its status,
// with the C netserver's for -V, -h, a bad option and a busy port.
func TestMatchesCNetserver(t *testing.T) {
	_, cns := netperfc.CTools(t)
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	for _, args := range [][]string{{"-V"}, {"-h"}, {"-q"}, {"-p"}, {"-D", "-L", "127.0.0.1", "-p", port}} {
		c, g := cRun(t, cns, args...), goRun(args...)
		c.stderr = strings.ReplaceAll(c.stderr, cns+":", "netserver:")
		if c != g {
			t.Errorf("netserver %q:\nC:  %d %q %q\nGo: %d %q %q", args, c.code, c.stdout, c.stderr, g.code, g.stdout, g.stderr)
		}
	}
	// The start message (C prints it with -D too).
	free := strconv.Itoa(netperfc.FreePort(t))
	cmd := exec.Command(cns, "-D", "-L", "127.0.0.1", "-p", free)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	o, err := Parse([]string{"-D", "-L", "127.0.0.1", "-p", free})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.startMessage(); got != line {
		t.Errorf("start message %q, C says %q", got, line)
	}
}

// inetd accepts one connection on a listener and starts a netserver with
// it as standard input, as inetd does; it returns the listener's port.
func inetd(t *testing.T, serve func(conn *os.File) error) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			done <- err
			return
		}
		f, err := c.(*net.TCPConn).File()
		c.Close()
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		done <- serve(f)
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("inetd's netserver: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("inetd's netserver did not exit after its connection")
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// TestInetd: netserver started by inetd (the connection on stdin, no -D,
// -f, -L or -p) serves that connection and exits, as the C one does; the
// Go netperf and the C netperf drive it. (The C netserver is not run this
// way here: on exit from inetd mode it unlinks its empty debug file,
// which is /dev/null, and as root that removes /dev/null.)
func TestInetd(t *testing.T) {
	serve := func(f *os.File) error {
		var errb bytes.Buffer
		if code := Main(nil, f, &bytes.Buffer{}, &errb); code != 0 {
			return errors.New(errb.String())
		}
		return nil
	}
	t.Run("Go netperf", func(t *testing.T) {
		port := inetd(t, serve)
		r, err := netperf.Run(context.Background(), netperf.Config{Test: netperf.TCPRR, Host: "127.0.0.1", Port: port, Transactions: 500})
		if err != nil {
			t.Fatal(err)
		}
		if r.RemoteTrans != 500 {
			t.Errorf("netserver counted %d transactions, want 500", r.RemoteTrans)
		}
	})
	t.Run("C netperf", func(t *testing.T) {
		np, _ := netperfc.CTools(t)
		port := inetd(t, serve)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, np, "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "TCP_STREAM", "-l", "1",
			"-P", "0", "--", "-k", "LOCAL_BYTES_SENT,REMOTE_BYTES_RECVD").CombinedOutput()
		if err != nil {
			t.Fatalf("C netperf: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "REMOTE_BYTES_RECVD=") || strings.Contains(string(out), "REMOTE_BYTES_RECVD=0\n") {
			t.Errorf("C netperf said:\n%s", out)
		}
	})
}

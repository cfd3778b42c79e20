package run

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sluice/internal/bench/topo"
	"sluice/internal/netperf"
)

// helperEnv, when set in the environment, turns this binary into a
// netserver listening on the address it holds (see NetserverHelper).
const helperEnv = "SLUICE_NETSERVER_HELPER"

// Netserver is the netperf library's netserver running in the peer
// namespace, in a child process of this binary.
//
// Why a child: netperf.Server opens each test's data listener from the
// goroutine serving the control connection, and a Go goroutine does not
// stay in the namespace it was started from, so an in-process server
// binds in the wrong namespace (EADDRNOTAVAIL). A process forked from a
// thread inside the peer namespace lives there entirely. Once
// netperf.Server can be told its namespace, this can become in-process.
type Netserver struct {
	// Addr is the control address (the peer's address and the port).
	Addr netip.AddrPort

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer
	done   chan error
	once   sync.Once
	err    error
}

// StartNetserver starts the child in tb's peer namespace and waits until
// it listens.
func StartNetserver(ctx context.Context, tb *topo.Topo) (*Netserver, error) {
	peer := tb.Host(topo.Peer)
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"="+netip.AddrPortFrom(peer.Addr, 0).String())
	// The child dies with the thread that forked it, and on EOF of its
	// stdin: either way it cannot outlive the bench.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ns := &Netserver{cmd: cmd, stdin: stdin, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = ns.stderr
	// fork happens on the calling thread, which Do has put in the peer
	// namespace; the child inherits it.
	if err := tb.Do(topo.Peer, cmd.Start); err != nil {
		return nil, fmt.Errorf("starting netserver: %w", err)
	}
	go func() { ns.done <- cmd.Wait() }()

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case s := <-line:
		port, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "port "))
		if err != nil || port <= 0 || port > 65535 {
			return nil, errors.Join(fmt.Errorf("netserver: bad start-up line %q: %s", s, ns.stderr.String()), ns.Close())
		}
		ns.Addr = netip.AddrPortFrom(peer.Addr, uint16(port))
		return ns, nil
	case <-timer.C:
		return nil, errors.Join(errors.New("netserver: no start-up line within 10 s"), ns.Close())
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), ns.Close())
	}
}

// Close stops the child (EOF on its stdin, then SIGKILL after 3 s).
func (n *Netserver) Close() error {
	n.once.Do(func() {
		n.stdin.Close()
		select {
		case err := <-n.done:
			n.err = err
		case <-time.After(3 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.done
			n.err = errors.New("netserver: killed after 3 s")
		}
		if n.err != nil && n.stderr.Len() > 0 {
			n.err = fmt.Errorf("%w: %s", n.err, n.stderr.String())
		}
	})
	return n.err
}

// NetserverHelper makes this process the child netserver when the
// environment asks for it, and then exits; otherwise it returns at once.
// Call it first thing in main (cli.Main does) and in TestMain of
// packages whose tests start a Netserver.
func NetserverHelper() {
	addr := os.Getenv(helperEnv)
	if addr == "" {
		return
	}
	srv, err := netperf.NewServer(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("port %d\n", srv.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil // bounded: diagnostics only
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

// ExternalPort is the control port of the external netservers the bench
// starts; each runs in a namespace of its own, so a fixed port is free.
const ExternalPort = 12865

// External drives tests with external netperf binaries (for example the
// C netperf 2.7 of ../shared/netperf-c/bin), so a user can check that the
// in-process Go netperf is not the bottleneck: a netserver process in
// each namespace of the test bed (none in remote mode, where the remote
// machine runs its own) and one netperf process per test, started inside
// the client's namespace, whose keyval output (-k) is parsed.
type External struct {
	Netperf, Netserver string
	SUT, Peer          Endpoint
	version            string
	// in runs fn inside a host's namespace (the process forked there
	// inherits it).
	in    [2]func(func() error) error
	procs []*exec.Cmd
}

// NewExternal makes the generator for a test bed (local: netservers in
// both namespaces; remote: the remote's netserver at port) or for the
// gateway topology when gw is not nil.
func NewExternal(netperfPath, netserverPath string, tb *topo.Topo, gw *topo.Gateway, port int) (*External, error) {
	for _, p := range []string{netperfPath, netserverPath} {
		if p == "" {
			return nil, errors.New("netperf: --netperf and --netserver go together")
		}
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("netperf: %s is not an executable file", p)
		}
	}
	e := &External{Netperf: netperfPath, Netserver: netserverPath}
	out, _ := exec.Command(netperfPath, "-V").CombinedOutput()
	e.version = strings.TrimSpace(string(out))
	if !strings.Contains(e.version, "Netperf version") {
		return nil, fmt.Errorf("netperf: %s -V answered %q, not netperf's version line", netperfPath, e.version)
	}
	type side struct {
		h      *topo.Host
		server bool
		addr   netip.Addr
	}
	var sides [2]side
	switch {
	case gw != nil:
		sides[0] = side{h: gw.Host(topo.GWClient)}
		sides[1] = side{h: gw.Host(topo.GWServer), server: true, addr: topo.ServiceAddr}
	case tb.Remote():
		h := tb.Host(topo.Peer)
		addr := h.Addr
		if !addr.IsValid() {
			addr = h.Addr6
		}
		e.SUT = Endpoint{}
		e.Peer = Endpoint{Server: netip.AddrPortFrom(addr, uint16(port))}
		e.in = [2]func(func() error) error{func(fn func() error) error { return fn() }, nil}
		return e, nil
	default:
		sides[0] = side{h: tb.Host(topo.SUT), server: true, addr: tb.Host(topo.SUT).Addr}
		sides[1] = side{h: tb.Host(topo.Peer), server: true, addr: tb.Host(topo.Peer).Addr}
	}
	for i, s := range sides {
		e.in[i] = s.h.Do
		ep := Endpoint{NetNS: s.h.NetNS}
		if s.server {
			listen := s.addr.String()
			if gw != nil {
				listen = "0.0.0.0"
			}
			cmd := exec.Command(netserverPath, "-D", "-f", "-p", strconv.Itoa(ExternalPort), "-L", listen+",inet")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			if err := s.h.Do(cmd.Start); err != nil {
				return nil, errors.Join(fmt.Errorf("netperf: starting %s: %w", netserverPath, err), e.Close())
			}
			e.procs = append(e.procs, cmd)
			ep.Server = netip.AddrPortFrom(s.addr, ExternalPort)
			if err := s.h.Do(func() error { return waitListening(ep.Server) }); err != nil {
				return nil, errors.Join(fmt.Errorf("netperf: %s: %w (%s)", netserverPath, err, strings.TrimSpace(stderr.String())), e.Close())
			}
		}
		if i == 0 {
			e.SUT = ep
		} else {
			e.Peer = ep
		}
	}
	return e, nil
}

// waitListening waits up to 5 s for a netserver to accept connections
// (it must be called inside the netserver's namespace).
func waitListening(a netip.AddrPort) error {
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", a.String(), time.Second); err == nil {
			return c.Close()
		}
	}
	return fmt.Errorf("not listening on %s: %w", a, err)
}

// Close stops the netservers it started.
func (e *External) Close() error {
	for _, c := range e.procs {
		if c.Process != nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	e.procs = nil
	return nil
}

// Name implements Generator.
func (e *External) Name() string { return "netperf (external)" }

// Describe says which binaries measured.
func (e *External) Describe() string {
	return fmt.Sprintf("external %s (%s), netserver %s", e.Netperf, e.version, e.Netserver)
}

// keys are the omni output selectors read from netperf's -k output.
const keys = "THROUGHPUT,THROUGHPUT_UNITS,LOCAL_CPU_UTIL,REMOTE_CPU_UTIL,LOCAL_SD,REMOTE_SD,ELAPSED_TIME"

// Run implements Generator.
func (e *External) Run(ctx context.Context, t result.Test, d time.Duration) (Measurement, error) {
	// in enters the client's namespace; server is the other end.
	server, in := e.Peer, e.in[0]
	if t.ClientHost() == result.Peer {
		server, in = e.SUT, e.in[1]
	}
	if !server.Server.IsValid() || in == nil {
		return Measurement{}, fmt.Errorf("netperf: %s needs a netserver on the %s and there is none", t.ID, t.ServerHost())
	}
	secs := max(1, int(d.Round(time.Second)/time.Second))
	args := []string{"-H", server.Server.Addr().String(), "-p", strconv.Itoa(int(server.Server.Port())),
		"-t", t.NetperfTest(), "-l", strconv.Itoa(secs), "-c", "-C", "-P", "0", "--"}
	if t.Stream() {
		args = append(args, "-m", strconv.Itoa(t.SendSize))
	} else {
		args = append(args, "-r", fmt.Sprintf("%d,%d", t.ReqSize, t.RespSize))
	}
	args = append(args, "-k", keys)
	cmd := exec.CommandContext(ctx, e.Netperf, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := in(cmd.Start); err != nil {
		return Measurement{}, fmt.Errorf("netperf: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return Measurement{}, fmt.Errorf("netperf %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+" "+out.String()))
	}
	return ParseKeyval(out.Bytes())
}

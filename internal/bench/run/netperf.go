package run

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
	"sluice/internal/netperf"
)

// Endpoint is one host of the test bed as the netperf generator sees it.
type Endpoint struct {
	// NetNS is the namespace a client running on this host opens its
	// sockets in ("" = the process's own).
	NetNS string
	// Server is the control address of the netserver on this host; the
	// zero value means there is none (the SUT in remote mode).
	Server netip.AddrPort
}

// Netperf drives tests through the netperf library (internal/netperf),
// with CPU measured at both ends (-c -C). Each test runs its client on
// the host its Client field names and its netserver on the other, so
// one generator serves the papers' roles in both directions. Test
// lengths are whole seconds, as on netperf's wire.
type Netperf struct {
	SUT, Peer Endpoint

	cancel context.CancelFunc
	srvs   []*netperf.Server
	wg     sync.WaitGroup
	errs   chan error
}

// NewNetperf makes the generator for a test bed. For a local test bed it
// starts an in-process netserver in each namespace (netperf.NewServerNS
// opens the control listener and every data socket there, so no child
// process is needed); Close stops them. For a remote test bed it uses the
// netserver at the peer's address and port, and the SUT has none: see
// FromSUT.
func NewNetperf(tb *topo.Topo, port int) (*Netperf, error) {
	if tb.Remote() {
		h := tb.Host(topo.Peer)
		addr := h.Addr
		if !addr.IsValid() {
			addr = h.Addr6
		}
		if port <= 0 || port > 65535 {
			return nil, fmt.Errorf("netperf: bad netserver port %d", port)
		}
		return &Netperf{
			SUT:  Endpoint{NetNS: tb.NetNSPath(topo.SUT)},
			Peer: Endpoint{Server: netip.AddrPortFrom(addr, uint16(port))},
		}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Netperf{cancel: cancel, errs: make(chan error, 2)}
	for _, r := range []topo.Role{topo.SUT, topo.Peer} {
		h := tb.Host(r)
		srv, err := netperf.NewServerNS(netip.AddrPortFrom(h.Addr, 0).String(), h.NetNS)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("netperf: starting netserver in the %s namespace: %w", r, err), n.Close())
		}
		n.srvs = append(n.srvs, srv)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := srv.Serve(ctx); err != nil && ctx.Err() == nil {
				n.errs <- fmt.Errorf("netperf: netserver on the %s: %w", r, err)
			}
		}()
		e := Endpoint{NetNS: h.NetNS, Server: netip.AddrPortFrom(h.Addr, uint16(srv.Addr().(*net.TCPAddr).Port))}
		if r == topo.SUT {
			n.SUT = e
		} else {
			n.Peer = e
		}
	}
	return n, nil
}

// Close stops the in-process netservers (aborting any test they serve)
// and waits for them. It is safe to call more than once.
func (n *Netperf) Close() error {
	if n.cancel == nil {
		return nil
	}
	n.cancel()
	var errs []error
	for _, s := range n.srvs {
		errs = append(errs, s.Close())
	}
	n.wg.Wait()
	for len(n.errs) > 0 {
		errs = append(errs, <-n.errs)
	}
	n.srvs = nil
	return errors.Join(errs...)
}

// Name implements Generator.
func (n *Netperf) Name() string { return "netperf" }

// Describe says which netperf measured.
func (n *Netperf) Describe() string {
	return "in-process Go netperf (internal/netperf: netperf 2.7's control protocol and tests, CPU from /proc/stat)"
}

// Run implements Generator.
func (n *Netperf) Run(ctx context.Context, t result.Test, d time.Duration) (Measurement, error) {
	client, server := n.SUT, n.Peer
	if t.ClientHost() == result.Peer {
		client, server = n.Peer, n.SUT
	}
	if !server.Server.IsValid() {
		return Measurement{}, fmt.Errorf("netperf: %s needs a netserver on the %s and there is none", t.ID, t.ServerHost())
	}
	// The protocol carries the test length in whole seconds (a server
	// given 0 falls back to its default of 10 s), so round.
	d = max(time.Second, d.Round(time.Second))
	cfg := netperf.Config{
		Test:      t.NetperfTest(),
		Host:      server.Server.Addr().String(),
		Port:      int(server.Server.Port()),
		Duration:  d,
		SendSize:  t.SendSize,
		ReqSize:   t.ReqSize,
		RespSize:  t.RespSize,
		LocalCPU:  true,
		RemoteCPU: true,
		NetNS:     client.NetNS,
	}
	r, err := netperf.Run(ctx, cfg)
	if err != nil {
		return Measurement{}, err
	}
	return Measurement{
		Elapsed:        r.Elapsed,
		ThroughputMbps: r.ThroughputMbps,
		TransPerSec:    r.TransPerSec,
		LocalCPU:       r.LocalCPU,
		RemoteCPU:      r.RemoteCPU,
		LocalSD:        r.LocalSD,
		RemoteSD:       r.RemoteSD,
	}, nil
}

// NewGatewayNetperf makes the generator of the gateway topology: an
// in-process netserver in the server's namespace, listening on every
// address (the client dials topo.ServiceAddr, which reaches the server
// as itself or translated to topo.ServerAddr), and clients in the
// client's namespace. Tests of the NAT suite run their client there
// (result.Client).
func NewGatewayNetperf(gw *topo.Gateway) (*Netperf, error) {
	ctx, cancel := context.WithCancel(context.Background())
	n := &Netperf{cancel: cancel, errs: make(chan error, 1)}
	srvHost := gw.Host(topo.GWServer)
	srv, err := netperf.NewServerNS("0.0.0.0:0", srvHost.NetNS)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("netperf: starting netserver in the server namespace: %w", err), n.Close())
	}
	n.srvs = append(n.srvs, srv)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := srv.Serve(ctx); err != nil && ctx.Err() == nil {
			n.errs <- fmt.Errorf("netperf: netserver on the server: %w", err)
		}
	}()
	port := uint16(srv.Addr().(*net.TCPAddr).Port)
	// A client-side test picks n.SUT as the client's end (its Client is
	// neither the peer nor the SUT) and n.Peer as the server's.
	n.SUT = Endpoint{NetNS: gw.Host(topo.GWClient).NetNS}
	n.Peer = Endpoint{NetNS: srvHost.NetNS, Server: netip.AddrPortFrom(topo.ServiceAddr, port)}
	return n, nil
}

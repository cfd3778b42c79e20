//go:build linux

package topo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

var gwSuffix = [3]string{"cli", "gw", "srv"}

// Gateway is the three-namespace test bed of the NAT suite: client —
// gateway — server, two veth pairs, IPv4 forwarding on the gateway. The
// client routes everything through the gateway and dials ServiceAddr,
// which the gateway routes to the server and the server holds on its
// loopback. Create it with NewGateway and always Close it.
type Gateway struct {
	id     string
	nsName [3]string
	ns     [3]netns.NsHandle
	hosts  [3]Host

	closeOnce sync.Once
	closeErr  error
}

// NewGateway builds the gateway topology (names start with prefix, as
// for New, so Sweep finds leftovers). On failure everything it made is
// removed.
func NewGateway(prefix string) (*Gateway, error) {
	o := Options{Prefix: prefix}
	if err := o.validate(); err != nil {
		return nil, err
	}
	g := &Gateway{ns: [3]netns.NsHandle{-1, -1, -1}}
	if err := g.setup(o.Prefix); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	return g, nil
}

func (g *Gateway) setup(prefix string) error {
	rnd := randomHex(4)
	g.id = fmt.Sprintf("%s-%d-%s", prefix, os.Getpid(), rnd)
	for r := range g.nsName {
		name := g.id + "-" + gwSuffix[r]
		h, err := newNamed(name)
		if err != nil {
			return fmt.Errorf("topo: creating namespace %s: %w", name, err)
		}
		g.nsName[r], g.ns[r] = name, h
	}
	// Links: client c — gateway i (inside), gateway o (outside) — server s.
	c, i, o, s := "sg"+rnd+"c", "sg"+rnd+"i", "sg"+rnd+"o", "sg"+rnd+"s"
	gh := func(r GWRole) func(func() error) error {
		return func(fn func() error) error { return doIn(g.ns[r], gwSuffix[r], fn) }
	}
	for r := range g.hosts {
		g.hosts[r].NetNS = filepath.Join(NetNSDir, g.nsName[r])
		g.hosts[r].do = gh(GWRole(r))
	}
	g.hosts[GWClient].Role, g.hosts[GWClient].Link = Peer, c
	g.hosts[GWClient].Addr, g.hosts[GWClient].PeerAddr = ClientAddr, ServiceAddr
	g.hosts[GWGateway].Role, g.hosts[GWGateway].Link, g.hosts[GWGateway].Inside = SUT, o, i
	g.hosts[GWGateway].Addr, g.hosts[GWGateway].PeerAddr = GWOutAddr, ServerAddr
	g.hosts[GWServer].Role, g.hosts[GWServer].Link = Peer, s
	g.hosts[GWServer].Addr, g.hosts[GWServer].PeerAddr = ServerAddr, ClientAddr

	for _, pair := range []struct {
		a, b   GWRole
		la, lb string
	}{{GWClient, GWGateway, c, i}, {GWGateway, GWServer, o, s}} {
		h, err := netlink.NewHandleAt(g.ns[pair.a])
		if err != nil {
			return err
		}
		err = h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: pair.la}, PeerName: pair.lb,
			PeerNamespace: netlink.NsFd(int(g.ns[pair.b]))})
		h.Close()
		if err != nil {
			return fmt.Errorf("topo: adding veth %s/%s: %w", pair.la, pair.lb, err)
		}
	}
	cfg := [3]struct {
		addrs  []addr
		routes []struct{ dst, via netip.Addr }
	}{
		GWClient: {addrs: []addr{{c, ClientAddr, 24}},
			routes: []struct{ dst, via netip.Addr }{{netip.IPv4Unspecified(), GWInsideAddr}}},
		GWGateway: {addrs: []addr{{i, GWInsideAddr, 24}, {o, GWOutAddr, 24}},
			routes: []struct{ dst, via netip.Addr }{{ServiceAddr, ServerAddr}}},
		GWServer: {addrs: []addr{{s, ServerAddr, 24}, {"lo", ServiceAddr, 32}},
			routes: []struct{ dst, via netip.Addr }{{netip.IPv4Unspecified(), GWOutAddr}}},
	}
	for r := range cfg {
		if err := g.configure(GWRole(r), cfg[r].addrs, cfg[r].routes); err != nil {
			return err
		}
	}
	g.hosts[GWGateway].Index = g.index(GWGateway, o)
	return doIn(g.ns[GWGateway], "gw", func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
	})
}

func (g *Gateway) index(r GWRole, link string) int {
	h, err := netlink.NewHandleAt(g.ns[r])
	if err != nil {
		return 0
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return 0
	}
	return l.Attrs().Index
}

// addr is an address to put on a link of the gateway topology.
type addr struct {
	link string
	ip   netip.Addr
	bits int
}

func (g *Gateway) configure(r GWRole, addrs []addr, routes []struct{ dst, via netip.Addr }) error {
	h, err := netlink.NewHandleAt(g.ns[r])
	if err != nil {
		return err
	}
	defer h.Close()
	up := map[string]bool{}
	for _, a := range append([]addr{{"lo", netip.Addr{}, 0}}, addrs...) {
		l, err := h.LinkByName(a.link)
		if err != nil {
			return fmt.Errorf("topo: %s: finding %s: %w", gwSuffix[r], a.link, err)
		}
		if a.ip.IsValid() {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: a.ip.AsSlice(), Mask: net.CIDRMask(a.bits, 32)}}); err != nil {
				return fmt.Errorf("topo: %s: adding %s: %w", gwSuffix[r], a.ip, err)
			}
		}
		if !up[a.link] {
			up[a.link] = true
			if err := h.LinkSetUp(l); err != nil {
				return fmt.Errorf("topo: %s: %s up: %w", gwSuffix[r], a.link, err)
			}
		}
	}
	for _, rt := range routes {
		var dst *net.IPNet
		if rt.dst != netip.IPv4Unspecified() {
			dst = &net.IPNet{IP: rt.dst.AsSlice(), Mask: net.CIDRMask(32, 32)}
		}
		if err := h.RouteAdd(&netlink.Route{Dst: dst, Gw: rt.via.AsSlice()}); err != nil {
			return fmt.Errorf("topo: %s: route to %v via %s: %w", gwSuffix[r], dst, rt.via, err)
		}
	}
	return nil
}

// Host returns a host of the gateway topology. The gateway's Link is its
// server-facing (outside) interface and Inside its client-facing one.
func (g *Gateway) Host(r GWRole) *Host {
	h := g.hosts[r]
	return &h
}

// NetNSNames returns the names of the three namespaces.
func (g *Gateway) NetNSNames() []string {
	var out []string
	for _, n := range g.nsName {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Close removes the links and namespaces. It is safe to call more than
// once.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		var errs []error
		for r := range g.nsName {
			if g.ns[r].IsOpen() {
				if h, err := netlink.NewHandleAt(g.ns[r]); err == nil {
					if l, err := h.LinkByName(g.hosts[r].Link); err == nil && g.hosts[r].Link != "" {
						_ = h.LinkDel(l) // its peer goes with it
					}
					h.Close()
				}
				g.ns[r].Close()
				g.ns[r] = -1
			}
			if g.nsName[r] != "" {
				if err := netns.DeleteNamed(g.nsName[r]); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, fmt.Errorf("topo: deleting namespace %s: %w", g.nsName[r], err))
				}
			}
		}
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}

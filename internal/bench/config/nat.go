package config

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"sluice/internal/bench/topo"
)

// SuiteNAT is the gateway suite (issue 13): netperf from a client
// namespace through the SUT, a forwarding gateway, to a server namespace
// (topo.Gateway); the configurations translate on the gateway.
const SuiteNAT = "nat"

// NATLoader loads an ipnat.conf into Sluice's kernel NAT. The text has
// @IN@ and @OUT@ already replaced by the gateway's client- and
// server-facing interfaces. Apply runs inside the gateway's namespace
// (host.Do). A build or kernel without kernel NAT fails Apply with an
// error wrapping errors.ErrUnsupported, which the run records as the
// configuration's skip reason.
type NATLoader func(conf string) (Applier, error)

// NATMasq is the ipnat.conf of sluice-nat-map: the client network
// masqueraded behind the gateway's server-facing address (IPFilter's
// outbound NAT, `-> 0/32` for the interface's address). The second rule
// is needed: `portmap tcp/udp auto` gives each host of the /24 252
// ports, picks one from the client's port and, with 0/32, tries only
// that; a connection whose port a closed session still holds (240 s)
// would get no session at every retransmission (netperf's control
// connections to one server port stalled so in TestNATCost). The plain
// map takes it with its own port. internal/cmd/ipnat's
// TestPrivilegedNATPortmapClash loads these rules.
func NATMasq() string {
	return fmt.Sprintf("map @OUT@ %s/24 -> 0/32 portmap tcp/udp auto\nmap @OUT@ %s/24 -> 0/32\n",
		topo.GWClientNet, topo.GWClientNet)
}

// NATRdr is the ipnat.conf of sluice-nat-rdr: the service address that
// clients dial (topo.ServiceAddr) redirected to the server (port
// forwarding of every port, IPFilter's rdr).
func NATRdr() string {
	return fmt.Sprintf("rdr @IN@ %s/32 -> %s ip\n", topo.ServiceAddr, topo.ServerAddr)
}

func (r *Registry) addNAT() {
	r.add(r.floor("tcx-floor-gw", SuiteNAT, "a trivial TCX program (return TCX_NEXT) on ingress and egress of both gateway interfaces: the floor of the in-kernel cost of the gateway's ns/packet rows"))
	r.add(r.natSluice("sluice-nat-map", "Sluice kernel NAT on the gateway: map (masquerade) of the client network, portmap auto", NATMasq()))
	r.add(r.natSluice("sluice-nat-rdr", "Sluice kernel NAT on the gateway: rdr of the service address to the server", NATRdr()))
	// The filter path alone and with NAT beside it, on the gateway's
	// server-facing interface (where map translates), so that NAT's own
	// share of a packet is one report's difference.
	r.add(r.gwFilter("sluice-gw-stateful", "Sluice IPFilter on the gateway's server-facing interface: HP's set with keep state, no NAT", IPFStateful(), ""))
	// Filter and NAT through the commands (ipnat -f beside the filter's
	// pins): NAT's established path inside the filter's programs, as
	// ipnat puts it (natw), and with nat_inline=0, two programs on each
	// hook (what -nat-map measured before natw)
	r.add(r.gwNAT("sluice-gw-stateful-nat-map", "Sluice IPFilter (HP's set with keep state) and kernel NAT (sluice-nat-map's map) on the gateway's server-facing interface, loaded by ipf and ipnat: NAT's established path inside the filter's programs", true))
	r.add(r.gwNAT("sluice-gw-stateful-nat-two", "sluice-gw-stateful-nat-map with ipf -T nat_inline=0: NAT's programs beside the filter's (two programs on each hook)", false))
	r.add(&Config{Name: "nft-masq", Family: NFTables, Suite: SuiteNAT,
		Description: "nftables on the gateway: masquerade to the server-facing interface",
		Rules:       fmt.Sprintf("table ip %s {\n  chain postrouting {\n    type nat hook postrouting priority srcnat;\n    oifname @OUT@ masquerade\n  }\n}\n", NFTTable),
		New:         func() (Applier, error) { return &nftNAT{masq: true}, nil }})
	r.add(&Config{Name: "nft-dnat", Family: NFTables, Suite: SuiteNAT,
		Description: "nftables on the gateway: dnat of the service address to the server",
		Rules: fmt.Sprintf("table ip %s {\n  chain prerouting {\n    type nat hook prerouting priority dstnat;\n    ip daddr %s dnat to %s\n  }\n}\n",
			NFTTable, topo.ServiceAddr, topo.ServerAddr),
		New: func() (Applier, error) { return &nftNAT{}, nil }})
}

func (r *Registry) natSluice(name, desc, conf string) *Config {
	return &Config{Name: name, Family: Sluice, Suite: SuiteNAT, Description: desc, Rules: conf,
		Unavailable: func() bool { return r.dp.NAT == nil },
		New: func() (Applier, error) {
			if r.dp.NAT == nil {
				return nil, ErrUnavailable
			}
			return &natSubst{conf: conf, load: r.dp.NAT}, nil
		}}
}

// gwNAT is a configuration of the NAT suite with the filter (HP's set
// with keep state) and NAT's masquerade loaded as the commands load them
// (GWNAT), NAT's path inside the filter's programs or not.
func (r *Registry) gwNAT(name, desc string, inline bool) *Config {
	return &Config{Name: name, Family: Sluice, Suite: SuiteNAT, Description: desc, Rules: NATMasq(), Filter: IPFStateful(),
		Unavailable: func() bool { return r.dp.GWNAT == nil },
		New: func() (Applier, error) {
			if r.dp.GWNAT == nil {
				return nil, ErrUnavailable
			}
			return r.dp.GWNAT(IPFStateful(), NATMasq(), inline)
		}}
}

// gwFilter is a configuration of the NAT suite with Sluice's IPFilter
// datapath on the gateway's server-facing interface (the IPF loader
// attaches to host.Link) loaded with filter, and Sluice's kernel NAT
// with nat beside it when nat is not empty (applied after the filter:
// the NAT's programs go before it on ingress and after it on egress).
func (r *Registry) gwFilter(name, desc, filter, nat string) *Config {
	return &Config{Name: name, Family: Sluice, Suite: SuiteNAT, Description: desc, Rules: nat, Filter: filter,
		Unavailable: func() bool { return r.dp.IPF == nil || (nat != "" && r.dp.NAT == nil) },
		New: func() (Applier, error) {
			if r.dp.IPF == nil || (nat != "" && r.dp.NAT == nil) {
				return nil, ErrUnavailable
			}
			f, err := r.dp.IPF(filter)
			if err != nil {
				return nil, err
			}
			if nat == "" {
				return f, nil
			}
			return &stack{appliers: []Applier{f, &natSubst{conf: nat, load: r.dp.NAT}}}, nil
		}}
}

// stack applies its appliers in order and removes them in reverse.
type stack struct {
	appliers []Applier
	applied  int
}

func (s *stack) Apply(ctx context.Context, h *topo.Host) error {
	for _, a := range s.appliers[s.applied:] {
		if err := a.Apply(ctx, h); err != nil {
			return errors.Join(err, s.Remove())
		}
		s.applied++
	}
	return nil
}

func (s *stack) Remove() error {
	var errs []error
	for ; s.applied > 0; s.applied-- {
		errs = append(errs, s.appliers[s.applied-1].Remove())
	}
	return errors.Join(errs...)
}

// natSubst fills in the gateway's interfaces before loading.
type natSubst struct {
	conf string
	load NATLoader
	a    Applier
}

func (n *natSubst) Apply(ctx context.Context, h *topo.Host) error {
	if h.Inside == "" {
		return fmt.Errorf("NAT configurations run on the gateway topology only (host %s has no inside interface)", h.Role)
	}
	conf := strings.NewReplacer("@IN@", h.Inside, "@OUT@", h.Link).Replace(n.conf)
	a, err := n.load(conf)
	if err != nil {
		return err
	}
	if err := a.Apply(ctx, h); err != nil {
		return err
	}
	n.a = a
	return nil
}

func (n *natSubst) Remove() error {
	if n.a == nil {
		return nil
	}
	err := n.a.Remove()
	n.a = nil
	return err
}

// nftNAT is nftables' NAT on the gateway: masquerade on the
// server-facing interface, or dnat of the service address.
type nftNAT struct {
	masq  bool
	conn  *nftables.Conn
	nsfd  int
	table *nftables.Table
}

func (n *nftNAT) Apply(_ context.Context, h *topo.Host) error {
	if n.conn != nil {
		return errors.New("nftables: already applied")
	}
	if h.NetNS == "" {
		return errors.New("nftables NAT: the gateway must be a namespace of the test bed")
	}
	fd, err := unix.Open(h.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("nftables: opening namespace %s: %w", h.NetNS, err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(fd))
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: NFTTable})
	if n.masq {
		ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(h.Link)},
			&expr.Masq{},
		}})
	} else {
		ch := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
		vip, srv := topo.ServiceAddr.As4(), topo.ServerAddr.As4()
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: vip[:]},
			&expr.Immediate{Register: 1, Data: srv[:]},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
		}})
	}
	if err := c.Flush(); err != nil {
		unix.Close(fd)
		return fmt.Errorf("nftables: loading the NAT table: %w", err)
	}
	n.conn, n.nsfd, n.table = c, fd, t
	return nil
}

func (n *nftNAT) Remove() error {
	if n.conn == nil {
		return nil
	}
	n.conn.DelTable(n.table)
	err := n.conn.Flush()
	n.conn = nil
	unix.Close(n.nsfd)
	if err != nil {
		return fmt.Errorf("nftables: deleting the NAT table: %w", err)
	}
	return nil
}

// ifname pads an interface name as the kernel compares it (IFNAMSIZ).
func ifname(s string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, s)
	return b
}

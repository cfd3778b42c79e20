// Package nat is the NAT engine of IPFilter's ipnat: rule selection,
// address and port allocation for map, bimap, map-block, rdr and
// rewrite rules, the session table with its host map, and the in-place
// rewriting of IPv4/IPv6 packets with incremental checksum fixups, and
// the application proxies (ftp, rcmd, pptp, rpcbu/rpcbt) with the NAT
// sessions and filter state entries they open for the connections they
// expect.
//
// The engine follows IPFilter 5.x (ip_nat.c) closely, including its
// allocation order, because ipftest output depends on it. Randomness
// (portmap) and interface addresses (0/32) are injected through Config.
package nat

import (
	"fmt"
	"net/netip"
	"sync"

	"sluice/internal/pool"
	"sluice/internal/rules/ipnat"
	"sluice/internal/rules/ippool"
)

// Direction is the way a packet travels through an interface.
type Direction uint8

// Packet directions.
const (
	In Direction = iota
	Out
)

// Result is the outcome of offering a packet to NAT.
type Result uint8

// Results.
const (
	// NoMatch: no session and no rule applied; the packet is unchanged.
	NoMatch Result = iota
	// Translated: the packet was rewritten in place.
	Translated
	// Failed: a rule matched but no translation could be set up; the
	// caller blocks the packet (block reason natv4/natv6).
	Failed
)

// String names the result.
func (r Result) String() string {
	return [...]string{"nomatch", "translated", "failed"}[r]
}

// Config holds what the engine needs from its surroundings.
type Config struct {
	// Rand is IPFilter's ipf_random(): it picks portmap ports. nil uses
	// IPFTestRandom, the deterministic sequence of ipftest.
	Rand func() uint32
	// IfAddr returns the address of an interface (for 0/32 rules).
	IfAddr func(ifname string, v6 bool) (netip.Addr, bool)
	// Pools answers pool/N and hash/N operands and dstlist/NAME targets.
	Pools *pool.Set
	// Clock gives the time in IPFilter ticks (0.5 s; state.Clock
	// satisfies it). nil: sessions never age (ipftest).
	Clock Clock
	// MaxSessions caps the session table (nat_table_max); 0 = 30000.
	MaxSessions int
	// AddState opens the filter for a connection a proxy (ftp, rcmd,
	// pptp) expects; nil when no filter is attached.
	AddState func(ProxyState) bool
	// Debug receives proxy debug messages (ftp_debug); nil drops them.
	Debug func(msg string)
	// Tunable reads proxy tunables (ftp_debug, ftp_insecure,
	// ftp_pasvonly) when a proxy session starts; nil reads zeros.
	Tunable func(name string) (int, bool)
	// OnSession is called when a rule starts a session: IPFilter's
	// ipf_sync_new numbers NAT sessions from the counter that numbers
	// the entries of keep state (sync) rules, so each session moves
	// the next such entry's number on. nil: nothing to tell.
	OnSession func()
	// OnSyncUpdate is called when a session's first outbound packet is
	// translated: IPFilter's ipf_sync_update gives it a slot of the
	// update log that keep state (sync) entries take theirs from too.
	// nil: nothing to tell.
	OnSyncUpdate func()
}

// Clock is the time source for session ageing.
type Clock interface {
	Ticks() uint32
}

// fragEntry is a first fragment's session and where that fragment's
// data ended: IPFilter's fragment cache refuses a later fragment that
// starts before it (an overlap).
type fragEntry struct {
	s   *session
	end int
	// icmpErr: the first fragment was an ICMP error quoting a session's
	// packet; the rest get the outer address which (0 source, 1
	// destination) set to addr, as it had.
	icmpErr bool
	which   int
	addr    netip.Addr
	// dst, when valid, is the destination an outbound error gets too.
	dst netip.Addr
}

// setOuter gives an ICMP error's outer header the addresses its session
// translates it to.
func (fe *fragEntry) setOuter(v *view) {
	v.setAddr(fe.which, fe.addr)
	if fe.dst.IsValid() {
		v.setAddr(1, fe.dst)
	}
}

// usablePorts and mapBlockMinPort are IPFilter's USABLE_PORTS and
// MAPBLK_MINPORT.
const (
	usablePorts     = 65535 - 1023
	mapBlockMinPort = 1024
)

// rule is a loaded rule with its allocation state (guarded by NAT.mu).
type rule struct {
	*ipnat.Rule
	v6          bool
	inIf, outIf string
	src, dst    addrOperand // from/to operands
	orig, newA  addrOperand // simple LHS and RHS
	nsrc, ndst  addrOperand // rewrite targets
	seq         int
	bucket      [2]int // in the outbound and inbound rule hash tables

	snip     a128 // next source address (map) / rewrite source
	dnip     a128 // next destination (rdr split, rewrite)
	spnext   int
	dpnext   int
	stepnext int
	ppip     int
	ippip    int
	icmpID   bool // a map rule with icmpidmap (see ruleMatches)
	notDst   bool // the to operand is negated (r.NotDst, unless dropped)
	hits     uint64
}

type key struct {
	dir      Direction
	proto    uint8
	src, dst netip.Addr
	sp, dp   uint16
}

// session is one active translation. Its forward direction is dir;
// o* fields are the addresses as first seen, n* as rewritten.
type session struct {
	rule   *rule
	dir    Direction
	proto  uint8
	flags  int
	v6     bool
	ifname string // interface the session was created on
	ifIn   string // interfaces it applies to, by direction
	ifOut  string
	hnext  [2]*session // next on the chains of its forward and reverse keys (hash)

	osrc, odst, nsrc, ndst         netip.Addr
	osport, odport, nsport, ndport uint16

	hm      *hostmap
	dstList *pool.DstList
	dstIdx  int
	pkts    [2]uint64
	bytes   [2]uint64
	seq     uint64

	expire   uint32   // tick at which the session ends (with a Clock)
	tcpSeen  [2]uint8 // TCP flags seen per direction (0 forward)
	hasFrags bool     // the fragment table points at this session

	proxy  *proxy // the rule's application proxy, nil if none
	slave  bool   // set up by the proxy of another session
	rcmd   bool   // the stderr back-connection of an rcmd proxy
	wildSP bool   // waiting for its first packet to learn the source port
	clone  bool   // a wildcard that copies itself for each connection
	pass   uint32 // filter flags of the proxy's state entry (0: proxyPass)
	gone   bool   // unlinked from the tables (expired or flushed)
	synced bool   // has its state-sync update slot (see OnSyncUpdate)
}

// hmKey indexes host map entries by original source and destination.
type hmKey struct{ src, dst netip.Addr }

// hostmap remembers which new address a (source, destination) pair got,
// so later sessions of the pair reuse it (IPFilter hostmap_t).
type hostmap struct {
	rule       *rule
	v6         bool
	osrc, odst netip.Addr
	nsrc, ndst netip.Addr
	port       uint16
	ref        int
	seq        uint64
}

// NAT is one NAT configuration with its sessions.
type NAT struct {
	mu    sync.Mutex // guards everything below
	cfg   Config
	rules []*rule // file order, for listing
	maps  []*rule // outbound rules in hash bucket order (rulehash.go)
	rdrs  []*rule // inbound rules in hash bucket order
	// mapMasks and rdrMasks are the masks the packet walks, per family.
	mapMasks, rdrMasks [2][]int

	sessions  map[key]*session
	wild      []*session // proxy sessions with a source port still to learn
	frags     map[fragKey]fragEntry
	active    []*session
	hostmaps  map[hmKey][]*hostmap
	nHostmaps int
	seq       uint64
	lastAge   uint32
}

// New loads the rules of f. Rules are checked for things the engine
// cannot do (unknown pools are allowed: they simply never match).
func New(f *ipnat.File, cfg Config) (*NAT, error) {
	if cfg.Rand == nil {
		cfg.Rand = IPFTestRandom()
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = 30000
	}
	n := &NAT{cfg: cfg, sessions: make(map[key]*session)}
	if f != nil {
		if err := n.AddRules(f); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// SetPools installs the pool tables that pool/N, hash/N and dstlist/NAME
// operands refer to (ipftest may load -P after -N).
func (n *NAT) SetPools(p *pool.Set) {
	n.mu.Lock()
	n.cfg.Pools = p
	n.mu.Unlock()
}

// SetMaxSessions changes the session table's cap (nat_table_max, which
// ipftest -T may set before or after -N); 0 is the default, 30000. Sessions
// already made stay; new ones are refused while the table holds max.
func (n *NAT) SetMaxSessions(max int) {
	if max <= 0 {
		max = 30000
	}
	n.mu.Lock()
	n.cfg.MaxSessions = max
	n.mu.Unlock()
}

// AddRules appends rules (ipnat -f, ipftest -N).
func (n *NAT) AddRules(f *ipnat.File) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range f.Rules {
		rl, err := compile(r)
		if err != nil {
			return err
		}
		rl.seq = len(n.rules)
		rl.place()
		n.rules = append(n.rules, rl)
		switch r.Type {
		case ipnat.Rdr, ipnat.RewriteIn, ipnat.DivertIn:
			n.rdrs = append(n.rdrs, rl)
		case ipnat.Bimap:
			n.maps = append(n.maps, rl)
			n.rdrs = append(n.rdrs, rl)
		default:
			n.maps = append(n.maps, rl)
		}
	}
	n.mapMasks = ruleMasks(n.maps, false)
	n.rdrMasks = ruleMasks(n.rdrs, true)
	return nil
}

func (r *rule) maskFor(rdr bool) int {
	if r.Type == ipnat.Bimap && rdr {
		return r.newA.maskLen
	}
	if r.Filter {
		if rdr {
			return r.dst.maskLen
		}
		return r.src.maskLen
	}
	return r.orig.maskLen
}

func compile(r *ipnat.Rule) (*rule, error) {
	v6 := r.Family == 6
	rl := &rule{Rule: r, v6: v6, inIf: r.Ifs[0], outIf: r.Ifs[1]}
	if rl.outIf == "" {
		rl.outIf = rl.inIf
	}
	rl.src, rl.dst = operand(r.Src, v6), operand(r.Dst, v6)
	rl.notDst = r.NotDst
	if r.Filter && r.ICMPIDMap && r.Type != ipnat.Rdr && !r.Type.IsRewrite() {
		// IPFilter's parser keeps only the source of a from/to map
		// rule with icmpidmap (printnat shows it in the short form):
		// the destination matches any address, negated or not.
		rl.dst = addrOperand{kind: ipnat.AddrNormal}
		rl.notDst = false
	}
	rl.orig, rl.newA = operand(r.Orig, v6), operand(r.New, v6)
	rl.icmpID = r.ICMPIDMap && r.Type != ipnat.Rdr && !r.Type.IsRewrite()
	rl.nsrc, rl.ndst = operand(r.NewSrc, v6), operand(r.NewDst, v6)
	if r.Type == ipnat.MapBlock && rl.orig.kind != ipnat.AddrNormal {
		return nil, fmt.Errorf("%d:%d: map-block needs an address/mask", r.Pos.Line, r.Pos.Col)
	}
	// Initial allocation state (ipf_nat_ruleaddrinit).
	rl.snip = firstAddr(rl.newA, v6)
	if r.Type.IsRewrite() {
		rl.snip = firstAddr(rl.nsrc, v6)
		rl.dnip = firstAddr(rl.ndst, v6)
	} else if r.Type == ipnat.Rdr && rl.newA.kind == ipnat.AddrSplit {
		rl.dnip = rl.newA.a
	}
	if r.Portmap || r.ICMPIDMap || r.Type.IsRewrite() {
		rl.spnext = r.SPMin
	}
	if r.Portmap && r.PortAuto {
		// IPFilter's parser gives "portmap … auto" the ports 1024-65535
		// (in_spmin): its next port is never 0 and never moves, so a
		// clash fails the session instead of moving to the next address.
		rl.spnext = mapBlockMinPort
	}
	rl.dpnext = r.DPMin
	// IPFilter's IPv6 NAT has neither map-block blocks nor automatic
	// port blocks (see newMap): no groups to compute.
	if !v6 && (r.Type == ipnat.MapBlock || (r.Portmap && r.PortAuto)) {
		rl.setGroupMap()
	}
	return rl, nil
}

// firstAddr is where a pool of new addresses starts: the start of a
// range, the first host of a subnet, or the address itself.
func firstAddr(o addrOperand, v6 bool) a128 {
	switch {
	case o.kind == ipnat.AddrRange:
		return o.a
	case o.kind == ipnat.AddrNormal && !o.m.allOnes(v6) && !o.m.isZero():
		return o.a.add(1)
	}
	return o.a
}

// setGroupMap computes ports per address (ppip) and addresses per new
// address (ippip) for map-block and "portmap … auto".
func (r *rule) setGroupMap() {
	omask, nmask := r.orig.m, r.newA.m
	if r.Filter {
		// A from/to rule's original block is its source (in_osrcmsk
		// comes from the "from" operand in IPFilter's parser).
		omask = r.src.m
	}
	switch {
	case omask == nmask:
		// ipf_nat_setgroupmap: one new address per old one and no ports
		// per address (in_ppip stays 0). A map-block then fails every
		// new session; "portmap … auto" keeps the source port.
		r.ippip, r.ppip = 1, 0
	case r.PortAuto:
		// IPFilter's arithmetic, in its field widths: in_ippip is a
		// u_short, so the inside block's host part counts at most 0xffff
		// addresses, and a quotient of 0xffff+1 wraps to 0 (then 1).
		ippip := uint16(min(omask.not(r.v6).lo, 0xffff))
		if !nmask.allOnes(r.v6) {
			if outside := uint32(nmask.not(r.v6).lo) + 1; outside != 0 {
				ippip = uint16(uint32(ippip) / outside)
			}
		}
		ippip++
		if ippip == 0 {
			ippip = 1
		}
		r.ippip = int(ippip)
		r.ppip = usablePorts / r.ippip
	default:
		r.ppip = r.SPMin
		if r.ppip == 0 {
			r.ppip = 1
		}
		r.ippip = usablePorts / r.ppip
	}
}

// IPFTestRandom returns IPFilter's user-mode ipf_random(): 0, 4, 3999,
// 4000, 48999, 49000, then a multiplicative sequence. Calls must share
// one instance, as they share one counter in ipftest.
func IPFTestRandom() func() uint32 {
	fixed := [...]uint32{0, 4, 3999, 4000, 48999, 49000}
	var calls uint32
	last := uint32(0xa5a5a5a5)
	var mu sync.Mutex
	return func() uint32 {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if int(calls) <= len(fixed) {
			return fixed[calls-1]
		}
		number := last
		last *= calls
		last++
		return number ^ last
	}
}

// roleNAT is the ippool role NAT rules look pools up in.
const roleNAT = ippool.RoleNAT

// Package qos is Sluice's compiled IPQoS configuration: Compile turns a
// parsed ipqos.conf into an immutable Ruleset, and Stats are the counters
// read back from a datapath. Both datapaths take the same Ruleset: the Go
// reference engine (internal/qos/engine) and the eBPF marker
// (internal/bpf/qosmark); neither depends on the other.
package qos

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"

	"sluice/internal/rules/ipqos"
)

// Addr128 is an IPv4 or IPv6 address as a big-endian 128-bit number, so
// range checks are two integer comparisons (IPv4 lives in Lo, Hi = 0).
type Addr128 struct{ Hi, Lo uint64 }

// Less reports a < b.
func (a Addr128) Less(b Addr128) bool { return a.Hi < b.Hi || a.Hi == b.Hi && a.Lo < b.Lo }

// AddrFrom converts a netip.Addr.
func AddrFrom(ip netip.Addr) Addr128 {
	if ip.Is4() {
		b := ip.As4()
		return Addr128{Lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := ip.As16()
	return Addr128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// Match flags of a Rule: which conditions it checks.
const (
	MatchSrc uint16 = 1 << iota
	MatchDst
	MatchSport
	MatchDport
	MatchProto
	MatchDSCP
	MatchMAC
)

// Rule is one expanded filter, flat so it can be copied into a BPF map.
type Rule struct {
	Flags          uint16
	Family         uint8 // 0 = any, 4, 6
	Proto          uint8
	SrcLo, SrcHi   Addr128
	DstLo, DstHi   Addr128
	SportLo        uint16
	SportHi        uint16
	DportLo        uint16
	DportHi        uint16
	DSCPLo, DSCPHi uint8
	MAC            [6]byte
	Priority       int    // ipqos.NoPriority sorts last
	Policy         uint32 // index into Adapter.Policies
	Filter         uint32 // index into Adapter.Filters
}

// Policy is a policy as applied on one adapter.
type Policy struct {
	Name     string
	DSCP     int // -1 = leave the DSCP alone
	VPR      int // -1 = no 802.1p priority
	Res, Max ipqos.Rate
	// Class is the HTB minor class number the policy's traffic goes to.
	Class uint16
}

// FilterRef is a filter as used by one policy on one adapter.
type FilterRef struct {
	Name   string
	Policy uint32
}

// Adapter is the compiled classifier of one interface. Rules are ordered
// by precedence: the first rule that matches a packet decides.
type Adapter struct {
	Name     string
	Policies []Policy
	Filters  []FilterRef
	Rules    []Rule
	// Speed is the declared line rate in bits/s (ipqos `speed`), 0 if
	// none: loaders use it, when set, for res/max percentages and the
	// HTB root class instead of the speed the interface reports.
	Speed uint64
}

// Ruleset is a compiled configuration. It is immutable once Compile
// returns; loaders swap whole Rulesets.
type Ruleset struct {
	Config   *ipqos.Config
	Adapters []*Adapter
}

// Adapter returns the adapter of that name, or nil.
func (r *Ruleset) Adapter(name string) *Adapter {
	for _, a := range r.Adapters {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// HTB handles: the root qdisc is HTBMajor:0 (a distinctive major number
// marks it as Sluice's), RootClass is the class every other class borrows
// from, FirstClass is an adapter's first policy and DefaultClass takes
// unmatched traffic.
const (
	HTBMajor     = 0x5351
	RootClass    = 1
	FirstClass   = 0x10
	DefaultClass = 0xffff
	// MaxRules bounds the rules of one adapter; the BPF program scans at
	// most this many.
	MaxRules = 256
)

// Compile expands the configuration's filters into per-adapter rules.
// Precedence: a lower filter priority wins; filters without a priority
// come after all numbered ones; ties go to the earlier policy on the
// adapter, then the earlier filter in the policy (Sluice's choice).
func Compile(cfg *ipqos.Config) (*Ruleset, error) {
	rs := &Ruleset{Config: cfg}
	for _, ca := range cfg.Adapters {
		a := &Adapter{Name: ca.Name, Speed: ca.Speed}
		for pi, u := range ca.Uses {
			cp := cfg.Policy(u.Name)
			if cp == nil {
				return nil, fmt.Errorf("adapter %s: unknown policy %s", ca.Name, u.Name)
			}
			a.Policies = append(a.Policies, Policy{
				Name: cp.Name, DSCP: cp.DSCP, VPR: cp.VPR, Res: cp.Res, Max: cp.Max,
				Class: uint16(FirstClass + pi),
			})
			for _, fu := range cp.Uses {
				cf := cfg.Filter(fu.Name)
				if cf == nil {
					return nil, fmt.Errorf("policy %s: unknown filter %s", cp.Name, fu.Name)
				}
				fi := uint32(len(a.Filters))
				a.Filters = append(a.Filters, FilterRef{Name: cf.Name, Policy: uint32(pi)})
				a.Rules = append(a.Rules, expand(cf, uint32(pi), fi)...)
			}
		}
		sort.SliceStable(a.Rules, func(i, j int) bool {
			return prioKey(a.Rules[i].Priority) < prioKey(a.Rules[j].Priority)
		})
		if len(a.Rules) > MaxRules {
			return nil, fmt.Errorf("adapter %s: %d rules after expansion, at most %d are supported", a.Name, len(a.Rules), MaxRules)
		}
		rs.Adapters = append(rs.Adapters, a)
	}
	return rs, nil
}

func prioKey(p int) int {
	if p == ipqos.NoPriority {
		return 1 << 20
	}
	return p
}

// expand turns a filter into one rule, or two when it has an
// either-direction address or port (the source copy first).
func expand(f *ipqos.Filter, policy, filter uint32) []Rule {
	base := Rule{Priority: f.Priority, Policy: policy, Filter: filter}
	switch f.Family() {
	case 4:
		base.Family = 4
	case 6:
		base.Family = 6
	}
	if f.Protocol >= 0 {
		base.Flags |= MatchProto
		base.Proto = uint8(f.Protocol)
	}
	if f.DSCP.Set {
		base.Flags |= MatchDSCP
		base.DSCPLo, base.DSCPHi = uint8(f.DSCP.Lo), uint8(f.DSCP.Hi)
	}
	if f.HasMAC {
		base.Flags |= MatchMAC
		base.MAC = f.DstMAC
	}
	either := f.Addr[ipqos.Either].IsSet() || f.Port[ipqos.Either].Set
	if !either {
		r := base
		if setSide(&r, f, ipqos.Src, ipqos.Src) && setSide(&r, f, ipqos.Dst, ipqos.Dst) {
			return []Rule{r}
		}
		return nil
	}
	var out []Rule
	for _, side := range []ipqos.Side{ipqos.Src, ipqos.Dst} {
		r := base
		other := ipqos.Dst
		if side == ipqos.Dst {
			other = ipqos.Src
		}
		// The either-direction condition lands on `side`, intersected with
		// any explicit condition on that side; an empty intersection means
		// this copy can never match and is dropped.
		if setSide(&r, f, side, side) && setSide(&r, f, other, other) && setSide(&r, f, side, ipqos.Either) {
			out = append(out, r)
		}
	}
	return out
}

// setSide adds filter f's conditions of side `from` to rule side `to`,
// intersecting with what is there; it returns false if the result is empty.
func setSide(r *Rule, f *ipqos.Filter, to, from ipqos.Side) bool {
	if a := f.Addr[from]; a.IsSet() {
		lo, hi := AddrFrom(a.Lo), AddrFrom(a.Hi)
		flag, plo, phi := MatchSrc, &r.SrcLo, &r.SrcHi
		if to == ipqos.Dst {
			flag, plo, phi = MatchDst, &r.DstLo, &r.DstHi
		}
		if r.Flags&flag != 0 {
			if lo.Less(*plo) {
				lo = *plo
			}
			if phi.Less(hi) {
				hi = *phi
			}
			if hi.Less(lo) {
				return false
			}
		}
		r.Flags |= flag
		*plo, *phi = lo, hi
	}
	if p := f.Port[from]; p.Set {
		lo, hi := p.Lo, p.Hi
		flag, plo, phi := MatchSport, &r.SportLo, &r.SportHi
		if to == ipqos.Dst {
			flag, plo, phi = MatchDport, &r.DportLo, &r.DportHi
		}
		if r.Flags&flag != 0 {
			lo, hi = max(lo, *plo), min(hi, *phi)
			if lo > hi {
				return false
			}
		}
		r.Flags |= flag
		*plo, *phi = lo, hi
	}
	return true
}

// Priority is the skb->priority (an HTB class id, HTBMajor:Class) the
// kernel path sets for a policy that shapes or sets an 802.1p priority; 0
// otherwise. HTB reads it as the class; a VLAN device's egress QoS map
// turns it into the 802.1p priority.
func (p *Policy) Priority() uint32 {
	if p.VPR < 0 && !p.Shapes() {
		return 0
	}
	return HTBMajor<<16 | uint32(p.Class)
}

// Shapes reports whether the policy has a bandwidth reservation or cap.
func (p *Policy) Shapes() bool { return p.Res.Set || p.Max.Set }

// Stats is a snapshot of counters, shaped like `ipqosadmin -showstats`.
type Stats struct {
	Adapter  string
	Policies []PolicyStats
}

// PolicyStats are one policy's counters and those of its filters.
type PolicyStats struct {
	Name                                         string
	Packets, Bytes, DroppedPackets, DroppedBytes uint64
	Filters                                      []FilterStats
}

// FilterStats are one filter's counters.
type FilterStats struct {
	Name           string
	Packets, Bytes uint64
}

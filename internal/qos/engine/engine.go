// Package engine is the Go reference datapath of IPQoS: it classifies and
// marks outbound packets with a compiled qos.Ruleset and keeps the
// per-policy and per-filter counters; RunTest is ipqosadmin -test. The
// eBPF marker (internal/bpf/qosmark) is tested against it.
package engine

import (
	"fmt"
	"sync/atomic"

	"sluice/internal/qos"
)

// Action is what the engine did with a packet.
type Action uint8

// Actions.
const (
	Unmatched Action = iota // no filter matched (or not an IP packet): untouched
	Matched                 // a policy matched; its DSCP was already right or it sets none
	Marked                  // a policy matched and the DSCP was rewritten
)

func (a Action) String() string {
	switch a {
	case Unmatched:
		return "unmatched"
	case Matched:
		return "matched"
	case Marked:
		return "marked"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Result describes the classification of one packet. Policy and Filter
// index the adapter's Policies and Filters, -1 when unmatched.
type Result struct {
	Action         Action
	Policy, Filter int32
	OldTC, NewTC   uint8  // IPv4 TOS / IPv6 traffic class before and after
	Priority       uint32 // skb->priority the kernel path would set, 0 = none
}

// match returns the index of the first rule matching the packet, or -1.
func match(a *qos.Adapter, f *flow, dstMAC []byte) int {
	for i := range a.Rules {
		r := &a.Rules[i]
		if r.Family != 0 && r.Family != f.family {
			continue
		}
		if r.Flags&qos.MatchProto != 0 && r.Proto != f.proto {
			continue
		}
		if r.Flags&qos.MatchSrc != 0 && (f.src.Less(r.SrcLo) || r.SrcHi.Less(f.src)) {
			continue
		}
		if r.Flags&qos.MatchDst != 0 && (f.dst.Less(r.DstLo) || r.DstHi.Less(f.dst)) {
			continue
		}
		if r.Flags&(qos.MatchSport|qos.MatchDport) != 0 {
			if !f.hasPorts {
				continue
			}
			if r.Flags&qos.MatchSport != 0 && (f.sport < r.SportLo || f.sport > r.SportHi) {
				continue
			}
			if r.Flags&qos.MatchDport != 0 && (f.dport < r.DportLo || f.dport > r.DportHi) {
				continue
			}
		}
		if r.Flags&qos.MatchDSCP != 0 {
			if d := f.tc >> 2; d < r.DSCPLo || d > r.DSCPHi {
				continue
			}
		}
		if r.Flags&qos.MatchMAC != 0 && (len(dstMAC) < 6 || [6]byte(dstMAC[:6]) != r.MAC) {
			continue
		}
		return i
	}
	return -1
}

// PolicyCounters count one policy on one adapter. Dropped counts come from
// the shaper (the kernel qdisc); the Go engine does not shape.
type PolicyCounters struct {
	Packets, Bytes, DroppedPackets, DroppedBytes atomic.Uint64
}

// FilterCounters count one filter of one policy on one adapter.
type FilterCounters struct {
	Packets, Bytes atomic.Uint64
}

type adapterState struct {
	a        *qos.Adapter
	policies []PolicyCounters
	filters  []FilterCounters
}

type engineState struct {
	rs       *qos.Ruleset
	adapters []adapterState
}

// Engine is the Go reference datapath. Load swaps the ruleset atomically
// (and starts fresh counters); Process may run concurrently with Load.
type Engine struct {
	cur atomic.Pointer[engineState]
}

// NewEngine returns an engine with the given ruleset (nil = none loaded).
func NewEngine(rs *qos.Ruleset) *Engine {
	e := &Engine{}
	e.Load(rs)
	return e
}

// Load installs a ruleset; nil unloads.
func (e *Engine) Load(rs *qos.Ruleset) {
	if rs == nil {
		e.cur.Store(nil)
		return
	}
	st := &engineState{rs: rs, adapters: make([]adapterState, len(rs.Adapters))}
	for i, a := range rs.Adapters {
		st.adapters[i] = adapterState{
			a:        a,
			policies: make([]PolicyCounters, len(a.Policies)),
			filters:  make([]FilterCounters, len(a.Filters)),
		}
	}
	e.cur.Store(st)
}

// AdapterIndex returns the index of the named adapter, or -1.
func (e *Engine) AdapterIndex(name string) int {
	st := e.cur.Load()
	if st == nil {
		return -1
	}
	for i, a := range st.rs.Adapters {
		if a.Name == name {
			return i
		}
	}
	return -1
}

// Process classifies an outbound IP packet (l3 starts at the IP header)
// leaving adapter number ad, rewrites its DSCP in place if the matching
// policy says so, and counts it. dstMAC may be nil when the link-layer
// header is unknown; filters on dstphysaddr then do not match.
func (e *Engine) Process(ad int, l3, dstMAC []byte) Result {
	res := Result{Policy: -1, Filter: -1}
	st := e.cur.Load()
	if st == nil || ad < 0 || ad >= len(st.adapters) {
		return res
	}
	var f flow
	if !parseFlow(l3, &f) {
		return res
	}
	as := &st.adapters[ad]
	res.OldTC, res.NewTC = f.tc, f.tc
	i := match(as.a, &f, dstMAC)
	if i < 0 {
		return res
	}
	r := &as.a.Rules[i]
	p := &as.a.Policies[r.Policy]
	res.Action, res.Policy, res.Filter = Matched, int32(r.Policy), int32(r.Filter)
	res.Priority = p.Priority()
	if p.DSCP >= 0 {
		SetDSCP(l3, uint8(p.DSCP))
		res.NewTC = uint8(p.DSCP)<<2 | f.tc&3
		if res.NewTC != res.OldTC {
			res.Action = Marked
		}
	}
	n := uint64(len(l3))
	as.policies[r.Policy].Packets.Add(1)
	as.policies[r.Policy].Bytes.Add(n)
	as.filters[r.Filter].Packets.Add(1)
	as.filters[r.Filter].Bytes.Add(n)
	return res
}

// Stats snapshots the counters of every adapter.
func (e *Engine) Stats() []qos.Stats {
	st := e.cur.Load()
	if st == nil {
		return nil
	}
	out := make([]qos.Stats, len(st.adapters))
	for i := range st.adapters {
		as := &st.adapters[i]
		s := qos.Stats{Adapter: as.a.Name}
		for pi, p := range as.a.Policies {
			pc := &as.policies[pi]
			ps := qos.PolicyStats{Name: p.Name, Packets: pc.Packets.Load(), Bytes: pc.Bytes.Load(),
				DroppedPackets: pc.DroppedPackets.Load(), DroppedBytes: pc.DroppedBytes.Load()}
			for fi, f := range as.a.Filters {
				if int(f.Policy) == pi {
					ps.Filters = append(ps.Filters, qos.FilterStats{Name: f.Name, Packets: as.filters[fi].Packets.Load(), Bytes: as.filters[fi].Bytes.Load()})
				}
			}
			s.Policies = append(s.Policies, ps)
		}
		out[i] = s
	}
	return out
}

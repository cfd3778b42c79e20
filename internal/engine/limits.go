package engine

import (
	"net/netip"
	"sync"

	"sluice/internal/packet"
	"sluice/internal/ruleset"
)

// connLimits is HP-UX's DCA connection limiting, `keep limit N
// [cumulative]` (ipf-reference §7): a quick inbound TCP rule admits at
// most N open connections per source address, or N in total with
// cumulative. A connection opens with a SYN and closes with a FIN or RST
// from either end. [HP; HP documents only the behaviour, so this is an
// inferred model.]
type connLimits struct {
	mu    sync.Mutex // guards the maps
	open  map[limitKey]int
	conns map[connKey]limitKey
}

type limitKey struct {
	rule uint32
	src  netip.Addr // invalid for cumulative limits
}

type connKey struct {
	rule     uint32
	src, dst netip.Addr
	sp, dp   uint16
}

// admit reports whether the packet may pass rule r's connection limit,
// and keeps the connection table up to date.
func (l *connLimits) admit(r *ruleset.Rule, fi *packet.Info) bool {
	if r.KeepLimit == 0 || fi.Proto != packet.ProtoTCP {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = make(map[limitKey]int)
		l.conns = make(map[connKey]limitKey)
	}
	ck := connKey{rule: r.ID, src: fi.Src, dst: fi.Dst, sp: fi.SrcPort, dp: fi.DstPort}
	switch {
	case fi.TCPFlags&(packet.TCPFlagSyn|packet.TCPFlagAck) == packet.TCPFlagSyn:
		if _, ok := l.conns[ck]; ok {
			return true
		}
		lk := limitKey{rule: r.ID}
		if !r.LimitCumulative {
			lk.src = fi.Src
		}
		if l.open[lk] >= int(r.KeepLimit) {
			return false
		}
		l.open[lk]++
		l.conns[ck] = lk
	case fi.TCPFlags&(packet.TCPFlagFin|packet.TCPFlagRst) != 0:
		if lk, ok := l.conns[ck]; ok {
			delete(l.conns, ck)
			if l.open[lk]--; l.open[lk] <= 0 {
				delete(l.open, lk)
			}
		}
	}
	return true
}

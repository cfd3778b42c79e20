package engine

import (
	"net/netip"
	"sync"

	"sluice/internal/packet"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// connLimits is HP-UX's DCA connection limiting, `keep limit N
// [cumulative]` (ipf-reference §7): a quick inbound TCP rule admits at
// most N open connections per source address, or N in total with
// cumulative. A connection opens with a SYN (a retransmitted SYN is the
// same connection) and closes with a FIN or RST from the client, or when
// it expires: after tcp_syn_sent while only its SYN was seen, after
// tcp_idle_timeout without a packet once it is open. A closed or expired
// connection gives its quota back. [HP; HP documents only the behaviour,
// so this is an inferred model; the kernel datapath's lib/dca.h is the
// same one.]
type connLimits struct {
	mu    sync.Mutex // guards the maps
	open  map[limitKey]int
	conns map[connKey]dcaConn
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

type dcaConn struct {
	limit  limitKey
	expire uint32 // ticks
}

// admit reports whether the packet may pass rule r's connection limit,
// and keeps the connection table up to date. now is the engine's clock,
// to the timeouts of cfg.
func (l *connLimits) admit(r *ruleset.Rule, fi *packet.Info, now uint32, cfg *state.Config) bool {
	if r.KeepLimit == 0 || fi.Proto != packet.ProtoTCP {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = make(map[limitKey]int)
		l.conns = make(map[connKey]dcaConn)
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
			// quotas of connections that expired since the last
			// Expire come back before the refusal
			l.expireLocked(now)
			if l.open[lk] >= int(r.KeepLimit) {
				return false
			}
		}
		l.open[lk]++
		l.conns[ck] = dcaConn{limit: lk, expire: now + cfg.TCPTimeout[state.TCPSynSent]}
	case fi.TCPFlags&(packet.TCPFlagFin|packet.TCPFlagRst) != 0:
		if c, ok := l.conns[ck]; ok {
			l.closeLocked(ck, c)
		}
	default:
		if c, ok := l.conns[ck]; ok {
			c.expire = now + cfg.TCPTimeout[state.TCPEstablished]
			l.conns[ck] = c
		}
	}
	return true
}

func (l *connLimits) closeLocked(ck connKey, c dcaConn) {
	delete(l.conns, ck)
	if l.open[c.limit]--; l.open[c.limit] <= 0 {
		delete(l.open, c.limit)
	}
}

// expire closes the connections whose time ran out and returns how many.
func (l *connLimits) expire(now uint32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expireLocked(now)
}

func (l *connLimits) expireLocked(now uint32) int {
	n := 0
	for ck, c := range l.conns {
		if int32(now-c.expire) >= 0 {
			l.closeLocked(ck, c)
			n++
		}
	}
	return n
}

// open returns the connections open under the limit of rule id from src
// (any invalid src: a cumulative limit).
func (l *connLimits) count(id uint32, src netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[limitKey{rule: id, src: src}]
}

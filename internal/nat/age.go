package nat

import (
	"sluice/internal/packet"
)

// Session lifetimes in ticks (IPFilter defaults, ipf-reference §3.5).
const (
	tcpTimeout     = 480    // tcp_timeout: before the handshake completes
	tcpIdleTimeout = 864000 // tcp_idle_timeout: established
	tcpHalfClosed  = 14400  // tcp_half_closed: one FIN seen
	tcpTimeWait    = 480    // tcp_time_wait: both FINs seen
	tcpLastAck     = 60     // tcp_last_ack: after a RST (NAT's CLOSED)
	natUDPAge      = 1200   // DEF_NAT_AGE, both directions
	natICMPFwd     = 6      // ICMP queries, forward
	natICMPRev     = 1200   // ICMP replies
	natIPAge       = 120    // other protocols
	minTCPAge      = 6      // every TCP state lasts at least 3 s
)

// touch refreshes the session's lifetime after a packet in direction w
// (0 forward, 1 reply).
func (n *NAT) touch(s *session, v *view, w int) {
	if n.cfg.Clock == nil {
		return
	}
	if s.proto == 6 && v.l4 >= 0 && v.l4+14 <= len(v.b) {
		s.tcpSeen[w] |= v.b[v.l4+13]
	}
	s.expire = n.cfg.Clock.Ticks() + s.lifetime(w)
}

func (s *session) lifetime(w int) uint32 {
	if a := s.rule.Age[w]; a != 0 {
		return uint32(a) * 2
	}
	switch s.proto {
	case 6:
		f0, f1 := s.tcpSeen[0], s.tcpSeen[1]
		var t uint32
		switch {
		case (f0|f1)&packet.TCPFlagRst != 0:
			t = tcpLastAck
		case f0&packet.TCPFlagFin != 0 && f1&packet.TCPFlagFin != 0:
			t = tcpTimeWait
		case (f0|f1)&packet.TCPFlagFin != 0:
			t = tcpHalfClosed
		case f0&packet.TCPFlagAck != 0 && f1&packet.TCPFlagAck != 0:
			t = tcpIdleTimeout
		default:
			t = tcpTimeout
		}
		if t < minTCPAge {
			t = minTCPAge
		}
		return t
	case 17:
		return natUDPAge
	case 1, 58:
		if s.flags&flagICMPQuery != 0 && w == 0 {
			return natICMPFwd
		}
		return natICMPRev
	}
	return natIPAge
}

// Expire removes the sessions whose lifetime has passed and returns how
// many it removed. It runs by itself at most once per tick when a new
// session is needed; a datapath may also call it from a timer.
func (n *NAT) Expire() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.expireLocked()
}

func (n *NAT) expireLocked() int {
	if n.cfg.Clock == nil {
		return 0
	}
	now := n.cfg.Clock.Ticks()
	n.lastAge = now
	kept := n.active[:0]
	removed := 0
	for _, s := range n.active {
		if int32(s.expire-now) > 0 {
			kept = append(kept, s)
			continue
		}
		n.unlink(s)
		removed++
	}
	clear(n.active[len(kept):])
	n.active = kept
	return removed
}

// unlink drops a session's table keys and the references it holds.
func (n *NAT) unlink(s *session) {
	s.gone = true
	if s.wildSP {
		for i, w := range n.wild {
			if w == s {
				n.wild = append(n.wild[:i], n.wild[i+1:]...)
				break
			}
		}
	}
	n.unhash(s)
	if s.hm != nil {
		n.hostmapDel(s.hm)
		s.hm = nil
	}
	if s.dstList != nil {
		s.dstList.Release(s.dstIdx)
		s.dstList = nil
	}
	if s.hasFrags {
		for k, fs := range n.frags {
			if fs.s == s {
				delete(n.frags, k)
			}
		}
	}
}

package pool

import (
	"crypto/md5"
	"encoding/binary"
	"net/netip"
	"sync"

	"sluice/internal/rules/ippool"
)

// DstList is a destination list: each Select picks one member according
// to the list's policy, as IPFilter's ipf_dstlist_select does.
type DstList struct {
	Def *ippool.Table
	rnd func() uint32
	// seed feeds the hash policies; IPFilter's user-mode build starts
	// it at 0, which the conformance kit's expected output relies on.
	seed uint32

	mu       sync.Mutex // guards selected and states
	selected int
	states   []int // connections per member (weighted connection)
}

// NewDstList builds a destination list. rnd serves the random policy;
// nil selects a fixed sequence (0, 1, 2, …).
func NewDstList(def *ippool.Table, rnd func() uint32) *DstList {
	if rnd == nil {
		var n uint32
		rnd = func() uint32 { n++; return n - 1 }
	}
	return &DstList{Def: def, rnd: rnd, selected: -1, states: make([]int, len(def.Dests))}
}

// Len returns the number of members.
func (d *DstList) Len() int { return len(d.Def.Dests) }

// Select picks a member for a flow from src to dst and counts a
// connection on it. ok is false for an empty list.
func (d *DstList) Select(src, dst netip.Addr) (dest ippool.Dest, index int, ok bool) {
	n := len(d.Def.Dests)
	if n == 0 {
		return ippool.Dest{}, -1, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var sel int
	switch d.Def.Policy {
	case ippool.PolicyRandom:
		sel = int(d.rnd() % uint32(n))
	case ippool.PolicyHash, ippool.PolicySrcHash, ippool.PolicyDstHash:
		var buf [36]byte
		binary.LittleEndian.PutUint32(buf[:4], d.seed)
		l := 4
		if d.Def.Policy != ippool.PolicyDstHash {
			b, _ := addrBytes(src)
			copy(buf[l:], b[:])
			l += 16
		}
		if d.Def.Policy != ippool.PolicySrcHash {
			b, _ := addrBytes(dst)
			copy(buf[l:], b[:])
			l += 16
		}
		sum := md5.Sum(buf[:l])
		sel = int(binary.BigEndian.Uint32(sum[:4]) % uint32(n))
	case ippool.PolicyWeighted:
		sel = d.leastConnections()
	default: // round-robin, and lists without a policy
		sel = (d.selected + 1) % n
	}
	d.selected = sel
	d.states[sel]++
	return d.Def.Dests[sel], sel, true
}

// leastConnections walks from the member after the last selected one and
// takes the first idle member, else the one with the fewest connections.
func (d *DstList) leastConnections() int {
	n := len(d.states)
	if d.selected < 0 {
		return 0
	}
	sel, best := d.selected, int(^uint(0)>>1)
	for i := (d.selected + 1) % n; i != d.selected; i = (i + 1) % n {
		if d.states[i] == 0 {
			return i
		}
		if d.states[i] < best {
			sel, best = i, d.states[i]
		}
	}
	return sel
}

// Release ends a connection counted by Select on member index.
func (d *DstList) Release(index int) {
	d.mu.Lock()
	if index >= 0 && index < len(d.states) && d.states[index] > 0 {
		d.states[index]--
	}
	d.mu.Unlock()
}

// Package frag is IPFilter's fragment cache (ipf-reference §3.8): the
// verdict of a first fragment (or of a state match on one) is remembered
// under the fragment's identity so that later fragments, which carry no
// ports, get the same verdict.
//
// A Cache is safe for concurrent use; its mutex guards every entry.
package frag

import (
	"net/netip"
	"sync"
)

// Clock gives the current time in IPFilter ticks (0.5 s).
type Clock interface {
	Ticks() uint32
}

// Key identifies the fragments of one datagram.
type Key struct {
	V      uint8
	Proto  uint8
	ID     uint32
	Src    netip.Addr
	Dst    netip.Addr
	OptMsk uint32
	SecMsk uint16
	Auth   uint16
	IfName string
}

// Entry is one cached datagram.
type Entry struct {
	Pass     uint32 // the flags of the rule the first fragment matched
	Rule     any    // that rule, opaque to this package
	RuleNum  int    // the rule's number as the caller counts them
	Pkts     uint64
	Bytes    uint64
	Expire   uint32
	seen0    bool
	firstEnd int // end of the first fragment, in 8-byte units
	nextOff  int // where the next in-order fragment starts, 8-byte units
}

// Stats counts cache events (ipfstat -f).
type Stats struct {
	New, Expired, Hits, Retrans, Exists, NoMem uint64
}

// Cache is the fragment cache.
type Cache struct {
	mu    sync.Mutex
	m     map[Key]*Entry
	clock Clock
	// Max is frag_size, the most entries held; TTL is frag_ttl in ticks.
	max   int
	ttl   uint32
	stats Stats
}

// IPFilter's defaults: frag_size (entries) and frag_ttl (ticks of 0.5 s).
// The Go engine and the kernel datapath both start from them.
const (
	DefaultSize = 257
	DefaultTTL  = 120
)

// FlagStrict is FR_FRSTRICT: `keep frags (strict)`.
const FlagStrict = 0x100000

// FlagKeepState is FR_KEEPSTATE: the entry was made for a stateful flow.
const FlagKeepState = 0x400

// New returns an empty cache holding at most max entries for ttl ticks.
func New(max int, ttl uint32, clock Clock) *Cache {
	return &Cache{m: make(map[Key]*Entry), max: max, ttl: ttl, clock: clock}
}

// SetLimits changes frag_size and frag_ttl.
func (c *Cache) SetLimits(max int, ttl uint32) {
	c.mu.Lock()
	c.max, c.ttl = max, ttl
	c.mu.Unlock()
}

// Add records a fragment that got verdict pass from rule, number ruleNum
// (ipf_frag_new). off is the fragment offset in bytes and dlen its payload
// length; end is where a first fragment ends for the overlap test (bytes,
// rounded up to 8-byte units: IPFilter counts a TCP first fragment as at
// least 20 bytes long, see the engine's firstFragEnd). It returns false if
// no entry was made.
func (c *Cache) Add(k *Key, pass uint32, rule any, ruleNum, off, dlen, plen, end int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pass&FlagStrict != 0 && off != 0 {
		return false
	}
	now := c.clock.Ticks()
	if e, ok := c.m[*k]; ok {
		if int32(now-e.Expire) < 0 {
			c.stats.Exists++
			return false
		}
		delete(c.m, *k)
	}
	if len(c.m) >= c.max {
		c.expireLocked(now)
		if len(c.m) >= c.max {
			c.stats.NoMem++
			return false
		}
	}
	o := off >> 3
	e := &Entry{Pass: pass, Rule: rule, RuleNum: ruleNum, Pkts: 1, Bytes: uint64(plen), Expire: now + c.ttl,
		nextOff: o + dlen>>3}
	if o == 0 {
		e.seen0 = true
		e.firstEnd = (end + 7) >> 3
	}
	c.m[*k] = e
	c.stats.New++
	return true
}

// Lookup finds the entry for a fragment (ipf_frag_lookup). bad is set when
// a fragment overlaps the first fragment already seen: the caller marks
// the packet bad (reason bad-frag). An overlapping IPv6 fragment of an
// entry made without keep state finds no entry instead. end is as for Add.
func (c *Cache) Lookup(k *Key, off, dlen, plen, end int) (e *Entry, bad bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e = c.m[*k]
	if e == nil {
		return nil, false
	}
	now := c.clock.Ticks()
	if int32(now-e.Expire) >= 0 {
		delete(c.m, *k)
		c.stats.Expired++
		return nil, false
	}
	o := off >> 3
	if e.seen0 {
		if o == 0 {
			c.stats.Retrans++
			return nil, false
		}
		if e.firstEnd != 0 && o < e.firstEnd {
			// IPFilter marks an overlapping fragment bad, except an
			// IPv6 one of a plain `keep frags` datagram, which is
			// only not found: the rules decide.
			return nil, k.V == 4 || e.Pass&FlagKeepState != 0
		}
	} else if o == 0 {
		e.seen0 = true
		e.firstEnd = (end + 7) >> 3
	}
	if e.Pass&FlagStrict != 0 && o != e.nextOff {
		return nil, false
	}
	if o == e.nextOff {
		e.nextOff = o + dlen>>3
	}
	e.Pkts++
	e.Bytes += uint64(plen)
	c.stats.Hits++
	return e, false
}

func (c *Cache) expireLocked(now uint32) {
	for k, e := range c.m {
		if int32(now-e.Expire) >= 0 {
			delete(c.m, k)
			c.stats.Expired++
		}
	}
}

// Expire drops entries whose time has run out.
func (c *Cache) Expire() {
	c.mu.Lock()
	c.expireLocked(c.clock.Ticks())
	c.mu.Unlock()
}

// Len returns the number of entries.
func (c *Cache) Len() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.m) }

// Stats returns a copy of the counters.
func (c *Cache) Stats() Stats { c.mu.Lock(); defer c.mu.Unlock(); return c.stats }

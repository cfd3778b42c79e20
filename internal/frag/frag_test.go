package frag

import (
	"net/netip"
	"testing"
)

type clock struct{ t uint32 }

func (c *clock) Ticks() uint32 { return c.t }

func key(id uint32) *Key {
	return &Key{V: 6, Proto: 6, ID: id, Src: netip.MustParseAddr("fe80::1"), Dst: netip.MustParseAddr("fe80::2"), IfName: "nic0"}
}

// TestOverlap follows ipv6_4's third case: a first fragment of 48 bytes,
// a fragment at 48 (in order), and one at 8 that overlaps the first.
func TestOverlap(t *testing.T) {
	c := New(257, 120, &clock{})
	if !c.Add(key(16), 2, "r", -1, 0, 48, 96, 48) {
		t.Fatal("Add failed")
	}
	if e, bad := c.Lookup(key(16), 48, 8, 56, 8); e == nil || bad {
		t.Errorf("in-order fragment: got %v bad=%v, want hit", e, bad)
	}
	if e, bad := c.Lookup(key(16), 8, 40, 88, 40); e != nil || bad {
		t.Errorf("overlapping fragment of a keep frags entry: got %v bad=%v, want miss", e, bad)
	}
	if e, _ := c.Lookup(key(16), 0, 48, 96, 48); e != nil {
		t.Errorf("retransmitted first fragment matched, want miss")
	}
	if e, _ := c.Lookup(key(17), 48, 8, 56, 8); e != nil {
		t.Errorf("other datagram matched")
	}
}

// TestOverlapStateful: an overlapping fragment of a datagram whose entry
// a stateful flow made, or any overlapping IPv4 fragment, is bad.
func TestOverlapStateful(t *testing.T) {
	c := New(257, 120, &clock{})
	if !c.Add(key(16), FlagKeepState, "r", -1, 0, 48, 96, 48) {
		t.Fatal("Add failed")
	}
	if e, bad := c.Lookup(key(16), 8, 40, 88, 40); e != nil || !bad {
		t.Errorf("overlapping fragment of a stateful flow: got %v bad=%v, want bad", e, bad)
	}
	k4 := &Key{V: 4, Proto: 17, ID: 7, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), IfName: "nic0"}
	if !c.Add(k4, 2, "r", -1, 0, 48, 68, 48) {
		t.Fatal("Add failed")
	}
	if e, bad := c.Lookup(k4, 16, 40, 60, 40); e != nil || !bad {
		t.Errorf("overlapping IPv4 fragment: got %v bad=%v, want bad", e, bad)
	}
}

func TestStrictAndExpiry(t *testing.T) {
	clk := &clock{}
	c := New(2, 10, clk)
	if c.Add(key(1), FlagStrict, nil, -1, 8, 8, 8, 8) {
		t.Error("strict entry created from a non-first fragment")
	}
	c.Add(key(1), FlagStrict|2, nil, -1, 0, 16, 16, 16)
	if e, _ := c.Lookup(key(1), 24, 8, 8, 8); e != nil {
		t.Error("strict: out-of-order fragment matched")
	}
	if e, _ := c.Lookup(key(1), 16, 8, 8, 8); e == nil {
		t.Error("strict: in-order fragment missed")
	}
	c.Add(key(2), 2, nil, -1, 0, 8, 8, 8)
	if c.Add(key(3), 2, nil, -1, 0, 8, 8, 8) {
		t.Error("cache over frag_size accepted an entry")
	}
	clk.t = 10
	if e, _ := c.Lookup(key(2), 8, 8, 8, 8); e != nil {
		t.Error("expired entry matched")
	}
	if !c.Add(key(3), 2, nil, -1, 0, 8, 8, 8) {
		t.Error("no room after expiry")
	}
}

func TestLookupAllocs(t *testing.T) {
	c := New(257, 120, &clock{})
	c.Add(key(5), 2, nil, -1, 0, 1448, 1500, 1448)
	k := key(5)
	off := 1448
	allocs := testing.AllocsPerRun(100, func() {
		c.Lookup(k, off, 8, 60, 8)
		off += 8
	})
	if allocs != 0 {
		t.Errorf("Lookup allocates %v, want 0", allocs)
	}
}

// TestFirstEnd: the end a first fragment gives the overlap test is the
// caller's (an IPv4 TCP first fragment of 16 bytes ends at 24), rounded up
// to 8-byte units, and is used whether the first fragment made the entry
// or arrived after a later one.
func TestFirstEnd(t *testing.T) {
	c := New(257, 120, &clock{})
	k := &Key{V: 4, Proto: 6, ID: 9, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), IfName: "nic0"}
	if !c.Add(k, 2, "r", -1, 0, 16, 36, 20) {
		t.Fatal("Add failed")
	}
	if e, bad := c.Lookup(k, 16, 8, 28, 8); e != nil || !bad {
		t.Errorf("fragment at 16 behind a first fragment ending at 24: got %v bad=%v, want bad", e, bad)
	}
	if e, bad := c.Lookup(k, 24, 8, 28, 8); e == nil || bad {
		t.Errorf("fragment at 24: got %v bad=%v, want a hit", e, bad)
	}
	k.ID = 10
	if !c.Add(k, 2, "r", -1, 32, 8, 28, 8) {
		t.Fatal("Add of a later fragment failed")
	}
	if e, _ := c.Lookup(k, 0, 16, 36, 20); e == nil {
		t.Fatal("first fragment after a later one: no hit")
	}
	if e, bad := c.Lookup(k, 16, 8, 28, 8); e != nil || !bad {
		t.Errorf("fragment at 16 after the late first fragment: got %v bad=%v, want bad", e, bad)
	}
}

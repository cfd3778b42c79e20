package bpf

import (
	"testing"
	"time"

	"sluice/internal/frag"
)

// TestFragCache checks the typed count of the fragment cache that
// ipfctl.ReadStatus (ipfstat, the exporter) reports: a first fragment
// passed by a rule makes one live entry, two datagrams two, and moving
// the datapath's clock past frag_ttl leaves them in the map but not live.
func TestFragCache(t *testing.T) {
	h := newHarness(t)
	h.load("pass in proto udp from any to any port = 53 keep frags\n")
	if live, capacity, err := h.d.FragCache(); err != nil || live != 0 || capacity < 1 {
		t.Fatalf("empty cache: live %d capacity %d (%v), want 0 and > 0", live, capacity, err)
	}
	first := testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, sport: 999, dport: 53, moreFrags: true, payload: 24, id: 4242}
	h.expect(false, first, "pass")
	if live, _, err := h.d.FragCache(); err != nil || live != 1 {
		t.Fatalf("after a first fragment: live %d (%v), want 1", live, err)
	}
	first.id = 4243
	h.expect(false, first, "pass")
	live, capacity, err := h.d.FragCache()
	if err != nil || live != 2 {
		t.Fatalf("after two datagrams' first fragments: live %d (%v), want 2", live, err)
	}
	if capacity != frag.DefaultSize {
		t.Errorf("capacity %d, want frag_size's default %d (ipfstat's table size, not the map's %d)", capacity, frag.DefaultSize,
			h.d.objs.Frags.MaxEntries())
	}
	if err := h.d.AdvanceClock(frag.DefaultTTL*Tick + time.Second); err != nil {
		t.Fatal(err)
	}
	if live, _, err := h.d.FragCache(); err != nil || live != 0 {
		t.Errorf("past frag_ttl: live %d (%v), want 0", live, err)
	}
}

// TestFragCacheFull: the kernel's fragment cache holds frag_size datagrams
// (ipf -T frag_size, here 3) and refuses new ones when full, as IPFilter's
// ipf_frag_new (ipfr_inuse >= ipfr_size): a fourth datagram's first
// fragment passes by its rule but makes no entry, so its rest goes to the
// rules and is blocked, while the first three's rests pass. The sweeper
// takes out the entries of datagrams whose rest never came once frag_ttl
// is past (ipf_frag_expire), after which a new datagram gets an entry
// again. The kernel's cache was an LRU map of 4096 that evicted its oldest
// entry when full (semantics frag-cache-full-refuses-new, in kernelPending
// until faith19).
func TestFragCacheFull(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass in proto udp from any to any port = 53 keep frags\n")
	if err := h.d.SetTunable("frag_size", 3); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.d.SetTunable("frag_size", frag.DefaultSize); err != nil {
			t.Error(err)
		}
	})
	first := func(id uint16) testPkt {
		return testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, sport: 999, dport: 53, moreFrags: true, payload: 24, id: id}
	}
	rest := func(id uint16) testPkt {
		return testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, fragOff: 4, payload: 16, id: id}
	}
	for id := uint16(1); id <= 4; id++ {
		h.expect(false, first(id), "pass")
	}
	for id := uint16(1); id <= 3; id++ {
		h.expect(false, rest(id), "pass")
	}
	h.expect(false, rest(4), "block")
	if live, size, err := h.d.FragCache(); err != nil || live != 3 || size != 3 {
		t.Fatalf("full cache: live %d of %d (%v), want 3 of frag_size 3", live, size, err)
	}
	// a datagram's first fragment sent again finds its entry: no new one
	h.expect(false, first(2), "pass")
	h.expect(false, rest(2), "pass")

	if err := h.d.AdvanceClock(frag.DefaultTTL*Tick + time.Second); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Sweep(); err != nil {
		t.Fatal(err)
	}
	var (
		k filterFragKey
		v filterFragEntry
		n int
	)
	for it := h.d.objs.Frags.Iterate(); it.Next(&k, &v); {
		n++
	}
	var count int64
	if err := h.d.objs.FragCount.Lookup(uint32(0), &count); err != nil {
		t.Fatal(err)
	}
	if n != 0 || count != 0 {
		t.Fatalf("past frag_ttl, after a sweep: %d entries in the map, count %d; want none", n, count)
	}
	for id := uint16(5); id <= 7; id++ {
		h.expect(false, first(id), "pass")
		h.expect(false, rest(id), "pass")
	}
	h.expect(false, first(8), "pass")
	h.expect(false, rest(8), "block")
}

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
	if want := int(h.d.objs.Frags.MaxEntries()); capacity != want {
		t.Errorf("capacity %d, want the map's %d", capacity, want)
	}
	if err := h.d.AdvanceClock(frag.DefaultTTL*Tick + time.Second); err != nil {
		t.Fatal(err)
	}
	if live, _, err := h.d.FragCache(); err != nil || live != 0 {
		t.Errorf("past frag_ttl: live %d (%v), want 0", live, err)
	}
}

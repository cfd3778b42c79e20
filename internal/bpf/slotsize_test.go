package bpf

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSlotMapSizes: a set's rate windows and state counts take one entry
// unless a rule has pps or may hold state entries (a blocklist's), and
// sets with and without such rules, of several sizes, loaded in turn
// through every slot (its maps rewritten in place or replaced) keep
// pps, keep limit and keep state working: each limits set starts with
// fresh rate windows and state counts, whatever the slot held before.
func TestSlotMapSizes(t *testing.T) {
	h := newHarness(t)
	// a blocklist's set asks for one-entry maps
	bl := compileText(t, blocklist(1000))
	if z := slotSizeOf(bl); z != (slotSize{rules: len(bl.rules)}) || z.room().pps != 0 || z.room().states != 0 {
		t.Fatalf("a blocklist of %d rules: sizes %+v, room %+v", len(bl.rules), z, z.room())
	}
	plain := "block in quick from 10.9.9.9 to any\npass in all\n"
	for round := 0; round < 6; round++ {
		// 20 to 6 000 filler rules: maps grow, are reused, shrink
		var fill strings.Builder
		for i := 0; i < []int{20, 6000, 300}[round%3]; i++ {
			fmt.Fprintf(&fill, "block in from 198.18.%d.%d/32 to any\n", i>>8, i&255)
		}
		limits := round%2 == 1
		text := fill.String() + plain
		if limits {
			text = fill.String() + "pass in quick proto udp from any to any port = 53 keep state\n" +
				"pass in quick proto tcp from any to any port = 25 flags S keep limit 2\n" +
				"pass in quick proto udp all pps 3\n" + plain
		}
		im := compileText(t, text)
		h.load(text)
		sm, err := h.d.slotMaps(h.d.slotOf(Active))
		if err != nil {
			t.Fatal(err)
		}
		pps, states, rules := int(sm.pps.MaxEntries()), int(sm.states.MaxEntries()), int(sm.rules.MaxEntries())
		sm.close()
		n := len(im.rules)
		if rules < n {
			t.Fatalf("round %d: %d rules in a map of %d", round, n, rules)
		}
		if limits && (pps < n || states < n) {
			t.Fatalf("round %d: %d rules with pps and state in maps of %d rate windows, %d state counts", round, n, pps, states)
		}
		// without pps or state: one entry, or the slot's maps of an
		// earlier set when they are not far too large (4 096 entries)
		if !limits && (pps > 4096 || states > 4096) {
			t.Fatalf("round %d: a set without pps or state has maps of %d rate windows, %d state counts", round, pps, states)
		}
		h.expect(false, tcp4("10.9.9.9", "10.0.0.1", 1000, 80, ackF), "block")
		if !limits {
			continue
		}
		src := fmt.Sprintf("10.0.%d.9", round)
		for i, want := range []string{"pass", "pass", "block"} {
			h.expect(false, tcp4(src, "10.0.0.1", uint16(2000+i), 25, synF), want)
		}
		for i, want := range []string{"pass", "pass", "pass", "block"} {
			h.expect(false, testPkt{src: src, dst: "10.0.0.1", proto: 17, sport: uint16(i + 1), dport: 9}, want)
		}
		h.expect(false, testPkt{src: src, dst: "10.0.0.1", proto: 17, sport: 5353, dport: 53}, "pass")
		rs, err := h.d.Rules(Active)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range rs {
			if strings.Contains(r.Text, "keep state") {
				found = true
				if r.States != 1 {
					t.Errorf("round %d: the keep state rule holds %d entries, want 1", round, r.States)
				}
			}
		}
		if !found {
			t.Fatalf("round %d: no keep state rule listed", round)
		}
		// the windows of this round must not carry into the next set
		// of limits (zeroed when its slot's maps are reused)
		if err := h.d.AdvanceClock(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
}

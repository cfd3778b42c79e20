package bpf

import (
	"testing"
	"time"
)

// stateKeys returns the state table's keys: twins (a flow's second entry,
// the other way round) and the others.
func stateKeys(t *testing.T, h *harness) (own, twins int) {
	t.Helper()
	var (
		k filterStateKey
		v filterStateEntry
	)
	it := h.d.objs.States.Iterate()
	for it.Next(&k, &v) {
		if k.Twin != 0 {
			twins++
		} else {
			own++
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return own, twins
}

// TestStateTwins: a flow's entry has one key for both directions, so a
// reply finds it with the one lookup a packet of its own way does. When
// IPFilter keeps a second entry the other way round (a reply the first
// could not match), it is the key's twin: packets find the twin, the newer
// entry, first whichever way they go, and the older when the twin refuses
// them, as IPFilter's lookup walks a bucket newest first (checked against
// its ipftest -D: X counts 3 inbound replies and 1 outbound packet, Y the
// outbound one); when the first entry goes the twin takes its key.
func TestStateTwins(t *testing.T) {
	h := newHarness(t)
	h.load("pass out quick proto udp all keep state (age 10)\npass in quick proto udp all keep state (age 100)\n")
	fwd := testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 1000, dport: 53}
	reply := testPkt{src: "10.0.0.2", dst: "10.0.0.1", proto: 17, sport: 53, dport: 1000}
	withOpts := reply
	withOpts.ipOpts = []byte{1, 1, 1, 0}
	fwdOpts := fwd
	fwdOpts.ipOpts = withOpts.ipOpts
	h.expect(true, fwd, "pass")    // entry X, 10.0.0.1 -> 10.0.0.2
	h.expect(false, reply, "pass") // a reply: X found the other way round
	h.expect(false, reply, "pass")
	if own, twins := stateKeys(t, h); own != 1 || twins != 0 {
		t.Fatalf("one flow, one entry: %d keys and %d twins", own, twins)
	}
	// a reply with options is not X's (its first reply had none): the
	// inbound rule makes entry Y the other way round, X's twin
	h.expect(false, withOpts, "pass")
	if own, twins := stateKeys(t, h); own != 1 || twins != 1 {
		t.Fatalf("entries both ways: %d keys and %d twins, want 1 and 1", own, twins)
	}
	// the newer entry first: Y is found and refuses the option-less
	// packet (its own way carries options), then X takes it as a reply
	h.expect(false, reply, "pass")
	byFrom := func() map[string]State {
		states, err := h.d.States()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]State{}
		for _, s := range states {
			m[s.Src.String()] = s
		}
		return m
	}
	m := byFrom()
	x, y := m["10.0.0.1"], m["10.0.0.2"]
	if len(m) != 2 || x.DstPort != 53 || y.SrcPort != 53 || y.DstPort != 1000 {
		t.Fatalf("want entries both ways, got %+v", m)
	}
	// X's inbound replies ([rev*2+out] = 2): the two before Y was made
	// and the one Y refused
	if got := x.Pkts[2]; got != 3 {
		t.Errorf("entry 10.0.0.1 -> 10.0.0.2: %d inbound replies, want 3 (the last one refused by Y, the newer)", got)
	}
	// an outbound packet of X's way finds Y first, as its first reply
	// (no options: Y's replies carry none from now on)
	h.expect(true, fwd, "pass")
	m = byFrom()
	if got := m["10.0.0.1"].Pkts[1]; got != 1 {
		t.Errorf("entry 10.0.0.1 -> 10.0.0.2: %d outbound packets, want 1", got)
	}
	if got := m["10.0.0.2"].Pkts[3]; got != 1 {
		t.Errorf("entry 10.0.0.2 -> 10.0.0.1: %d outbound replies, want 1", got)
	}
	// X expires (age 10), Y (age 100) takes the key and is found both ways
	if err := h.d.AdvanceClock(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Sweep(); err != nil {
		t.Fatal(err)
	}
	if own, twins := stateKeys(t, h); own != 1 || twins != 0 {
		t.Fatalf("after X expired: %d keys and %d twins, want 1 and 0", own, twins)
	}
	h.expect(true, fwd, "pass") // Y's reply: [rev*2+out] = 3
	m = byFrom()
	if y := m["10.0.0.2"]; len(m) != 1 || y.Pkts[3] != 2 {
		t.Errorf("after X expired: want Y alone with two outbound replies, got %+v", m)
	}
	if n, err := h.d.StateCount(); err != nil || n != 1 {
		t.Errorf("state count %d (%v), want 1", n, err)
	}
	// a full flush removes twins and their keys' entries alike
	h.expect(true, fwdOpts, "pass") // Y refuses it (options): X again, the twin
	if own, twins := stateKeys(t, h); own != 1 || twins != 1 {
		t.Fatalf("X made again: %d keys and %d twins, want 1 and 1", own, twins)
	}
	if n, err := h.d.FlushStates(nil); err != nil || n != 2 {
		t.Fatalf("flush removed %d (%v), want 2", n, err)
	}
	if own, twins := stateKeys(t, h); own+twins != 0 {
		t.Errorf("after a full flush: %d keys and %d twins", own, twins)
	}
	if n, err := h.d.StateCount(); err != nil || n != 0 {
		t.Errorf("state count %d (%v) after a full flush", n, err)
	}
}

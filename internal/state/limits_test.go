package state

import (
	"net/netip"
	"testing"
)

func udpFrom(i int) *Packet {
	return &Packet{V: 4, Proto: 17, Src: netip.AddrFrom4([4]byte{10, 0, 1, byte(i)}), Dst: srv,
		SPort: uint16(1000 + i), DPort: 53, PLen: 28, IfName: "nic0"}
}

// TestMaxBucket: with one bucket (state_size 1) the bucket holds at most
// state_maxbucket entries; expiry frees the slot again.
func TestMaxBucket(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Size, cfg.MaxBucket = 1, 2
	c := &ManualClock{}
	tb := New(cfg, c)
	want := []AddError{AddOK, AddOK, AddBucketFull, AddBucketFull}
	for i, w := range want {
		if _, got := tb.Add(udpFrom(i), 0x2008402, &Limits{}); got != w {
			t.Errorf("add %d: got %v, want %v", i, got, w)
		}
	}
	if got := tb.Stats().BucketFull; got != 2 {
		t.Errorf("BucketFull: got %d, want 2", got)
	}
	c.Advance(cfg.UDPTimeout + 1)
	tb.Expire()
	if _, got := tb.Add(udpFrom(9), 0x2008402, &Limits{}); got != AddOK {
		t.Errorf("after expiry: got %v, want ok", got)
	}
	// A larger table spreads entries: 26 per bucket over 5737 buckets
	// does not refuse 100 distinct flows.
	tb = New(DefaultConfig(), c)
	for i := 0; i < 100; i++ {
		if _, got := tb.Add(udpFrom(i), 0x2008402, &Limits{}); got != AddOK {
			t.Fatalf("add %d: got %v", i, got)
		}
	}
}

// TestAggressiveFlush: passing state_wm_high schedules a flush that the
// next Expire runs (no sooner than state_wm_freq ticks after the last):
// CLOSED TCP entries go first; with active*100/state_size still above
// state_wm_low, TIME_WAIT ones too. UDP entries are never flushed.
func TestAggressiveFlush(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Max, cfg.Size, cfg.WMHigh, cfg.WMLow, cfg.WMFreq = 4, 4, 50, 10, 20
	c := &ManualClock{}
	c.Advance(100)
	tb := New(cfg, c)
	mk := func(i int, st uint8) {
		p := tcpPkt(false, false, THSyn, 1, 0)
		p.SPort = uint16(2000 + i)
		e, err := tb.Add(p, 0x2008402, &Limits{})
		if err != AddOK {
			t.Fatalf("add %d: %v", i, err)
		}
		e.TCPState = [2]uint8{st, st}
		e.Expire = c.Ticks() + 100000
	}
	mk(0, TCPClosed)
	mk(1, TCPTimeWait)
	mk(2, TCPEstablished)
	if _, err := tb.Add(udpFrom(1), 0x2008402, &Limits{}); err != AddOK {
		t.Fatal(err)
	}
	// 4*100/4 = 100 > 50: the next Add schedules the flush.
	if _, err := tb.Add(udpFrom(2), 0x2008402, &Limits{}); err != AddTableFull {
		t.Fatalf("add over max: got %v, want table full", err)
	}
	if n := tb.Expire(); n != 2 {
		t.Errorf("flushed: got %d, want 2 (CLOSED and TIME_WAIT)", n)
	}
	var states []uint8
	tb.Walk(func(e *Entry) {
		if e.Proto == 6 {
			states = append(states, e.TCPState[0])
		}
	})
	if len(states) != 1 || states[0] != TCPEstablished || tb.Active() != 2 {
		t.Errorf("left: tcp states %v, active %d; want [4] and 2", states, tb.Active())
	}
	// Not scheduled again: nothing more goes.
	if n := tb.Expire(); n != 0 {
		t.Errorf("second expire: got %d, want 0", n)
	}
}

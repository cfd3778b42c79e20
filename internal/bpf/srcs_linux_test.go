package bpf

import (
	"fmt"
	"testing"
	"time"
)

// srcCounts reads the max-srcs table (c/lib/srcs.h): each source key's
// count and each rule key's, by address ("rule" for a rule key).
func srcCounts(t *testing.T, d *Datapath) (map[string]uint64, error) {
	t.Helper()
	var (
		k filterSrcKey
		v uint64
	)
	got := map[string]uint64{}
	it := d.objs.Srcs.Iterate()
	for it.Next(&k, &v) {
		name := "rule"
		if k.Kind == 0 {
			a := k.Addr[0]
			name = fmt.Sprintf("%d.%d.%d.%d", byte(a), byte(a>>8), byte(a>>16), byte(a>>24))
		}
		got[fmt.Sprintf("%s/%d", name, k.Rule)] = v
	}
	return got, it.Err()
}

// TestStateMaxSrcs: keep state (max-srcs N, max-per-src M/bits) in the
// kernel as the engine's Table.admit: a new source past N and one more
// entry of a source past M are refused (the pass becomes a block, reason
// state-add), sources masked to the rule's bits; every entry's end gives
// its count back (here ipf -FS), the table then empty. Before faith13
// CompileSet refused such a rule.
func TestStateMaxSrcs(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass in proto udp from any to any port = 53 keep state (max-srcs 2, max-per-src 2/24)\n")
	udp := func(src string, sport uint16) testPkt {
		return testPkt{src: src, dst: "10.9.9.9", proto: 17, sport: sport, dport: 53}
	}
	for _, c := range []struct {
		src  string
		want string
	}{
		{"10.0.0.1", "pass"},  // source 10.0.0.0/24: 1
		{"10.0.0.2", "pass"},  // 2
		{"10.0.0.3", "block"}, // max-per-src 2
		{"10.0.1.1", "pass"},  // a second source
		{"10.0.2.1", "block"}, // max-srcs 2
	} {
		h.expect(false, udp(c.src, 1000), c.want)
	}
	st, _ := h.d.Stats()
	if st.Drops[RSNStateAdd] != 2 || st.SrcFull != 0 {
		t.Errorf("drops state-add %d, source table full %d: want 2 and 0", st.Drops[RSNStateAdd], st.SrcFull)
	}
	got, err := srcCounts(t, h.d)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"10.0.0.0/1": 2, "10.0.1.0/1": 1, "rule/1": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("source counts %v, want %v", got, want)
	}
	// a packet of a flow with an entry is no new entry: not refused
	h.expect(false, udp("10.0.0.1", 1000), "pass")
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	if got, err := srcCounts(t, h.d); err != nil || len(got) != 0 {
		t.Errorf("after ipf -FS: source counts %v (%v), want none", got, err)
	}
	h.expect(false, udp("10.0.2.1", 1000), "pass")
	h.expect(false, udp("10.0.3.1", 1000), "pass")
	h.expect(false, udp("10.0.4.1", 1000), "block")
	// a new set counts afresh (the engine's new rule ids); the old
	// entries give back to the counts they took
	h.load("block in all\npass in proto udp from any to any port = 53 keep state (max-srcs 2, max-per-src 2/24)\n")
	h.expect(false, udp("10.0.4.1", 1000), "pass")
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	if got, err := srcCounts(t, h.d); err != nil || len(got) != 0 {
		t.Errorf("after ipf -FS of two sets' entries: source counts %v (%v), want none", got, err)
	}
}

// TestStateMaxSrcsReplace: an entry replaced by a datagram of its flow it
// cannot match (one with a router alert option after one without and
// back; a log first rule's entry is never a duplicate, so each makes an
// entry; the map keeps one a key and way, so state_create's replace
// removes the old, as the engine's table does, where IPFilter keeps both:
// ipfilter-differences C4) gives its source's count back as it goes
// (state_unlink_later, then sl_src_undo at the end of sl_state_create):
// the source holds one entry's count however often its entry is
// replaced, and nothing is left after ipf -FS. A count not given back
// reaches max-per-src 2 at the second datagram and refuses the third
// (checked with the copy of the key into the work area left out).
func TestStateMaxSrcsReplace(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass in log first proto udp from any to any port = 53 keep state (max-srcs 1, max-per-src 2)\n")
	p := testPkt{src: "10.0.0.1", dst: "10.9.9.9", proto: 17, sport: 1000, dport: 53}
	for i := range 6 {
		p.ipOpts = nil
		if i%2 == 1 {
			p.ipOpts = []byte{148, 4, 0, 0} // router alert
		}
		h.expect(false, p, "pass")
	}
	if st, _ := h.d.Stats(); st.Drops[RSNStateAdd] != 0 {
		t.Errorf("drops state-add %d: want none", st.Drops[RSNStateAdd])
	}
	got, err := srcCounts(t, h.d)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"10.0.0.1/1": 1, "rule/1": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("source counts after 5 replacements %v, want %v", got, want)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	if got, err := srcCounts(t, h.d); err != nil || len(got) != 0 {
		t.Errorf("after ipf -FS: source counts %v (%v), want none", got, err)
	}
}

// TestStateMaxSrcsFlood: more sources than the source table holds. Once
// it is full an entry of a new source is refused (fail closed: the pass
// becomes a block, counted as SrcFull); the counts stay those of the
// entries made; every entry's end (ipf -FS, then the sweeper's expiry)
// gives them back and the table is left empty, nothing leaked.
func TestStateMaxSrcsFlood(t *testing.T) {
	h := newHarness(t)
	// the table holds every entry made (under the watermark): only the
	// source table limits
	for _, tu := range h.d.Tunables() {
		if tu.Name == "state_max" || tu.Name == "udp_timeout" {
			defer h.d.SetTunable(tu.Name, tu.Cur)
		}
	}
	if err := h.d.SetTunable("state_max", 200000); err != nil {
		t.Fatal(err)
	}
	h.load("pass in proto udp from any to any port = 53 keep state (max-srcs 100000)\n")
	const n = srcCap + 100
	src := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", 1+i>>16, i>>8&0xff, i&0xff) }
	pass := 0
	for i := 0; i < n; i++ {
		ret, _ := h.run(false, testPkt{src: src(i), dst: "10.200.0.1", proto: 17, sport: 1000, dport: 53}.build())
		if ret == tcNext {
			pass++
		}
	}
	st, _ := h.d.Stats()
	// the map's own count may let a few more or fewer in near its end
	// (per-CPU counters): the refusals and the entries must agree
	if pass > srcCap || uint64(n-pass) != st.SrcFull || st.SrcFull < 50 {
		t.Errorf("%d of %d new sources passed, %d refused for a full table: want at most %d, the rest refused",
			pass, n, st.SrcFull, srcCap)
	}
	got, err := srcCounts(t, h.d)
	if err != nil {
		t.Fatal(err)
	}
	if got["rule/0"] != uint64(pass) || len(got) != pass+1 {
		t.Errorf("source table: rule count %d, %d keys; want %d sources", got["rule/0"], len(got), pass)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	if got, err := srcCounts(t, h.d); err != nil || len(got) != 0 {
		t.Fatalf("after ipf -FS: %d source keys left (%v), want none", len(got), err)
	}
	// expiry by the sweeper: entries living one tick
	if err := h.d.SetTunable("udp_timeout", 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		h.expect(false, testPkt{src: src(i), dst: "10.200.0.1", proto: 17, sport: 1000, dport: 53}, "pass")
	}
	var left map[string]uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if left, err = srcCounts(t, h.d); err != nil || len(left) == 0 {
			break
		}
	}
	if len(left) != 0 {
		t.Errorf("after the entries expired: %d source keys left, want none", len(left))
	}
}

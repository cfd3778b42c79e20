package bpf

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/engine"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// engineFor compiles text for the Go engine.
func engineFor(t *testing.T, text string) *engine.Engine {
	eng, _ := engineClock(t, text)
	return eng
}

// engineClock is engineFor with the engine's clock (to read its table's
// lifetimes, engineEntries).
func engineClock(t *testing.T, text string) (*engine.Engine, *state.ManualClock) {
	t.Helper()
	rules, err := ipf.Parse("r", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := ruleset.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	clock := &state.ManualClock{}
	eng := engine.New(engine.Config{Clock: clock})
	eng.Sets().Store(0, set)
	t.Cleanup(eng.Close)
	return eng, clock
}

// TestPrivilegedV6ExtensionChains (issue 10 item 1): an IPv6 SYN to a
// blocked port behind a chain of extension headers of any length gets the
// Go engine's verdict. The program walked six headers and then took the
// seventh for the transport (protocol 60, no ports), so such a SYN passed.
func TestPrivilegedV6ExtensionChains(t *testing.T) {
	h := newHarness(t)
	const rules = "block in quick proto tcp from any to any port = 22\npass in all\n"
	h.load(rules)
	eng := engineFor(t, rules)
	rep := func(n int, typ uint8) []uint8 {
		out := make([]uint8, n)
		for i := range out {
			out[i] = typ
		}
		return out
	}
	chains := map[string][]uint8{
		"none":                      nil,
		"6 dstopts":                 rep(6, 60),
		"7 dstopts":                 rep(7, 60),
		"hopopts + 6 dstopts":       append([]uint8{0}, rep(6, 60)...),
		"6 dstopts + atomic frag":   append(rep(6, 60), 44),
		"hop, routing, 14 dstopts":  append([]uint8{0, 43}, rep(14, 60)...),
		"16 dstopts":                rep(16, 60),
		"100 dstopts":               rep(100, 60),
		"400 dstopts":               rep(400, 60),
		"frag + 40 dstopts":         append([]uint8{44}, rep(40, 60)...),
		"two hopopts (bad), 6 dsto": append([]uint8{0, 0}, rep(6, 60)...),
	}
	for name, exts := range chains {
		t.Run(name, func(t *testing.T) {
			for _, dport := range []uint16{22, 80} {
				fp := flowPkt{v6: true, proto: 6, src: netip.MustParseAddr("2001:db8::1"), dst: netip.MustParseAddr("2001:db8::2"),
					sp: 40000, dp: dport, flags: synF, seq: 1, exts: exts}
				frame := fp.frame()
				var p engine.Packet
				p.Load(append([]byte(nil), frame[14:]...), "eth0", false, 0)
				want := eng.Check(&p).Verdict
				ret, _ := h.run(false, frame)
				got := verdictName(ret)
				if (got == "pass") != want.Passed() {
					t.Errorf("port %d: bpf %s, engine %s", dport, got, want)
				}
				if dport == 22 && name != "two hopopts (bad), 6 dsto" && got != "block" {
					t.Errorf("port %d: bpf %s, want block", dport, got)
				}
			}
		})
	}
}

// groupRules returns heads head rules of group g, members rules in g that
// an index cannot leave out for a TCP packet, and a trailing quick block of
// TCP port 22.
func groupRules(heads, members int) string {
	var b strings.Builder
	for i := 0; i < heads; i++ {
		b.WriteString("pass in all head g\n")
	}
	for i := 0; i < members; i++ {
		b.WriteString("block in proto udp all group g\n")
	}
	b.WriteString("block in quick proto tcp from any to any port = 22\n")
	return b.String()
}

// TestPrivilegedScanBudget (issue 10 item 2): a set whose scans are long
// (five heads of a group of 15 000 rules: 75 000 steps, past the old
// budget of 65 536) evaluates every rule, so the trailing block holds; a
// set that could need more steps than a scan has is refused when it is
// compiled, with an error that names the group and the heads.
func TestPrivilegedScanBudget(t *testing.T) {
	h := newHarness(t)
	h.load(groupRules(5, 15000))
	syn := tcp4("10.0.0.1", "10.0.0.2", 40000, 22, synF)
	h.expect(false, syn, "block")
	other := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF)
	h.expect(false, other, "pass")
	rules, err := h.d.Rules(Active)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if strings.Contains(r.Text, "port = 22") && r.Hits != 1 {
			t.Errorf("trailing rule %q: %d hits, want 1", r.Text, r.Hits)
		}
	}
	if s, _ := h.d.Stats(); s.ScanCut != 0 {
		t.Errorf("%d scans cut short", s.ScanCut)
	}

	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"600 heads of 15 000", groupRules(600, 15000), []string{"the in list", "600 head rules (big.conf:1, big.conf:2, big.conf:3, and 597 more) of group g (15000 rules"}},
		{"self-heading group", "pass in all head s\npass in all head s group s\npass in all head s group s\npass in all head s group s\n",
			[]string{"group s", "head rules"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, err := ipf.Parse("big.conf", []byte(c.text), ipf.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(rs, CompileOptions{})
			if !errors.Is(err, ErrTooCostly) {
				t.Fatalf("got %v, want ErrTooCostly", err)
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// randSrc returns the n-th of many distinct source addresses.
func randSrc(n int) string {
	return netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// checkCount fails unless the kernel's state count equals the entries in
// the table (and the wildcard count the wildcard entries), compared over
// a walk nothing changed the table during (stillCounts: the sweeper runs
// by itself).
func checkCount(t *testing.T, d *Datapath, what string) int64 {
	t.Helper()
	c := stillCounts(t, d)
	if c.count != int64(c.entries) || c.wild != int64(c.wildEntries) {
		t.Errorf("%s: state count %d, table holds %d; wildcard count %d, wildcard entries %d",
			what, c.count, c.entries, c.wild, c.wildEntries)
	}
	return c.count
}

// waitCount waits (the sweeper runs every 0.5 s on its own) until the
// state count is want.
func waitCount(t *testing.T, d *Datapath, want int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := d.StateCount()
		if err != nil {
			t.Fatal(err)
		}
		if c == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state count %d after %v, want %d: the kernel did not reclaim the table by itself", c, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func setTunable(t *testing.T, d *Datapath, name string, v uint64) {
	t.Helper()
	old := uint64(0)
	for _, tu := range d.Tunables() {
		if tu.Name == name {
			old = tu.Cur
		}
	}
	if err := d.SetTunable(name, v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.SetTunable(name, old) })
}

// TestPrivilegedStateReclaim (issue 10 items 4 and 5): state_max SYNs from
// random sources never seen again fill the table (new keep-state
// connections are refused, as IPFilter does when full); once they expire
// the kernel's own timer gives the table back, with no process running
// and no packet touching the entries; the state count equals the table
// throughout, across ipf -FS, and past the 65 536 entries the old LRU
// table held (it evicted without counting).
func TestPrivilegedStateReclaim(t *testing.T) {
	h := newHarness(t)
	h.load("pass in quick proto tcp from any to any port = 80 flags S keep state\nblock in all\n")
	max := state.DefaultConfig().Max
	for i := 0; i < max; i++ {
		h.expect(false, tcp4(randSrc(i), "192.0.2.1", 40000, 80, synF), "pass")
	}
	if c := checkCount(t, h.d, "full"); c != int64(max) {
		t.Fatalf("state count %d, want state_max %d", c, max)
	}
	h.expect(false, tcp4("172.16.0.1", "192.0.2.1", 40000, 80, synF), "block")
	// the flood's entries are SYN_SENT: they expire after tcp_syn_sent
	if err := h.d.AdvanceClock(time.Duration(state.TCPTimeoutDefault("tcp_syn_sent"))*tick + time.Second); err != nil {
		t.Fatal(err)
	}
	waitCount(t, h.d, 0, 5*time.Second)
	checkCount(t, h.d, "swept")
	h.expect(false, tcp4("172.16.0.1", "192.0.2.1", 40000, 80, synF), "pass")
	if s, _ := h.d.Stats(); s.Swept < uint64(max) || s.SweepRuns == 0 {
		t.Errorf("sweeper: %d runs, %d swept, want >= %d", s.SweepRuns, s.Swept, max)
	}

	// ipf -FS keeps the count: the table is emptied by the kernel's code
	for i := 0; i < 1000; i++ {
		h.run(false, tcp4(randSrc(i), "192.0.2.1", 40001, 80, synF).build())
	}
	n, err := h.d.FlushStates(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1001 {
		t.Errorf("ipf -FS removed %d, want 1001", n)
	}
	if c := checkCount(t, h.d, "after ipf -FS"); c != 0 {
		t.Errorf("state count %d after ipf -FS, want 0", c)
	}

	// more entries than the old LRU table held
	const many = 70000
	setTunable(t, h.d, "state_max", many)
	for i := 0; i < many; i++ {
		h.run(false, tcp4(randSrc(i), "192.0.2.1", 40002, 80, synF).build())
	}
	if c := checkCount(t, h.d, "70 000 entries"); c != many {
		t.Errorf("state count %d, want %d", c, many)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	checkCount(t, h.d, "after the second ipf -FS")
}

// TestPrivilegedStateCountConcurrent (issue 10 item 5): packets that make
// and close state on every CPU, the sweeper, and ipf -FS flushes, all at
// once: afterwards the count equals the table.
func TestPrivilegedStateCountConcurrent(t *testing.T) {
	h := newHarness(t)
	h.load("pass in quick proto tcp all keep state\npass out quick proto tcp all keep state\n")
	// The flusher stops before the packets do: on a loaded machine a last
	// flush after the workers' last packets could otherwise empty the
	// table and make the end state meaningless.
	stop, stopFlush := make(chan struct{}), make(chan struct{})
	var wg, flushWG sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				src, sp := randSrc(g<<12|i&0xfff), uint16(1024+i%7)
				h.d.Run(false, tcp4(src, "192.0.2.1", sp, 80, synF).build())
				if i%3 == 0 {
					h.d.Run(false, tcp4(src, "192.0.2.1", sp, 80, rstF|ackF).build())
				}
			}
		}(g)
	}
	flushWG.Add(1)
	go func() {
		defer flushWG.Done()
		for {
			select {
			case <-stopFlush:
				return
			case <-time.After(20 * time.Millisecond):
				h.d.FlushStates(func(s State) bool { return s.TCPState[0] == 11 || s.Idle > 50*time.Millisecond })
			}
		}
	}()
	time.Sleep(time.Second)
	close(stopFlush)
	flushWG.Wait()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if c := checkCount(t, h.d, "after concurrent changes"); c == 0 {
		t.Error("table empty at the end: the test exercised nothing")
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	checkCount(t, h.d, "after ipf -FS")
}

// TestPrivilegedKeepLimitQuotas (issue 10 item 6): keep-limit quotas come
// back when connections close and when they expire (spoofed SYNs took
// them), keep state (limit N) counts come back on expiry, and ipf -m d
// turns the limits off.
func TestPrivilegedKeepLimitQuotas(t *testing.T) {
	h := newHarness(t)
	h.load("pass in quick proto tcp from any to any port = 25 keep limit 2 cumulative\n" +
		"pass in quick proto tcp from any to any port = 26 keep limit 1\n" +
		"pass in quick proto tcp from any to any port = 27 flags S keep state (limit 3)\n" +
		"block in all\n")
	syn := func(src string, sp, dp uint16) testPkt { return tcp4(src, "192.0.2.1", sp, dp, synF) }
	// cumulative: two spoofed SYNs take the quota
	h.expect(false, syn("10.0.0.1", 1, 25), "pass")
	h.expect(false, syn("10.0.0.2", 1, 25), "pass")
	h.expect(false, syn("10.0.0.1", 1, 25), "pass") // a retransmission
	h.expect(false, syn("10.0.0.3", 1, 25), "block")
	// per source, closed by a FIN
	h.expect(false, syn("10.0.0.1", 1, 26), "pass")
	h.expect(false, syn("10.0.0.1", 2, 26), "block")
	h.expect(false, syn("10.0.0.2", 2, 26), "pass")
	h.expect(false, tcp4("10.0.0.1", "192.0.2.1", 1, 26, finF|ackF), "pass")
	h.expect(false, syn("10.0.0.1", 2, 26), "pass")
	// keep state (limit 3)
	for i := 0; i < 3; i++ {
		h.expect(false, syn(randSrc(i), 1, 27), "pass")
	}
	h.expect(false, syn("10.9.9.9", 1, 27), "block")
	counts, err := h.d.DCACounts()
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 3 {
		t.Errorf("DCA counts: %+v, want 3 (rule 1 cumulative, rule 2 twice)", counts)
	}
	// everything above was embryonic: after tcp_syn_sent it is all back
	if err := h.d.AdvanceClock(time.Duration(state.TCPTimeoutDefault("tcp_syn_sent"))*tick + time.Second); err != nil {
		t.Fatal(err)
	}
	waitCount(t, h.d, 0, 5*time.Second)
	if err := h.d.Sweep(); err != nil {
		t.Fatal(err)
	}
	h.expect(false, syn("10.0.0.3", 1, 25), "pass")
	h.expect(false, syn("10.0.0.4", 1, 25), "pass")
	h.expect(false, syn("10.9.9.9", 1, 27), "pass")
	h.expect(false, syn("10.0.0.5", 1, 25), "block")
	// ipf -m d: no limits
	if err := h.d.SetDCA(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.d.SetDCA(true) })
	if h.d.DCAEnabled() {
		t.Error("DCA still enabled")
	}
	h.expect(false, syn("10.0.0.5", 1, 25), "pass")
}

// TestPrivilegedBeyondOldCap (issue 12): a set of 40 000 rules, past the
// 16 384 the storage held, loads; the last rule still decides, every
// rule is listed back with its text, and a smaller set loaded into the
// same slot afterwards reuses its maps.
func TestPrivilegedBeyondOldCap(t *testing.T) {
	h := newHarness(t)
	const n = 40000
	var b strings.Builder
	for i := 0; i < n-1; i++ {
		fmt.Fprintf(&b, "block in proto udp from 10.%d.%d.%d to any port = 9\n", i>>16&255, i>>8&255, i&255)
	}
	b.WriteString("block in quick proto tcp from any to any port = 22\n")
	h.load(b.String())
	h.expect(false, tcp4("192.0.2.1", "192.0.2.2", 40000, 22, synF), "block")
	h.expect(false, tcp4("192.0.2.1", "192.0.2.2", 40000, 23, synF), "pass")
	rules, err := h.d.Rules(Active)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != n {
		t.Fatalf("%d rules listed, want %d", len(rules), n)
	}
	if last := rules[n-1]; last.Text != "block in quick proto tcp from any to any port = 22" || last.Hits != 1 {
		t.Errorf("last rule %q, %d hits", last.Text, last.Hits)
	}
	if rules[12345].Text != "block in inet proto udp from 10.0.48.57/32 to any port = 9" {
		t.Errorf("rule 12346: %q", rules[12345].Text)
	}
	h.load("block in quick proto tcp from any to any port = 23\n")
	h.expect(false, tcp4("192.0.2.1", "192.0.2.2", 40000, 22, synF), "pass")
	h.expect(false, tcp4("192.0.2.1", "192.0.2.2", 40000, 23, synF), "block")
}

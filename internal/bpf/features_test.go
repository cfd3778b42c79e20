package bpf

// Tests of the features added to close the gaps of the first version:
// pool tables, v6hdr, interface addresses, routing, auth, wildcard state.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"sluice/internal/engine"
	"sluice/internal/pool"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ippool"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// TestPoolAddresses checks `from pool/N` and `to hash/N` against the Go
// engine with the same ippool tables: tree "!" entries, longest match,
// hash masks, negated tests and a table that does not exist.
func TestPoolAddresses(t *testing.T) {
	h := newHarness(t)
	pf, err := ippool.Parse("ippool.conf", `
table role = ipf type = tree number = 100
	{ 10.0.0.0/8; !10.1.0.0/16; 10.1.2.0/24; 2001:db8::/32; };
table role = ipf type = hash number = 200
	{ 192.168.1.1/32; 172.16.0.0/12; };
`)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pool.NewSet(pf, func() uint32 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	text := "block in all\n" +
		"pass in quick from pool/100 to hash/200\n" +
		"pass in quick proto udp from !pool/100 to any port = 53\n" +
		"pass in quick proto udp from hash/999 to any port = 54\n"
	rules, err := ipf.Parse("r", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Compile(rules, CompileOptions{Pools: ps})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(engine.Config{Clock: &state.ManualClock{}, Pools: ps})
	defer eng.Close()
	set, err := ruleset.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	eng.Sets().Store(0, set)
	for _, c := range []struct {
		src, dst string
		dport    uint16
		want     string
	}{
		{"10.9.9.9", "192.168.1.1", 80, "pass"},
		{"10.1.9.9", "192.168.1.1", 80, "block"}, // under the "!" entry
		{"10.1.2.3", "192.168.1.1", 80, "pass"},  // longer prefix wins again
		{"10.9.9.9", "172.20.0.1", 80, "pass"},
		{"10.9.9.9", "192.168.1.2", 80, "block"},
		{"11.0.0.1", "192.168.1.1", 53, "pass"}, // !pool
		{"10.0.0.1", "10.0.0.2", 53, "block"},
		{"11.0.0.1", "10.0.0.2", 54, "block"}, // unknown table
		{"2001:db8::1", "2001:db8::2", 53, "block"},
		{"2001:db9::1", "2001:db8::2", 53, "pass"},
	} {
		p := testPkt{src: c.src, dst: c.dst, proto: 17, sport: 1000, dport: c.dport}
		h.expect(false, p, c.want)
		fp := flowPkt{v6: netip.MustParseAddr(c.src).Is6(), proto: 17, src: netip.MustParseAddr(c.src), dst: netip.MustParseAddr(c.dst), sp: 1000, dp: c.dport}
		var ep engine.Packet
		ep.Load(fp.frame()[14:], "eth0", false, 0)
		if got := eng.Check(&ep).Verdict; got.Passed() != (c.want == "pass") {
			t.Errorf("%s > %s:%d: engine %s, want %s", c.src, c.dst, c.dport, got, c.want)
		}
	}
}

// v6Ext returns an Ethernet frame with an IPv6 UDP packet behind the
// given extension headers (each 8 bytes, next-header chained).
func v6Ext(exts ...uint8) []byte {
	p := testPkt{src: "2001:db8::1", dst: "2001:db8::2", proto: 17, sport: 1000, dport: 53}
	f := p.build()
	ip, l4 := f[14:54], f[54:]
	var hdrs []byte
	next := uint8(17)
	for i := len(exts) - 1; i >= 0; i-- {
		hdrs = append([]byte{next, 0, 0, 0, 0, 0, 0, 0}, hdrs...)
		next = exts[i]
	}
	ip[6] = next
	binary.BigEndian.PutUint16(ip[4:], uint16(len(hdrs)+len(l4)))
	out := append(append(append([]byte(nil), f[:54]...), hdrs...), l4...)
	return out
}

// TestV6Hdr checks `v6hdr` and `not v6hdr` on IPv6 extension headers.
func TestV6Hdr(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass in quick family inet6 all with v6hdr dstopts\npass in quick family inet6 proto udp from any to any port = 53 with not v6hdr hopopts,routing\n")
	for _, c := range []struct {
		exts []uint8
		want string
	}{
		{nil, "pass"},            // no headers: the "not" rule
		{[]uint8{60}, "pass"},    // dstopts
		{[]uint8{0}, "block"},    // hop-by-hop
		{[]uint8{0, 60}, "pass"}, // both: dstopts rule first
		{[]uint8{43}, "block"},   // routing
	} {
		if ret, _ := h.run(false, v6Ext(c.exts...)); verdictName(ret) != c.want {
			t.Errorf("headers %v: got %s, want %s", c.exts, verdictName(ret), c.want)
		}
	}
}

// TestInterfaceAddresses checks addresses taken from interfaces, resolved
// when the rules are compiled: through CompileOptions.IfAddr, and from the
// host (the loopback interface's 127.0.0.1).
func TestInterfaceAddresses(t *testing.T) {
	h := newHarness(t)
	text := "block in all\n" +
		"pass in quick proto udp from (eth9)/24 to any port = 1\n" +
		"pass in quick proto udp from any to eth9/broadcast port = 2\n" +
		"pass in quick proto udp from eth9/netmasked to eth9/peer port = 3\n" +
		"pass in quick proto udp from !(nope0) to any port = 4\n" +
		"pass in quick proto udp from (lo) to any port = 5\n"
	rules, err := ipf.Parse("r", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fake := func(name string, v6 bool) (ruleset.IfaceNet, bool) {
		switch {
		case name == "lo":
			return hostIfNet(name, v6)
		case name != "eth9" || v6:
			return ruleset.IfaceNet{}, false
		}
		return ruleset.IfaceNet{
			Prefix:    netip.MustParsePrefix("192.0.2.7/24"),
			Broadcast: netip.MustParseAddr("192.0.2.255"),
			Peer:      netip.MustParseAddr("198.51.100.1"),
		}, true
	}
	im, err := Compile(rules, CompileOptions{IfNet: fake})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src, dst string
		port     uint16
		want     string
	}{
		{"192.0.2.99", "10.0.0.1", 1, "pass"}, // (eth9)/24
		{"192.0.3.99", "10.0.0.1", 1, "block"},
		{"10.0.0.1", "192.0.2.255", 2, "pass"},
		{"10.0.0.1", "192.0.2.254", 2, "block"},
		{"192.0.2.5", "198.51.100.1", 3, "pass"},
		{"192.0.2.5", "198.51.100.2", 3, "block"},
		{"10.0.0.1", "10.0.0.2", 4, "block"}, // no such interface: never matches
		{"127.0.0.1", "10.0.0.2", 5, "pass"},
		{"127.0.0.2", "10.0.0.2", 5, "block"},
	} {
		h.expect(false, testPkt{src: c.src, dst: c.dst, proto: 17, sport: 1000, dport: c.port}, c.want)
	}
}

// TestRouting: `to IF` redirects a passing packet (the program returns
// TC_ACT_REDIRECT and counts it), `dup-to IF` sends a copy and lets the
// packet pass, a blocked packet is not routed, and fastroute consults the
// routing table (counted as routed or failed, never silently skipped).
func TestRouting(t *testing.T) {
	h := newHarness(t)
	h.load("pass in quick to lo:127.0.0.1 proto udp from any to any port = 1\n" +
		"pass in quick dup-to lo proto udp from any to any port = 2\n" +
		"block in quick to lo proto udp from any to any port = 3\n" +
		"pass in quick fastroute proto udp from any to any port = 4\n" +
		"pass in quick to nosuch0 proto udp from any to any port = 5\n")
	udp := func(port uint16) []byte {
		return testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 1000, dport: port}.build()
	}
	stats := func() Stats {
		s, err := h.d.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if ret, _ := h.run(false, udp(1)); ret != tcRedirect {
		t.Errorf("to: got %s, want redirect", verdictName(ret))
	}
	if s := stats(); s.Routed != 1 || s.Duplicated != 0 {
		t.Errorf("to: routed %d duplicated %d, want 1 and 0", s.Routed, s.Duplicated)
	}
	if ret, _ := h.run(false, udp(2)); ret != tcNext {
		t.Errorf("dup-to: got %s, want pass", verdictName(ret))
	}
	if s := stats(); s.Duplicated+s.RouteFail != 1 || s.Routed != 1 {
		t.Errorf("dup-to: duplicated %d failed %d routed %d, want one copy attempt", s.Duplicated, s.RouteFail, s.Routed)
	}
	if ret, _ := h.run(false, udp(3)); ret != tcShot {
		t.Errorf("blocked: got %s, want block", verdictName(ret))
	}
	before := stats()
	ret, _ := h.run(false, udp(4))
	after := stats()
	if n := after.Routed + after.RouteFail - before.Routed - before.RouteFail; n != 1 {
		t.Errorf("fastroute: %d routing outcomes counted, want 1", n)
	}
	if (ret == tcRedirect) != (after.Routed > before.Routed) {
		t.Errorf("fastroute: returned %s but routed count %d -> %d", verdictName(ret), before.Routed, after.Routed)
	}
	before = stats()
	if ret, _ := h.run(false, udp(5)); ret != tcNext {
		t.Errorf("to a missing interface: got %s, want pass", verdictName(ret))
	}
	if after := stats(); after.Routed != before.Routed || after.RouteFail != before.RouteFail {
		t.Error("to a missing interface: the packet was routed")
	}
}

// TestAuth: with no authorising daemon an auth rule blocks (IPFilter
// queues the packet and drops it when nobody answers), counts the hit and
// creates no state even with keep state.
func TestAuth(t *testing.T) {
	h := newHarness(t)
	h.load("pass in all\nauth in proto tcp from any to any port = 80 keep state\n")
	p := tcp4("10.0.0.1", "10.0.0.2", 1000, 80, synF)
	h.expect(false, p, "block")
	h.expect(false, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "pass")
	s, err := h.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.In.Block != 1 || s.Drops[RSNFilter] != 1 || s.StateActive != 0 {
		t.Errorf("blocked %d, filter drops %d, states %d; want 1, 1, 0", s.In.Block, s.Drops[RSNFilter], s.StateActive)
	}
	rs, err := h.d.Rules(Active)
	if err != nil {
		t.Fatal(err)
	}
	if rs[1].Hits != 1 {
		t.Errorf("auth rule hits %d, want 1", rs[1].Hits)
	}
}

// TestWildcardState: state created by a packet to a multicast address has
// a wildcard destination; the first reply fills it in, so a reply from a
// second host no longer matches (ipf-reference §3.1).
func TestWildcardState(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass out proto udp all keep state\npass out proto ipv6-icmp all keep state\n")
	q := testPkt{src: "10.0.0.1", dst: "224.0.0.9", proto: 17, sport: 5000, dport: 53}
	h.expect(true, q, "pass")
	h.expect(false, testPkt{src: "10.0.0.7", dst: "10.0.0.1", proto: 17, sport: 53, dport: 5000}, "pass")
	h.expect(false, testPkt{src: "10.0.0.8", dst: "10.0.0.1", proto: 17, sport: 53, dport: 5000}, "block")
	h.expect(false, testPkt{src: "10.0.0.7", dst: "10.0.0.1", proto: 17, sport: 53, dport: 5000}, "pass")

	e := testPkt{src: "2001:db8::1", dst: "ff02::1", proto: 58, icmpType: 128, icmpID: 7}
	h.expect(true, e, "pass")
	h.expect(false, testPkt{src: "2001:db8::5", dst: "2001:db8::1", proto: 58, icmpType: 129, icmpID: 7}, "pass")
	h.expect(false, testPkt{src: "2001:db8::6", dst: "2001:db8::1", proto: 58, icmpType: 129, icmpID: 7}, "block")
	sts, err := h.d.States()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range sts {
		got[s.Src.String()+">"+s.Dst.String()] = true
	}
	if len(sts) != 2 || !got["10.0.0.1>10.0.0.7"] || !got["2001:db8::1>2001:db8::5"] {
		t.Errorf("states after the replies: %v, want the two filled-in entries", got)
	}
}

// TestInlinePools loads rules with inline pool=(...)/hash=(...) tables:
// Compile gives them anonymous tables as ipf does, and the kernel answers
// as the Go engine does with those tables.
func TestInlinePools(t *testing.T) {
	h := newHarness(t)
	text := "block in all\n" +
		"pass in quick from pool=(10.0.0.0/8,!10.1.0.0/16,2001:db8::/32) to hash=(192.168.1.1,172.16.0.0/12)\n" +
		"pass in quick proto udp from !pool=(10.0.0.0/8) to any port = 53\n"
	rules, err := ipf.Parse("r", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Compile(rules, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	named, anon, err := ruleset.InlineTables(rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(anon) != 3 || anon[0].Name != "2147483649" || anon[1].Type != ippool.Hash {
		t.Fatalf("anonymous tables: %+v", anon)
	}
	ps, err := pool.NewSet(&ippool.File{Tables: anon}, func() uint32 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(engine.Config{Clock: &state.ManualClock{}, Pools: ps})
	defer eng.Close()
	set, err := ruleset.Compile(named)
	if err != nil {
		t.Fatal(err)
	}
	eng.Sets().Store(0, set)
	for _, c := range []struct {
		src, dst string
		dport    uint16
		want     string
	}{
		{"10.9.9.9", "192.168.1.1", 80, "pass"},
		{"10.1.9.9", "192.168.1.1", 80, "block"}, // the "!" entry
		{"10.9.9.9", "172.20.0.1", 80, "pass"},
		{"10.9.9.9", "192.168.1.2", 80, "block"},
		{"11.0.0.1", "192.168.1.1", 53, "pass"}, // !pool
		{"10.0.0.1", "10.0.0.2", 53, "block"},
		{"2001:db8::1", "2001:db8::2", 53, "pass"},
	} {
		p := testPkt{src: c.src, dst: c.dst, proto: 17, sport: 1000, dport: c.dport}
		h.expect(false, p, c.want)
		fp := flowPkt{v6: netip.MustParseAddr(c.src).Is6(), proto: 17, src: netip.MustParseAddr(c.src), dst: netip.MustParseAddr(c.dst), sp: 1000, dp: c.dport}
		var ep engine.Packet
		ep.Load(fp.frame()[14:], "eth0", false, 0)
		if got := eng.Check(&ep).Verdict; got.Passed() != (c.want == "pass") {
			t.Errorf("%s > %s:%d: engine %s, want %s", c.src, c.dst, c.dport, got, c.want)
		}
	}
}

// TestHotFeatures checks which directions of a set skip the candidate
// index (FEAT_HOT_*): those whose scans all run from compact lists. A
// direction with a long main list, a group or (outbound) a long
// accounting list keeps it.
func TestHotFeatures(t *testing.T) {
	long := func(dir string, n int) string {
		var s string
		for i := 0; i < n; i++ {
			s += fmt.Sprintf("block %s proto tcp from any to 198.18.0.1 port = %d\n", dir, 1000+i)
		}
		return s
	}
	for _, c := range []struct {
		name, rules string
		want        uint64
	}{
		{"empty", "", featHotIn | featHotOut},
		{"hp stateless", hpStatelessRules, featHotIn | featHotOut},
		{"hp stateful", strings.ReplaceAll(hpStatelessRules, "any\n", "any keep state\n"), featHotIn | featHotOut},
		{"long in", long("in", hotMax+1) + "pass out all\n", featHotOut},
		{"long out", "pass in all\n" + long("out", hotMax+1), featHotIn},
		{"group in", "pass in all head 10\nblock in proto tcp all group 10\npass out all\n", featHotOut},
		{"long accounting out", "pass out all\n" + strings.ReplaceAll(long("out", hotMax+1), "block out", "count out"), featHotIn},
		{"long accounting in", strings.ReplaceAll(long("in", hotMax+1), "block in", "count in"), featHotIn | featHotOut},
	} {
		im := compileText(t, c.rules)
		if got := im.features() & (featHotIn | featHotOut); got != c.want {
			t.Errorf("%s: hot bits %#x, want %#x", c.name, got, c.want)
		}
	}
}

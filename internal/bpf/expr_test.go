package bpf

import (
	"net/netip"
	"strings"
	"testing"

	"sluice/internal/engine"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// TestExpr runs exp { "..." } rules through BPF_PROG_TEST_RUN: ORed values,
// ANDed clauses, `!=`, masks, and the protocol rule that fails a negated
// clause on a packet of another protocol.
func TestExpr(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		rule string
		pkt  testPkt
		want string
	}{
		{`ip.p = 6;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 80, synF), "pass"},
		{`ip.p = 17, 1;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 80, synF), "block"},
		{`ip.src = 10.0.0.0/8; tcp.dport = 22, 80;`, tcp4("10.9.0.1", "192.168.0.2", 1000, 80, synF), "pass"},
		{`ip.src = 10.0.0.0/8; tcp.dport = 22, 80;`, tcp4("11.9.0.1", "192.168.0.2", 1000, 80, synF), "block"},
		{`ip.src = 10.0.0.0/8; tcp.dport = 22, 80;`, tcp4("10.9.0.1", "192.168.0.2", 1000, 81, synF), "block"},
		{`ip.dst = 192.168.0.0/255.255.0.0;`, tcp4("10.9.0.1", "192.168.7.2", 1000, 81, synF), "pass"},
		{`ip.addr = 192.168.7.2;`, tcp4("192.168.7.2", "10.0.0.1", 1000, 81, synF), "pass"},
		{`ip.addr = 192.168.7.3;`, tcp4("192.168.7.2", "10.0.0.1", 1000, 81, synF), "block"},
		{`ip.src != 10.0.0.1;`, tcp4("10.0.0.2", "10.0.0.1", 1000, 81, synF), "pass"},
		{`ip.src != 10.0.0.1;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "block"},
		{`tcp.port = 1000;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "pass"},
		{`tcp.sport = 81;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "block"},
		{`udp.dport = 53;`, testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 9, dport: 53}, "pass"},
		// a tcp.* clause on UDP fails even when negated
		{`tcp.dport != 53;`, testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 9, dport: 54}, "block"},
		{`tcp.dport != 53;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 54, synF), "pass"},
		{`tcp.flags = S/SA;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "pass"},
		{`tcp.flags = S/SA;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF|ackF), "block"},
		{`tcp.flags = SA;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF|ackF), "pass"},
		{`tcp.state = 4;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "block"},
		{`tcp.state != 4;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "pass"},
		{`ip6.src = 2001:db8::/32;`, tcp4("2001:db8::1", "2001:db8::2", 1000, 81, synF), "pass"},
		{`ip6.src = 2001:db9::/32;`, tcp4("2001:db8::1", "2001:db8::2", 1000, 81, synF), "block"},
		{`ip6.dst = 2001:db8::2, 2001:db8::3;`, tcp4("2001:db8::1", "2001:db8::2", 1000, 81, synF), "pass"},
		// an IPv4 field never matches IPv6 (and the reverse)
		{`ip.src = 0.0.0.0/0;`, tcp4("2001:db8::1", "2001:db8::2", 1000, 81, synF), "block"},
		{`ip6.addr = ::/0;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "block"},
		{`ip6.addr != 2001:db8::1;`, tcp4("10.0.0.1", "10.0.0.2", 1000, 81, synF), "pass"},
	} {
		h.load("block in all\npass in quick exp { \"" + c.rule + "\" }\n")
		ret, _ := h.run(false, c.pkt.build())
		if got := verdictName(ret); got != c.want {
			t.Errorf("exp %q, %s:%d > %s:%d proto %d flags %#x: got %s, want %s",
				c.rule, c.pkt.src, c.pkt.sport, c.pkt.dst, c.pkt.dport, c.pkt.proto, c.pkt.flags, got, c.want)
		}
	}
}

// TestExprLimits checks that an exp rule beyond the kernel's per-rule
// value count is refused with an error rather than truncated.
func TestExprLimits(t *testing.T) {
	vals := make([]string, maxExprVals+1)
	for i := range vals {
		vals[i] = "1"
	}
	text := "pass in exp { \"ip.p = " + strings.Join(vals, ",") + ";\" }\n"
	if _, err := Compile(mustParse(t, text), CompileOptions{}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("got %v, want a per-rule limit error", err)
	}
	text = "pass in exp { \"ip.p = " + strings.Join(vals[:maxExprVals], ",") + ";\" }\n"
	if _, err := Compile(mustParse(t, text), CompileOptions{}); err != nil {
		t.Fatalf("%d values: %v", maxExprVals, err)
	}
}

func mustParse(t *testing.T, text string) []*ipf.Rule {
	t.Helper()
	rs, err := ipf.Parse("t.conf", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatalf("parse %q: %v", text, err)
	}
	return rs
}

// TestZeroRuleAndListName zeroes one rule's counters and leaves the
// others, and names group lists by id.
func TestZeroRuleAndListName(t *testing.T) {
	h := newHarness(t)
	h.load("count in proto tcp all\ncount in proto udp all\npass in all head g1\npass in proto udp all group g1\n")
	h.expect(false, tcp4("10.0.0.1", "10.0.0.2", 1000, 80, synF), "pass")
	h.expect(false, testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 9, dport: 53}, "pass")
	infos, err := h.d.Rules(Active)
	if err != nil {
		t.Fatal(err)
	}
	find := func(acct bool, group string, n int) RuleInfo {
		for _, ri := range infos {
			if ri.Acct == acct && ri.Group == group && ri.Number == n {
				return ri
			}
		}
		t.Fatalf("rule %v %q %d not listed", acct, group, n)
		return RuleInfo{}
	}
	tcpRule, udpRule, grp := find(true, "", 1), find(true, "", 2), find(false, "g1", 1)
	if tcpRule.Hits != 1 || udpRule.Hits != 1 || grp.Hits != 1 {
		t.Fatalf("hits before: tcp %d udp %d group %d", tcpRule.Hits, udpRule.Hits, grp.Hits)
	}
	hits, bytes, err := h.d.ZeroRule(Active, tcpRule.Index)
	if err != nil || hits != 1 || bytes == 0 {
		t.Fatalf("ZeroRule: %d hits %d bytes, %v", hits, bytes, err)
	}
	if infos, err = h.d.Rules(Active); err != nil {
		t.Fatal(err)
	}
	if a, b := find(true, "", 1).Hits, find(true, "", 2).Hits; a != 0 || b != 1 {
		t.Errorf("after ZeroRule: zeroed rule %d hits, other rule %d (want 0, 1)", a, b)
	}
	if n, err := h.d.ListName(Active, grp.List); err != nil || n != "g1" {
		t.Errorf("ListName(group) = %q, %v", n, err)
	}
	if n, err := h.d.ListName(Active, tcpRule.List); err != nil || n != "" {
		t.Errorf("ListName(accounting) = %q, %v", n, err)
	}
	if _, err := h.d.ListName(Active, MaxLists); err == nil {
		t.Error("ListName accepted an id out of range")
	}
}

// TestIPv4AH checks the AH skip (§2.1): fi_p stays AH, so `proto tcp`
// does not match, but the ports behind AH are read (tcp/udp rules match
// them) and a short or oversized AH is short or bad. The engine agrees
// on each packet.
func TestIPv4AH(t *testing.T) {
	h := newHarness(t)
	ah := func(proto uint8, dp uint16) flowPkt {
		return flowPkt{proto: proto, src: netip.MustParseAddr("10.0.0.1"), dst: netip.MustParseAddr("10.0.0.2"),
			sp: 1000, dp: dp, flags: synF, icmp: 8, ah: true}
	}
	bigAH := func(b []byte) { b[14+20+1] = 200 } // AH longer than the packet
	for _, c := range []struct {
		rules string
		pkt   flowPkt
		want  string
		mut   func([]byte)
	}{
		{"block in all\npass in quick proto tcp/udp from any to any port = 80\n", ah(6, 80), "pass", nil},
		{"block in all\npass in quick proto tcp/udp from any to any port = 80\n", ah(17, 80), "pass", nil},
		{"block in all\npass in quick proto tcp/udp from any to any port = 80\n", ah(6, 81), "block", nil},
		{"block in all\npass in quick proto tcp from any to any port = 80\n", ah(6, 80), "block", nil},
		{"block in all\npass in quick proto ah all\n", ah(6, 80), "pass", nil},
		{"block in all\npass in quick proto icmp all icmp-type echo\n", ah(1, 0), "block", nil},
		{"block in all\npass in quick exp { \"ip.p = 51;\" }\n", ah(17, 80), "pass", nil},
		{"block in all\npass in quick exp { \"udp.dport = 80;\" }\n", ah(17, 80), "block", nil},
		{"block in all\npass in quick with ah\n", ah(17, 80), "pass", nil},
		// an AH longer than the packet is freed before the rules (bad-packet)
		{"block in all\npass in quick with bad\n", ah(17, 80), "block", bigAH},
		{"block in all\npass in quick with bad\n", ah(17, 80), "block", nil},
	} {
		h.load(c.rules)
		frame := c.pkt.frame()
		if c.mut != nil {
			c.mut(frame)
		}
		ret, _ := h.run(false, frame)
		if got := verdictName(ret); got != c.want {
			t.Errorf("%q, %s: kernel %s, want %s", c.rules, c.pkt, got, c.want)
		}
		rs := mustParse(t, c.rules)
		set, err := ruleset.Compile(rs)
		if err != nil {
			t.Fatal(err)
		}
		eng := engine.New(engine.Config{Clock: &state.ManualClock{}})
		eng.Sets().Store(0, set)
		var ep engine.Packet
		ep.Load(append([]byte(nil), frame[14:]...), "eth0", false, 0)
		if got := eng.Check(&ep).Verdict; got.Passed() != (c.want == "pass") {
			t.Errorf("%q, %s: engine %s, want %s", c.rules, c.pkt, got, c.want)
		}
		eng.Close()
	}
}

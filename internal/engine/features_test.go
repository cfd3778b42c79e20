package engine

import (
	"net/netip"
	"testing"

	"sluice/internal/packet"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

type recorder struct {
	rst, icmp int
	code      uint8
	asDest    bool
	routes    []string
}

func (r *recorder) SendRST(p *Packet) { r.rst++ }
func (r *recorder) SendICMP(p *Packet, code uint8, asDest bool) {
	r.icmp++
	r.code, r.asDest = code, asDest
}
func (r *recorder) Route(p *Packet, iface string, nh netip.Addr, dup bool) {
	s := iface
	if nh.IsValid() {
		s += ":" + nh.String()
	}
	if dup {
		s = "dup " + s
	}
	r.routes = append(r.routes, s)
}

func TestReplies(t *testing.T) {
	e := newEngine(t, "block return-rst in proto tcp all\nblock return-icmp-as-dest(port-unr) in proto udp all\nblock return-rst out all\n")
	rec := &recorder{}
	e.SetReplier(rec)
	var p Packet
	check(e, &p, mkTCP("1.1.1.1", "2.2.2.2", 1, 2, 0x02, 1, 0), false, "a")
	check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), false, "a")
	check(e, &p, mkTCP("1.1.1.1", "2.2.2.2", 1, 2, 0x02, 1, 0), true, "a")
	if rec.rst != 1 {
		t.Errorf("RSTs: got %d, want 1 (none for outbound)", rec.rst)
	}
	if rec.icmp != 1 || rec.code != 3 || !rec.asDest {
		t.Errorf("ICMP: got %d code %d asDest %v, want 1 code 3 as-dest", rec.icmp, rec.code, rec.asDest)
	}
}

func TestRouting(t *testing.T) {
	e := newEngine(t, "pass in on a dup-to b:10.0.0.9 to c all\n")
	rec := &recorder{}
	e.SetRouter(rec)
	var p Packet
	check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), false, "a")
	if len(rec.routes) != 2 || rec.routes[0] != "dup b:10.0.0.9" || rec.routes[1] != "c" {
		t.Errorf("routes: got %q", rec.routes)
	}
}

func TestPPS(t *testing.T) {
	clk := &state.ManualClock{}
	rs, err := ipf.Parse("t", []byte("pass in quick proto udp all pps 2\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Clock: clk})
	set := mustCompile(t, rs)
	e.Sets().Store(0, set)
	var p Packet
	pkt := mkUDP("1.1.1.1", "2.2.2.2", 1, 2)
	var got []Verdict
	for i := 0; i < 3; i++ {
		got = append(got, check(e, &p, pkt, false, "a").Verdict)
	}
	clk.Advance(2)
	got = append(got, check(e, &p, pkt, false, "a").Verdict)
	want := []Verdict{VerdictPass, VerdictPass, VerdictBlock, VerdictPass}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("packet %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func TestKeepLimit(t *testing.T) {
	e := newEngine(t, "pass return-rst in quick proto tcp from any to any port = 25 keep limit 2\n")
	var p Packet
	syn := func(src string, sp uint16) Verdict {
		return check(e, &p, mkTCP(src, "2.2.2.2", sp, 25, 0x02, 1, 0), false, "a").Verdict
	}
	if v := syn("1.1.1.1", 1); v != VerdictPass {
		t.Fatalf("first connection: %v", v)
	}
	syn("1.1.1.1", 2)
	if v := syn("1.1.1.1", 3); v != VerdictBlockReturnRST {
		t.Errorf("third connection from one source: got %v, want %v", v, VerdictBlockReturnRST)
	}
	if v := syn("1.1.1.2", 3); v != VerdictPass {
		t.Errorf("other source: got %v, want pass", v)
	}
	check(e, &p, mkTCP("1.1.1.1", "2.2.2.2", 1, 25, 0x11, 2, 1), false, "a")
	if v := syn("1.1.1.1", 4); v != VerdictPass {
		t.Errorf("after a close: got %v, want pass", v)
	}
}

type ifaddrs map[string]netip.Addr

func (m ifaddrs) IfAddr(name string, v6 bool) (netip.Addr, bool) {
	a, ok := m[name]
	return a, ok && a.Is6() == v6
}

func TestInterfaceAddress(t *testing.T) {
	e := newEngine(t, "block in from any to (nic0)\npass in from any to (nic0)/24\n")
	e.SetIfAddrs(ifaddrs{"nic0": netip.MustParseAddr("2.2.2.2")})
	var p Packet
	for _, c := range []struct {
		dst  string
		want Verdict
	}{{"2.2.2.2", VerdictPass}, {"2.2.2.9", VerdictPass}, {"2.2.3.2", VerdictNoMatch}} {
		if v := check(e, &p, mkUDP("1.1.1.1", c.dst, 1, 2), false, "nic1").Verdict; v != c.want {
			t.Errorf("to %s: got %v, want %v", c.dst, v, c.want)
		}
	}
	e = newEngine(t, "block in from any to (nic0)\n")
	e.SetIfAddrs(ifaddrs{"nic0": netip.MustParseAddr("2.2.2.2")})
	if v := check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), false, "nic1").Verdict; v != VerdictBlock {
		t.Errorf("exact interface address: got %v, want block", v)
	}
}

// mkFrag builds an IPv4 UDP fragment: off in bytes, payload bytes of
// data (the first fragment carries the UDP header inside them).
func mkFrag(id uint16, off int, mf bool, n int) []byte {
	b := make([]byte, 20+n)
	b[0], b[8], b[9] = 0x45, 63, 17
	b[2], b[3] = byte((20+n)>>8), byte(20+n)
	b[4], b[5] = byte(id>>8), byte(id)
	fo := off / 8
	if mf {
		fo |= 0x2000
	}
	b[6], b[7] = byte(fo>>8), byte(fo)
	copy(b[12:], []byte{1, 1, 1, 1, 2, 2, 2, 2})
	if off == 0 {
		b[20], b[21], b[22], b[23] = 0, 53, 0, 53
	}
	return b
}

func TestKeepFrags(t *testing.T) {
	e := newEngine(t, "block in all\npass in proto udp from any to any port = 53 keep frags\n")
	var p Packet
	steps := []struct {
		pkt  []byte
		want Verdict
	}{
		{mkFrag(7, 0, true, 32), VerdictPass},   // first fragment matches the rule
		{mkFrag(7, 32, true, 32), VerdictPass},  // in order: fragment cache
		{mkFrag(7, 64, false, 16), VerdictPass}, // last fragment
		{mkFrag(7, 8, false, 16), VerdictBlock}, // overlaps the first fragment: bad, to the rules (block in all)
		{mkFrag(8, 32, false, 16), VerdictBlock},
	}
	for i, s := range steps {
		res := check(e, &p, s.pkt, false, "nic0")
		if res.Verdict != s.want {
			t.Errorf("step %d: got %v, want %v", i, res.Verdict, s.want)
		}
		if i == 3 && res.Reason != ReasonBadFrag {
			t.Errorf("overlap reason: got %d, want %d", res.Reason, ReasonBadFrag)
		}
	}
}

func TestExpire(t *testing.T) {
	clk := &state.ManualClock{}
	rs, err := ipf.Parse("t", []byte("pass in proto udp all keep state\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Clock: clk})
	e.Sets().Store(0, mustCompile(t, rs))
	var p Packet
	check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), false, "a")
	if n := e.Expire(); n != 0 || e.States.Active() != 1 {
		t.Fatalf("fresh entry expired (%d)", n)
	}
	clk.Advance(241) // udp_timeout is 240 ticks
	if n := e.Expire(); n != 1 || e.States.Active() != 0 {
		t.Errorf("after udp_timeout: expired %d, active %d; want 1, 0", n, e.States.Active())
	}
}

// TestFastroute: an inbound pass with fastroute leaves through the
// routing table (no interface given, so the one it arrived on), before
// any `to`; outbound, fastroute does nothing.
func TestFastroute(t *testing.T) {
	e := newEngine(t, "pass in fastroute all\npass out fastroute all\n")
	rec := &recorder{}
	e.SetRouter(rec)
	var p Packet
	if r := check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), false, "a"); !r.Forwarded {
		t.Errorf("inbound: not forwarded")
	}
	if r := check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), true, "b"); r.Forwarded {
		t.Errorf("outbound: forwarded")
	}
	if len(rec.routes) != 1 || rec.routes[0] != "a" {
		t.Errorf("routes: got %q, want [a]", rec.routes)
	}
}

type routeNAT struct{ outIfs []string }

func (f *routeNAT) In(p *Packet) bool { return true }
func (f *routeNAT) Out(p *Packet, tag string) bool {
	f.outIfs = append(f.outIfs, p.IfName)
	return p.IfName != "deny"
}

// TestInboundRouteNATsOut: an inbound packet sent elsewhere by `to` or
// fastroute is counted by outbound accounting and translated as it leaves
// (ipf_fastroute); if that translation fails it is not sent.
func TestInboundRouteNATsOut(t *testing.T) {
	e := newEngine(t, "pass in on a to b all\npass in on c fastroute all\npass in on d to deny all\ncount out on b all\n")
	rec := &recorder{}
	nat := &routeNAT{}
	e.SetRouter(rec)
	e.SetNAT(nat)
	var p Packet
	for _, ifn := range []string{"a", "c", "d"} {
		check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), false, ifn)
		if p.Out || p.IfName != ifn {
			t.Errorf("%s: packet left as out=%v on %s", ifn, p.Out, p.IfName)
		}
	}
	if len(rec.routes) != 2 || rec.routes[0] != "b" || rec.routes[1] != "c" {
		t.Errorf("routes: got %q, want [b c]", rec.routes)
	}
	if len(nat.outIfs) != 3 || nat.outIfs[0] != "b" || nat.outIfs[1] != "c" || nat.outIfs[2] != "deny" {
		t.Errorf("NAT-out on: got %q, want [b c deny]", nat.outIfs)
	}
	if got := e.sets.Active().AcctOut.Rules[0].Stats.Hits.Load(); got != 1 {
		t.Errorf("outbound accounting hits: got %d, want 1", got)
	}
}

// A state entry with no rule behind it (NAT proxies open such entries)
// lets a datagram's first fragment in; the later fragments then match the
// fragment cache entry it left, which has no rule either.
func TestFragOfRulelessState(t *testing.T) {
	e := newEngine(t, "block in all\n")
	sp := state.Packet{V: 4, Proto: packet.ProtoUDP, Src: netip.MustParseAddr("2.2.2.2"), Dst: netip.MustParseAddr("1.1.1.1"),
		SPort: 53, DPort: 53, Out: true, IfName: "nic0", PLen: 28}
	if _, err := e.States.Add(&sp, ruleset.FRPass|ruleset.FRKeepState, &state.Limits{RuleNum: -1}); err != state.AddOK {
		t.Fatalf("state add: %v", err)
	}
	var p Packet
	for i, pkt := range [][]byte{mkFrag(9, 0, true, 32), mkFrag(9, 32, false, 16)} {
		res := check(e, &p, pkt, false, "nic0")
		if res.Verdict != VerdictPass || res.Rule != nil || res.RuleNum != -1 {
			t.Errorf("fragment %d: got %v rule %v num %d, want pass with no rule", i, res.Verdict, res.Rule, res.RuleNum)
		}
	}
}

// Fragments of a datagram already in the fragment cache, including a
// retransmitted first fragment that is offered to the cache again, do not
// allocate.
func TestKeepFragsAllocs(t *testing.T) {
	e := newEngine(t, "block in all\npass in proto udp from any to any port = 53 keep frags\n")
	first, next := mkFrag(7, 0, true, 32), mkFrag(7, 32, true, 32)
	var p Packet
	if res := check(e, &p, first, false, "nic0"); res.Verdict != VerdictPass {
		t.Fatalf("first fragment: got %v, want pass", res.Verdict)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if res := check(e, &p, first, false, "nic0"); res.Verdict != VerdictPass {
			t.Fatalf("retransmitted first fragment: got %v", res.Verdict)
		}
		if res := check(e, &p, next, false, "nic0"); res.Verdict != VerdictPass {
			t.Fatalf("next fragment: got %v", res.Verdict)
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocs per fragment pair, want 0", allocs)
	}
}

// TestKeepLimitExpiry (issue 10 item 6): keep-limit quotas come back when
// a connection expires, not only when it closes: an embryonic connection
// (spoofed SYNs) after tcp_syn_sent, an open one after tcp_idle_timeout.
func TestKeepLimitExpiry(t *testing.T) {
	clk := &state.ManualClock{}
	rs, err := ipf.Parse("t", []byte("pass in quick proto tcp from any to any port = 25 keep limit 2 cumulative\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := ruleset.Compile(rs)
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Clock: clk})
	e.Sets().Store(0, set)
	var p Packet
	pkt := func(src string, sp uint16, flags uint8) Verdict {
		return check(e, &p, mkTCP(src, "2.2.2.2", sp, 25, flags, 1, 0), false, "a").Verdict
	}
	id := set.In.Rules[0].ID
	syn := uint32(state.TCPTimeoutDefault("tcp_syn_sent"))
	idle := uint32(state.TCPTimeoutDefault("tcp_idle_timeout"))
	// two spoofed SYNs take the whole cumulative quota
	pkt("10.0.0.1", 1, 0x02)
	pkt("10.0.0.2", 1, 0x02)
	if v := pkt("10.0.0.3", 1, 0x02); v != VerdictBlock {
		t.Fatalf("third connection: got %v, want block", v)
	}
	clk.Advance(syn - 1)
	if v := pkt("10.0.0.3", 2, 0x02); v != VerdictBlock {
		t.Errorf("before tcp_syn_sent: got %v, want block", v)
	}
	clk.Advance(1)
	if v := pkt("10.0.0.3", 3, 0x02); v != VerdictPass {
		t.Errorf("after tcp_syn_sent: got %v, want pass (the spoofed SYNs' quota back)", v)
	}
	if n := e.limits.count(id, netip.Addr{}); n != 1 {
		t.Errorf("open connections: got %d, want 1", n)
	}
	// an open connection (its ACKs refresh it) keeps its quota until idle
	pkt("10.0.0.3", 3, 0x10)
	pkt("10.0.0.4", 1, 0x02)
	clk.Advance(syn + 1)
	pkt("10.0.0.3", 3, 0x10)
	e.Expire()
	if n := e.limits.count(id, netip.Addr{}); n != 1 {
		t.Errorf("after the embryonic one expired: %d open, want 1", n)
	}
	clk.Advance(idle)
	e.Expire()
	if n := e.limits.count(id, netip.Addr{}); n != 0 {
		t.Errorf("after tcp_idle_timeout: %d open, want 0", n)
	}
}

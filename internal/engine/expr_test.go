package engine

import "testing"

// TestExprRules covers `exp { "..." }` matching (ipf-reference §1.3.17,
// ipf_fr_matcharray): values ORed, clauses ANDed, `!=` inverts, and a
// tcp./udp. field fails any packet of another protocol, even with `!=`.
func TestExprRules(t *testing.T) {
	syn := mkTCP("1.1.1.1", "2.2.2.2", 1025, 80, 0x02, 1, 0)
	ack := mkTCP("1.1.1.1", "2.2.2.2", 1025, 80, 0x10, 1, 1)
	udp := mkUDP("10.1.2.3", "2.2.2.2", 53, 5353)
	tests := []struct {
		name string
		exp  string
		pkt  []byte
		want Verdict
	}{
		{"proto by name", `ip.p = tcp;`, syn, VerdictBlock},
		{"proto list ORed", `ip.p = 17,6;`, syn, VerdictBlock},
		{"proto miss", `ip.p = udp;`, syn, VerdictNoMatch},
		{"proto not", `ip.p != udp;`, syn, VerdictBlock},
		{"src host", `ip.src = 1.1.1.1;`, syn, VerdictBlock},
		{"src masked", `ip.src = 10.1.0.0/16;`, udp, VerdictBlock},
		{"src dotted mask", `ip.src = 10.0.0.0/255.0.0.0;`, udp, VerdictBlock},
		{"src miss", `ip.src = 2.2.2.2;`, syn, VerdictNoMatch},
		{"dst", `ip.dst = 2.2.2.2;`, syn, VerdictBlock},
		{"addr either side", `ip.addr = 2.2.2.2;`, syn, VerdictBlock},
		{"addr list", `ip.addr = 9.9.9.9,1.1.1.1;`, syn, VerdictBlock},
		{"v6 clause on v4 packet", `ip6.src = ::1;`, syn, VerdictNoMatch},
		{"v6 clause negated on v4 packet", `ip6.src != ::1;`, syn, VerdictBlock},
		{"tcp dport", `tcp.dport = 80;`, syn, VerdictBlock},
		{"tcp dport by service", `tcp.dport = http;`, syn, VerdictBlock},
		{"tcp sport miss", `tcp.sport = 80;`, syn, VerdictNoMatch},
		{"tcp port either side", `tcp.port = 1025;`, syn, VerdictBlock},
		{"tcp field on udp fails", `tcp.port = 53;`, udp, VerdictNoMatch},
		{"tcp field negated on udp still fails", `tcp.port != 1;`, udp, VerdictNoMatch},
		{"udp dport", `udp.dport = 5353;`, udp, VerdictBlock},
		{"udp sport", `udp.sport = 53;`, udp, VerdictBlock},
		{"flags exact default mask", `tcp.flags = S;`, syn, VerdictBlock},
		{"flags default mask is 0xff", `tcp.flags = S;`, mkTCP("1.1.1.1", "2.2.2.2", 1, 2, 0x42, 1, 0), VerdictNoMatch},
		{"flags with mask", `tcp.flags = S/SA;`, mkTCP("1.1.1.1", "2.2.2.2", 1, 2, 0x42, 1, 0), VerdictBlock},
		{"flags miss", `tcp.flags = S/SA;`, ack, VerdictNoMatch},
		{"clauses ANDed", `ip.p = tcp; tcp.dport = 80; ip.src = 1.1.1.1;`, syn, VerdictBlock},
		{"clauses ANDed miss", `ip.p = tcp; tcp.dport = 81;`, syn, VerdictNoMatch},
		{"state field never holds", `tcp.state = 4;`, syn, VerdictNoMatch},
		{"state field negated", `tcp.state != 4;`, syn, VerdictBlock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, "block in exp { \""+tt.exp+"\" }\n")
			var p Packet
			if got := check(e, &p, tt.pkt, false, "a").Verdict; got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// An exp rule keeps the rest of the rule: direction, interface, quick.
	e := newEngine(t, "block in on a exp { \"ip.p = tcp;\" }\npass in quick on b exp { \"ip.p = tcp;\" }\nblock in on b all\n")
	var p Packet
	for _, c := range []struct {
		ifn  string
		out  bool
		want Verdict
	}{{"a", false, VerdictBlock}, {"b", false, VerdictPass}, {"c", false, VerdictNoMatch}, {"a", true, VerdictNoMatch}} {
		if got := check(e, &p, syn, c.out, c.ifn).Verdict; got != c.want {
			t.Errorf("on %s out=%v: got %v, want %v", c.ifn, c.out, got, c.want)
		}
	}
}

// TestExprAllocs: exp and interface-address rules stay allocation-free.
func TestExprAllocs(t *testing.T) {
	e := newEngine(t, "block in exp { \"ip.p = tcp; tcp.dport = 80,81; ip.addr = 2.2.2.0/24;\" }\n"+
		"pass in on a from any to (a)/24\npass in on a from any to a/netmasked\n")
	e.SetIfAddrs(fakeIfAddrs{"a": mustAddr("2.2.2.1")})
	var p Packet
	pkt := mkTCP("1.1.1.1", "2.2.2.2", 1025, 80, 0x02, 1, 0)
	if n := testing.AllocsPerRun(200, func() { check(e, &p, pkt, false, "a") }); n != 0 {
		t.Errorf("allocs per packet: got %v, want 0", n)
	}
}

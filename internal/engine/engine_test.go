package engine

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"sluice/internal/packet/packettest"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// mkTCP builds an IPv4/TCP packet with valid checksums.
func mkTCP(src, dst string, sport, dport uint16, flags uint8, seq, ack uint32) []byte {
	tcp := packettest.TCP{SrcPort: sport, DstPort: dport, Seq: seq, Ack: ack, Flags: flags, Win: 4096}
	return packettest.V4{Src: src, Dst: dst, Proto: 6, TTL: 63, Payload: tcp.Bytes()}.Bytes()
}

// mkUDP builds an IPv4/UDP packet (UDP checksum 0 = none).
func mkUDP(src, dst string, sport, dport uint16) []byte {
	return packettest.V4{Src: src, Dst: dst, Proto: 17, TTL: 63, Payload: packettest.UDP(sport, dport, nil, true)}.Bytes()
}

func newEngine(t testing.TB, rules string) *Engine {
	t.Helper()
	rs, err := ipf.Parse("test", []byte(rules), ipf.ParseOptions{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	set, err := ruleset.Compile(rs)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	e := New(Config{})
	e.Sets().Store(0, set)
	return e
}

func check(e *Engine, p *Packet, data []byte, out bool, ifn string) Result {
	p.Load(data, ifn, out, 0)
	return e.Check(p)
}

// TestScan covers the scan semantics of ipf-reference §2.3.
func TestScan(t *testing.T) {
	syn := mkTCP("1.1.1.1", "2.2.2.2", 1025, 22, 0x02, 1, 0)
	udp := mkUDP("1.1.1.1", "2.2.2.2", 53, 53)
	tests := []struct {
		name  string
		rules string
		pkt   []byte
		out   bool
		want  Verdict
		rule  int // 0-based RuleNum, -1 = none
	}{
		{"no rules", "", syn, false, VerdictNoMatch, -1},
		{"last match wins", "pass in all\nblock in all\n", syn, false, VerdictBlock, 1},
		{"quick stops", "pass in quick all\nblock in all\n", syn, false, VerdictPass, 0},
		{"direction", "block out all\n", syn, false, VerdictNoMatch, -1},
		{"interface", "block in on nic1 all\npass in on nic0 all\n", syn, false, VerdictPass, 1},
		{"proto", "block in proto udp all\n", syn, false, VerdictNoMatch, -1},
		{"port", "block in proto tcp from any to any port = 22\n", syn, false, VerdictBlock, 0},
		{"port range", "block in proto tcp from any port 1000 >< 1025 to any\n", syn, false, VerdictNoMatch, -1},
		{"flags", "block in proto tcp all flags S/SA\n", syn, false, VerdictBlock, 0},
		{"not addr", "block in from !1.1.1.1 to any\n", syn, false, VerdictNoMatch, -1},
		{"mask", "block in from 1.1.0.0/16 to 2.2.2.0/24\n", syn, false, VerdictBlock, 0},
		{"return-rst", "block return-rst in proto tcp all\n", syn, false, VerdictBlockReturnRST, 0},
		{"return-icmp", "block return-icmp(port-unr) in proto udp all\n", udp, false, VerdictBlockReturnICMP, 0},
		{"group head result stands", "block in all head 10\npass in proto udp all group 10\n", syn, false, VerdictBlock, 0},
		{"group member replaces", "block in all head 10\npass in proto tcp all group 10\n", syn, false, VerdictPass, 0},
		{"group quick stops outer", "block in all head 10\npass in quick proto tcp all group 10\nblock in all\n", syn, false, VerdictPass, 0},
		{"group non-quick continues", "pass in all head 10\npass in proto tcp all group 10\nblock in all\n", syn, false, VerdictBlock, 1},
		{"skip", "skip 1 in all\nblock in all\n", syn, false, VerdictNoMatch, 0},
		{"skip then match", "skip 1 in all\nblock in all\npass in all\n", syn, false, VerdictPass, 2},
		{"count is not a verdict", "count in all\n", syn, false, VerdictNoMatch, -1},
		{"log only", "log in all\n", syn, false, VerdictNoMatch, 0},
		{"nomatch action drops", "pass in all\nnomatch in all\n", syn, false, VerdictBadPacket, 1},
		{"auth", "auth in all\n", syn, false, VerdictAuth, 0},
		{"preauth", "preauth in all\n", syn, false, VerdictPreauth, 0},
		{"keep state add fails on quick rule", "pass in quick proto tcp all flags S keep state (limit 0)\n", syn, false, VerdictPass, 0},
		{"with short", "block in all with short\n", syn, false, VerdictNoMatch, -1},
		{"tos", "block in tos 0x10 all\n", syn, false, VerdictNoMatch, -1},
		{"ttl", "block in ttl 63 all\n", syn, false, VerdictBlock, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.rules)
			var p Packet
			res := check(e, &p, tc.pkt, tc.out, "nic0")
			if res.Verdict != tc.want {
				t.Errorf("verdict: got %v, want %v", res.Verdict, tc.want)
			}
			if tc.want != VerdictNoMatch && res.RuleNum != tc.rule {
				t.Errorf("rule: got %d, want %d", res.RuleNum, tc.rule)
			}
		})
	}
}

func TestAccountingCounts(t *testing.T) {
	e := newEngine(t, "count in from 1.1.1.1 to any\npass in all\ncount out all\n")
	var p Packet
	check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), false, "nic0")
	check(e, &p, mkUDP("3.3.3.3", "2.2.2.2", 1, 2), false, "nic0")
	set := e.Sets().Active()
	if h := set.AcctIn.Rules[0].Stats.Hits.Load(); h != 1 {
		t.Errorf("count in hits: got %d, want 1", h)
	}
	if h := set.In.Rules[0].Stats.Hits.Load(); h != 2 {
		t.Errorf("pass in hits: got %d, want 2", h)
	}
	if h := set.AcctOut.Rules[0].Stats.Hits.Load(); h != 0 {
		t.Errorf("count out hits: got %d, want 0", h)
	}
}

func TestStatefulFlow(t *testing.T) {
	e := newEngine(t, "block in all\nblock out all\npass out quick proto tcp all flags S keep state\n")
	var p Packet
	steps := []struct {
		pkt  []byte
		out  bool
		want Verdict
	}{
		{mkTCP("10.0.0.1", "10.0.0.2", 1025, 80, 0x02, 100, 0), true, VerdictPass},
		{mkTCP("10.0.0.2", "10.0.0.1", 80, 1025, 0x12, 500, 101), false, VerdictPass},
		{mkTCP("10.0.0.1", "10.0.0.2", 1025, 80, 0x10, 101, 501), true, VerdictPass},
		{mkTCP("10.0.0.2", "10.0.0.1", 80, 1026, 0x10, 501, 101), false, VerdictBlock},
		{mkTCP("10.0.0.2", "10.0.0.1", 80, 1025, 0x10, 501+1<<24, 101), false, VerdictBlock},
	}
	for i, s := range steps {
		if got := check(e, &p, s.pkt, s.out, "nic0").Verdict; got != s.want {
			t.Errorf("step %d: got %v, want %v", i, got, s.want)
		}
	}
	if n := e.States.Active(); n != 1 {
		t.Errorf("state entries: got %d, want 1", n)
	}
}

func TestStateAddFailureBlocksPass(t *testing.T) {
	tun := NewTunables()
	if err := tun.SetString("state_max=1"); err != nil {
		t.Fatal(err)
	}
	rs, _ := ipf.Parse("t", []byte("pass in proto udp all keep state\n"), ipf.ParseOptions{})
	set, _ := ruleset.Compile(rs)
	e := New(Config{Tunables: tun})
	e.Sets().Store(0, set)
	var p Packet
	if v := check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 1, 2), false, "a").Verdict; v != VerdictPass {
		t.Fatalf("first: got %v", v)
	}
	res := check(e, &p, mkUDP("1.1.1.1", "2.2.2.2", 3, 2), false, "a")
	if res.Verdict != VerdictBlock || res.Reason != ReasonStateAdd {
		t.Errorf("second: got %v reason %d, want block reason %d", res.Verdict, res.Reason, ReasonStateAdd)
	}
}

func TestTunables(t *testing.T) {
	tun := NewTunables()
	if err := tun.SetString("fr_statemax=7,tcp_timeout=0x10"); err != nil {
		t.Fatal(err)
	}
	if v, _ := tun.Get("state_max"); v != 7 {
		t.Errorf("state_max via 4.1 alias: got %d, want 7", v)
	}
	if c := tun.StateConfig(); c.TCPTimeout[0] != 16 {
		t.Errorf("tcp_timeout: got %d, want 16", c.TCPTimeout[0])
	}
	// state_size sets state_maxbucket (IPFilter's ipftest -T list:
	// twice the size's bit length); a later state_maxbucket stands
	for _, c := range []struct {
		set  string
		want uint64
	}{{"state_size=1", 2}, {"state_size=5737", 26}, {"state_size=3,state_maxbucket=30", 30}, {"state_maxbucket=9,state_size=4", 6}} {
		if err := tun.SetString(c.set); err != nil {
			t.Fatal(err)
		}
		if v, _ := tun.Get("state_maxbucket"); v != c.want {
			t.Errorf("%s: state_maxbucket %d, want %d", c.set, v, c.want)
		}
	}
	for _, bad := range []string{"nosuch=1", "state_max", "state_max=x", "log_all=2", "active=1"} {
		if err := tun.SetString(bad); err == nil {
			t.Errorf("SetString(%q) succeeded, want error", bad)
		}
	}
}

const sixRules = `block in all
pass in quick proto tcp from 10.0.0.0/8 to any port = 22 flags S/SA
pass in proto udp from any to any port = 53
block in quick from 192.168.0.0/16 to any
pass in proto tcp from any to any port 6000 >< 6100
block in proto icmp all icmp-type echo
`

func bigRules(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "block in proto tcp from 172.%d.%d.0/24 to any port = %d\n", i/256, i%256, 1000+i)
	}
	b.WriteString("pass in all\n")
	return b.String()
}

func TestCheckAllocs(t *testing.T) {
	cases := []struct {
		name  string
		rules string
		setup func(e *Engine, p *Packet)
		pkt   []byte
		out   bool
		want  Verdict
	}{
		{"stateless 6 rules", sixRules, nil, mkTCP("10.1.1.1", "10.2.2.2", 1025, 22, 0x02, 1, 0), false, VerdictPass},
		{"1000 rules", bigRules(1000), nil, mkTCP("10.1.1.1", "10.2.2.2", 1025, 80, 0x10, 1, 1), false, VerdictPass},
		{"stateful established", "pass out quick proto tcp all flags S keep state\nblock in all\n",
			func(e *Engine, p *Packet) {
				check(e, p, mkTCP("10.0.0.1", "10.0.0.2", 1025, 80, 0x02, 100, 0), true, "nic0")
				check(e, p, mkTCP("10.0.0.2", "10.0.0.1", 80, 1025, 0x12, 500, 101), false, "nic0")
			}, mkTCP("10.0.0.2", "10.0.0.1", 80, 1025, 0x10, 501, 101), false, VerdictPass},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, c.rules)
			var p Packet
			if c.setup != nil {
				c.setup(e, &p)
			}
			allocs := testing.AllocsPerRun(500, func() {
				if v := check(e, &p, c.pkt, c.out, "nic0").Verdict; v != c.want {
					t.Fatalf("verdict %v, want %v", v, c.want)
				}
			})
			if allocs != 0 {
				t.Errorf("Check allocates %v times per packet, want 0", allocs)
			}
		})
	}
}

func benchCheck(b *testing.B, rules string, setup func(*Engine, *Packet), pkt []byte, out bool) {
	e := newEngine(b, rules)
	var p Packet
	if setup != nil {
		setup(e, &p)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		check(e, &p, pkt, out, "nic0")
	}
}

func BenchmarkCheckStateless6(b *testing.B) {
	benchCheck(b, sixRules, nil, mkTCP("10.1.1.1", "10.2.2.2", 1025, 22, 0x02, 1, 0), false)
}

func BenchmarkCheck1000Rules(b *testing.B) {
	benchCheck(b, bigRules(1000), nil, mkTCP("10.1.1.1", "10.2.2.2", 1025, 80, 0x10, 1, 1), false)
}

func BenchmarkCheckEstablished(b *testing.B) {
	benchCheck(b, "pass out quick proto tcp all flags S keep state\nblock in all\n", func(e *Engine, p *Packet) {
		check(e, p, mkTCP("10.0.0.1", "10.0.0.2", 1025, 80, 0x02, 100, 0), true, "nic0")
		check(e, p, mkTCP("10.0.0.2", "10.0.0.1", 80, 1025, 0x12, 500, 101), false, "nic0")
	}, mkTCP("10.0.0.2", "10.0.0.1", 80, 1025, 0x10, 501, 101), false)
}

func mustCompile(t testing.TB, rs []*ipf.Rule) *ruleset.Set {
	t.Helper()
	s, err := ruleset.Compile(rs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConcurrentCheck runs packets from several goroutines against one
// engine (run with -race to check the locking).
func TestConcurrentCheck(t *testing.T) {
	e := newEngine(t, "block in all\npass out quick proto tcp all flags S keep state\npass in proto udp all keep state\n")
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func(w int) {
			defer func() { done <- struct{}{} }()
			var p Packet
			for i := 0; i < 200; i++ {
				sp := uint16(1000 + w*1000 + i)
				check(e, &p, mkTCP("10.0.0.1", "10.0.0.2", sp, 80, 0x02, 100, 0), true, "nic0")
				check(e, &p, mkTCP("10.0.0.2", "10.0.0.1", 80, sp, 0x12, 500, 101), false, "nic0")
				check(e, &p, mkUDP("10.0.0.3", "10.0.0.4", sp, 53), false, "nic0")
			}
		}(w)
	}
	for w := 0; w < 4; w++ {
		<-done
	}
	if n := e.States.Active(); n != 4*200*2 {
		t.Errorf("state entries: got %d, want %d", n, 4*200*2)
	}
	s := e.Stats()
	if s.Pass[0]+s.Pass[1] != 4*200*3 {
		t.Errorf("passed: got %d, want %d", s.Pass[0]+s.Pass[1], 4*200*3)
	}
}

// TestHotPrefilterAgreesWithMatch compares scans with and without the
// ruleset.Hot prefilter on random rule sets and packets.
func TestHotPrefilterAgreesWithMatch(t *testing.T) {
	rnd := rand.New(rand.NewSource(3))
	addrs := []string{"any", "1.1.1.1", "1.1.0.0/16", "!1.1.1.0/24", "2.2.2.2/32", "!any", "10.0.0.0/8"}
	pick := func(s []string) string { return s[rnd.Intn(len(s))] }
	hosts := []string{"1.1.1.1", "1.1.2.2", "2.2.2.2", "10.1.1.1", "3.3.3.3"}
	for iter := 0; iter < 200; iter++ {
		var b strings.Builder
		for i := 0; i < 12; i++ {
			fmt.Fprintf(&b, "%s %s %s%sfrom %s to %s\n", pick([]string{"pass", "block"}), pick([]string{"in", "out"}),
				pick([]string{"", "quick "}), pick([]string{"", "proto tcp ", "proto udp ", "family inet "}),
				pick(addrs), pick(addrs))
		}
		withHot := newEngine(t, b.String())
		noHot := newEngine(t, b.String())
		set := noHot.Sets().Active()
		set.In.Hot, set.Out.Hot = nil, nil
		for j := 0; j < 20; j++ {
			var pkt []byte
			if rnd.Intn(2) == 0 {
				pkt = mkTCP(pick(hosts), pick(hosts), 1, 2, 0x02, 1, 0)
			} else {
				pkt = mkUDP(pick(hosts), pick(hosts), 1, 2)
			}
			out := rnd.Intn(2) == 0
			var p1, p2 Packet
			r1 := check(withHot, &p1, append([]byte(nil), pkt...), out, "nic0")
			r2 := check(noHot, &p2, append([]byte(nil), pkt...), out, "nic0")
			if r1.Verdict != r2.Verdict || r1.RuleNum != r2.RuleNum {
				t.Fatalf("rules:\n%s\npacket %x out=%v: with Hot %v/%d, without %v/%d",
					b.String(), pkt, out, r1.Verdict, r1.RuleNum, r2.Verdict, r2.RuleNum)
			}
		}
	}
}

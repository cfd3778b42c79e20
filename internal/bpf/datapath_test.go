package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
	"sluice/internal/testutil"
)

// TC return codes the program uses.
const (
	tcNext     = 0xffffffff // TC_ACT_UNSPEC: pass, let later programs run
	tcShot     = 2
	tcRedirect = 7
)

type harness struct {
	t *testing.T
	d *Datapath
	// fastSets counts the sets diffRandom ran on a program with constant
	// lists (lib/fast.h)
	fastSets int
}

var shared struct {
	once sync.Once
	d    *Datapath
	err  error
}

// newHarness returns the package's datapath (loading and verifying it takes
// about a second, so tests share one) reset to an empty state: no rules, no
// state entries, zero counters.
func newHarness(t *testing.T) *harness {
	t.Helper()
	testutil.RequireRoot(t)
	shared.once.Do(func() { shared.d, shared.err = Load(Options{NoPin: true}) })
	if shared.err != nil {
		t.Fatalf("Load: %+v", shared.err)
	}
	d := shared.d
	for _, s := range []Set{Active, Inactive} {
		if err := d.LoadRules(&Image{}, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.FlushFrags(); err != nil {
		t.Fatal(err)
	}
	if err := d.ZeroStats(); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, d: d}
}

func compileText(t testing.TB, text string) *Image {
	t.Helper()
	rs, err := ipf.Parse("test.conf", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	im, err := Compile(rs, CompileOptions{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return im
}

// compileSetText parses and compiles set n of a differential test into the
// engine's set and the kernel's image of it.
func compileSetText(t testing.TB, n int, text string) (*ruleset.Set, *Image) {
	t.Helper()
	rules, err := ipf.Parse("r", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatalf("set %d: %v\n%s", n, err, text)
	}
	set, err := ruleset.Compile(rules)
	if err != nil {
		t.Fatalf("set %d: %v\n%s", n, err, text)
	}
	im, err := CompileSet(set, CompileOptions{})
	if err != nil {
		t.Fatalf("set %d: %v\n%s", n, err, text)
	}
	return set, im
}

func (h *harness) load(text string) {
	h.t.Helper()
	if err := h.d.LoadRules(compileText(h.t, text), Active); err != nil {
		h.t.Fatalf("LoadRules: %v", err)
	}
}

// run sends the frame through the ingress (out=false) or egress program
// and returns the program's return code and the packet it left behind.
func (h *harness) run(out bool, frame []byte) (uint32, []byte) {
	h.t.Helper()
	prog := h.d.objs.SluiceIngress
	if out {
		prog = h.d.objs.SluiceEgress
	}
	buf := make([]byte, len(frame)+256)
	ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: buf})
	if err != nil {
		h.t.Fatalf("Run: %v", err)
	}
	return ret, buf
}

func verdictName(ret uint32) string {
	switch ret {
	case tcNext:
		return "pass"
	case tcShot:
		return "block"
	case tcRedirect:
		return "reply"
	}
	return fmt.Sprintf("ret%d", ret)
}

func (h *harness) expect(out bool, p testPkt, want string) {
	h.t.Helper()
	ret, _ := h.run(out, p.build())
	if got := verdictName(ret); got != want {
		dir := "in"
		if out {
			dir = "out"
		}
		h.t.Errorf("%s %s:%d -> %s:%d proto %d flags %#x: got %s, want %s", dir, p.src, p.sport, p.dst, p.dport, p.proto, p.flags, got, want)
	}
}

const (
	synF = 0x02
	ackF = 0x10
	finF = 0x01
	rstF = 0x04
	pshF = 0x08
)

func tcp4(src, dst string, sport, dport uint16, flags uint8) testPkt {
	return testPkt{src: src, dst: dst, proto: 6, sport: sport, dport: dport, flags: flags, seq: 1000, ack: 0}
}

func TestVerdicts(t *testing.T) {
	h := newHarness(t)
	type pk struct {
		out  bool
		p    testPkt
		want string
	}
	cases := []struct {
		name  string
		rules string
		pkts  []pk
	}{
		{"empty set passes", "", []pk{
			{false, tcp4("10.0.0.1", "10.0.0.2", 1025, 80, synF), "pass"},
		}},
		{"last match wins", "block in all\npass in proto tcp from any to any port = 80\n", []pk{
			{false, tcp4("10.0.0.1", "10.0.0.2", 1025, 80, synF), "pass"},
			{false, tcp4("10.0.0.1", "10.0.0.2", 1025, 81, synF), "block"},
			{true, tcp4("10.0.0.1", "10.0.0.2", 1025, 81, synF), "pass"},
		}},
		{"quick stops the scan", "block in quick proto tcp all\npass in all\n", []pk{
			{false, tcp4("10.0.0.1", "10.0.0.2", 1025, 80, synF), "block"},
			{false, testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 5, dport: 53}, "pass"},
		}},
		{"addresses and masks", "block in all\npass in from 10.1.0.0/16 to 192.168.1.1\npass in from !10.9.0.0/16 to 172.16.0.0/12\n", []pk{
			{false, tcp4("10.1.2.3", "192.168.1.1", 1, 2, ackF), "pass"},
			{false, tcp4("10.2.2.3", "192.168.1.1", 1, 2, ackF), "block"},
			{false, tcp4("10.1.2.3", "192.168.1.2", 1, 2, ackF), "block"},
			{false, tcp4("10.8.0.1", "172.20.0.1", 1, 2, ackF), "pass"},
			{false, tcp4("10.9.0.1", "172.20.0.1", 1, 2, ackF), "block"},
		}},
		{"ports", "block in all\npass in proto udp from any port 1:1023 to any port < 100\npass in proto tcp from any to any port 6000 >< 6010\npass in proto tcp from any to any port 20 <> 65000\n", []pk{
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 53, dport: 99}, "pass"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1024, dport: 99}, "block"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 53, dport: 100}, "block"},
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 6005, ackF), "pass"},
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 6010, ackF), "block"},
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 65001, ackF), "pass"},
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 19, ackF), "pass"},
		}},
		{"tcp flags", "block in all\npass in proto tcp all flags S/SA\n", []pk{
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, synF), "pass"},
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, synF|ackF), "block"},
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, ackF), "block"},
		}},
		{"icmp type and code", "block in all\npass in proto icmp all icmp-type echo\npass in proto icmp all icmp-type unreach code 3\n", []pk{
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 1, icmpType: 8}, "pass"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 1, icmpType: 3, icmpCode: 3, payload: 20}, "pass"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 1, icmpType: 3, icmpCode: 1, payload: 20}, "block"},
		}},
		{"ipv6", "block in all\npass in inet6 proto tcp from 2001:db8::/32 to any port = 22\npass in inet6 proto ipv6-icmp all icmp-type echo\n", []pk{
			{false, tcp4("2001:db8::1", "2001:db9::1", 9, 22, synF), "pass"},
			{false, tcp4("2001:db9::1", "2001:db8::1", 9, 22, synF), "block"},
			{false, testPkt{src: "2001:db8::1", dst: "2001:db8::2", proto: 58, icmpType: 128}, "pass"},
			{false, tcp4("10.0.0.1", "10.0.0.2", 9, 22, synF), "block"},
		}},
		{"groups", "block in all\npass in proto tcp from 10.0.0.0/8 to any head 10\nblock in quick proto tcp from any to any port = 23 group 10\nblock in proto tcp from 10.9.0.0/16 to any group 10\n", []pk{
			{false, tcp4("10.1.0.1", "1.1.1.1", 9, 80, ackF), "pass"},
			{false, tcp4("10.1.0.1", "1.1.1.1", 9, 23, ackF), "block"},
			{false, tcp4("10.9.0.1", "1.1.1.1", 9, 80, ackF), "block"},
			{false, tcp4("11.1.0.1", "1.1.1.1", 9, 80, ackF), "block"},
		}},
		{"quick head, member without quick continues", "pass in quick proto udp all head g\nblock in proto udp from any to any port = 9 group g\nblock in quick proto udp all\n", []pk{
			// head quick, no member match: head's quick stands
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 8}, "pass"},
			// member matches without quick: outer scan continues to the block quick
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 9}, "block"},
		}},
		{"with attributes", "pass in all\nblock in all with ipopts\nblock in proto tcp all with short\nblock in all with frag-body\n", []pk{
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 2, ipOpts: []byte{1, 1, 1, 0}}, "block"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 2}, "pass"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, fragOff: 10, payload: 16}, "block"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, fragOff: 0, moreFrags: true, sport: 1, dport: 2, payload: 16}, "pass"},
		}},
		{"tos and ttl", "block in all\npass in ttl 9 all\n", []pk{
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 2, ttl: 9}, "pass"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 2, ttl: 10}, "block"},
		}},
		{"interfaces", "block in all\npass in on lo all\nblock in on nosuchif0 all\n", []pk{
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, ackF), "pass"},
		}},
		{"nomatch and log-only keep default", "log in all\n", []pk{
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, ackF), "pass"},
		}},
		{"a nomatch rule drops", "pass in all\nnomatch in proto tcp all\n", []pk{
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, ackF), "block"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 2}, "pass"},
		}},
		{"skip", "block in all\nskip 1 in proto tcp all\npass in all\n", []pk{
			{false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, ackF), "block"},
			{false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 2}, "pass"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			h.load(c.rules)
			for _, p := range c.pkts {
				h.expect(p.out, p.p, p.want)
			}
		})
	}
}

func TestReturnRST(t *testing.T) {
	h := newHarness(t)
	h.load("block return-rst in proto tcp all\nblock return-icmp(port-unr) in proto udp all\n")
	p := tcp4("10.0.0.1", "10.0.0.2", 1025, 80, synF)
	p.seq = 5000
	ret, out := h.run(false, p.build())
	if ret != tcRedirect {
		t.Fatalf("got %s, want reply", verdictName(ret))
	}
	ip := out[14:34]
	tcp := out[34:54]
	if got := fmt.Sprintf("%d.%d.%d.%d>%d.%d.%d.%d", ip[12], ip[13], ip[14], ip[15], ip[16], ip[17], ip[18], ip[19]); got != "10.0.0.2>10.0.0.1" {
		t.Errorf("RST addresses: got %s", got)
	}
	if sp, dp := binary.BigEndian.Uint16(tcp[0:]), binary.BigEndian.Uint16(tcp[2:]); sp != 80 || dp != 1025 {
		t.Errorf("RST ports: got %d>%d, want 80>1025", sp, dp)
	}
	if f := tcp[13]; f != rstF|ackF {
		t.Errorf("RST flags: got %#x, want RST|ACK", f)
	}
	if ack := binary.BigEndian.Uint32(tcp[8:]); ack != 5001 {
		t.Errorf("RST ack: got %d, want 5001", ack)
	}
	if c := csum(ip, 0); c != 0xffff {
		t.Errorf("IP checksum does not verify: %#x", c)
	}
	ph := make([]byte, 12)
	copy(ph, ip[12:20])
	ph[9], ph[11] = 6, 20
	if c := csum(tcp, uint32(csum(ph, 0))); c != 0xffff {
		t.Errorf("TCP checksum does not verify: %#x", c)
	}
	// outbound return-rst only blocks
	h.load("block return-rst out proto tcp all\n")
	h.expect(true, p, "block")
	// an RST is never answered
	h.load("block return-rst in proto tcp all\n")
	h.expect(false, tcp4("10.0.0.1", "10.0.0.2", 1, 2, rstF|ackF), "block")

	h.load("block return-icmp(port-unr) in proto udp all\n")
	ret, out = h.run(false, testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 7, dport: 9}.build())
	if ret != tcRedirect {
		t.Fatalf("return-icmp: got %s, want reply", verdictName(ret))
	}
	if out[14+9] != 1 || out[34] != 3 || out[35] != 3 {
		t.Errorf("return-icmp: got proto %d type %d code %d, want 1 3 3", out[23], out[34], out[35])
	}
	if c := csum(out[34:70], 0); c != 0xffff {
		t.Errorf("ICMP checksum does not verify: %#x", c)
	}
}

func TestState(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\nblock out all\npass out quick proto tcp all flags S/SA keep state\npass out quick proto udp all keep state\npass out quick proto icmp all keep state\n")
	syn := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF)
	syn.seq = 100
	h.expect(true, syn, "pass")
	synack := syn.reply(synF | ackF)
	synack.seq, synack.ack = 9000, 101
	h.expect(false, synack, "pass")
	ack := syn
	ack.flags, ack.seq, ack.ack = ackF, 101, 9001
	h.expect(true, ack, "pass")
	data := synack
	data.flags, data.seq, data.ack, data.payload = ackF|pshF, 9001, 101, 100
	h.expect(false, data, "pass")
	// unsolicited SYN from outside: no state, rules block
	h.expect(false, tcp4("10.0.0.2", "10.0.0.1", 5555, 22, synF), "block")
	// a reply for a port pair we never opened
	stray := synack
	stray.sport = 81
	h.expect(false, stray, "block")

	sts, err := h.d.States()
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 1 {
		t.Fatalf("got %d state entries, want 1", len(sts))
	}
	if sts[0].TCPState != [2]uint8{4, 4} {
		t.Errorf("TCP state: got %d/%d, want 4/4 (ESTABLISHED)", sts[0].TCPState[0], sts[0].TCPState[1])
	}

	// UDP: reply allowed, expires after udp_ack_timeout/udp_timeout
	q := testPkt{src: "10.0.0.1", dst: "10.0.0.3", proto: 17, sport: 5353, dport: 53}
	h.expect(true, q, "pass")
	h.expect(false, q.reply(0), "pass")
	if err := h.d.AdvanceClock(13 * time.Second); err != nil {
		t.Fatal(err)
	}
	// the reply moved the entry to the 12 s queue
	h.expect(false, q.reply(0), "block")

	// ICMP echo: echo reply passes, an unrelated echo reply does not
	e := testPkt{src: "10.0.0.1", dst: "10.0.0.4", proto: 1, icmpType: 8, icmpID: 77}
	h.expect(true, e, "pass")
	h.expect(false, e.reply(0), "pass")
	other := e.reply(0)
	other.icmpID = 78
	h.expect(false, other, "block")

	st, err := h.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.StateAdded[0] != 1 || st.StateAdded[1] != 1 || st.StateAdded[2] != 1 {
		t.Errorf("states added tcp/udp/icmp: got %v, want 1 1 1", st.StateAdded[:3])
	}
}

func TestStateWindowAndFSM(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass out quick proto tcp all flags S/SA keep state\n")
	syn := tcp4("10.0.0.1", "10.0.0.2", 40001, 80, synF)
	syn.seq = 100
	h.expect(true, syn, "pass")
	synack := syn.reply(synF | ackF)
	synack.seq, synack.ack = 9000, 101
	h.expect(false, synack, "pass")
	// far outside the window
	oow := synack
	oow.flags, oow.seq, oow.ack = ackF, 9001+5000000, 101
	h.expect(false, oow, "block")
	// FIN/ACK close sequence leads to time-wait/closed
	fin := syn
	fin.flags, fin.seq, fin.ack = finF|ackF, 101, 9001
	h.expect(true, fin, "pass")
	finr := synack
	finr.flags, finr.seq, finr.ack = finF|ackF, 9001, 102
	h.expect(false, finr, "pass")
	sts, _ := h.d.States()
	if len(sts) != 1 || sts[0].TCPState[0] < 6 || sts[0].TCPState[1] < 6 {
		t.Errorf("after FINs: got %+v, want both sides closing", sts)
	}
	// a RST passes and closes
	rst := synack
	rst.flags, rst.seq, rst.ack = rstF|ackF, 9002, 102
	h.expect(false, rst, "pass")
	sts, _ = h.d.States()
	if len(sts) != 1 || sts[0].TCPState[1] != 11 {
		t.Errorf("after RST: got %+v, want side 1 CLOSED", sts)
	}
}

func TestStateLimit(t *testing.T) {
	h := newHarness(t)
	// not quick: a pass whose state cannot be added becomes a block
	h.load("block in all\npass in proto udp all keep state (limit 2)\n")
	for i, want := range []string{"pass", "pass", "block"} {
		h.expect(false, testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, sport: uint16(1000 + i), dport: 53}, want)
	}
	st, _ := h.d.Stats()
	if st.Drops[RSNStateAdd] != 1 {
		t.Errorf("state_add-fail drops: got %d, want 1", st.Drops[RSNStateAdd])
	}
}

// TestQuickKeepStateFailure: a quick rule whose state cannot be added is
// skipped, the previous verdict restored and the scan goes on (§2.3).
func TestQuickKeepStateFailure(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass in quick proto udp all keep state (limit 1)\npass in proto udp from any to any port = 54\n")
	p := testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, sport: 1000, dport: 53}
	h.expect(false, p, "pass") // creates the entry
	p.sport = 1001
	h.expect(false, p, "block") // limit reached: back to block in all
	p.dport = 54
	h.expect(false, p, "pass") // ... and the scan reached the port 54 rule
	st, _ := h.d.Stats()
	if st.Drops[RSNStateAdd] != 0 || st.Drops[RSNFilter] != 1 {
		t.Errorf("drops state_add-fail %d filter %d, want 0 and 1", st.Drops[RSNStateAdd], st.Drops[RSNFilter])
	}
	// a quick keep-state rule in a group: the head's verdict is restored
	h.load("pass in all head 1\nblock in quick proto tcp all keep state group 1\n")
	h.expect(false, tcp4("10.0.0.9", "10.0.0.1", 1000, 80, 0x04), "pass") // RST: no state
	h.expect(false, tcp4("10.0.0.9", "10.0.0.1", 1000, 80, 0x02), "block")
	rs, err := h.d.Rules(Active)
	if err != nil {
		t.Fatal(err)
	}
	if rs[1].Hits != 2 || rs[1].States != 1 {
		t.Errorf("group rule: hits %d states %d, want 2 and 1", rs[1].Hits, rs[1].States)
	}
}

func TestKeepLimitAndPPS(t *testing.T) {
	h := newHarness(t)
	h.load("pass in quick proto tcp from any to any port = 25 flags S keep limit 2\npass in quick proto udp all pps 3\n")
	for i, want := range []string{"pass", "pass", "block"} {
		h.expect(false, tcp4("10.0.0.9", "10.0.0.1", uint16(2000+i), 25, synF), want)
	}
	// another source has its own budget
	h.expect(false, tcp4("10.0.0.8", "10.0.0.1", 2000, 25, synF), "pass")
	for i, want := range []string{"pass", "pass", "pass", "block"} {
		h.expect(false, testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, sport: uint16(i + 1), dport: 9}, want)
	}
	if err := h.d.AdvanceClock(1100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	h.expect(false, testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, sport: 9, dport: 9}, "pass")
}

func TestCountersAndAccounting(t *testing.T) {
	h := newHarness(t)
	h.load("count in proto tcp all\npass in proto tcp all\nblock in proto udp all\n")
	for i := 0; i < 3; i++ {
		h.expect(false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, ackF), "pass")
	}
	h.expect(false, testPkt{src: "1.1.1.1", dst: "2.2.2.2", proto: 17, sport: 1, dport: 2}, "block")
	rules, err := h.d.Rules(Active)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, r := range rules {
		got[r.Text] = r.Hits
		if r.Text == "" {
			t.Errorf("rule %d has no text", r.Number)
		}
	}
	want := map[string]uint64{}
	for _, r := range rules {
		switch {
		case r.Acct:
			want[r.Text] = 3
		case r.Flags&ruleset.FRCmdMask == ruleset.FRPass:
			want[r.Text] = 3
		default:
			want[r.Text] = 1
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("rule %q: got %d hits, want %d", k, got[k], v)
		}
	}
	st, _ := h.d.Stats()
	if st.In.Pass != 3 || st.In.Block != 1 || st.In.Acct != 3 {
		t.Errorf("stats: got pass %d block %d acct %d, want 3 1 3", st.In.Pass, st.In.Block, st.In.Acct)
	}
}

func TestSwapAndInactive(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\n")
	if err := h.d.LoadRules(compileText(t, "pass in all\n"), Inactive); err != nil {
		t.Fatal(err)
	}
	p := tcp4("1.1.1.1", "2.2.2.2", 9, 80, ackF)
	h.expect(false, p, "block")
	if _, err := h.d.Swap(); err != nil {
		t.Fatal(err)
	}
	h.expect(false, p, "pass")
	if _, err := h.d.Swap(); err != nil {
		t.Fatal(err)
	}
	h.expect(false, p, "block")
	n, err := h.d.Flush(FlushIn, Active)
	if err != nil || n != 1 {
		t.Fatalf("Flush: got %d, %v; want 1 removed", n, err)
	}
	h.expect(false, p, "pass")
}

func TestLogRing(t *testing.T) {
	h := newHarness(t)
	rd, err := h.d.OpenLog()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	// records of earlier tests on the shared datapath
	rd.SetDeadline(time.Now().Add(50 * time.Millisecond))
	for {
		if _, err := rd.Read(); err != nil {
			break
		}
	}
	h.load("block in log quick proto tcp all\n")
	h.expect(false, tcp4("1.1.1.1", "2.2.2.2", 9, 80, ackF), "block")
	rd.SetDeadline(time.Now().Add(2 * time.Second))
	rec, err := rd.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Blocked() || rec.RuleNo != 1 || rec.Out || len(rec.Data) < 40 || rec.Data[9] != 6 {
		t.Errorf("log record: got %+v", rec)
	}
	if rec.Reason != RSNFilter {
		t.Errorf("reason: got %d, want %d", rec.Reason, RSNFilter)
	}
}

func TestCompileErrors(t *testing.T) {
	// a call of another function is refused (by ruleset.Compile already)
	rs, err := ipf.Parse("t.conf", []byte("call now fooflow/1 in all\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(rs, CompileOptions{}); err == nil || !strings.Contains(err.Error(), "fooflow") {
		t.Errorf("call fooflow: got %v, want an error naming the function", err)
	}
	for _, text := range []string{
		"decapsulate in proto 4 all head 5\n",
		"pass out on nic0 all set-tag(nat=a)\n",
		// the rule keeps max-per-src in 16 bits (faith13)
		"pass out proto udp all keep state (max-srcs 2, max-per-src 65536/24)\n",
		// no group scan over a state entry's ICMP errors in the
		// program: refused rather than passing what the group blocks
		"pass out proto udp all keep state (icmp-head 9)\nblock in proto icmp all group 9\n",
	} {
		rs, err := ipf.Parse("t.conf", []byte(text), ipf.ParseOptions{})
		if err != nil {
			t.Fatalf("parse %q: %v", text, err)
		}
		if _, err := Compile(rs, CompileOptions{}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%q: got %v, want ErrUnsupported", text, err)
		}
	}
	// max-srcs loads (faith13: the program counts sources, srcs.h); a
	// lone max-per-src, which IPFilter drops, limits nothing and tracks
	// nothing. Bits: the engine's default /32 without max-per-src, the
	// rule's mask with it, 0 (whole address) as 128.
	for text, want := range map[string][3]uint32{
		"pass out proto udp all keep state (max-per-src 1)\n":                   {0, 0, 0},
		"pass out proto udp all keep state (max-srcs 1)\n":                      {32, 1, 0},
		"pass out proto udp all keep state (max-srcs 2, max-per-src 1/24)\n":    {24, 2, 1},
		"pass out proto udp all keep state (max-srcs 3, max-per-src 65535/0)\n": {128, 3, 65535},
	} {
		rs, err = ipf.Parse("t.conf", []byte(text), ipf.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		im, err := Compile(rs, CompileOptions{})
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		r := im.rules[0]
		if got := [3]uint32{uint32(r.SrcBits), r.MaxSrcs, uint32(r.MaxPerSrc)}; got != want {
			t.Errorf("%q: bits, max-srcs, max-per-src %v, want %v", text, got, want)
		}
	}
}

// TestCompileNATTagIn: an inbound rule with a nat tag (match-tag)
// matches only packets inbound NAT tagged so, and the kernel
// NAT tags none (it refuses tagged rules): it never matches, as in the
// engine without a tagging NAT rule. A rule without one is left as it is.
func TestCompileNATTagIn(t *testing.T) {
	for text, never := range map[string]bool{
		"pass in all match-tag(nat=a)\n": true,
		"pass in all set-tag(log=3)\n":   false,
	} {
		rs, err := ipf.Parse("t.conf", []byte(text), ipf.ParseOptions{})
		if err != nil {
			t.Fatalf("parse %q: %v", text, err)
		}
		im, err := Compile(rs, CompileOptions{})
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if got := im.rules[0].Match&mNever != 0; got != never {
			t.Errorf("%q: never matches %v, want %v", text, got, never)
		}
	}
}

func TestTunables(t *testing.T) {
	h := newHarness(t)
	defer h.d.SetTunable("udp_ack_timeout", 24)
	if err := h.d.SetTunable("udp_ack_timeout", 2); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tu := range h.d.Tunables() {
		if tu.Name == "udp_ack_timeout" {
			found = tu.Cur == 2
		}
	}
	if !found {
		t.Error("udp_ack_timeout: not 2 after SetTunable")
	}
	if err := h.d.SetTunable("nope", 1); err == nil {
		t.Error("unknown tunable: got nil error")
	}
	h.load("block in all\npass out quick proto udp all keep state\n")
	q := testPkt{src: "10.0.0.1", dst: "10.0.0.3", proto: 17, sport: 5353, dport: 53}
	h.expect(true, q, "pass")
	h.expect(false, q.reply(0), "pass")
	if err := h.d.AdvanceClock(1500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// one second (2 ticks) after the reply the entry has expired
	h.expect(false, q.reply(0), "block")
}

func FuzzDecodeLog(f *testing.F) {
	f.Add(make([]byte, 48))
	f.Add(make([]byte, 48+logSnap))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeLog(b)
		if err == nil && len(r.Data) > logSnap {
			t.Fatalf("decoded %d data bytes", len(r.Data))
		}
	})
}

func TestICMPErrorMatchesState(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass out quick proto udp from any to any port = 7 keep state (no-icmp-err)\npass out quick proto udp all keep state\n")
	q := testPkt{src: "10.0.0.1", dst: "10.0.0.3", proto: 17, sport: 5353, dport: 53}
	h.expect(true, q, "pass")
	// unreachable from 10.0.0.3 quoting our datagram
	icmpErr := func(quoted testPkt) []byte {
		qb := quoted.build()[14 : 14+28]
		e := testPkt{src: quoted.dst, dst: quoted.src, proto: 1, icmpType: 3, icmpCode: 3, payload: 28}
		fr := e.build()
		copy(fr[14+20+8:], qb)
		return fr
	}
	if ret, _ := h.run(false, icmpErr(q)); verdictName(ret) != "pass" {
		t.Errorf("ICMP error for a known flow: got %s, want pass", verdictName(ret))
	}
	other := q
	other.sport = 9999
	if ret, _ := h.run(false, icmpErr(other)); verdictName(ret) != "block" {
		t.Errorf("ICMP error for an unknown flow: got %s, want block", verdictName(ret))
	}
	n := testPkt{src: "10.0.0.1", dst: "10.0.0.4", proto: 17, sport: 1234, dport: 7}
	h.expect(true, n, "pass")
	if ret, _ := h.run(false, icmpErr(n)); verdictName(ret) != "block" {
		t.Errorf("ICMP error for a no-icmp-err flow: got %s, want block", verdictName(ret))
	}
}

func TestFragmentCache(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\npass in proto udp from any to any port = 53 keep state\n")
	first := testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, sport: 999, dport: 53, moreFrags: true, payload: 24, id: 4242}
	h.expect(false, first, "pass")
	// a later fragment has no ports: only the cache lets it through
	body := testPkt{src: "10.0.0.9", dst: "10.0.0.1", proto: 17, fragOff: 4, payload: 16, id: 4242}
	h.expect(false, body, "pass")
	body.id = 4243
	h.expect(false, body, "block")
}

func TestReturnICMPv6(t *testing.T) {
	h := newHarness(t)
	h.load("block return-icmp(port-unr) in proto udp all\n")
	ret, out := h.run(false, testPkt{src: "2001:db8::1", dst: "2001:db8::2", proto: 17, sport: 7, dport: 9}.build())
	if ret != tcRedirect {
		t.Fatalf("got %s, want reply", verdictName(ret))
	}
	ip, icmp := out[14:54], out[54:110]
	if ip[6] != 58 || icmp[0] != 1 || icmp[1] != 4 {
		t.Errorf("got next header %d type %d code %d, want 58 1 4", ip[6], icmp[0], icmp[1])
	}
	ph := make([]byte, 40)
	copy(ph, ip[8:40])
	ph[35], ph[39] = 56, 58
	if c := csum(icmp, uint32(csum(ph, 0))); c != 0xffff {
		t.Errorf("ICMPv6 checksum does not verify: %#x", c)
	}
}

func TestImageInterfaces(t *testing.T) {
	rs, err := ipf.Parse("t", []byte("pass in on eth0 all\npass out on eth1,eth0 all\npass in on - all\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Compile(rs, CompileOptions{Ifindex: func(string) (int, bool) { return 0, false }})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(im.Interfaces()); got != "[eth0 eth1]" {
		t.Errorf("Interfaces: got %s, want [eth0 eth1]", got)
	}
}

// TestReturnICMPSource: return-icmp answers from the receiving interface's
// address, return-icmp-as-dest from the original destination (§1.3.15).
func TestReturnICMPSource(t *testing.T) {
	h := newHarness(t)
	h.load("block return-icmp(port-unr) in proto udp from any to any port = 53\n" +
		"block return-icmp-as-dest(port-unr) in proto udp from any to any port = 54\n")
	// BPF_PROG_TEST_RUN delivers on the loopback interface
	if err := h.d.SetInterfaceAddr(1, netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::99")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src, dst string
		port     uint16
		want     string
	}{
		{"10.0.0.1", "10.0.0.2", 53, "192.0.2.1"},
		{"10.0.0.1", "10.0.0.2", 54, "10.0.0.2"},
		{"2001:db8::1", "2001:db8::2", 53, "2001:db8::99"},
		{"2001:db8::1", "2001:db8::2", 54, "2001:db8::2"},
	} {
		p := testPkt{src: c.src, dst: c.dst, proto: 17, sport: 1000, dport: c.port}
		ret, out := h.run(false, p.build())
		if ret != tcRedirect {
			t.Fatalf("%s port %d: got %s, want reply", c.dst, c.port, verdictName(ret))
		}
		var from, to netip.Addr
		var sum uint16
		if netip.MustParseAddr(c.src).Is4() {
			ip := out[14:34]
			from, to = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
			sum = csum(ip, 0)
		} else {
			ip := out[14:54]
			from, to = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
			ph := make([]byte, 40)
			copy(ph, ip[8:40])
			ph[35], ph[39] = 56, 58
			sum = csum(out[54:110], uint32(csum(ph, 0)))
		}
		if from.String() != c.want || to.String() != c.src {
			t.Errorf("%s port %d: reply %s > %s, want %s > %s", c.dst, c.port, from, to, c.want, c.src)
		}
		if sum != 0xffff {
			t.Errorf("%s port %d: checksum does not verify: %#x", c.dst, c.port, sum)
		}
	}
}

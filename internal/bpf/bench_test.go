package bpf

import (
	"fmt"
	"math/bits"
	"math/rand"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// benchRun measures the program on one frame with BPF_PROG_TEST_RUN's own
// repeat loop, so the figure is the in-kernel cost per packet.
func benchRun(b *testing.B, h *harness, out bool, frame []byte) {
	b.Helper()
	prog := h.d.objs.SluiceIngress
	if out {
		prog = h.d.objs.SluiceEgress
	}
	b.ReportAllocs()
	b.ResetTimer()
	const repeat = 1000
	var total time.Duration
	for i := 0; i < b.N; i++ {
		_, d, err := prog.Benchmark(frame, repeat, nil)
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/packet")
}

func benchHarness(b *testing.B) *harness {
	shared.once.Do(func() { shared.d, shared.err = Load(Options{NoPin: true}) })
	if shared.err != nil {
		b.Skipf("Load: %v", shared.err)
	}
	return &harness{d: shared.d}
}

const sixRules = `block in all
pass in quick proto tcp from 10.0.0.0/8 to any port = 22 flags S/SA
pass in quick proto tcp from any to 192.168.1.0/24 port = 80
pass in quick proto udp from any to any port = 53
block in quick proto icmp all icmp-type echo
pass in proto tcp from any to any port 1024:65535
`

func BenchmarkStateless6Rules(b *testing.B) {
	h := benchHarness(b)
	if err := h.d.LoadRules(compileText(b, sixRules), Active); err != nil {
		b.Fatal(err)
	}
	// matches the last rule: the whole list is scanned
	benchRun(b, h, false, tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build())
}

// sixExprRules are sixRules as exp rules (the last one a 4-clause,
// multi-value expression that matches).
const sixExprRules = `block in all
pass in quick exp { "ip.src = 10.0.0.0/8; tcp.dport = 22; tcp.flags = S/SA;" }
pass in quick exp { "ip.dst = 192.168.1.0/24; tcp.dport = 80;" }
pass in quick exp { "udp.dport = 53;" }
block in quick exp { "ip.p = 1;" }
pass in exp { "ip.p = 6; ip.src = 10.0.0.0/8, 172.16.0.0/12; tcp.dport = 443, 8080; tcp.flags != S/SA;" }
`

func BenchmarkStatelessExpr6Rules(b *testing.B) {
	h := benchHarness(b)
	if err := h.d.LoadRules(compileText(b, sixExprRules), Active); err != nil {
		b.Fatal(err)
	}
	benchRun(b, h, false, tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build())
}

func BenchmarkStatefulEstablished(b *testing.B) {
	h := benchHarness(b)
	if err := h.d.LoadRules(compileText(b, "block in all\nblock out all\npass out quick proto tcp all flags S/SA keep state\n"), Active); err != nil {
		b.Fatal(err)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		b.Fatal(err)
	}
	syn := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF)
	syn.seq = 100
	synack := syn.reply(synF | ackF)
	synack.seq, synack.ack = 9000, 101
	ack := syn
	ack.flags, ack.seq, ack.ack = ackF, 101, 9001
	for _, s := range []struct {
		out bool
		p   testPkt
	}{{true, syn}, {false, synack}, {true, ack}} {
		if v, _, err := h.d.Run(s.out, s.p.build()); err != nil || v != VerdictPass {
			b.Fatalf("handshake: %v %v", v, err)
		}
	}
	// the same in-window ACK again and again: a state hit every time
	data := synack
	data.flags, data.seq, data.ack = ackF, 9001, 101
	benchRun(b, h, false, data.build())
}

// bigRules is a 10 000-rule set of host/port rules, the kind an index helps.
func bigRules(n int) string {
	var sb strings.Builder
	sb.WriteString("block in all\n")
	for i := 0; i < n-1; i++ {
		fmt.Fprintf(&sb, "pass in quick proto tcp from any to 10.%d.%d.%d port = %d\n", i/65536%256, i/256%256, i%256, 1000+i%5000)
	}
	return sb.String()
}

func benchBig(b *testing.B, index bool) {
	h := benchHarness(b)
	im := compileText(b, bigRules(10000))
	if !index {
		im.dst, im.ports = nil, nil
	}
	if err := h.d.LoadRules(im, Active); err != nil {
		b.Fatal(err)
	}
	// no rule but the first matches: a linear scan visits all 10 000
	v, _, err := h.d.Run(false, tcp4("172.16.0.1", "10.0.200.1", 40000, 999, ackF).build())
	if err != nil || v != VerdictBlock {
		b.Fatalf("got %v %v, want block", v, err)
	}
	benchRun(b, h, false, tcp4("172.16.0.1", "10.0.200.1", 40000, 999, ackF).build())
}

func Benchmark10000RulesIndexed(b *testing.B) { benchBig(b, true) }
func Benchmark10000RulesLinear(b *testing.B)  { benchBig(b, false) }

// srcBlockRules is the common large-set shape: an inbound source blocklist
// and an outbound destination blocklist, each n rules, then a stateless
// pass set. Every inbound block has dst=any, so only a source dimension of
// the index can prune them.
func srcBlockRules(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "block in from 10.%d.%d.%d/32 to any\n", i/65536%256, i/256%256, i%256)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "block out from any to 10.%d.%d.%d/32\n", i/65536%256, i/256%256, i%256)
	}
	for _, d := range []string{"in", "out"} {
		for _, p := range []string{"tcp", "udp", "icmp"} {
			fmt.Fprintf(&sb, "pass %s proto %s from any to any\n", d, p)
		}
	}
	return sb.String()
}

func benchSrc(b *testing.B, index bool) {
	h := benchHarness(b)
	im := compileText(b, srcBlockRules(5000))
	if !index {
		im.dst, im.ports, im.src, im.sports = nil, nil, nil, nil
	}
	if err := h.d.LoadRules(im, Active); err != nil {
		b.Fatal(err)
	}
	// a source on no list: every block rule is tested without an index
	frame := tcp4("172.16.0.1", "10.0.200.1", 40000, 80, ackF).build()
	v, _, err := h.d.Run(false, frame)
	if err != nil || v != VerdictPass {
		b.Fatalf("got %v %v, want pass", v, err)
	}
	benchRun(b, h, false, frame)
}

func Benchmark10000SrcRules(b *testing.B)       { benchSrc(b, true) }
func Benchmark10000SrcRulesLinear(b *testing.B) { benchSrc(b, false) }

// candidates is the Go reading of the index for one packet: the blocks the
// datapath would scan, from the same maps it is given.
func candidates(im *Image, src, dst netip.Addr, sport, dport uint16) filterBlocks {
	lookupAddr := func(idx map[prefixKey]filterBlocks, a netip.Addr) filterBlocks {
		fam, n := uint8(4), 32
		if a.Is6() {
			fam, n = 6, 128
		}
		var full [16]byte
		if a.Is4() {
			a4 := a.As4()
			copy(full[:], a4[:])
		} else {
			full = a.As16()
		}
		for l := n; l >= 0; l-- {
			if b, ok := idx[prefixKey{family: fam, addr: maskBytes(full, l), bits: l}]; ok {
				return b
			}
		}
		return filterBlocks{}
	}
	lookupPort := func(idx map[uint32]filterBlocks, p uint16) filterBlocks {
		if b, ok := idx[uint32(p)]; ok {
			return b
		}
		return idx[0x20000]
	}
	c := lookupAddr(im.dst, dst)
	and := func(o filterBlocks) {
		for i := range c.W {
			c.W[i] &= o.W[i]
		}
	}
	and(lookupPort(im.ports, dport))
	if im.src != nil {
		and(lookupAddr(im.src, src))
	}
	if im.sports != nil {
		and(lookupPort(im.sports, sport))
	}
	return c
}

// TestSourceIndexPrunes checks that the source blocklist shape leaves a
// packet from an unlisted source a handful of blocks to scan, and a listed
// source the block holding its rule.
func TestSourceIndexPrunes(t *testing.T) {
	im := compileText(t, srcBlockRules(5000))
	if im.src == nil {
		t.Fatal("source blocklist: no source index built")
	}
	if im.sports != nil {
		t.Error("no rule tests a source port, yet a source port index was built")
	}
	count := func(b filterBlocks) int {
		n := 0
		for _, w := range b.W {
			n += bits.OnesCount64(w)
		}
		return n
	}
	dst := netip.MustParseAddr("10.0.200.1")
	// the inbound pass rules share a block; the outbound blocks and passes
	// (src any) are candidates too but lie outside the in list
	if n := count(candidates(im, netip.MustParseAddr("172.16.0.1"), dst, 40000, 80)); n > 2*numBlocks/64 {
		t.Errorf("unlisted source: %d candidate blocks", n)
	}
	c := candidates(im, netip.MustParseAddr("10.0.7.9"), dst, 40000, 80)
	pos := 7*256 + 9
	if blk := pos >> blockBits; c.W[blk/64]&(1<<(blk%64)) == 0 {
		t.Errorf("listed source 10.0.7.9: block %d of its rule not a candidate", blk)
	}
	inBlocks := 0
	for blk := 0; blk < 5000>>blockBits; blk++ {
		if c.W[blk/64]&(1<<(blk%64)) != 0 {
			inBlocks++
		}
	}
	if inBlocks != 1 {
		t.Errorf("listed source 10.0.7.9: %d candidate blocks among the inbound blocks, want 1", inBlocks)
	}
}

// TestIndexMatchesLinear runs random packets through random rule sets with
// and without the index: the index must never change a verdict nor which
// rules matched (hit counters). The sets mix source and destination
// prefixes, negations, non-contiguous masks, source and destination ports,
// both families, both directions and a group.
func TestIndexMatchesLinear(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewSource(1))
	addrs4 := []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.3", "10.1.2.0/24", "192.168.0.0/24", "any", "!10.2.0.0/16",
		"10.1.2.0/255.255.0.255", "!10.1.2.3", "0.0.0.0/0", "8.8.8.8/32"}
	addrs6 := []string{"2001:db8::/32", "2001:db8:1::/48", "2001:db8:1::5", "any", "!2001:db8::/32", "::/0"}
	hosts4 := []string{"10.1.2.3", "10.1.9.9", "10.2.0.1", "192.168.0.7", "8.8.8.8", "10.200.2.3", "10.1.2.77"}
	hosts6 := []string{"2001:db8:1::5", "2001:db8:1::9", "2001:db8:2::1", "2001:dba::1"}
	// positive prefixes and = ports: what the index can prune on
	spec4 := []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.3", "10.1.2.0/24", "192.168.0.0/24", "8.8.8.8/32"}
	spec6 := []string{"2001:db8::/32", "2001:db8:1::/48", "2001:db8:1::5"}
	port := func(exact bool) string {
		if exact {
			return fmt.Sprintf(" port = %d", 20+rng.Intn(8))
		}
		switch rng.Intn(6) {
		case 0, 1:
			return fmt.Sprintf(" port = %d", 20+rng.Intn(8))
		case 2:
			return fmt.Sprintf(" port > %d", 20+rng.Intn(8))
		case 3:
			return fmt.Sprintf(" port != %d", 20+rng.Intn(8))
		case 4:
			return fmt.Sprintf(" port %d >< %d", 18+rng.Intn(4), 24+rng.Intn(4))
		}
		return ""
	}
	// mode forces dimensions to be specific for a run of rules, so whole
	// blocks prune on them: 1 source, 2 source port, 4 destination, 8
	// destination port
	rule := func(dir string, mode int) string {
		act := []string{"pass", "block"}[rng.Intn(2)]
		q := []string{"", " quick"}[rng.Intn(4)/3]
		addrs, spec := addrs4, spec4
		v6 := rng.Intn(4) == 0
		if v6 {
			addrs, spec = addrs6, spec6
		}
		pickAddr := func(specific bool) string {
			if specific {
				return spec[rng.Intn(len(spec))]
			}
			return addrs[rng.Intn(len(addrs))]
		}
		from, to := pickAddr(mode&1 != 0), pickAddr(mode&4 != 0)
		protos := []string{"tcp", "udp", "tcp/udp", "icmp", ""}
		if mode&(2|8) != 0 {
			protos = protos[:3]
		}
		proto := protos[rng.Intn(len(protos))]
		sp, dp := "", ""
		if proto == "tcp" || proto == "udp" || proto == "tcp/udp" {
			sp, dp = port(mode&2 != 0), port(mode&8 != 0)
		}
		if proto == "icmp" && v6 {
			proto = "ipv6-icmp"
		}
		if proto != "" {
			proto = " proto " + proto
		}
		return fmt.Sprintf("%s %s%s%s from %s%s to %s%s", act, dir, q, proto, from, sp, to, dp)
	}
	for set := 0; set < 3; set++ {
		var sb strings.Builder
		mode := 0
		for i := 0; i < 400; i++ {
			if i%24 == 0 {
				mode = rng.Intn(16)
			}
			dir := []string{"in", "out"}[rng.Intn(2)]
			fmt.Fprintln(&sb, rule(dir, mode))
			if i == 200 {
				fmt.Fprintf(&sb, "%s head 7\n", rule("in", 0))
				for j := 0; j < 40; j++ {
					fmt.Fprintf(&sb, "%s group 7\n", rule("in", j/16+1))
				}
			}
		}
		idx := compileText(t, sb.String())
		if idx.dst == nil || idx.src == nil || idx.sports == nil {
			t.Fatalf("set %d: index not fully built (dst %v, src %v, sport %v)", set, idx.dst != nil, idx.src != nil, idx.sports != nil)
		}
		lin := compileText(t, sb.String())
		lin.dst, lin.ports, lin.src, lin.sports = nil, nil, nil, nil
		type pkt struct {
			out bool
			p   testPkt
		}
		pkts := make([]pkt, 400)
		for i := range pkts {
			hosts := hosts4
			if rng.Intn(4) == 0 {
				hosts = hosts6
			}
			p := testPkt{src: hosts[rng.Intn(len(hosts))], dst: hosts[rng.Intn(len(hosts))],
				proto: []uint8{6, 17, 1}[rng.Intn(3)], sport: uint16(18 + rng.Intn(12)), dport: uint16(18 + rng.Intn(12)), flags: ackF}
			if p.proto == 1 && &hosts[0] == &hosts6[0] {
				p.proto = 58
			}
			if p.proto == 1 || p.proto == 58 {
				p.icmpType = 8
			}
			pkts[i] = pkt{rng.Intn(2) == 0, p}
		}
		var got [2][]Verdict
		var hits [2][]uint64
		for j, im := range []*Image{idx, lin} {
			if err := h.d.LoadRules(im, Active); err != nil {
				t.Fatal(err)
			}
			for _, p := range pkts {
				v, _, err := h.d.Run(p.out, p.p.build())
				if err != nil {
					t.Fatal(err)
				}
				got[j] = append(got[j], v)
			}
			infos, err := h.d.Rules(Active)
			if err != nil {
				t.Fatal(err)
			}
			for _, ri := range infos {
				hits[j] = append(hits[j], ri.Hits)
			}
		}
		for i, p := range pkts {
			if got[0][i] != got[1][i] {
				t.Errorf("set %d: out=%v proto %d %s:%d -> %s:%d: indexed %v, linear %v", set, p.out, p.p.proto, p.p.src, p.p.sport, p.p.dst, p.p.dport, got[0][i], got[1][i])
			}
		}
		matched := 0
		for i := range hits[1] {
			if hits[0][i] != hits[1][i] {
				t.Errorf("set %d: rule %d: %d hits indexed, %d linear", set, i, hits[0][i], hits[1][i])
			}
			matched += int(hits[1][i])
		}
		// the sets must exercise matching, not only the default
		if matched < len(pkts)/2 {
			t.Errorf("set %d: only %d rule hits for %d packets", set, matched, len(pkts))
		}
	}
}

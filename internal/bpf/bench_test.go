package bpf

import (
	"fmt"
	"math/bits"
	"math/rand"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"sluice/internal/rules/ipf"
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
	reportRuns(b, prog, frame, 1000)
}

// reportRuns runs prog on frame b.N times, repeat packets each, and reports
// the mean and the least ns/packet of a run. On a busy machine the mean
// carries every preemption; the least is a run that was not disturbed, the
// figure to compare between builds (both are there: the mean for a quiet
// machine, the least for a loaded one).
func reportRuns(b *testing.B, prog *ebpf.Program, frame []byte, repeat int) {
	b.Helper()
	var total time.Duration
	least := time.Duration(1<<63 - 1)
	for i := 0; i < b.N; i++ {
		_, d, err := prog.Benchmark(frame, repeat, nil)
		if err != nil {
			b.Fatal(err)
		}
		total += d
		least = min(least, d)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/packet")
	b.ReportMetric(float64(least.Nanoseconds()), "min-ns/packet")
}

// BenchmarkTrivial is the floor of the test_run figures: a program that
// returns at once, run on the same frame as the others (compare the
// datapath's figures with it from the same run on a noisy machine).
func BenchmarkTrivial(b *testing.B) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		b.Skipf("loading a program: %v", err)
	}
	defer p.Close()
	frame := tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build()
	b.ReportAllocs()
	b.ResetTimer()
	reportRuns(b, p, frame, 1000)
}

func benchHarness(b *testing.B) *harness {
	shared.once.Do(func() { shared.d, shared.err = Load(Options{NoPin: true}) })
	if shared.err != nil {
		b.Skipf("Load: %v", shared.err)
	}
	return &harness{d: shared.d}
}

// hpStatelessRules is HP's stateless test set (hp-test-nostate.conf).
const hpStatelessRules = "pass in proto tcp from any to any\npass out proto tcp from any to any\npass in proto udp from any to any\npass out proto udp from any to any\npass in proto icmp from any to any\npass out proto icmp from any to any\n"

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
	// the same in-window ACK again and again: a state hit every time
	in, _ := establishedFrames(b, h)
	benchRun(b, h, false, in)
}

// established sets up an outbound TCP flow in the harness (block by
// default, the flow passed by its state) and returns an inbound and an
// outbound segment of it that its entry passes again and again.
func establishedFrames(b *testing.B, h *harness) (in, out []byte) {
	b.Helper()
	if err := h.d.LoadRules(compileText(b, "block in all\nblock out all\npass out quick proto tcp all flags S/SA keep state\n"), Active); err != nil {
		b.Fatal(err)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		b.Fatal(err)
	}
	_, synack, ack := handshake(b, h)
	data := synack
	data.flags, data.seq, data.ack = ackF, 9001, 101
	return data.build(), ack.build()
}

// handshake opens the outbound TCP flow 10.0.0.1:40000 → 10.0.0.2:80
// through the harness's set (each segment must pass) and returns its SYN,
// SYN-ACK and ACK.
func handshake(b *testing.B, h *harness) (syn, synack, ack testPkt) {
	b.Helper()
	syn = tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF)
	syn.seq = 100
	synack = syn.reply(synF | ackF)
	synack.seq, synack.ack = 9000, 101
	ack = syn
	ack.flags, ack.seq, ack.ack = ackF, 101, 9001
	for _, s := range []struct {
		out bool
		p   testPkt
	}{{true, syn}, {false, synack}, {true, ack}} {
		if v, _, err := h.d.Run(s.out, s.p.build()); err != nil || v != VerdictPass {
			b.Fatalf("handshake: %v %v", v, err)
		}
	}
	return syn, synack, ack
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
	// the blocklists are runs, which need no index: build it anyway
	im.buildIndex()
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

// stageNames are the pipeline's stages as filter() marks them with STAGE:
// a copy of the program loaded with stop_at = n ends after stage n.
var stageNames = []string{
	1: "entry", 2: "enabled", 3: "setup", 4: "parse", 5: "counters", 6: "clock",
	7: "count in", 8: "state/frag", 9: "index", 10: "scan", 11: "limits/state add",
	12: "count out", 13: "log", 14: "verdict",
}

type stageKey struct {
	spec uint64
	n    uint32
}

var stageProgs = map[stageKey]*ebpf.Program{}

// stageProg is the ingress program specialised as s ending after stage n
// (0: the whole pipeline) over the harness's maps.
func stageProg(b testing.TB, h *harness, s progSpec, n uint32) *ebpf.Program {
	b.Helper()
	k := stageKey{s.key(), n}
	if p := stageProgs[k]; p != nil {
		return p
	}
	p, err := stageVariant(h.d, "sluice_ingress", n, s)
	if err != nil {
		b.Fatal(err)
	}
	stageProgs[k] = p
	return p
}

// currentSpec is the specialisation the configuration and the state
// table of d want now (what LoadRules attached).
func currentSpec(b testing.TB, d *Datapath) progSpec {
	b.Helper()
	var c filterConf
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		b.Fatal(err)
	}
	return d.withRunBig(fastLists(wantSpec(&c, d.stateCount(), d.fragsPresent(), -1), d.hotOf))
}

// stageVariant loads program name of the filter specialised as s with
// stop_at = n over d's maps.
func stageVariant(d *Datapath, name string, n uint32, s progSpec) (*ebpf.Program, error) {
	spec, err := filterSpec()
	if err != nil {
		return nil, err
	}
	if err := s.setVars(spec); err != nil {
		return nil, err
	}
	if err := spec.Variables["stop_at"].Set(n); err != nil {
		return nil, err
	}
	foldRodata(spec)
	repl := map[string]*ebpf.Map{}
	for mname, m := range map[string]*ebpf.Map{
		"rules": d.objs.Rules, "lists": d.objs.Lists, "pps": d.objs.Pps,
		"rule_states": d.objs.RuleStates, "config": d.objs.Config, "stats": d.objs.Stats,
		"state_count": d.objs.StateCount, "states": d.objs.States, "frags": d.objs.Frags, "dca": d.objs.Dca,
		"dca_conns": d.objs.DcaConns, "idx_dst": d.objs.IdxDst, "idx_dport": d.objs.IdxDport, "idx_src": d.objs.IdxSrc,
		"idx_sport": d.objs.IdxSport, "exprs": d.objs.Exprs, "ifaces": d.objs.Ifaces, "pools": d.objs.Pools,
		"ifaddrs": d.objs.Ifaddrs, "log_ring": d.objs.LogRing, "rule_texts": d.objs.RuleTexts,
		"list_metas": d.objs.ListMetas, "scratch": d.objs.Scratch, "sweeper": d.objs.Sweeper,
		"ctl_args": d.objs.CtlArgs, "ctl_keys": d.objs.CtlKeys, "hotlists": d.objs.Hotlists, "runs": d.objs.Runs,
		"hot_counts": d.objs.HotCounts, "cblocks": d.objs.Cblocks,
		"runs4": d.objs.Runs4, "run_bits": d.objs.RunBits,
	} {
		repl[mname] = m
	}
	for pname := range spec.Programs {
		if pname != name {
			delete(spec.Programs, pname)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: repl})
	if err != nil {
		return nil, fmt.Errorf("stage %d: %w", n, err)
	}
	p := coll.DetachProgram(name)
	coll.Close()
	return p, nil
}

// BenchmarkStages measures the pipeline stage by stage: for each scenario
// the ingress program is run to the end of each stage in turn, so the
// difference between two lines is what that stage costs the packet.
func BenchmarkStages(b *testing.B) {
	h := benchHarness(b)
	established := func() []byte {
		if err := h.d.LoadRules(compileText(b, "pass in proto tcp from any to any keep state\npass out proto tcp from any to any keep state\n"), Active); err != nil {
			b.Fatal(err)
		}
		syn := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF)
		syn.seq = 100
		synack := syn.reply(synF | ackF)
		synack.seq, synack.ack = 9000, 101
		h.d.Run(true, syn.build())
		h.d.Run(false, synack.build())
		data := synack
		data.flags, data.seq, data.ack = ackF, 9001, 101
		return data.build()
	}
	for _, sc := range []struct {
		name  string
		setup func() []byte
	}{
		{"empty", func() []byte {
			h.d.LoadRules(&Image{}, Active)
			return tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build()
		}},
		{"hp-stateless", func() []byte {
			h.d.LoadRules(compileText(b, hpStatelessRules), Active)
			return tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build()
		}},
		{"established", established},
		{"10000-indexed", func() []byte {
			// the stateless set behind 10 000 indexed rules none of which
			// matches: what the index and the scan add with the rule count
			if err := h.d.LoadRules(compileText(b, bigRules(10000)), Active); err != nil {
				b.Fatal(err)
			}
			return tcp4("172.16.0.1", "10.0.200.1", 40000, 999, ackF).build()
		}},
		{"nomatch-10000", func() []byte {
			// the bench's sluice-nomatch-10000: two runs of 5 000
			// addresses (a run each way) before the stateless set, a
			// packet none of them has: the runs table's miss
			if err := h.d.LoadRules(compileText(b, blocklist(10000)), Active); err != nil {
				b.Fatal(err)
			}
			return tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build()
		}},
	} {
		if _, err := h.d.FlushStates(nil); err != nil {
			b.Fatal(err)
		}
		frame := sc.setup()
		// the stages of the program specialised for the set (what
		// LoadRules attached), then the whole generic program
		spec := currentSpec(b, h.d)
		for n := uint32(1); n <= uint32(len(stageNames)); n++ {
			stop := n
			if n == uint32(len(stageNames)) {
				stop = 0
			}
			name := "whole"
			if int(n) < len(stageNames) {
				name = stageNames[n]
			}
			b.Run(fmt.Sprintf("%s/%02d-%s", sc.name, n, strings.ReplaceAll(name, " ", "_")), func(b *testing.B) {
				reportRuns(b, stageProg(b, h, spec, stop), frame, 1000)
			})
		}
		// the program that reads everything from config, for comparison
		b.Run(fmt.Sprintf("%s/%02d-generic", sc.name, len(stageNames)+1), func(b *testing.B) {
			reportRuns(b, stageProg(b, h, genericSpec, 0), frame, 1000)
		})
		if spec.fast != 0 {
			// a set whose lists are constants of its program (the stages
			// past the fast path's return are the whole): the same
			// program without them, the whole pipeline
			b.Run(fmt.Sprintf("%s/%02d-pipeline", sc.name, len(stageNames)+2), func(b *testing.B) {
				reportRuns(b, stageProg(b, h, spec.withoutFast(), 0), frame, 1000)
			})
		}
	}
}

// BenchmarkStateHit measures a state hit by the packet's way: a flow's
// own direction, its replies, and its replies while another flow of the
// table has entries both ways (IPFilter keeps two when a reply could not
// match the first). With a key that is the same both ways each is one
// hash lookup; before (a key per direction) a reply took two lookups as
// soon as any flow had entries both ways.
func BenchmarkStateHit(b *testing.B) {
	h := benchHarness(b)
	if err := h.d.LoadRules(compileText(b, "pass out quick proto udp all keep state\npass in quick proto udp all keep state\n"), Active); err != nil {
		b.Fatal(err)
	}
	fwd := testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 1000, dport: 53}
	reply := testPkt{src: "10.0.0.2", dst: "10.0.0.1", proto: 17, sport: 53, dport: 1000}
	run := func(out bool, p testPkt) {
		if v, _, err := h.d.Run(out, p.build()); err != nil || v != VerdictPass {
			b.Fatalf("%+v: %v %v", p, v, err)
		}
	}
	setup := func(twin bool) {
		if _, err := h.d.FlushStates(nil); err != nil {
			b.Fatal(err)
		}
		run(true, fwd)
		run(false, reply)
		if twin {
			// another flow with entries both ways: a reply with IP
			// options its entry's first reply did not have
			o, r := fwd, reply
			o.sport, r.dport = 2000, 2000
			r.ipOpts = []byte{1, 1, 1, 0}
			run(true, o)
			run(false, r)
		}
	}
	for _, c := range []struct {
		name string
		twin bool
		out  bool
		p    testPkt
	}{
		{"own-way", false, true, fwd},
		{"reply", false, false, reply},
		{"reply-twins-in-table", true, false, reply},
	} {
		b.Run(c.name, func(b *testing.B) {
			setup(c.twin)
			benchRun(b, h, c.out, c.p.build())
		})
	}
}

// blocklist is n rules of two blocklists (inbound sources, outbound
// destinations) and HP's stateless set: the million-rule shape of
// TestPrivilegedCost.
func blocklist(n int) string {
	var b strings.Builder
	for i := 0; i < n/2; i++ {
		fmt.Fprintf(&b, "block in from 198.%d.%d.%d/32 to any\nblock out from any to 198.%d.%d.%d/32\n",
			18+i>>16&1, i>>8&255, i&255, 18+i>>16&1, i>>8&255, i&255)
	}
	b.WriteString("pass in proto tcp from any to any\npass out proto tcp from any to any\n" +
		"pass in proto udp from any to any\npass out proto udp from any to any\n" +
		"pass in proto icmp from any to any\npass out proto icmp from any to any\n")
	return b.String()
}

// BenchmarkLoadMillion times what loading a million-rule set takes, by
// step (parse, compile, load into the kernel): the target is under 10 s
// in all. Run it with -benchtime 1x (and -cpuprofile to see where).
func BenchmarkLoadMillion(b *testing.B) {
	h := benchHarness(b)
	text := []byte(blocklist(1000000))
	var parse, comp, load time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rs, err := ipf.Parse("million.conf", text, ipf.ParseOptions{})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		im, err := Compile(rs, CompileOptions{})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := h.d.LoadRules(im, Active); err != nil {
			b.Fatal(err)
		}
		parse, comp, load = parse+t1.Sub(t0), comp+t2.Sub(t1), load+time.Since(t2)
	}
	b.ReportMetric(parse.Seconds()/float64(b.N), "parse-s")
	b.ReportMetric(comp.Seconds()/float64(b.N), "compile-s")
	b.ReportMetric(load.Seconds()/float64(b.N), "load-s")
	if err := h.d.LoadRules(&Image{}, Active); err != nil {
		b.Fatal(err)
	}
}

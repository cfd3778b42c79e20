package bpf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"sluice/internal/engine"
	"sluice/internal/packet"
	"sluice/internal/state"
)

// progsWithEst loads the filter programs specialised as s over d's maps
// (not attached), with the established path (lib/est.h) in or left out.
func progsWithEst(t testing.TB, d *Datapath, s progSpec, est bool) progPair {
	t.Helper()
	p, _ := specProgs(t, d, s, true, map[string]uint32{"k_est": b2u32(est)})
	return p
}

// randomEstRules returns a set that keeps state: keep state rules (pass,
// block, logged, log first, strict, loose, with ages or no-icmp-err) among
// stateless pass, block and return-rst rules, sometimes behind a default
// block.
func randomEstRules(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(pick(r, []string{"", "", "block in all\n", "block out all\n", "block in all\nblock out all\n"}))
	for n := 1 + r.IntN(5); n > 0; n-- {
		act := pick(r, []string{"pass", "pass", "pass", "block", "block return-rst"})
		b.WriteString(act)
		b.WriteString(pick(r, []string{" in", " out"}))
		if act == "pass" && r.IntN(5) == 0 {
			b.WriteString(pick(r, []string{" log", " log first"}))
		}
		if r.IntN(2) == 0 {
			b.WriteString(" quick")
		}
		proto := pick(r, []string{"tcp", "tcp", "udp", "tcp/udp", ""})
		if act == "block return-rst" {
			proto = "tcp"
		}
		if proto != "" {
			b.WriteString(" proto " + proto)
		}
		addr := func() string {
			switch r.IntN(4) {
			case 0:
				return pick(r, randAddr4)
			case 1:
				return pick(r, randAddr6)
			}
			return "any"
		}
		from, to := addr(), addr()
		if (from != "any") && (to != "any") && strings.Contains(from, ":") != strings.Contains(to, ":") {
			to = "any"
		}
		port := ""
		if (proto == "tcp" || proto == "udp" || proto == "tcp/udp") && r.IntN(3) == 0 {
			port = fmt.Sprintf(" port = %d", pick(r, randPorts))
		}
		if from == "any" && to == "any" && port == "" && r.IntN(2) == 0 {
			b.WriteString(" all")
		} else {
			b.WriteString(" from " + from + " to " + to + port)
		}
		if proto == "tcp" && r.IntN(3) == 0 {
			b.WriteString(" flags S/SA")
		}
		if act != "block return-rst" && r.IntN(10) < 7 {
			b.WriteString(" keep state")
			// aged TCP entries too: both sides age them by the
			// rule since rel10, as IPFilter does
			opts := []string{"", "", "", " (strict)", " (loose)", " (no-icmp-err)", " (age 20)", " (age 20/5)"}
			o := pick(r, opts)
			if (o == " (strict)" || o == " (loose)") && proto != "" && proto != "tcp" {
				// IPFilter takes strict and loose with proto tcp
				// only (a rule without a protocol it crashes on)
				o = ""
			}
			b.WriteString(o)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// tcpConv is a TCP conversation between two hosts: the handshake, data
// both ways, segments out of window, a RST or a close with FINs, and a new
// SYN on the same ports after it ended.
type tcpConv struct {
	p     flowPkt   // side 0 to side 1, the first SYN
	seq   [2]uint32 // each side's next sequence number
	stage int       // 0 closed, 1 SYN sent, 2 SYN-ACK sent, 3 established, 4 both FINs sent
	fin   [2]bool
	last  flowPkt
}

func newTCPConv(r *rand.Rand) *tcpConv {
	v6 := r.IntN(3) == 0
	addrs := randAddr4
	if v6 {
		addrs = randAddr6
	}
	p := flowPkt{v6: v6, proto: 6, out: r.IntN(2) == 0, sp: 30000 + uint16(r.IntN(1000)), dp: pick(r, randPorts)}
	p.src = netip.MustParseAddr(pick(r, addrs))
	p.dst = netip.MustParseAddr(addrs[(indexOf(addrs, p.src.String())+1+r.IntN(len(addrs)-1))%len(addrs)])
	return &tcpConv{p: p}
}

// from is side s's packet template.
func (c *tcpConv) from(s int) flowPkt {
	p := c.p
	if s == 1 {
		p.src, p.dst, p.sp, p.dp, p.out = c.p.dst, c.p.src, c.p.dp, c.p.sp, !c.p.out
	}
	return p
}

func (c *tcpConv) next(r *rand.Rand) flowPkt {
	var p flowPkt
	switch c.stage {
	case 0:
		if c.seq[0] != 0 {
			// the next conversation on the next port: on the
			// same ports the engine keeps the closed flow's entry
			// beside the new one where the kernel replaces it
			// (both programs alike; see the report)
			c.p.sp++
		}
		p = c.from(0)
		p.flags, p.seq = 0x02, r.Uint32()
		c.seq[0], c.fin = p.seq+1, [2]bool{}
		c.stage = 1
	case 1:
		p = c.from(1)
		p.flags, p.seq, p.ack = 0x12, r.Uint32(), c.seq[0]
		c.seq[1] = p.seq + 1
		c.stage = 2
	case 2:
		p = c.from(0)
		p.flags, p.seq, p.ack = 0x10, c.seq[0], c.seq[1]
		c.stage = 3
	case 3:
		s := r.IntN(2)
		if c.fin[s] {
			s = 1 - s
		}
		p = c.from(s)
		p.seq, p.ack = c.seq[s], c.seq[1-s]
		switch x := r.IntN(100); {
		case x < 70:
			p.flags = pick(r, []uint8{0x10, 0x18})
			p.payload = r.IntN(100)
			c.seq[s] += uint32(p.payload)
		case x < 80:
			// out of the receiver's window, ahead or behind
			p.flags, p.payload = 0x18, 1+r.IntN(50)
			p.seq += pick(r, []uint32{1 << 20, 1 << 31, 1<<32 - 200000})
		case x < 84:
			p.flags = 0x14
			c.stage = 0
		default:
			p.flags = 0x11
			c.seq[s]++
			c.fin[s] = true
			if c.fin[0] && c.fin[1] {
				c.stage = 4
			}
		}
	case 4:
		s := r.IntN(2)
		p = c.from(s)
		p.flags, p.seq, p.ack = 0x10, c.seq[s], c.seq[1-s]
		c.stage = 0
	}
	c.last = p
	return p
}

// icmpErrorFor returns an ICMP error (unreachable) about packet q, sent
// back from its destination, and the frame carrying it.
func icmpErrorFor(q flowPkt) (flowPkt, []byte) {
	quoted := q.frame()[14:]
	n := 28
	if q.v6 {
		n = 48
	}
	n = min(n, len(quoted))
	e := flowPkt{v6: q.v6, proto: 1, icmp: 3, src: q.dst, dst: q.src, out: !q.out, payload: n}
	l4off := 14 + 20
	if q.v6 {
		e.proto, e.icmp, l4off = 58, 1, 14+40
	}
	fr := e.frame()
	l4 := fr[l4off:]
	l4[1] = 3
	if q.v6 {
		l4[1] = 4
	}
	clear(l4[2:8])
	copy(l4[8:], quoted[:n])
	var init uint16
	if e.proto != 1 {
		init = packet.PseudoHeaderChecksum(e.proto, e.src, e.dst, len(l4))
	}
	binary.BigEndian.PutUint16(l4[2:], ^packet.Checksum(l4, init))
	return e, fr
}

// clean reports whether the established path may take p (fast_parse's
// packets: TCP or UDP, no IPv4 options or fragment, no IPv6 extension
// header, no AH).
func (f flowPkt) clean() bool {
	return (f.proto == 6 || f.proto == 17) && len(f.exts) == 0 && !f.ah && f.fragOff == 0 && !f.fragMore && f.fragID == 0
}

// estEvent is one step of the differential test: a packet, or the clock
// moved on.
type estEvent struct {
	pkt     flowPkt
	frame   []byte
	advance time.Duration
	icmpErr bool // an ICMP error about a packet sent
}

func (e estEvent) String() string {
	if e.advance != 0 {
		return fmt.Sprintf("clock +%v", e.advance)
	}
	return e.pkt.String()
}

// estEvents makes n steps: random packets of a few flows (flowGen), TCP
// conversations, ICMP errors about packets sent, and the clock moved past
// the short timeouts (45 s: UDP replies, last-ack, closed, age 20) and
// later past UDP's (another 100 s), far enough from every timeout that
// the kernel's real time between packets does not matter.
func estEvents(r *rand.Rand, n int) []estEvent {
	gen := newFlowGen(r)
	convs := []*tcpConv{newTCPConv(r), newTCPConv(r), newTCPConv(r)}
	var sent []flowPkt
	var evs []estEvent
	for i := 0; i < n; i++ {
		switch {
		case i == n*2/5:
			evs = append(evs, estEvent{advance: 45 * time.Second})
			continue
		case i == n*7/10:
			evs = append(evs, estEvent{advance: 100 * time.Second})
			continue
		}
		var p flowPkt
		switch x := r.IntN(100); {
		case x < 30:
			p = gen.next()
		case x < 90:
			p = pick(r, convs).next(r)
		default:
			if len(sent) == 0 {
				p = gen.next()
				break
			}
			// about a plain IPv4 packet: the engine and the kernel
			// differ on errors quoting AH or IPv6 (both programs alike:
			// not the established path's business; see the report)
			q := pick(r, sent)
			if q.v6 || q.ah || q.src.IsMulticast() || q.dst.IsMulticast() || !q.clean() {
				p = gen.next()
				break
			}
			var fr []byte
			p, fr = icmpErrorFor(q)
			evs = append(evs, estEvent{pkt: p, frame: fr, icmpErr: true})
			continue
		}
		sent = append(sent, p)
		evs = append(evs, estEvent{pkt: p, frame: p.frame()})
	}
	return evs
}

// estEntry is a state entry as the two programs' runs compare it: the key,
// the entry with its times taken relative to the clock (the runs are
// made at different moments) and its counter stripes added.
type estEntry struct {
	key              filterStateKey
	e                filterStateEntry
	ttl, idle, since time.Duration
}

func estEntries(t *testing.T, d *Datapath) []estEntry {
	t.Helper()
	now, err := d.now()
	if err != nil {
		t.Fatal(err)
	}
	var (
		k   filterStateKey
		v   filterStateEntry
		out []estEntry
	)
	it := d.objs.States.Iterate()
	for it.Next(&k, &v) {
		if err := d.withSlot(k, &v); err != nil {
			t.Fatal(err)
		}
		x := estEntry{key: k, e: v, ttl: time.Duration(int64(v.Expire - now)), idle: time.Duration(int64(now - v.Last)),
			since: time.Duration(int64(now - v.Created))}
		x.e.Expire, x.e.Last, x.e.Created = 0, 0, 0
		pk, by := v.counts()
		x.e.Cnt = [4]filterStateCnt{{Pkts: pk, Bytes: by}}
		out = append(out, x)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b estEntry) int { return strings.Compare(fmt.Sprint(a.key), fmt.Sprint(b.key)) })
	return out
}

// diffEntries compares two runs' tables: every field but the times
// exactly, the times within the runs' own duration (2 s).
func diffEntries(a, b []estEntry) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d entries, %d", len(a), len(b))
	}
	near := func(x, y time.Duration) bool { return (x - y).Abs() <= 2*time.Second }
	var out []string
	for i := range a {
		if a[i].key != b[i].key || a[i].e != b[i].e || !near(a[i].ttl, b[i].ttl) || !near(a[i].idle, b[i].idle) ||
			!near(a[i].since, b[i].since) {
			out = append(out, fmt.Sprintf("%+v\nvs\n%+v", a[i], b[i]))
		}
	}
	return strings.Join(out, "\n")
}

// engineEntries compares the kernel's table with the engine's: for each
// concrete entry the flow, TCP states, packets and bytes each way, and the
// lifetime left (within 2 s: the engine's clock stood still while the
// kernel's ran).
func engineEntries(t *testing.T, d *Datapath, eng *engine.Engine, clock *state.ManualClock) string {
	t.Helper()
	ks, err := d.States()
	if err != nil {
		t.Fatal(err)
	}
	type ent struct {
		tcp         [2]uint8
		pkts, bytes [4]uint64
		ttl         time.Duration
	}
	// wildcard entries are left out (the kernel keys them without the
	// address the engine keeps); filled ones to a group are compared
	skip := func(a netip.Addr, wild bool) bool { return !a.IsValid() || a.IsUnspecified() || wild }
	name := func(proto uint8, src, dst netip.Addr, sp, dp uint16) string {
		return fmt.Sprintf("%d %s,%d > %s,%d", proto, src, sp, dst, dp)
	}
	kern, engs := map[string][]ent{}, map[string][]ent{}
	for _, s := range ks {
		if skip(s.Dst, s.Wild) {
			continue
		}
		kern[name(s.Proto, s.Src, s.Dst, s.SrcPort, s.DstPort)] = append(kern[name(s.Proto, s.Src, s.Dst, s.SrcPort, s.DstPort)],
			ent{s.TCPState, s.Pkts, s.Bytes, s.TTL})
	}
	now := clock.Ticks()
	eng.States.Walk(func(e *state.Entry) {
		// an entry due now is over: the engine keeps one a new SYN
		// closed until the next tick, as IPFilter's delete queue,
		// where the kernel removes it at once (no packet finds it
		// in either)
		if skip(e.Dst, e.WildDst() || e.WildSrcPort() || e.WildDstPort()) || e.Deleted() || e.Expire <= now {
			return
		}
		sp, dp := e.SPort, e.DPort
		if e.Proto == 1 || e.Proto == 58 {
			sp, dp = e.ICMPID, uint16(e.ICMPType)
		}
		n := name(e.Proto, e.Src, e.Dst, sp, dp)
		engs[n] = append(engs[n], ent{e.TCPState, e.Pkts, e.Bytes, time.Duration(e.Expire-now) * Tick})
	})
	var out []string
	for n, es := range engs {
		kes := kern[n]
		if len(kes) != len(es) {
			out = append(out, fmt.Sprintf("%s: engine %d entries, kernel %d", n, len(es), len(kes)))
			continue
		}
		for i := range es {
			e, k := es[i], kes[i]
			if len(es) > 1 {
				// several entries one way (neither table keeps
				// them today): their order is the tables' own
				continue
			}
			if e.tcp != k.tcp || e.pkts != k.pkts || e.bytes != k.bytes || (e.ttl-k.ttl).Abs() > 2*time.Second {
				out = append(out, fmt.Sprintf("%s: engine %+v, kernel %+v", n, e, k))
			}
		}
	}
	for n, kes := range kern {
		if _, ok := engs[n]; !ok {
			out = append(out, fmt.Sprintf("%s: kernel %d entries, engine none", n, len(kes)))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestEstablishedDifferential runs random sets that keep state over TCP
// conversations (handshake, data, segments out of window, RST, FINs, a new
// SYN after the close), random packets of other flows and ICMP errors
// about packets sent, with the clock moved past the short timeouts twice,
// three ways: the Go engine, the program made for the set (the established
// path first, lib/est.h) and the same program without the established
// path (the pipeline). Each packet must get one verdict and state hit from
// all three; after each packet the live state count must be the engine's;
// after the run the statistics, drop reasons, rule counters and the state
// table (every field, times within 2 s) the two programs left must be
// equal, the rule counters and table (flows, TCP states, counts, lifetimes)
// also the engine's. A packet the established path decides leaves the
// scratch area untouched: the test fails unless it decided packets in both
// directions, and clean packets with an entry (a state hit the path left
// to the pipeline) and without one fell through.
func TestEstablishedDifferential(t *testing.T) {
	h := newHarness(t)
	seed := diffSeed(t, 11)
	rng := rand.New(rand.NewPCG(seed, 0xe57))
	sets, nev := 16, 90
	if testing.Short() {
		sets = 6
	}
	sets = diffSets(t, sets)
	clearScratch, scratchUsed := scratchProbe(t, h.d)
	pipelines := map[uint64]progPair{}
	var decided [2]int
	var fellHit, fellMiss, estSets, failures int
	setHits := make([]int, sets)
	var slotHits uint64
	for n := 0; n < sets && failures < 3; n++ {
		text := randomEstRules(rng)
		switch n {
		case 0:
			text = hpStatefulRules
		case 1:
			// HP's set with its entries logged: the established
			// path leaves their packets to the pipeline, so every
			// seed has clean packets the pipeline decides by a
			// state hit (random sets may have none: seeds 3 and 77
			// had not)
			text = strings.NewReplacer("pass in ", "pass in log ", "pass out ", "pass out log ").Replace(hpStatefulRules)
		}
		set, im := compileSetText(t, n, text)
		if err := h.d.LoadRules(im, Active); err != nil {
			t.Fatal(err)
		}
		reset := func() {
			if _, err := h.d.FlushStates(nil); err != nil {
				t.Fatal(err)
			}
			if _, err := h.d.FlushFrags(); err != nil {
				t.Fatal(err)
			}
			if err := h.d.ZeroStats(); err != nil {
				t.Fatal(err)
			}
			if err := h.d.ZeroRuleCounters(Active); err != nil {
				t.Fatal(err)
			}
		}
		reset()
		s := currentSpec(t, h.d)
		if h.d.progKey != s.key() {
			t.Fatalf("set %d: program %#x attached, want %#x", n, h.d.progKey, s.key())
		}
		if s.state {
			estSets++
		}
		pipeline, ok := pipelines[s.key()]
		if !ok {
			pipeline = progsWithEst(t, h.d, s, false)
			pipelines[s.key()] = pipeline
		}
		est := progPair{h.d.objs.SluiceIngress, h.d.objs.SluiceEgress}
		evs := estEvents(rng, nev)
		var trace []string
		fail := func(format string, args ...any) {
			failures++
			t.Errorf("seed %d set %d: %s\nrules:\n%sevents:\n%s", seed, n, fmt.Sprintf(format, args...), text,
				strings.Join(trace, "\n"))
		}

		clock := &state.ManualClock{}
		eng := engine.New(engine.Config{Clock: clock})
		eng.Sets().Store(0, set)
		run := func(pp progPair, withEngine bool) ([]uint32, fastSnapshot, []estEntry, bool) {
			reset()
			trace = trace[:0]
			var rets []uint32
			for i, ev := range evs {
				trace = append(trace, fmt.Sprintf("  %d: %s", i+1, ev))
				if ev.advance != 0 {
					if err := h.d.AdvanceClock(ev.advance); err != nil {
						t.Fatal(err)
					}
					if err := h.d.Sweep(); err != nil {
						t.Fatal(err)
					}
					if withEngine {
						clock.Advance(uint32(ev.advance / Tick))
						eng.States.Expire()
					}
					rets = append(rets, 0)
					continue
				}
				prog := pp.in
				if ev.pkt.out {
					prog = pp.out
				}
				clearScratch()
				kept0 := h.stat(stStKept) + h.stat(stDir+stStKept)
				ret, err := prog.Run(&ebpf.RunOptions{Data: ev.frame, DataOut: make([]byte, len(ev.frame)+256)})
				if err != nil {
					t.Fatal(err)
				}
				rets = append(rets, ret)
				if !withEngine {
					continue
				}
				kept := h.stat(stStKept)+h.stat(stDir+stStKept) != kept0
				if kept {
					setHits[n]++
				}
				var p engine.Packet
				p.Load(append([]byte(nil), ev.frame[14:]...), "eth0", ev.pkt.out, 0)
				hits0 := eng.States.Stats().Hits
				res := eng.Check(&p)
				engHit := eng.States.Stats().Hits != hits0
				if ev.icmpErr {
					// the engine counts no hit for an error it
					// matched to a flow (an error makes no entry)
					engHit = res.State != nil
				}
				switch {
				case !s.state:
					// no state: no established path (a fast
					// path of constant lists may decide)
				case !scratchUsed():
					decided[b2u32(ev.pkt.out)]++
					if !kept {
						fail("event %d: decided by the established path without a state hit", i+1)
						return nil, fastSnapshot{}, nil, false
					}
				case ev.pkt.clean() && engHit:
					fellHit++
				case ev.pkt.clean():
					fellMiss++
				}
				if (ret == tcNext) != res.Verdict.Passed() {
					fail("event %d: engine %s, kernel %s", i+1, res.Verdict, verdictName(ret))
					return nil, fastSnapshot{}, nil, false
				}
				if engHit != kept {
					fail("event %d: state hit: engine %v, kernel %v", i+1, engHit, kept)
					return nil, fastSnapshot{}, nil, false
				}
				live, err := h.d.StateCount()
				if err != nil {
					t.Fatal(err)
				}
				if int64(eng.States.Active()) != live {
					fail("event %d: live states: engine %d, kernel %d", i+1, eng.States.Active(), live)
					return nil, fastSnapshot{}, nil, false
				}
			}
			return rets, snapshot(t, h.d), estEntries(t, h.d), true
		}
		hits0 := dmHits(t, h.d)
		estRets, estSnap, estTable, ok := run(est, true)
		slotHits += dmHits(t, h.d) - hits0
		if !ok {
			eng.Close()
			continue
		}
		if err := compareCounters(h.d, set); err != nil {
			fail("rule counters, engine and kernel: %v", err)
		}
		if d := engineEntries(t, h.d, eng, clock); d != "" {
			fail("state tables, engine and kernel:\n%s", d)
		}
		eng.Close()
		hits0 = dmHits(t, h.d)
		pipeRets, pipeSnap, pipeTable, _ := run(pipeline, false)
		if n := dmHits(t, h.d) - hits0; n != 0 {
			fail("%d packets through st_dm's slots in the program without the established path", n)
		}
		for i := range evs {
			if estRets[i] != pipeRets[i] {
				fail("event %d (%s): established path %s, pipeline %s", i+1, evs[i], verdictName(estRets[i]), verdictName(pipeRets[i]))
			}
		}
		if d := estSnap.diff(pipeSnap); d != "" {
			fail("counted differently (established path, pipeline):\n%s", d)
		}
		if d := diffEntries(estTable, pipeTable); d != "" {
			fail("state tables differ (established path, pipeline):\n%s", d)
		}
	}
	// HP's stateful set, plain and logged (sets 0 and 1, in the short
	// run too), has established flows whatever the seed: its packets
	// must find their entries (the kernel's state hits), or the run has
	// not exercised the state path it is about. Random sets may have
	// none (a rule set that blocks first, or keeps state for no flow).
	t.Logf("state hits by set: %v", setHits)
	for n := 0; n < 2 && n < sets; n++ {
		if setHits[n] == 0 {
			t.Errorf("set %d (HP's stateful set): no state hit", n)
		}
	}
	t.Logf("seed %d: %d sets (%d keeping state), %d/%d packets in/out decided by the established path (%d through "+
		"st_dm's slots); clean packets the pipeline decided: %d with a state hit, %d without", seed, sets, estSets,
		decided[0], decided[1], slotHits, fellHit, fellMiss)
	if slotHits == 0 {
		t.Error("no packet was decided through a slot of st_dm")
	}
	if decided[0] == 0 || decided[1] == 0 || fellHit == 0 || fellMiss == 0 {
		t.Errorf("the paths taken: %d/%d packets in/out by the established path, clean packets by the pipeline %d with "+
			"a state hit, %d without: want each", decided[0], decided[1], fellHit, fellMiss)
	}
}

// hpStatefulRules is HP's stateful test set (hp-test-state.conf).
var hpStatefulRules = strings.ReplaceAll(hpStatelessRules, "any\n", "any keep state\n")

// hpStatefulSpec loads HP's stateful set into the benchmarks' datapath
// with an empty table and returns the specialisation its programs are
// made for (made while the table was empty, as after an ipf -f).
func hpStatefulSpec(b *testing.B, h *harness) progSpec {
	b.Helper()
	if err := h.d.LoadRules(compileText(b, hpStatefulRules), Active); err != nil {
		b.Fatal(err)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		b.Fatal(err)
	}
	s := currentSpec(b, h.d)
	if !s.state || h.d.progKey != s.key() {
		b.Fatalf("the set's program: state %v, attached %#x, want %#x", s.state, h.d.progKey, s.key())
	}
	return s
}

// BenchmarkEstablished measures an established TCP flow of HP's stateful
// set, a data segment each way, through the program made for the set
// (the established path first, lib/est.h) and the same program without
// it (the pipeline), and the path without st_dm's slots (est-nodm, the
// hash only), beside the trivial program: warm (the repeat loop,
// least ns/packet of the runs) and single (one packet a run, median).
// rounds runs the three in turn, one packet a run, and logs each round's
// median (-test.v): the figures to compare on a busy machine.
func BenchmarkEstablished(b *testing.B) {
	h := benchHarness(b)
	trivial := trivialProg(b)
	defer trivial.Close()
	s := hpStatefulSpec(b, h)
	_, synack, ack := handshake(b, h)
	// TCP_RR's segments: a byte of data with PSH, each way
	in, out := synack, ack
	in.flags, in.seq, in.ack, in.payload = ackF|0x08, 9001, 101, 1
	out.flags, out.payload = ackF|0x08, 1
	frames := [2][]byte{in.build(), out.build()}
	// est-nodm: the established path without st_dm's slots (the hash
	// only, est2's path), in the same binary
	nodm, _ := specProgs(b, h.d, s, true, map[string]uint32{"k_est": 1, "k_estdm": 0})
	progs := map[string]progPair{"est": progsWithEst(b, h.d, s, true), "est-nodm": nodm, "pipeline": progsWithEst(b, h.d, s, false)}
	for dir, name := range []string{"in", "out"} {
		pick := func(pp progPair) *ebpf.Program {
			if dir == 1 {
				return pp.out
			}
			return pp.in
		}
		for _, mode := range []string{"warm", "single"} {
			for _, pn := range []string{"trivial", "est", "est-nodm", "pipeline"} {
				p := trivial
				if pn != "trivial" {
					p = pick(progs[pn])
				}
				b.Run(fmt.Sprintf("%s/%s/%s", name, mode, pn), func(b *testing.B) {
					if mode == "warm" {
						reportRuns(b, p, frames[dir], 1000)
					} else {
						singleRuns(b, p, frames[dir], false)
					}
				})
			}
		}
		b.Run(name+"/rounds", func(b *testing.B) {
			interleaved(b, []string{"trivial", "est", "est-nodm", "pipeline"},
				[]*ebpf.Program{trivial, pick(progs["est"]), pick(progs["est-nodm"]), pick(progs["pipeline"])}, frames[dir])
		})
	}
	// the established path cut at its STAGE points (29: before the
	// config's switch; then in est.h's order, 35 the parse, 36 the key,
	// 31 the statistics' block, 32 the lookup, 33 the clock, 37 the
	// entry's checks, 38 the window, 39 the stores, 34 the counter
	// stripe; 0: whole; 40-44 inside the lookup, est.h's est_probe),
	// inbound
	b.Run("in/bisect", func(b *testing.B) {
		names, ps := []string{"trivial"}, []*ebpf.Program{trivial}
		for _, n := range []uint32{29, 35, 36, 31, 40, 43, 41, 32, 42, 44, 33, 37, 38, 39, 34, 0} {
			p, err := stageVariant(h.d, "sluice_ingress", n, s)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			names, ps = append(names, fmt.Sprintf("stop_at %d", n)), append(ps, p)
		}
		names, ps = append(names, "pipeline"), append(ps, progs["pipeline"].in)
		for i, p := range ps {
			b.Run("warm/"+strings.ReplaceAll(names[i], " ", "-"), func(b *testing.B) { reportRuns(b, p, frames[0], 1000) })
		}
		interleaved(b, names, ps, frames[0])
	})
}

// flowLookupProg fills m with 1 001 flows' keys (key(0) to key(1000),
// 416-byte values) and returns a program that writes key(0) on its stack
// and looks it up, reading the value's first word: the state lookup of
// an established packet and nothing else.
func flowLookupProg(b *testing.B, m *ebpf.Map, key func(uint32) []byte) (*ebpf.Program, error) {
	b.Helper()
	for i := uint32(0); i <= 1000; i++ {
		if err := m.Put(key(i), make([]byte, 416)); err != nil {
			b.Fatal(err)
		}
	}
	k := key(0)
	var ins asm.Instructions
	for off := 0; off < len(k); off += 4 {
		ins = append(ins, asm.StoreImm(asm.R10, int16(off-len(k)), int64(int32(binary.LittleEndian.Uint32(k[off:]))), asm.Word))
	}
	lookup := asm.LoadMapPtr(asm.R1, 0)
	if err := lookup.AssociateMap(m); err != nil {
		b.Fatal(err)
	}
	ins = append(ins, asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, -int32(len(k))), lookup,
		asm.FnMapLookupElem.Call(), asm.JEq.Imm(asm.R0, 0, "out"), asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Mov.Imm(asm.R0, -1).WithSymbol("out"), asm.Return())
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: ins})
}

// BenchmarkStateKeySize: what a 16-byte IPv4 state key would save against
// today's 40-byte one (24 of them zeros for an IPv4 flow): hand-written
// programs that write a key on the stack and look it up in a hash map
// shaped as the state table (no preallocation, a 416-byte value, 1 000
// other flows), one per key size, beside the trivial program. warm is the
// repeat loop (least ns/packet); rounds one packet a run (-test.v).
func BenchmarkStateKeySize(b *testing.B) {
	trivial := trivialProg(b)
	defer trivial.Close()
	names, progs := []string{"trivial"}, []*ebpf.Program{trivial}
	for _, size := range []uint32{40, 16} {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: size, ValueSize: 416, MaxEntries: 4096,
			Flags: unix.BPF_F_NO_PREALLOC})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		// the key: addresses, ports, protocol and family as the IPv4
		// flow 10.0.0.1:40000 > 10.0.0.2:80 puts them
		key := func(i uint32) []byte {
			k := make([]byte, size)
			binary.LittleEndian.PutUint32(k[0:], 0x0100000a)
			if size == 40 {
				binary.LittleEndian.PutUint32(k[16:], 0x0200000a)
				binary.LittleEndian.PutUint32(k[32:], (40000+i)|80<<16)
				k[36], k[37] = 6, 4
			} else {
				binary.LittleEndian.PutUint32(k[4:], 0x0200000a)
				binary.LittleEndian.PutUint32(k[8:], (40000+i)|80<<16)
				k[12], k[13] = 6, 4
			}
			return k
		}
		p, err := flowLookupProg(b, m, key)
		if err != nil {
			b.Fatalf("key %d: %v", size, err)
		}
		defer p.Close()
		names, progs = append(names, fmt.Sprintf("key %d", size)), append(progs, p)
	}
	warmAndRounds(b, names, progs, tcp4("10.0.0.1", "10.0.0.2", 40000, 80, ackF).build())
}

// warmAndRounds runs each of progs on frame in the repeat loop (warm/NAME)
// and then one packet a run, interleaved round after round (rounds).
func warmAndRounds(b *testing.B, names []string, progs []*ebpf.Program, frame []byte) {
	for i, p := range progs {
		b.Run("warm/"+strings.ReplaceAll(names[i], " ", "-"), func(b *testing.B) { reportRuns(b, p, frame, 1000) })
	}
	b.Run("rounds", func(b *testing.B) { interleaved(b, names, progs, frame) })
}

// BenchmarkStateBuckets: where the established packet's lookup spends
// its time one packet a run (est13's live bisect: the lookup is half of
// the path over the trivial program). The same hand-written lookup as
// BenchmarkStateKeySize (40-byte key, 416-byte value, no preallocation,
// 1 001 flows) in tables that differ only in max_entries, so in the size
// of the bucket array (16 bytes a bucket): 2 048 entries make 32 KiB,
// which the kernel allocates with kmalloc (the direct map's large pages);
// 4 096 and up (the state table: 262 144, 4 MiB) with vmalloc, 4 KiB
// pages each with its own TLB entry. warm is the repeat loop; rounds one
// packet a run (-test.v).
func BenchmarkStateBuckets(b *testing.B) {
	trivial := trivialProg(b)
	defer trivial.Close()
	names, progs := []string{"trivial"}, []*ebpf.Program{trivial}
	for _, entries := range []uint32{2048, 4096, 262144} {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 40, ValueSize: 416, MaxEntries: entries,
			Flags: unix.BPF_F_NO_PREALLOC})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		key := func(i uint32) []byte {
			k := make([]byte, 40)
			binary.LittleEndian.PutUint32(k[0:], 0x0100000a)
			binary.LittleEndian.PutUint32(k[16:], 0x0200000a)
			binary.LittleEndian.PutUint32(k[32:], (40000+i)|80<<16)
			k[36], k[37] = 6, 4
			return k
		}
		p, err := flowLookupProg(b, m, key)
		if err != nil {
			b.Fatalf("%d entries: %v", entries, err)
		}
		defer p.Close()
		names, progs = append(names, fmt.Sprintf("entries %d", entries)), append(progs, p)
	}
	warmAndRounds(b, names, progs, tcp4("10.0.0.1", "10.0.0.2", 40000, 80, ackF).build())
}

// TestPrivilegedEstablishedLive: HP's stateful set on a veth pair between
// two namespaces; after a TCP connection's handshake its segments (data
// with timestamps, as Linux sends them) are decided by the established
// path — the scratch area, which the pipeline writes for every packet it
// takes, stays untouched — and kept by the flow's entry.
func TestPrivilegedEstablishedLive(t *testing.T) {
	tp := newTopo(t)
	d := tp.attach(t)
	if err := d.LoadRules(compileText(t, hpStatefulRules), Active); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	var err error
	inNS(t, tp.b, func() { ln, err = net.Listen("tcp", "10.99.0.2:7777") })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	var c net.Conn
	inNS(t, tp.a, func() { c, err = net.DialTimeout("tcp", "10.99.0.2:7777", 3*time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1)
	roundTrips := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
		}
	}
	roundTrips(3)
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.objs.Scratch.Put(uint32(0), make([]filterWork, ncpu)); err != nil {
		t.Fatal(err)
	}
	raw0, _, err := d.statBlock(ncpu)
	if err != nil {
		t.Fatal(err)
	}
	hits0 := dmHits(t, d)
	roundTrips(20)
	// the connection's packets go through its st_dm slot (est11)
	if n := dmHits(t, d) - hits0; n < 40 {
		t.Errorf("20 round trips: %d packets through st_dm's slots, want >= 40", n)
	}
	raw, _, err := d.statBlock(ncpu)
	if err != nil {
		t.Fatal(err)
	}
	kept := raw[stStKept] + raw[stDir+stStKept] - raw0[stStKept] - raw0[stDir+stStKept]
	per := make([]filterWork, ncpu)
	if err := d.objs.Scratch.Lookup(uint32(0), &per); err != nil {
		t.Fatal(err)
	}
	// Any pipeline run counts: newTopo's link carries no IPv6, so the
	// filtered interface sees this connection's packets and ARP (which
	// never reaches the pipeline) only. With IPv6 on the link a router
	// solicitation ran the pipeline and once failed this test in CI; the
	// scratch keeps only each CPU's last run, so counting only the
	// connection's runs would not do: a later one of the kernel's own
	// would hide the connection's.
	used := 0
	var seen []string
	for _, w := range per {
		if w.P.L3off == 0 {
			continue
		}
		seen = append(seen, fmt.Sprintf("family %d proto %d ports %d>%d", w.P.Family, w.P.Proto, w.P.Sport, w.P.Dport))
		used++
	}
	// 20 round trips: a request and a reply (and the ACKs the stack
	// sends alone) each way through the filtered interface
	if kept < 40 || used != 0 {
		t.Errorf("20 round trips: %d packets kept by state, the pipeline ran on %d CPUs (their last pipeline packets: %v); want >= 40 and none", kept, used, seen)
	}
}

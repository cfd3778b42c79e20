package bpf

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/bench/config"
	"sluice/internal/engine"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// TestFastLists: which sets' programs carry their main lists as constants
// (k_fast, lib/fast.h), by direction: only lists whose rules do nothing
// but their compact match and pass or block [quick], at most fastMax of
// them, in a slot that needs nothing else, with nothing logged.
func TestFastLists(t *testing.T) {
	defs := headerDefines(t)
	if defs["FAST_MAX"] != fastMax || defs["FAST_RUNS_IN"] != fastRunsIn || defs["FAST_RUNS_OUT"] != fastRunsOut {
		t.Fatalf("FAST_MAX %d, FAST_RUNS_IN %d, FAST_RUNS_OUT %d; want %d, %d, %d", defs["FAST_MAX"],
			defs["FAST_RUNS_IN"], defs["FAST_RUNS_OUT"], fastMax, fastRunsIn, fastRunsOut)
	}
	h := newHarness(t)
	many := func(dir string, n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "pass %s proto tcp from any to any port = %d\n", dir, 1000+i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, rules string
		want        uint32
		setup       func() error
	}{
		{"no rules: the idle program", "", 0, nil},
		{"HP stateless", hpStatelessRules, 3, nil},
		{"quick and last match", "pass in quick proto tcp from any to any port = 80\nblock in all\n", 3, nil},
		{"addresses, ports, flags", "block in from !10.0.0.0/8 to 10.1.2.3 port 1000:2000\n" +
			"pass out proto tcp from any port > 1023 to any port = 22 flags S/SA\npass in inet6 proto udp all\n", 3, nil},
		{"default block", "pass in proto tcp all\n", 3, func() error { return h.d.SetDefaultBlock(true) }},
		{"fastMax rules a direction", many("in", fastMax) + many("out", fastMax), 3, nil},
		{"one rule over fastMax", many("in", fastMax+1), 2, nil},
		{"an interface: matched whole", "pass in on lo all\npass out all\n", 2, nil},
		{"an IPv6 address: matched whole", "pass out from 2001:db8::/32 to any\n", 1, nil},
		{"a blocklist: IPv4 runs both ways", hpStatelessRules + runRules("block in", true, 12) + runRules("block out", false, 12),
			3 | fastRunsIn | fastRunsOut, nil},
		{"the bench's sluice-nomatch-10000", config.IPFNoMatch(10000), 3 | fastRunsIn | fastRunsOut, nil},
		{"an inbound run", runRules("pass in quick proto tcp", false, 9) + "block in all\n", 3 | fastRunsIn, nil},
		{"an IPv6 run: looked up whole", hpStatelessRules + runRules6("block in", 10), 2, nil},
		{"a run on an interface: matched whole", runRules("block in on lo", true, 10), 2, nil},
		{"a group: not compact", "block in all head 10\npass in proto tcp all group 10\n", 2, nil},
		{"auth", "auth in proto tcp all\n", 2, nil},
		{"skip", "skip 1 in proto tcp all\npass in all\n", 2, nil},
		{"keep state", "pass in proto tcp all keep state\n", 0, nil},
		{"keep frags", "pass in proto tcp all keep frags\n", 0, nil},
		{"log", "pass in log proto tcp all\n", 0, nil},
		{"accounting", "count in all\npass in all\n", 0, nil},
		{"return-rst", "block return-rst in proto tcp all\n", 0, nil},
		{"log flags", "pass in proto tcp all\n", 0, func() error { return h.d.SetLogFlags(LogFlags(ruleset.FRPass)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				_ = h.d.SetDefaultBlock(false)
				_ = h.d.SetLogFlags(0)
			}()
			if tc.setup != nil {
				if err := tc.setup(); err != nil {
					t.Fatal(err)
				}
			}
			h.t = t
			h.load(tc.rules)
			s := currentSpec(t, h.d)
			if s.fast != tc.want {
				t.Errorf("constant lists %#b, want %#b (in %d, out %d rules)", s.fast, tc.want, s.nfastIn, s.nfastOut)
			}
			if got := fastRuns(s) * fastRunsIn; got != s.fast&(fastRunsIn|fastRunsOut) {
				t.Errorf("lists with runs %#b, marked %#b", got, s.fast&(fastRunsIn|fastRunsOut))
			}
			if h.d.progKey != s.key() {
				t.Errorf("attached program %#x, want %#x", h.d.progKey, s.key())
			}
		})
	}
	// ipf -s between two sets with constant lists: each program was
	// loaded with its set, the swap loads none
	t.Run("ipf -s", func(t *testing.T) {
		h.t = t
		h.load(hpStatelessRules)
		if err := h.d.LoadRules(compileText(t, "block in quick proto udp all\n"), Inactive); err != nil {
			t.Fatal(err)
		}
		loaded := len(h.d.variants)
		for i := 0; i < 2; i++ {
			if _, err := h.d.Swap(); err != nil {
				t.Fatal(err)
			}
			s := currentSpec(t, h.d)
			if s.fast != 3 || h.d.progKey != s.key() {
				t.Errorf("swap %d: constant lists %#b, program %#x, want %#x", i+1, s.fast, h.d.progKey, s.key())
			}
			// the udp rule, then HP's three inbound rules
			if want := []uint32{1, 3}[i]; s.nfastIn != want {
				t.Errorf("swap %d: %d inbound constant rules, want %d", i+1, s.nfastIn, want)
			}
		}
		if len(h.d.variants) != loaded {
			t.Errorf("ipf -s loaded %d programs", len(h.d.variants)-loaded)
		}
		if _, err := h.d.Swap(); err != nil {
			t.Fatal(err)
		}
		if err := h.d.LoadRules(&Image{}, Inactive); err != nil {
			t.Fatal(err)
		}
	})
}

// randomFastRules returns 1 to 2*fastMax/3 rules a constant list can hold:
// pass or block [quick], IPv4 addresses (negated too), protocols, ports,
// TCP flags, a family.
func randomFastRules(r *rand.Rand) string {
	var b strings.Builder
	for n := 1 + r.IntN(2*fastMax/3); n > 0; n-- {
		b.WriteString(pick(r, []string{"pass", "block"}))
		b.WriteString(pick(r, []string{" in", " out"}))
		if r.IntN(3) == 0 {
			b.WriteString(" quick")
		}
		fam := pick(r, []string{"", "", "", " inet", " inet6"})
		b.WriteString(fam)
		proto := pick(r, []string{"", "tcp", "udp", "tcp/udp", "tcp", "icmp"})
		if proto != "" {
			b.WriteString(" proto " + proto)
		}
		addr := func() string {
			if fam == " inet6" || r.IntN(2) == 0 {
				return "any"
			}
			a := pick(r, randAddr4) + pick(r, []string{"", "/24", "/16"})
			if r.IntN(4) == 0 {
				a = "!" + a
			}
			return a
		}
		port := func() string {
			if (proto != "tcp" && proto != "udp" && proto != "tcp/udp") || r.IntN(2) == 0 {
				return ""
			}
			return randPortTest(r, portOpsAll)
		}
		from, to := addr(), addr()
		fp, tp := port(), port()
		if from == "any" && to == "any" && fp == "" && tp == "" && r.IntN(2) == 0 {
			b.WriteString(" all")
		} else {
			b.WriteString(" from " + from + fp + " to " + to + tp)
		}
		if proto == "tcp" && r.IntN(3) == 0 {
			b.WriteString(pick(r, []string{" flags S/SA", " flags A/A", " flags S", " flags SA/SAFR"}))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// fastRuns says which of s's constant lists hold an IPv4 run (CM_RUN4):
// bit 0 inbound, bit 1 outbound.
func fastRuns(s progSpec) uint32 {
	var r uint32
	for dir, l := range [][fastMax]filterHot{s.fastIn, s.fastOut} {
		n := []uint32{s.nfastIn, s.nfastOut}[dir]
		for i := uint32(0); i < n; i++ {
			if l[i].M.Flags&cmRun4 != 0 {
				r |= 1 << dir
			}
		}
	}
	return r
}

// runRules is a run of n rules "head from A to any" (src) or "head from
// any to A", A consecutive hosts of 10.9.0.0/16.
func runRules(head string, src bool, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if src {
			fmt.Fprintf(&b, "%s from 10.9.%d.%d to any\n", head, i/200, 1+i%200)
		} else {
			fmt.Fprintf(&b, "%s from any to 10.9.%d.%d\n", head, i/200, 1+i%200)
		}
	}
	return b.String()
}

// runRules6 is runRules of IPv6 source hosts.
func runRules6(head string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s from 2001:db8:9::%x to any\n", head, i+1)
	}
	return b.String()
}

// fastRun is an IPv4 run among a constant list's rules (TestFastPathDifferential):
// its direction, the address it tests, its prefix and its rules' addresses.
type fastRun struct {
	out, src bool
	bits     int
	members  map[netip.Prefix]bool
}

// withFastRun puts a run of 8 to 24 rules (source or destination, host or
// /24, in or out, quick or not, pass or block, TCP or any protocol) among
// the lines of text, at a random place.
func withFastRun(r *rand.Rand, text string) (string, *fastRun) {
	fr := &fastRun{out: r.IntN(2) == 0, src: r.IntN(2) == 0, bits: pick(r, []int{32, 32, 24}), members: map[netip.Prefix]bool{}}
	head := pick(r, []string{"block", "pass"}) + map[bool]string{false: " in", true: " out"}[fr.out]
	if r.IntN(3) == 0 {
		head += " quick"
	}
	head += pick(r, []string{"", " proto tcp"})
	var b strings.Builder
	// 8-24 distinct prefixes (a duplicate is drawn again, a bounded number
	// of times: a run needs 8, and /24s have only 8 of 10.9-10.10.0-3)
	for n, tries := 8+r.IntN(17), 0; len(fr.members) < n && tries < 1000; tries++ {
		a := netip.AddrFrom4([4]byte{10, byte(9 + r.IntN(2)), byte(r.IntN(4)), byte(1 + r.IntN(250))})
		if r.IntN(4) == 0 {
			a = netip.MustParseAddr(pick(r, randAddr4))
		}
		p := netip.PrefixFrom(a, fr.bits).Masked()
		if fr.members[p] {
			continue
		}
		fr.members[p] = true
		if fr.src {
			fmt.Fprintf(&b, "%s from %s to any\n", head, p)
		} else {
			fmt.Fprintf(&b, "%s from any to %s\n", head, p)
		}
	}
	lines := strings.SplitAfter(text, "\n")
	at := r.IntN(len(lines))
	return strings.Join(lines[:at], "") + b.String() + strings.Join(lines[at:], ""), fr
}

// The kinds of packet fastRun.packets makes: one the run has a rule for
// (its bit in the bitmap is set), one it has none for and whose bit is
// clear (the fast path decides it), and one it has none for whose bit is
// set all the same (a false positive: the pipeline decides it).
const (
	runOther = iota
	runHit
	runMiss
	runFalse
)

// packets makes TCP packets that pass the run's compact match (its
// direction, TCP): three of its rules' addresses, three addresses whose
// bit in the slot's bitmap is clear and two in no rule whose bits are set.
// The run's place (its first rule), mask and the bitmap's shift are read
// from the slot's hot list, the bitmap is im's. A run this short has the
// small sets' bitmap (RUN_FLAT), where three bits of 65 536 an entry make
// a false positive too rare to find: the two are made, their bits set in
// the slot's words of run_flat as a false positive has them.
func (fr *fastRun) packets(t *testing.T, d *Datapath, im *Image, r *rand.Rand) ([]flowPkt, []int) {
	t.Helper()
	var hl filterHotlist
	if err := d.objs.Hotlists.Lookup(d.slotOf(Active)*listGroup0+map[bool]uint32{false: listIn, true: listOut}[fr.out], &hl); err != nil {
		t.Fatal(err)
	}
	var e *filterCmatch
	var pos uint32
	for i := 0; i < int(hl.N) && i < len(hl.R); i++ {
		if hl.R[i].M.Flags&cmRun4 != 0 {
			e, pos = &hl.R[i].M, hl.R[i].Pos
		}
	}
	if e == nil {
		t.Fatalf("no IPv4 run in the hot list: %+v", hl)
	}
	mask, shift := e.Dmask, e.Dst
	if fr.src {
		mask, shift = e.Smask, e.Src
	}
	// the bitmap the probe reads: the small sets' (RUN_FLAT) for a run
	// this short
	words := im.runFlatBitmap()
	if want := im.runShift | runFlatBit; shift != want || !im.runFlat || len(words) == 0 {
		t.Fatalf("run shift word %#x, want %#x (%d words of the small bitmap)", shift, want, len(words))
	}
	bitSet := func(a netip.Addr) bool {
		b := a.As4()
		return im.runMayHold(words, pos, nativeWord(b[:])&mask)
	}
	pkt := func(a netip.Addr) flowPkt {
		peer := netip.MustParseAddr("10.1.0.1")
		p := flowPkt{proto: 6, flags: pick(r, []uint8{0x02, 0x10, 0x12}), sp: 40000, dp: pick(r, randPorts), out: fr.out,
			seq: r.Uint32(), src: peer, dst: a}
		if fr.src {
			p.src, p.dst = a, peer
		}
		return p
	}
	var pkts []flowPkt
	var kinds []int
	var list []netip.Prefix
	for p := range fr.members {
		list = append(list, p)
	}
	for i := 0; i < 3; i++ {
		p := list[r.IntN(len(list))]
		a := p.Addr()
		if p.Bits() < 32 {
			a = netip.AddrFrom4([4]byte{a.As4()[0], a.As4()[1], a.As4()[2], byte(1 + r.IntN(254))})
		}
		if !bitSet(a) {
			t.Fatalf("%s (a rule's address) has no bit in the bitmap", a)
		}
		pkts, kinds = append(pkts, pkt(a)), append(kinds, runHit)
	}
	var missed []netip.Addr
	falses := 0
	for tries := 0; (len(missed) < 3 || falses < 2) && tries < 1<<16; tries++ {
		a := netip.AddrFrom4([4]byte{10, byte(9 + r.IntN(2)), byte(r.IntN(256)), byte(r.IntN(256))})
		if fr.members[netip.PrefixFrom(a, fr.bits).Masked()] || a.String() == "10.1.0.1" || slices.Contains(missed, a) {
			continue
		}
		if bitSet(a) {
			continue // one found by chance: counted as a made one below
		}
		if len(missed) < 3 {
			missed = append(missed, a)
			pkts, kinds = append(pkts, pkt(a)), append(kinds, runMiss)
			continue
		}
		// a false positive: its three bits set in the kernel's words
		// and im's, so long as no miss above gets all of its own
		b := a.As4()
		w, m := runFlatBits(runHash(pos, nativeWord(b[:])&mask))
		key := d.slotOf(Active)*runFlatWords + w
		var v uint64
		if err := d.objs.RunFlat.Lookup(key, &v); err != nil {
			t.Fatal(err)
		}
		old := words[w]
		words[w] |= m
		if slices.ContainsFunc(missed, bitSet) {
			words[w] = old
			continue
		}
		if err := d.objs.RunFlat.Update(key, v|m, ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
		falses++
		pkts, kinds = append(pkts, pkt(a)), append(kinds, runFalse)
	}
	if falses < 2 || len(missed) < 3 {
		t.Fatalf("found %d false positives and %d misses", falses, len(missed))
	}
	return pkts, kinds
}

// scratchProbe tells whether the pipeline ran: it clears and fills the
// per-CPU scratch area, which the fast and established paths leave alone.
// clear zeroes every CPU's area; used reports whether a packet since
// filled one.
func scratchProbe(t *testing.T, d *Datapath) (clear func(), used func() bool) {
	t.Helper()
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	clear = func() {
		if err := d.objs.Scratch.Put(uint32(0), make([]filterWork, ncpu)); err != nil {
			t.Fatal(err)
		}
	}
	used = func() bool {
		per := make([]filterWork, ncpu)
		if err := d.objs.Scratch.Lookup(uint32(0), &per); err != nil {
			t.Fatal(err)
		}
		for _, w := range per {
			if w.P.L3off != 0 {
				return true
			}
		}
		return false
	}
	return clear, used
}

// progsFor loads the filter programs specialised as s over d's maps (not
// attached): the same set's program without its constant lists, for the
// fast path's differential test.
func progsFor(t *testing.T, d *Datapath, s progSpec) progPair {
	t.Helper()
	p, _ := specProgs(t, d, s, true, nil)
	return p
}

// fastSnapshot is what a run of packets leaves counted: the statistics,
// the drop reasons and every rule's hits and bytes.
type fastSnapshot struct {
	raw   [numStats]uint64
	drops [numReasons]uint64
	hits  []string
}

func snapshot(t *testing.T, d *Datapath) fastSnapshot {
	t.Helper()
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	var s fastSnapshot
	if s.raw, s.drops, err = d.statBlock(ncpu); err != nil {
		t.Fatal(err)
	}
	infos, err := d.Rules(Active)
	if err != nil {
		t.Fatal(err)
	}
	for _, ri := range infos {
		s.hits = append(s.hits, fmt.Sprintf("%s: %d/%d", ri.Text, ri.Hits, ri.Bytes))
	}
	return s
}

func (a fastSnapshot) diff(b fastSnapshot) string {
	var out []string
	for i := range a.raw {
		if a.raw[i] != b.raw[i] {
			out = append(out, fmt.Sprintf("stat %d: %d, %d", i, a.raw[i], b.raw[i]))
		}
	}
	for i := range a.drops {
		if a.drops[i] != b.drops[i] {
			out = append(out, fmt.Sprintf("drop reason %d: %d, %d", i, a.drops[i], b.drops[i]))
		}
	}
	if strings.Join(a.hits, "\n") != strings.Join(b.hits, "\n") {
		out = append(out, fmt.Sprintf("rule counters:\n%s\nvs\n%s", strings.Join(a.hits, "\n"), strings.Join(b.hits, "\n")))
	}
	return strings.Join(out, "\n")
}

// TestFastPathDifferential runs random sets a constant list can hold (and
// HP's stateless set) three ways: the Go engine, the program made for the
// set (its lists as constants), and the same program without them (the
// whole pipeline). Each packet must get one verdict from all three, and
// the kernel's statistics, drop reasons and rule counters after the
// packets must be the same from both programs (the engine's rule counters
// too). A packet the fast path decides leaves the scratch area untouched
// (the pipeline clears and fills it): the test counts those and fails
// unless both paths were taken, in both directions.
//
// Every other set has an IPv4 run among its rules (withFastRun): then
// packets of its rules' addresses, of addresses whose bit in the runs
// bitmap is clear and of addresses whose bit is set by another's (false
// positives) are sent too. A miss must be decided by the fast path (the
// test fails if lists with runs are not constant, or if the bitmap is not
// trusted); hits and false positives are left to the pipeline unless a
// quick rule before the run decided them, and the test fails unless some
// of each were.
func TestFastPathDifferential(t *testing.T) {
	h := newHarness(t)
	seed := diffSeed(t, 7)
	rng := rand.New(rand.NewPCG(seed, 0xfa57))
	sets := 30
	if testing.Short() {
		sets = 10
	}
	sets = diffSets(t, sets)
	clearScratch, scratchUsed := scratchProbe(t, h.d)
	full := map[uint64]progPair{}
	var taken [2]int
	fell, runSets := 0, 0
	var piped [runFalse + 1]int
	for n := 0; n < sets; n++ {
		text := hpStatelessRules
		if n > 0 {
			text = randomFastRules(rng)
		}
		var fr *fastRun
		if n%2 == 1 {
			text, fr = withFastRun(rng, text)
			runSets++
		}
		set, im := compileSetText(t, n, text)
		if err := h.d.LoadRules(im, Active); err != nil {
			t.Fatal(err)
		}
		s := currentSpec(t, h.d)
		if s.fast&3 != 3 || h.d.progKey != s.key() {
			t.Fatalf("seed %d set %d: constant lists %#b (program %#x, want %#x), want both\n%s", seed, n, s.fast, h.d.progKey, s.key(), text)
		}
		if fr != nil && s.fast&(fastRunsIn<<b2u32(fr.out)) == 0 {
			t.Fatalf("seed %d set %d: constant lists %#b, want the run's direction's run bit\n%s", seed, n, s.fast, text)
		}
		ps := s.withoutFast()
		pipeline, ok := full[ps.key()]
		if !ok {
			pipeline = progsFor(t, h.d, ps)
			full[ps.key()] = pipeline
		}
		fast := progPair{h.d.objs.SluiceIngress, h.d.objs.SluiceEgress}

		gen := newFlowGen(rng)
		var pkts []flowPkt
		for i := 0; i < 40; i++ {
			pkts = append(pkts, gen.next())
		}
		kinds := make([]int, len(pkts))
		if fr != nil {
			rp, rk := fr.packets(t, h.d, im, rng)
			pkts, kinds = append(pkts, rp...), append(kinds, rk...)
		}
		eng := engine.New(engine.Config{Clock: &state.ManualClock{}})
		eng.Sets().Store(0, set)
		run := func(pp progPair, withEngine bool) ([]uint32, fastSnapshot) {
			if err := h.d.ZeroStats(); err != nil {
				t.Fatal(err)
			}
			if err := h.d.ZeroRuleCounters(Active); err != nil {
				t.Fatal(err)
			}
			var rets []uint32
			for i, fp := range pkts {
				frame := fp.frame()
				prog := pp.in
				if fp.out {
					prog = pp.out
				}
				clearScratch()
				ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)})
				if err != nil {
					t.Fatal(err)
				}
				rets = append(rets, ret)
				if !withEngine {
					continue
				}
				used := scratchUsed()
				if used {
					fell++
					piped[kinds[i]]++
				} else {
					taken[b2u32(fp.out)]++
				}
				if kinds[i] == runMiss && used {
					t.Errorf("seed %d set %d packet %d (%s): no rule of the run, its bit clear, left to the pipeline\n%s", seed, n, i+1, fp, text)
				}
				var p engine.Packet
				p.Load(append([]byte(nil), frame[14:]...), "eth0", fp.out, 0)
				res := eng.Check(&p)
				if (ret == tcNext) != res.Verdict.Passed() {
					t.Errorf("seed %d set %d packet %d (%s): engine %s, kernel %s\n%s", seed, n, i+1, fp, res.Verdict, verdictName(ret), text)
				}
			}
			return rets, snapshot(t, h.d)
		}
		fastRets, fastSnap := run(fast, true)
		if err := compareCounters(h.d, set); err != nil {
			t.Errorf("seed %d set %d: engine and constant lists: %v\n%s", seed, n, err, text)
		}
		eng.Close()
		pipeRets, pipeSnap := run(pipeline, false)
		for i := range pkts {
			if fastRets[i] != pipeRets[i] {
				t.Errorf("seed %d set %d packet %d (%s): constant lists %s, pipeline %s\n%s", seed, n, i+1, pkts[i],
					verdictName(fastRets[i]), verdictName(pipeRets[i]), text)
			}
		}
		if d := fastSnap.diff(pipeSnap); d != "" {
			t.Errorf("seed %d set %d: counted differently (constant lists, pipeline):\n%s\nrules:\n%s", seed, n, d, text)
		}
	}
	t.Logf("seed %d: %d sets (%d with a run), %d/%d packets in/out decided by the constant lists, %d by the pipeline "+
		"(%d run hits, %d false positives)", seed, sets, runSets, taken[0], taken[1], fell, piped[runHit], piped[runFalse])
	if taken[0] == 0 || taken[1] == 0 || fell == 0 {
		t.Errorf("the paths taken: %d/%d packets in/out by the constant lists, %d by the pipeline: want each", taken[0], taken[1], fell)
	}
	if piped[runHit] == 0 || piped[runFalse] == 0 {
		t.Errorf("%d run hits and %d false positives left to the pipeline: want some of each", piped[runHit], piped[runFalse])
	}
}

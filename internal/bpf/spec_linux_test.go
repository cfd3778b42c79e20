package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"sluice/internal/ruleset"
	"sluice/internal/testutil/bpffs"
)

// TestWantSpec: what the programs are specialised for, from the config
// and the state count.
func TestWantSpec(t *testing.T) {
	base := func() *filterConf {
		var c filterConf
		c.V[cfgEnabled] = 1
		c.V[cfgActive], c.V[cfgInactive] = 0, 1
		c.V[cfgDefPass] = uint64(ruleset.FRPass | ruleset.FRNoMatch)
		c.V[cfgIndex0+0], c.V[cfgIndex0+1], c.V[cfgIndex0+2] = featIdle, featIdle, featIdle
		return &c
	}
	dp := uint32(ruleset.FRPass | ruleset.FRNoMatch)
	idle := progSpec{mode: kmIdle, defpass: dp}
	// on is the program made for active slot 0 whose word is sfeat
	on := func(sfeat, feat uint64, state bool) progSpec {
		return progSpec{feat: feat, state: state, cfg: true, sfeat: sfeat, defpass: dp}
	}
	with := func(s progSpec, f func(*progSpec)) progSpec { f(&s); return s }
	for _, tc := range []struct {
		name  string
		set   func(c *filterConf)
		count int64
		frags bool
		extra int
		want  progSpec
	}{
		{"idle", nil, 0, false, -1, idle},
		{"off", func(c *filterConf) { c.V[cfgEnabled] = 0 }, 0, false, -1, progSpec{mode: kmOff}},
		{"off with rules and state", func(c *filterConf) { c.V[cfgEnabled] = 0; c.V[cfgIndex0] = featClock }, 3, false, -1, progSpec{mode: kmOff}},
		{"default block", func(c *filterConf) { c.V[cfgDefPass] = uint64(ruleset.FRBlock | ruleset.FRNoMatch) }, 0, false, -1,
			progSpec{mode: kmIdle, defpass: uint32(ruleset.FRBlock | ruleset.FRNoMatch)}},
		{"default block log", func(c *filterConf) { c.V[cfgDefPass] = uint64(ruleset.FRBlock | ruleset.FRLog) }, 0, false, -1,
			with(on(featIdle, featLog, false), func(s *progSpec) { s.defpass = uint32(ruleset.FRBlock | ruleset.FRLog) })},
		{"default return-rst", func(c *filterConf) { c.V[cfgDefPass] = uint64(ruleset.FRBlock | ruleset.FRRetRST) }, 0, false, -1,
			with(on(featIdle, featRet, false), func(s *progSpec) { s.defpass = uint32(ruleset.FRBlock | ruleset.FRRetRST) })},
		{"log flags", func(c *filterConf) { c.V[cfgLogFlags] = uint64(ruleset.FRBlock) }, 0, false, -1,
			with(on(featIdle, featLog, false), func(s *progSpec) { s.logflags = uint32(ruleset.FRBlock) })},
		{"L3 interface", func(c *filterConf) { c.V[cfgAnyL3] = 1 }, 0, false, -1, with(on(featIdle, 0, false), func(s *progSpec) { s.anyl3 = true })},
		{"min TTL", func(c *filterConf) { c.V[cfgIndex0] = idxOn; c.V[cfgMinTTL] = 7 }, 0, false, -1,
			with(on(0, 0, false), func(s *progSpec) { s.minttl = 7 })},
		{"state left (ipf -Fa keeps it)", nil, 2, false, -1, on(featIdle, featFrags|featLog|featRet, true)},
		{"fragment entries left: clean packets stay idle", nil, 0, true, -1,
			progSpec{feat: featFrags | featLog | featRet, mode: kmIdle, defpass: dp}},
		{"active stateless (the index's use is read beside it)", func(c *filterConf) { c.V[cfgIndex0] = idxOn | idxSrc | featHotOut }, 0, false, -1,
			on(0, 0, false)},
		{"made for the active slot", func(c *filterConf) {
			c.V[cfgActive], c.V[cfgInactive] = 2, 0
			c.V[cfgIndex0+2] = featRoute | featHotIn
		}, 0, false, -1, with(on(featRoute, featRoute, false), func(s *progSpec) { s.slot = 2 })},
		{"the inactive set keeps state: so may the active one's packets", func(c *filterConf) { c.V[cfgIndex0+1] = featClock | featAcctIn }, 0, false, -1,
			on(featIdle, featFrags, true)},
		{"the spare slot does not count", func(c *filterConf) { c.V[cfgIndex0+2] = featRoute }, 0, false, -1, idle},
		{"unless it is about to be published: not idle", func(c *filterConf) { c.V[cfgIndex0+2] = featRoute }, 0, false, 2, on(featIdle, 0, false)},
		{"nor a slot being rewritten", func(c *filterConf) { c.V[cfgIndex0+2] = 0 }, 0, false, 2, on(featIdle, 0, false)},
		{"a swap in progress counts the old active slot's state", func(c *filterConf) {
			c.V[cfgIndex0+2] = featLimits | featClock
			c.V[cfgSwapLog] = swapLogValid | 2
		}, 0, false, -1, on(featIdle, featFrags, true)},
		{"clsact fallback", func(c *filterConf) { c.V[cfgClsact] = 1 }, 0, false, -1, genericSpec},
		{"log, return-*, pools, exp rules", func(c *filterConf) { c.V[cfgIndex0] = featLog | featRet | featPool | featExpr }, 0, false, -1,
			on(featLog|featRet|featPool|featExpr, featLog|featRet|featPool|featExpr, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			if tc.set != nil {
				tc.set(c)
			}
			if got := wantSpec(c, tc.count, tc.frags, tc.extra); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// ipf -s's program: the other slot's, with the same entry bits
	c := base()
	c.V[cfgIndex0+1] = featRoute | featClock
	if got, want := otherSpec(c, 0, false), with(on(featRoute|featClock, featRoute|featClock|featFrags, true), func(s *progSpec) { s.slot = 1 }); got != want {
		t.Errorf("other slot: got %+v, want %+v", got, want)
	}
	other := otherSpec(c, 0, false)
	c.V[cfgActive], c.V[cfgInactive] = 1, 0
	if got := wantSpec(c, 0, false, -1); got != other {
		t.Errorf("after the swap: want %+v, the program loaded for it is %+v", got, other)
	}
	seen := map[uint64]progSpec{}
	for _, s := range []progSpec{genericSpec, {}, {state: true}, {mode: kmOff}, {mode: kmIdle}, {mode: kmIdle, defpass: 1},
		on(0, 0, false), with(on(0, 0, false), func(s *progSpec) { s.slot = 1 }), on(featIdle, 0, false), on(featRoute, featRoute, false),
		with(on(0, 0, false), func(s *progSpec) { s.minttl = 1 }), with(on(0, 0, false), func(s *progSpec) { s.logflags = 1 }),
		with(on(0, 0, false), func(s *progSpec) { s.anyl3 = true }),
		{feat: featClock, state: true}, {feat: featFrags}, {feat: featExpr}, {feat: featPool}, {feat: featLog}, {feat: featRet}, {feat: featRoute}, {feat: featAcctIn}, {feat: featAcctOut}, {feat: featLimits}} {
		k := s.key()
		if k == 0 {
			t.Errorf("%+v: key 0", s)
		}
		if o, ok := seen[k]; ok {
			t.Errorf("%+v and %+v share key %#x", s, o, k)
		}
		seen[k] = s
	}
}

// TestPrivilegedSpecialiseFeatureAtOnce: a set needing a feature the
// programs were specialised without (accounting, then keep state) is
// counted and kept from the first packet after LoadRules returns, and the
// program that runs is a specialised one.
func TestPrivilegedSpecialiseFeatureAtOnce(t *testing.T) {
	h := newHarness(t)
	// the idle program of the shared datapath's configuration as it is
	// (default_pass and the rest as earlier tests left them), not of a
	// fresh one's: the test's result does not depend on the order
	if idle := currentSpec(t, h.d); idle.mode != kmIdle || h.d.progKey != idle.key() {
		t.Errorf("no rules: program %#x, want the idle one (%#x, mode %d)", h.d.progKey, idle.key(), idle.mode)
	}
	h.load("pass in quick proto tcp from any to any port = 80\nblock in all\n")
	stateless := h.d.progKey
	h.load("count in proto tcp all\npass in quick proto tcp from any to any port = 80\nblock in all\n")
	if h.d.progKey == stateless || h.d.progKey != liveKey(t, h.d, progSpec{feat: featAcctIn}) {
		t.Errorf("accounting set: program %#x (before %#x), want the accounting one", h.d.progKey, stateless)
	}
	before := h.stat(stAcct)
	h.expect(false, tcp4("10.0.0.1", "10.0.0.2", 1000, 80, synF), "pass")
	if got := h.stat(stAcct) - before; got != 1 {
		t.Errorf("accounting: %d packets counted, want 1", got)
	}
	// keep state after a stateless set: the reply is kept at once
	h.load("pass in quick proto tcp from any to any port = 80\nblock in all\n")
	h.load("pass out quick proto tcp from any to any port = 22 keep state\nblock in all\n")
	if h.d.progKey != liveKey(t, h.d, progSpec{feat: featClock | featFrags, state: true}) {
		t.Errorf("keep state set: program %#x, want the stateful one", h.d.progKey)
	}
	h.expect(true, tcp4("10.0.0.2", "10.0.0.1", 2000, 22, synF), "pass")
	synack := tcp4("10.0.0.1", "10.0.0.2", 22, 2000, synF|ackF)
	synack.ack = 1001
	h.expect(false, synack, "pass")
	// ipf -Fa: the entry stays, so does the state lookup
	if _, err := h.d.Flush(FlushAll, Active); err != nil {
		t.Fatal(err)
	}
	if h.d.progKey != liveKey(t, h.d, progSpec{feat: featFrags | featLog | featRet, state: true}) {
		t.Errorf("flushed with state left: program %#x, want one that looks state up", h.d.progKey)
	}
	ack := tcp4("10.0.0.1", "10.0.0.2", 22, 2000, ackF)
	ack.seq, ack.ack = 1, 1001
	h.expect(false, ack, "pass")
}

// linkProg returns the IDs of the programs of the TCX links pinned in dir
// and the ID of the pinned program prog_<hook>.
func linkProgs(t *testing.T, dir, hook string) (links []ebpf.ProgramID, pinned ebpf.ProgramID) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		_, h, ok := linkPin(e.Name())
		if !ok || h != hook {
			continue
		}
		l, err := link.LoadPinnedLink(filepath.Join(dir, e.Name()), nil)
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, info.Program)
	}
	p, err := ebpf.LoadPinnedProgram(filepath.Join(dir, "prog_"+hook), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return links, id
}

// TestPrivilegedSpecialiseLive: the attached programs follow the sets
// (each made for the active slot; ipf -s puts the inactive set's, loaded
// with it, in place), the pins name the attached program, a failed specialisation
// leaves rules and program as they were, and another process's load
// re-specialises them.
func TestPrivilegedSpecialiseLive(t *testing.T) {
	tp := newTopo(t)
	d := tp.attach(t)
	attached := func(what string) ebpf.ProgramID {
		t.Helper()
		var ids []ebpf.ProgramID
		for _, hook := range []string{"ingress", "egress"} {
			links, pinned := linkProgs(t, tp.pinDir, hook)
			if len(links) != 1 || links[0] != pinned {
				t.Fatalf("%s: %s links run %v, prog_%s is %d", what, hook, links, hook, pinned)
			}
			ids = append(ids, pinned)
		}
		return ids[0]
	}
	compile := func(text string) *Image {
		var im *Image
		inNS(t, tp.b, func() { im = compileText(t, text) })
		return im
	}
	spec := func() uint64 { return d.cfg(cfgSpec) }
	listenTCP(t, tp.b, "10.99.0.2:8080")
	listenTCP(t, tp.a, "10.99.0.1:9090")
	listenTCP(t, tp.b, "10.99.0.2:8083")

	idle := attached("attached, no rules")
	if want := (progSpec{mode: kmIdle, defpass: uint32(ruleset.FRPass | ruleset.FRNoMatch)}).key(); spec() != want {
		t.Errorf("no rules: spec %#x, want %#x", spec(), want)
	}
	if !tcpWorks(t, tp.b, "10.99.0.1:9090") {
		t.Error("no rules: b->a:9090 blocked")
	}

	const stateless = "block in all\npass in quick proto tcp from any to any port = 8080\n"
	const stateful = "block in all\npass in quick proto tcp from any to any port = 8080\npass out quick proto tcp from any to any keep state\n"
	if err := d.LoadRules(compile(stateless), Active); err != nil {
		t.Fatal(err)
	}
	sl := attached("stateless set")
	if sl == idle || spec() != liveKey(t, d, progSpec{}) {
		t.Errorf("stateless set: program %d (idle %d), spec %#x", sl, idle, spec())
	}
	if tcpWorks(t, tp.b, "10.99.0.1:9090") {
		t.Error("stateless set: b->a:9090 passed without state")
	}
	if !tcpWorks(t, tp.a, "10.99.0.2:8080") {
		t.Error("stateless set: a->b:8080 blocked")
	}

	// the inactive set needs state: the active set's program now looks
	// state up (entries its packets may meet after ipf -s), and the
	// inactive set's program is loaded for ipf -s
	if err := d.LoadRules(compile(stateful), Inactive); err != nil {
		t.Fatal(err)
	}
	both := attached("stateful inactive set")
	if both == sl || spec() != liveKey(t, d, progSpec{feat: featFrags, state: true}) {
		t.Errorf("stateful inactive set: program %d (before %d), spec %#x", both, sl, spec())
	}
	var c filterConf
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		t.Fatal(err)
	}
	next, ok := d.variants[fastLists(otherSpec(&c, d.stateCount(), d.fragsPresent()), d.hotOf).key()]
	if !ok {
		t.Fatal("the inactive set's program is not loaded before ipf -s")
	}
	nextInfo, err := next.in.Info()
	if err != nil {
		t.Fatal(err)
	}
	nextID, _ := nextInfo.ID()
	if _, err := d.Swap(); err != nil {
		t.Fatal(err)
	}
	// ipf -s is a link update to the program loaded with the set
	if got := attached("after ipf -s"); got != nextID {
		t.Errorf("ipf -s attached program %d, the inactive set's was %d (before %d)", got, nextID, both)
	}
	if spec() != liveKey(t, d, progSpec{feat: featClock | featFrags, state: true}) {
		t.Errorf("after ipf -s: spec %#x", spec())
	}
	both = nextID
	if !tcpWorks(t, tp.b, "10.99.0.1:9090") {
		t.Error("stateful set swapped in: b->a:9090 blocked")
	}

	// a specialisation that fails leaves the rules and the programs
	d.specMutate = func(s *ebpf.CollectionSpec) {
		s.Programs["sluice_ingress"].Instructions = asm.Instructions{asm.Mov.Reg(asm.R0, asm.R5), asm.Return()}
	}
	before, _ := d.Rules(Active)
	err = d.LoadRules(compile("count in all\n"+stateful), Active)
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		t.Errorf("accounting set with a broken program: got %v, want a verifier error", err)
	}
	if after, _ := d.Rules(Active); len(after) != len(before) {
		t.Errorf("failed load: %d active rules, before %d", len(after), len(before))
	}
	if got := attached("after a failed load"); got != both {
		t.Errorf("failed load: program %d, before %d", got, both)
	}
	if err := d.SetEnabled(false); err == nil {
		t.Error("ipf -D's switch with a broken program: got nil error")
	}
	if !d.Enabled() || attached("after a failed switch") != both {
		t.Errorf("failed switch: enabled %v", d.Enabled())
	}
	if !tcpWorks(t, tp.b, "10.99.0.1:9090") {
		t.Error("after failed loads: b->a:9090 blocked")
	}
	d.specMutate = nil

	// another process (maps only) loads a set: it re-specialises
	d2, err := OpenPinned(tp.pinDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.LoadRules(compile("count in all\n"+stateful), Active); err != nil {
		t.Fatal(err)
	}
	d2.Close()
	if got := attached("another process's load"); got == both || spec() != liveKey(t, d, progSpec{feat: featClock | featAcctIn | featFrags | featLog | featRet, state: true}) {
		t.Errorf("another process's load: program %d (before %d), spec %#x", got, both, spec())
	}
	// and this one attaches the program in force, not the one it loaded
	if err := d.Specialise(); err != nil {
		t.Fatal(err)
	}
	info, _ := d.objs.SluiceIngress.Info()
	id, _ := info.ID()
	if id != attached("this process catches up") {
		t.Errorf("this process's program %d is not the attached one", id)
	}
	// off: every packet passes untouched
	if err := d.SetEnabled(false); err != nil {
		t.Fatal(err)
	}
	if spec() != (progSpec{mode: kmOff}).key() {
		t.Errorf("off: spec %#x", spec())
	}
	if !tcpWorks(t, tp.a, "10.99.0.2:8083") {
		t.Error("off: a->b:8083 blocked")
	}
}

// TestSpecKeysCover: every config word a program's specialisation reads
// (wantSpec) re-specialises when it is written (specKeys), but the slots'
// words and the swap's log, which LoadRules and Swap write under the
// lock and specialise after. A word wantSpec starts to read (as
// est16-cfg-wip's clock offset and timeouts) without being added there
// would leave the programs made for its old value in place.
func TestSpecKeysCover(t *testing.T) {
	bases := map[string]func(c *filterConf){
		"idle":     func(c *filterConf) {},
		"stateful": func(c *filterConf) { c.V[cfgIndex0] = featClock },
		"stateless": func(c *filterConf) {
			c.V[cfgIndex0] = idxOn
			c.V[cfgClock] = 3
		},
	}
	for name, set := range bases {
		for k := uint32(0); k < cfgN; k++ {
			if (k >= cfgIndex0 && k < cfgIndex0+numSlots) || k == cfgSwapLog {
				continue
			}
			for _, v := range []uint64{0, 1, 2, 7, 1 << 40} {
				var c filterConf
				c.V[cfgEnabled] = 1
				c.V[cfgActive], c.V[cfgInactive] = 0, 1
				c.V[cfgDefPass] = uint64(ruleset.FRPass | ruleset.FRNoMatch)
				c.V[cfgIndex0+0], c.V[cfgIndex0+1], c.V[cfgIndex0+2] = featIdle, featIdle, featIdle
				set(&c)
				before := wantSpec(&c, 0, false, -1)
				c.V[k] = v
				if wantSpec(&c, 0, false, -1) != before && !specKeys[k] {
					t.Errorf("%s: config word %d = %d changes the specialisation, and is not in specKeys", name, k, v)
				}
			}
		}
	}
}

// liveKey is the key of base (the features of a KM_CONFIG specialisation)
// made for d's active slot and configuration as they are now.
func liveKey(t *testing.T, d *Datapath, base progSpec) uint64 {
	t.Helper()
	var c filterConf
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		t.Fatal(err)
	}
	a := uint32(c.V[cfgActive]) % numSlots
	base.cfg, base.slot, base.sfeat = true, a, c.V[cfgIndex0+a]&^(idxOn|idxSrc|idxSport|featHotIn|featHotOut)
	base.defpass, base.minttl = uint32(c.V[cfgDefPass]), uint32(c.V[cfgMinTTL])
	base.logflags, base.anyl3 = uint32(c.V[cfgLogFlags]), c.V[cfgAnyL3] != 0
	return d.withRunBig(fastLists(base, d.hotOf)).key()
}

// TestPrivilegedVariantPinsKeepNewest: the variant pins are pruned oldest
// first, so the other slot's program, pinned just before the active
// one's, is still there for ipf -s in another process.
func TestPrivilegedVariantPinsKeepNewest(t *testing.T) {
	dir := bpffs.Mount(t)
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// keys whose names sort against their age: a prune by name would
	// drop the newest
	var keys []uint64
	for i := 0; i <= maxVariantPins; i++ {
		keys = append(keys, uint64(0xf00-i*0x10))
	}
	for _, k := range keys {
		pinVariant(dir, variantPin(k, 0), progPair{p, p})
		time.Sleep(20 * time.Millisecond)
	}
	for i, k := range keys {
		_, err := os.Stat(filepath.Join(dir, variantPin(k, 0)+"_in"))
		if gone := errors.Is(err, os.ErrNotExist); gone != (i == 0) {
			t.Errorf("variant %d of %d (key %#x): removed %v", i+1, len(keys), k, gone)
		}
	}
}

// TestPrivilegedBenchStopAt: the cut the live bisect asks for is in place
// at once, an empty set's too (Load placed the whole idle program, which a
// load of no rules would keep): the programs are made again, with the
// pipeline gone from a cut before it (the verifier drops it), and the cut
// program passes a packet uncounted; 0 puts the whole program back.
func TestPrivilegedBenchStopAt(t *testing.T) {
	d := newHarness(t).d
	size := func() uint32 {
		t.Helper()
		info, err := d.objs.SluiceIngress.Info()
		if err != nil {
			t.Fatal(err)
		}
		n, err := info.JitedSize()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// the whole programs made now, over the maps as they are (the
	// shared datapath's large sets' array may have grown since Load
	// made the ones in place: another immediate, another JIT size)
	if err := d.BenchStopAt(0); err != nil {
		t.Fatal(err)
	}
	whole := size()
	pkt := tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build()
	for _, n := range []uint32{1, 29} {
		if err := d.BenchStopAt(n); err != nil {
			t.Fatal(err)
		}
		if err := d.LoadRules(&Image{}, Active); err != nil {
			t.Fatal(err)
		}
		if got := size(); got*4 > whole {
			t.Errorf("stop_at %d: %d bytes jited, the whole program %d", n, got, whole)
		}
		before := d.statsSum(t)
		if r, err := d.objs.SluiceIngress.Run(&ebpf.RunOptions{Data: pkt}); err != nil || int32(r) != -1 {
			t.Fatalf("stop_at %d: %d, %v", n, int32(r), err)
		}
		if after := d.statsSum(t); n == 1 && after != before {
			t.Errorf("stop_at 1 counted the packet: %d -> %d", before, after)
		} else if n == 29 && after != before+1 {
			// the idle path is before 29: it counts
			t.Errorf("stop_at 29: %d -> %d counts", before, after)
		}
	}
	if err := d.BenchStopAt(0); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != whole {
		t.Errorf("back to the whole program: %d bytes, want %d", got, whole)
	}
}

// TestPrivilegedBenchRunCut: the run probe's cut is in place at once,
// over the rules loaded (no load after it): with cut 1 every run reads as
// absent, so a source a blocklist's run holds passes; 0 puts the whole
// probe back and it is blocked again. Before BenchRunCut made the
// programs again, the cut waited for the next load.
func TestPrivilegedBenchRunCut(t *testing.T) {
	h := newHarness(t)
	var list strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&list, "block in quick from 192.0.2.%d to any\n", i)
	}
	h.load(list.String() + "pass in all\n")
	listed := tcp4("192.0.2.7", "10.0.0.2", 40000, 80, synF)
	h.expect(false, listed, "block")
	// the shared datapath gets the whole probe back whatever happens
	defer h.d.BenchRunCut(0)
	if err := h.d.BenchRunCut(1); err != nil {
		t.Fatal(err)
	}
	h.expect(false, listed, "pass")
	if err := h.d.BenchRunCut(0); err != nil {
		t.Fatal(err)
	}
	h.expect(false, listed, "block")
}

// statsSum is the inbound packets the statistics count.
func (d *Datapath) statsSum(t *testing.T) uint64 {
	t.Helper()
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.In.Pkts
}

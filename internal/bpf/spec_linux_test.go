package bpf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"sluice/internal/ruleset"
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
	idle := progSpec{mode: kmIdle, defpass: uint32(ruleset.FRPass | ruleset.FRNoMatch)}
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
		{"default block log", func(c *filterConf) { c.V[cfgDefPass] = uint64(ruleset.FRBlock | ruleset.FRLog) }, 0, false, -1, progSpec{feat: featLog}},
		{"default return-rst", func(c *filterConf) { c.V[cfgDefPass] = uint64(ruleset.FRBlock | ruleset.FRRetRST) }, 0, false, -1, progSpec{feat: featRet}},
		{"log flags", func(c *filterConf) { c.V[cfgLogFlags] = uint64(ruleset.FRBlock) }, 0, false, -1, progSpec{feat: featLog}},
		{"L3 interface", func(c *filterConf) { c.V[cfgAnyL3] = 1 }, 0, false, -1, progSpec{}},
		{"state left (ipf -Fa keeps it)", nil, 2, false, -1, progSpec{feat: featFrags | featLog | featRet, state: true}},
		{"fragment entries left: clean packets stay idle", nil, 0, true, -1,
			progSpec{feat: featFrags | featLog | featRet, mode: kmIdle, defpass: uint32(ruleset.FRPass | ruleset.FRNoMatch)}},
		{"active stateless", func(c *filterConf) { c.V[cfgIndex0] = idxOn }, 0, false, -1, progSpec{}},
		{"inactive keeps state", func(c *filterConf) { c.V[cfgIndex0+1] = featClock | featAcctIn }, 0, false, -1,
			progSpec{feat: featClock | featAcctIn | featFrags, state: true}},
		{"the spare slot does not count", func(c *filterConf) { c.V[cfgIndex0+2] = featRoute }, 0, false, -1, idle},
		{"unless it is about to be published", func(c *filterConf) { c.V[cfgIndex0+2] = featRoute }, 0, false, 2, progSpec{feat: featRoute}},
		{"nor a slot being rewritten", func(c *filterConf) { c.V[cfgIndex0+2] = 0 }, 0, false, 2, progSpec{}},
		{"a swap in progress counts the old active slot", func(c *filterConf) {
			c.V[cfgIndex0+2] = featLimits
			c.V[cfgSwapLog] = swapLogValid | 2
		}, 0, false, -1, progSpec{feat: featLimits}},
		{"clsact fallback", func(c *filterConf) { c.V[cfgClsact] = 1 }, 0, false, -1, genericSpec},
		{"log, return-*, pools, exp rules", func(c *filterConf) { c.V[cfgIndex0] = featLog | featRet | featPool | featExpr }, 0, false, -1,
			progSpec{feat: featLog | featRet | featPool | featExpr}},
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
	seen := map[uint64]progSpec{}
	for _, s := range []progSpec{genericSpec, {}, {state: true}, {mode: kmOff}, {mode: kmIdle}, {mode: kmIdle, defpass: 1},
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
	if h.d.progKey != (progSpec{mode: kmIdle, defpass: uint32(ruleset.FRPass | ruleset.FRNoMatch)}).key() {
		t.Errorf("no rules: program %#x, want the idle one", h.d.progKey)
	}
	h.load("pass in quick proto tcp from any to any port = 80\nblock in all\n")
	stateless := h.d.progKey
	h.load("count in proto tcp all\npass in quick proto tcp from any to any port = 80\nblock in all\n")
	if h.d.progKey == stateless || h.d.progKey != (progSpec{feat: featAcctIn}).key() {
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
	if h.d.progKey != (progSpec{feat: featClock | featFrags, state: true}).key() {
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
	if h.d.progKey != (progSpec{feat: featFrags | featLog | featRet, state: true}).key() {
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
// (grown before a set needing more is published, the same program across
// ipf -s), the pins name the attached program, a failed specialisation
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
	if sl == idle || spec() != (progSpec{}).key() {
		t.Errorf("stateless set: program %d (idle %d), spec %#x", sl, idle, spec())
	}
	if tcpWorks(t, tp.b, "10.99.0.1:9090") {
		t.Error("stateless set: b->a:9090 passed without state")
	}
	if !tcpWorks(t, tp.a, "10.99.0.2:8080") {
		t.Error("stateless set: a->b:8080 blocked")
	}

	// the inactive set needs state: the programs grow now, so that ipf -s
	// needs no other program
	if err := d.LoadRules(compile(stateful), Inactive); err != nil {
		t.Fatal(err)
	}
	both := attached("stateful inactive set")
	if both == sl || spec() != (progSpec{feat: featClock | featFrags, state: true}).key() {
		t.Errorf("stateful inactive set: program %d (before %d), spec %#x", both, sl, spec())
	}
	if _, err := d.Swap(); err != nil {
		t.Fatal(err)
	}
	if got := attached("after ipf -s"); got != both {
		t.Errorf("ipf -s replaced the program: %d, before %d", got, both)
	}
	if !tcpWorks(t, tp.b, "10.99.0.1:9090") {
		t.Error("stateful set swapped in: b->a:9090 blocked")
	}

	// a specialisation that fails leaves the rules and the programs
	d.specMutate = func(s *ebpf.CollectionSpec) {
		s.Programs["sluice_ingress"].Instructions = asm.Instructions{asm.Mov.Reg(asm.R0, asm.R5), asm.Return()}
	}
	before, _ := d.Rules(Active)
	err := d.LoadRules(compile("count in all\n"+stateful), Active)
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
	if got := attached("another process's load"); got == both || spec() != (progSpec{feat: featClock | featAcctIn | featFrags | featLog | featRet, state: true}).key() {
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

package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/engine"
	"sluice/internal/packet"
	"sluice/internal/pool"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ippool"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// TestDifferentialRandom generates random rule sets from a small grammar
// and random flows of packets (new flows, replies, continuations, to
// unicast and multicast addresses) and runs every packet through the Go
// engine and the BPF program. Both must agree on the verdict, on whether
// the packet matched state, on the number of live state entries after each
// packet, and on every rule's hit and byte counters at the end of the set.
// SLUICE_DIFF_SEED picks another seed; the failure message names the seed
// and the rule set, so a failure replays exactly.
func TestDifferentialRandom(t *testing.T) {
	h := newHarness(t)
	seed := diffSeed(t, 1)
	sets := 120
	if testing.Short() {
		sets = 30
	}
	diffRandom(t, h, seed, diffSets(t, sets), randomRules, true)
	if h.fastSets == 0 {
		t.Errorf("seed %d: no set ran on a program with constant lists", seed)
	}
}

// TestDifferentialGroups is TestDifferentialRandom over rule sets made of
// groups: repeated heads of one group, groups heading groups and
// themselves, skip and quick inside groups.
func TestDifferentialGroups(t *testing.T) {
	h := newHarness(t)
	sets := 150
	if testing.Short() {
		sets = 40
	}
	for seed := diffSeed(t, 1); seed <= diffSeed(t, 1)+1; seed++ {
		diffRandom(t, h, seed, diffSets(t, sets), randomGroupRules, false)
	}
}

// TestDifferentialRuns is TestDifferentialRandom over blocklist-like sets:
// runs of rules that differ only in one address (which the program
// decides with one lookup), with skips that land inside them.
func TestDifferentialRuns(t *testing.T) {
	h := newHarness(t)
	sets := 100
	if testing.Short() {
		sets = 30
	}
	var hits uint64
	for seed := diffSeed(t, 1); seed <= diffSeed(t, 1)+1; seed++ {
		hits += diffRandom(t, h, seed, diffSets(t, sets), randomRunRules, false)
	}
	if hits == 0 {
		t.Error("no packet matched a rule in a run: the test exercised no run")
	}
}

// randomRunRules returns one or two runs of 8 to 40 rules (source or
// destination, host or /24, in or out, quick or not, with or without a
// protocol) among plain rules, sometimes after a skip.
func randomRunRules(r *rand.Rand) string {
	var b strings.Builder
	plain := func(dir string) {
		b.WriteString(pick(r, []string{"pass", "block"}) + dir)
		if r.IntN(2) == 0 {
			b.WriteString(" quick")
		}
		b.WriteString(pick(r, []string{" all", " proto tcp all", " proto udp from any to any port = 53"}) + "\n")
	}
	for n := 1 + r.IntN(2); n > 0; n-- {
		dir := pick(r, []string{" in", " out"})
		if r.IntN(2) == 0 {
			plain(dir)
		}
		if r.IntN(4) == 0 {
			fmt.Fprintf(&b, "skip %d%s all\n", 1+r.IntN(10), dir)
		}
		head := pick(r, []string{"block", "pass", "block", "pass"}) + dir
		if r.IntN(2) == 0 {
			head += " quick"
		}
		head += pick(r, []string{"", "", " proto tcp", " proto udp"})
		src := r.IntN(2) == 0
		mask := pick(r, []string{"", "", "/24"})
		seen := map[string]bool{}
		for i := 8 + r.IntN(33); i > 0; i-- {
			a := fmt.Sprintf("10.%d.%d.%d", 9+r.IntN(2), r.IntN(4), 1+r.IntN(250))
			if r.IntN(4) == 0 {
				a = pick(r, randAddr4)
			}
			if mask == "/24" {
				p := netip.MustParsePrefix(a + "/24").Masked()
				a = p.Addr().String()
			}
			if seen[a] {
				continue
			}
			seen[a] = true
			if src {
				fmt.Fprintf(&b, "%s from %s%s to any\n", head, a, mask)
			} else {
				fmt.Fprintf(&b, "%s from any to %s%s\n", head, a, mask)
			}
		}
		if r.IntN(2) == 0 {
			plain(dir)
		}
	}
	return b.String()
}

// TestDifferentialGroupMap is TestDifferentialRandom over rule sets made of
// `call [now] srcgrpmap/dstgrpmap` rules and the groups group-map 300 names.
func TestDifferentialGroupMap(t *testing.T) {
	h := newHarness(t)
	sets := 150
	if testing.Short() {
		sets = 40
	}
	for seed := diffSeed(t, 1); seed <= diffSeed(t, 1)+1; seed++ {
		diffRandom(t, h, seed, diffSets(t, sets), randomCallRules, false)
	}
}

// diffSeed is SLUICE_DIFF_SEED, or def: the seed a failure names, to
// replay it, or another to explore.
func diffSeed(t *testing.T, def uint64) uint64 {
	s := os.Getenv("SLUICE_DIFF_SEED")
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("SLUICE_DIFF_SEED: %v", err)
	}
	return v
}

// diffSets is n rule sets times SLUICE_DIFF_SCALE (default 1): CI's count,
// or many more to search new seeds for longer (docs/datapath-cost.md,
// "Long fuzzing and new seeds").
func diffSets(t *testing.T, n int) int {
	s := os.Getenv("SLUICE_DIFF_SCALE")
	if s == "" {
		return n
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("SLUICE_DIFF_SCALE %q: want a positive integer", s)
	}
	return n * v
}

// diffRandom compares the engine and the kernel datapath over sets rule
// sets drawn by gen, 24 packets each; wide flows carry IPv4 options and
// out-of-order fragments (flowGen.wide).
func diffRandom(t *testing.T, h *harness, seed uint64, sets int, gen func(*rand.Rand) string, wide bool) (runHits uint64) {
	pkts := 24
	pf, err := ippool.Parse("ippool.conf", randPools)
	if err != nil {
		t.Fatal(err)
	}
	pools, err := pool.NewSet(pf, func() uint32 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var compared, failures, refused, runRules, withOpts int
	// the programs the sets ran on: specialised ones (never the generic
	// one), several, grown from one set to the next
	variants, grown := map[uint64]bool{}, 0
	prevFeat := uint64(0)
	for n := 0; n < sets && failures < 5; n++ {
		text := gen(rng)
		rules, err := ipf.Parse("r", []byte(text), ipf.ParseOptions{})
		if err != nil {
			t.Fatalf("seed %d set %d: generated rules do not parse: %v\n%s", seed, n, err, text)
		}
		rules, anon, err := ruleset.InlineTables(rules)
		if err != nil {
			t.Fatalf("seed %d set %d: %v\n%s", seed, n, err, text)
		}
		set, err := ruleset.Compile(rules)
		if err != nil {
			t.Fatalf("seed %d set %d: %v\n%s", seed, n, err, text)
		}
		pools := pools
		if len(anon) > 0 {
			// the named tables and this set's anonymous ones
			if pools, err = pool.NewSet(pf, func() uint32 { return 1 }); err != nil {
				t.Fatal(err)
			}
			if err := pools.Add(&ippool.File{Tables: anon}, func() uint32 { return 1 }); err != nil {
				t.Fatal(err)
			}
		}
		im, err := CompileSet(set, CompileOptions{Ifindex: func(s string) (int, bool) { return 1, s == "eth0" }, Pools: pools}.withAnon(anon))
		if errors.Is(err, ErrTooCostly) {
			// groups heading each other several times over: the kernel
			// refuses what the engine would scan (TestPrivilegedScanBudget)
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("seed %d set %d: compile: %v\n%s", seed, n, err, text)
		}
		if err := h.d.LoadRules(im, Active); err != nil {
			t.Fatal(err)
		}
		if _, err := h.d.FlushStates(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := h.d.FlushFrags(); err != nil {
			t.Fatal(err)
		}
		variants[h.d.progKey] = true
		if s := currentSpec(t, h.d); s.fast != 0 && s.key() == h.d.progKey {
			// its main lists, or one of them, are constants of the program
			h.fastSets++
		}
		if f := im.features() & featAll; f&^prevFeat != 0 {
			grown++
		}
		prevFeat = im.features() & featAll
		eng := engine.New(engine.Config{Clock: &state.ManualClock{}, Pools: pools})
		eng.Sets().Store(0, set)
		gen := newFlowGen(rng)
		gen.wide = wide
		var trace []string
		fail := func(format string, args ...any) {
			failures++
			t.Errorf("seed %d set %d: %s\nrules:\n%spackets:\n%s", seed, n, fmt.Sprintf(format, args...),
				text, strings.Join(trace, "\n"))
		}
		for i := 0; i < pkts; i++ {
			fp := gen.next()
			trace = append(trace, fmt.Sprintf("  %d: %s", i+1, fp))
			if len(fp.opts) > 0 {
				withOpts++
			}
			frame := fp.frame()
			var p engine.Packet
			p.Load(append([]byte(nil), frame[14:]...), "eth0", fp.out, 0)
			hits0 := eng.States.Stats().Hits
			res := eng.Check(&p)
			engHit := eng.States.Stats().Hits != hits0

			bhits0 := h.stat(stStKept) + h.stat(stDir+stStKept)
			got, _, err := h.d.Run(fp.out, frame)
			if err != nil {
				t.Fatal(err)
			}
			bpfHit := h.stat(stStKept)+h.stat(stDir+stStKept) != bhits0
			compared++
			if (got == VerdictPass) != res.Verdict.Passed() {
				fail("packet %d: engine %s, bpf %s", i+1, res.Verdict, got)
				break
			}
			if engHit != bpfHit {
				fail("packet %d: matched state: engine %v, bpf %v", i+1, engHit, bpfHit)
				break
			}
			var active int64
			if err := h.d.objs.StateCount.Lookup(uint32(0), &active); err != nil {
				t.Fatal(err)
			}
			if int64(eng.States.Active()) != active {
				fail("packet %d: live states: engine %d, bpf %d", i+1, eng.States.Active(), active)
				break
			}
		}
		if err := compareCounters(h.d, set); err != nil {
			fail("%v", err)
		}
		for _, e := range im.runs {
			runHits += ruleHits(set, int(e.idx))
		}
		runRules += len(im.runs)
		eng.Close()
	}
	t.Logf("seed %d: %d rule sets (%d too costly for the kernel), %d packets compared, %d rules in runs, %d hits on them; "+
		"%d specialised programs, %d sets needing a feature the one before did not; %d sets with constant lists so far",
		seed, sets, refused, compared, runRules, runHits, len(variants), grown, h.fastSets)
	if wide && withOpts == 0 && compared > 500 {
		t.Errorf("seed %d: no packet with IPv4 options in %d", seed, compared)
	}
	if variants[genericSpec.key()] {
		t.Errorf("seed %d: a set ran on the generic program", seed)
	}
	if grown > 0 && len(variants) < 2 {
		t.Errorf("seed %d: sets needing other features ran on one program", seed)
	}
	return runHits
}

// ruleHits is the engine's hit count of the rule at storage position pos
// of CompileSet's order (in, out, count in, count out, groups).
func ruleHits(set *ruleset.Set, pos int) uint64 {
	lists := []*ruleset.List{&set.In, &set.Out, &set.AcctIn, &set.AcctOut}
	for _, name := range set.GroupOrder {
		lists = append(lists, set.Groups[name])
	}
	for _, l := range lists {
		if pos < len(l.Rules) {
			return l.Rules[pos].Stats.Hits.Load()
		}
		pos -= len(l.Rules)
	}
	return 0
}

// randomCallRules returns 2 to 7 rules: group-map calls (group-map 300
// names groups 10, 20 and 99, 301 does not exist) among plain rules, and
// the groups 10 and 20 (either may be missing or empty).
func randomCallRules(r *rand.Rand) string {
	var b strings.Builder
	addr := func(v6 bool) string {
		switch r.IntN(3) {
		case 0:
			if v6 {
				return pick(r, randAddr6)
			}
			return pick(r, randAddr4)
		case 1:
			if v6 {
				return "2001:db8::/32"
			}
			return pick(r, []string{"10.0.0.0/16", "10.0.1.0/24"})
		}
		return "any"
	}
	rule := func(act, dir string) {
		b.WriteString(act + dir)
		if r.IntN(3) == 0 {
			b.WriteString(" quick")
		}
		if r.IntN(4) == 0 {
			b.WriteString(pick(r, []string{" proto udp", " proto tcp", " proto icmp"}))
		}
		v6 := r.IntN(3) == 0
		from, to := addr(v6), addr(v6)
		if from == "any" && to == "any" {
			b.WriteString(" all")
		} else {
			b.WriteString(" from " + from + " to " + to)
		}
		if strings.HasPrefix(act, "pass") && r.IntN(4) == 0 {
			b.WriteString(" keep state")
		}
	}
	plain := func() string {
		return pick(r, []string{"pass", "block", "block return-icmp", "log", "pass", "block"})
	}
	dirs := []string{" in", " out"}
	for n := 1 + r.IntN(4); n > 0; n-- {
		dir := pick(r, dirs)
		act := plain()
		if r.IntN(3) != 0 {
			act = pick(r, []string{"call now", "call"}) + pick(r, []string{" srcgrpmap/300", " dstgrpmap/300", " srcgrpmap/301"})
		}
		rule(act, dir)
		if !strings.HasPrefix(act, "call") && r.IntN(6) == 0 {
			b.WriteString(" head 20")
		}
		b.WriteString("\n")
	}
	for _, g := range []string{"10", "20"} {
		for n := r.IntN(4); n > 0; n-- {
			act := plain()
			if r.IntN(6) == 0 {
				act = "skip 1"
			}
			rule(act, pick(r, dirs))
			b.WriteString(" group " + g + "\n")
		}
	}
	return b.String()
}

// randomGroupRules returns rule sets made of groups: main-list rules that
// head groups (the same group from several heads), groups that head other
// groups and themselves (nesting to the 16-level limit and past it), skip
// rules and quick rules inside groups.
func randomGroupRules(r *rand.Rand) string {
	var b strings.Builder
	ngroups := 2 + r.IntN(4)
	group := func() string { return strconv.Itoa(10 * (1 + r.IntN(ngroups))) }
	dir := pick(r, []string{" in", " out"})
	rule := func() {
		act := pick(r, []string{"pass", "block", "pass", "block", "skip 1", "log", "block return-icmp"})
		b.WriteString(act)
		if r.IntN(8) == 0 {
			b.WriteString(pick(r, []string{" in", " out"}))
		} else {
			b.WriteString(dir)
		}
		if !strings.HasPrefix(act, "skip") && r.IntN(3) == 0 {
			b.WriteString(" quick")
		}
		switch r.IntN(5) {
		case 0:
			b.WriteString(" proto tcp from any to any port = " + strconv.Itoa(int(pick(r, randPorts))))
		case 1:
			b.WriteString(" proto udp all")
		case 2:
			b.WriteString(" from " + pick(r, []string{"10.0.0.0/16", "2001:db8::/32", "192.168.1.1"}) + " to any")
		default:
			b.WriteString(" all")
		}
		if strings.HasPrefix(act, "pass") && r.IntN(4) == 0 {
			b.WriteString(" keep state")
		}
	}
	for n := 1 + r.IntN(5); n > 0; n-- {
		rule()
		if r.IntN(2) == 0 {
			b.WriteString(" head " + group())
		}
		b.WriteString("\n")
	}
	for g := 1; g <= ngroups; g++ {
		name := strconv.Itoa(10 * g)
		for n := r.IntN(4); n > 0; n-- {
			rule()
			if r.IntN(3) == 0 {
				b.WriteString(" head " + group())
			}
			b.WriteString(" group " + name + "\n")
		}
	}
	return b.String()
}

// stat reads one global counter of the program.
func (h *harness) stat(i uint32) uint64 {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		h.t.Fatal(err)
	}
	raw, _, err := h.d.statBlock(ncpu)
	if err != nil {
		h.t.Fatal(err)
	}
	return raw[i]
}

// compareCounters checks each rule's hits and bytes against the engine's.
func compareCounters(d *Datapath, set *ruleset.Set) error {
	infos, err := d.Rules(Active)
	if err != nil {
		return err
	}
	lists := []*ruleset.List{&set.In, &set.Out, &set.AcctIn, &set.AcctOut}
	i := 0
	for li, l := range lists {
		for n, r := range l.Rules {
			if i >= len(infos) {
				return fmt.Errorf("bpf lists %d rules, engine more", len(infos))
			}
			bi := infos[i]
			i++
			if bi.Hits != r.Stats.Hits.Load() || bi.Bytes != r.Stats.Bytes.Load() {
				return fmt.Errorf("list %d rule %d (%s): hits/bytes engine %d/%d, bpf %d/%d", li, n+1, bi.Text,
					r.Stats.Hits.Load(), r.Stats.Bytes.Load(), bi.Hits, bi.Bytes)
			}
		}
	}
	return nil
}

// randPools are the ippool tables random rules may name.
const randPools = `
table role = ipf type = tree number = 100 { 10.0.0.0/16; !10.0.0.2/32; 2001:db8::/32; !2001:db8::2/128; };
table role = ipf type = hash number = 200 { 192.168.1.1/32; 10.0.1.0/24; 2001:db8:1::5/128; };
group-map in role = ipf number = 300 group = 10 { 10.0.0.1/32; 10.0.1.0/24, group = 20; 192.168.1.1/32, group = 99; 2001:db8::/32; 2001:db8::2/128, group = 20; };
`

var (
	randAddr4 = []string{"10.0.0.1", "10.0.0.2", "10.0.1.5", "192.168.1.1"}
	randAddr6 = []string{"2001:db8::1", "2001:db8::2", "2001:db8:1::5"}
	randMcast = map[bool]string{false: "224.0.0.9", true: "ff02::1"}
	randPorts = []uint16{22, 53, 80, 1024, 5000, 40000}
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// The port comparisons the random sets draw from: the basic ones, and all
// of IPFilter's (the fast-path sets, whose compact matches test each).
var (
	portOpsBasic = []string{"=", ">", "<", ":"}
	portOpsAll   = []string{"=", ">", "<", "!=", "<>", "><", ":"}
)

// randPortTest is a random " port ..." test with one of ops (a range
// operator spans 2000 ports from a port of randPorts).
func randPortTest(r *rand.Rand, ops []string) string {
	p := pick(r, randPorts)
	switch op := pick(r, ops); op {
	case ":":
		return fmt.Sprintf(" port %d:%d", p, p+2000)
	case "<>", "><":
		return fmt.Sprintf(" port %d %s %d", p, op, p+2000)
	default:
		return fmt.Sprintf(" port %s %d", op, p)
	}
}

// randomRules returns 1 to 6 rules from a small ipf.conf grammar.
func randomRules(r *rand.Rand) string {
	var b strings.Builder
	// sometimes the first filter rule heads group 10 and later rules of
	// its direction join it
	grouped, headDir := r.IntN(4) == 0, ""
	for n := 1 + r.IntN(6); n > 0; n-- {
		act := pick(r, []string{"pass", "pass", "block", "block", "count", "auth"})
		if grouped && act == "count" {
			act = "pass"
		}
		if act == "block" && r.IntN(6) == 0 {
			act = "block return-icmp"
		}
		if r.IntN(7) == 0 && (act == "pass" || act == "block") && (!grouped || headDir != "") {
			// group-map 300 names group 10 (the head group, when
			// there is one), 20 (sometimes another head) or 99 (never)
			act = pick(r, []string{"call now srcgrpmap/300", "call now dstgrpmap/300", "call srcgrpmap/300",
				"call dstgrpmap/300", "call now srcgrpmap/301"})
		}
		line := b.Len()
		b.WriteString(act)
		dir := pick(r, []string{" in", " out"})
		if headDir != "" {
			dir = headDir
		}
		b.WriteString(dir)
		if act != "count" && r.IntN(2) == 0 {
			b.WriteString(" quick")
		}
		if r.IntN(4) == 0 {
			b.WriteString(pick(r, []string{" on eth0", " on eth1"}))
		}
		if r.IntN(6) == 0 {
			b.WriteString(randomExpr(r))
			if strings.HasPrefix(act, "pass") && r.IntN(3) == 0 {
				b.WriteString(" keep state")
			}
			b.WriteString("\n")
			continue
		}
		v6 := r.IntN(3) == 0
		proto := pick(r, []string{"", "tcp", "udp", "tcp/udp", "icmp", "tcp/udp", "ah"})
		if proto == "icmp" && v6 {
			proto = "ipv6-icmp"
		}
		if proto == "ipv6-icmp" {
			// IPFilter takes icmp-type on ipv6-icmp only in an inet6 rule
			b.WriteString(" inet6")
		}
		if proto != "" {
			b.WriteString(" proto " + proto)
		}
		addr := func() string {
			if r.IntN(8) == 0 {
				return pick(r, []string{"pool/100", "hash/200", "pool/7",
					"pool=(10.0.0.0/16,!10.0.0.2)", "hash=(192.168.1.1,10.0.1.0/24)", "pool=(2001:db8::/32,!2001:db8::2)"})
			}
			switch r.IntN(3) {
			case 0:
				return "any"
			case 1:
				if v6 {
					return pick(r, randAddr6) + pick(r, []string{"", "/64", "/32"})
				}
				return pick(r, randAddr4) + pick(r, []string{"", "/24", "/16"})
			}
			if v6 {
				return pick(r, []string{"ff02::1", "ff00::/8", "2001:db8::/48"})
			}
			return pick(r, []string{"224.0.0.9", "224.0.0.0/4", "10.0.0.0/8"})
		}
		port := func() string {
			if (proto != "tcp" && proto != "udp" && proto != "tcp/udp") || r.IntN(2) == 0 {
				return ""
			}
			return randPortTest(r, portOpsBasic)
		}
		from, to := addr(), addr()
		if from == "any" && to == "any" && proto == "" && r.IntN(2) == 0 {
			b.WriteString(" all")
		} else {
			if from != "any" && r.IntN(5) == 0 {
				from = "!" + from
			}
			b.WriteString(" from " + from + port() + " to " + to + port())
		}
		if proto == "tcp" && r.IntN(3) == 0 {
			b.WriteString(pick(r, []string{" flags S/SA", " flags A/A", " flags S"}))
		}
		if (proto == "icmp" || proto == "ipv6-icmp") && r.IntN(3) == 0 {
			if v6 {
				b.WriteString(pick(r, []string{" icmp-type 128", " icmp-type 129"}))
			} else {
				b.WriteString(pick(r, []string{" icmp-type echo", " icmp-type echorep"}))
			}
		}
		if act != "count" && r.IntN(5) == 0 {
			w := pick(r, []string{" with frag", " with not frag", " with mcast", " with v6hdrs",
				" with v6hdr dstopts", " with not v6hdr hopopts", " with v6hdr hopopts,routing",
				" with ipopts", " with opt lsrr", " with not opt rr", " with opt nop,ts", " with not ipopts"})
			v6host := func(a string) bool {
				return strings.Contains(a, ":") && !strings.Contains(a, "=")
			}
			if strings.Contains(w, "v6hdr ") && !strings.Contains(b.String()[line:], " inet6") &&
				!v6host(from) && !v6host(to) {
				// IPFilter takes `v6hdr LIST` in an IPv6 rule only
				w = " with v6hdrs"
			}
			b.WriteString(w)
		}
		kept := strings.HasPrefix(act, "pass") && r.IntN(2) == 0 || (act == "block" || act == "auth") && r.IntN(8) == 0
		if kept {
			b.WriteString(" keep state")
		}
		switch {
		case grouped && headDir == "":
			b.WriteString(" head 10")
			headDir = dir
		case grouped && r.IntN(3) != 0:
			b.WriteString(" group 10")
		case !grouped && strings.HasPrefix(act, "pass") && r.IntN(6) == 0:
			b.WriteString(" head 20")
		case !grouped && r.IntN(5) == 0:
			b.WriteString(" group 20")
		}
		if kept && r.IntN(6) == 0 {
			// a log tag makes an entry never identical to a later one
			// (the engine's identical, the kernel's state_identical)
			b.WriteString(" set-tag(log=" + strconv.Itoa(1+r.IntN(3)) + ")")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// randomExpr returns ` exp { "..." }` with 1 to 3 clauses of 1 to 3
// values, some negated, over every field the kernel evaluates.
func randomExpr(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(` exp { "`)
	for n := 1 + r.IntN(3); n > 0; n-- {
		field := pick(r, []string{"ip.p", "ip.addr", "ip.src", "ip.dst", "ip6.addr", "ip6.src", "ip6.dst",
			"tcp.port", "tcp.sport", "tcp.dport", "udp.port", "udp.sport", "udp.dport", "tcp.flags", "tcp.state"})
		b.WriteString(field)
		if r.IntN(4) == 0 {
			b.WriteString(" != ")
		} else {
			b.WriteString(" = ")
		}
		for i := 1 + r.IntN(3); i > 0; i-- {
			switch field {
			case "ip.p":
				b.WriteString(pick(r, []string{"6", "17", "1", "58", "tcp", "udp", "51"}))
			case "ip.addr", "ip.src", "ip.dst":
				b.WriteString(pick(r, randAddr4) + pick(r, []string{"", "/24", "/16", "/255.255.0.0"}))
			case "ip6.addr", "ip6.src", "ip6.dst":
				b.WriteString(pick(r, randAddr6) + pick(r, []string{"", "/64", "/32"}))
			case "tcp.flags":
				b.WriteString(pick(r, []string{"S", "S/SA", "A/A", "SA", "R/R"}))
			case "tcp.state":
				b.WriteString("4")
			default:
				b.WriteString(strconv.Itoa(int(pick(r, randPorts))))
			}
			if i > 1 {
				b.WriteString(", ")
			}
		}
		b.WriteString("; ")
	}
	b.WriteString(`" }`)
	return b.String()
}

// flowPkt is one generated packet.
type flowPkt struct {
	v6       bool
	proto    uint8
	src, dst netip.Addr
	sp, dp   uint16
	flags    uint8
	seq, ack uint32
	icmp     uint8
	id       uint16
	out      bool
	payload  int
	exts     []uint8 // IPv6 extension headers, 8 bytes each unless extLen says
	extLen   []uint8 // per header, its length field (8*(n+1) bytes); missing: 0
	ah       bool    // IPv4: an AH header (12 bytes) before the transport header
	opts     []byte  // IPv4 options (a multiple of 4 bytes)
	// fragment: IPv4 offset/MF, or the fields of each IPv6 fragment header
	// (44 in exts); a fragment with an offset carries opaque payload
	fragOff  uint16 // bytes, a multiple of 8
	fragMore bool
	fragID   uint32
}

func (f flowPkt) String() string {
	dir := "in"
	if f.out {
		dir = "out"
	}
	if len(f.exts) > 0 {
		dir += fmt.Sprintf(" exthdrs %v", f.exts)
		if len(f.extLen) > 0 {
			dir += fmt.Sprintf(" lens %v", f.extLen)
		}
	}
	if f.fragOff != 0 || f.fragMore {
		dir += fmt.Sprintf(" frag off %d more %v id %d", f.fragOff, f.fragMore, f.fragID)
	}
	if f.ah {
		dir += " ah"
	}
	if len(f.opts) > 0 {
		dir += fmt.Sprintf(" opts % x", f.opts)
	}
	switch f.proto {
	case 6:
		return fmt.Sprintf("%s tcp %s,%d > %s,%d flags %#x seq %d ack %d len %d", dir, f.src, f.sp, f.dst, f.dp, f.flags, f.seq, f.ack, f.payload)
	case 17:
		return fmt.Sprintf("%s udp %s,%d > %s,%d", dir, f.src, f.sp, f.dst, f.dp)
	}
	return fmt.Sprintf("%s icmp %s > %s type %d id %d", dir, f.src, f.dst, f.icmp, f.id)
}

// frame builds the Ethernet frame with correct checksums (the engine
// verifies them; the kernel datapath does not).
func (f flowPkt) frame() []byte {
	var l4 []byte
	switch f.proto {
	case 6:
		l4 = make([]byte, 20+f.payload)
		binary.BigEndian.PutUint16(l4[0:], f.sp)
		binary.BigEndian.PutUint16(l4[2:], f.dp)
		binary.BigEndian.PutUint32(l4[4:], f.seq)
		binary.BigEndian.PutUint32(l4[8:], f.ack)
		l4[12] = 5 << 4
		l4[13] = f.flags
		binary.BigEndian.PutUint16(l4[14:], 8192)
	case 17:
		l4 = make([]byte, 8+f.payload)
		binary.BigEndian.PutUint16(l4[0:], f.sp)
		binary.BigEndian.PutUint16(l4[2:], f.dp)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	default:
		l4 = make([]byte, 8+f.payload)
		l4[0] = f.icmp
		binary.BigEndian.PutUint16(l4[4:], f.id)
		binary.BigEndian.PutUint16(l4[6:], 1)
	}
	ck := 16
	switch f.proto {
	case 17:
		ck = 6
	case 1, 58:
		ck = 2
	}
	var init uint16
	if f.proto != 1 {
		init = packet.PseudoHeaderChecksum(f.proto, f.src, f.dst, len(l4))
	}
	binary.BigEndian.PutUint16(l4[ck:], ^packet.Checksum(l4, init))
	frame := make([]byte, 14, 14+40+len(l4))
	copy(frame[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(frame[6:12], []byte{2, 0, 0, 0, 0, 1})
	if !f.v6 {
		binary.BigEndian.PutUint16(frame[12:], 0x0800)
		ip := make([]byte, 20, 20+len(f.opts))
		ip = append(ip, f.opts...)
		ip[0] = 0x40 | byte(len(ip)/4)
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(l4)))
		binary.BigEndian.PutUint16(ip[4:], uint16(f.fragID))
		fo := f.fragOff / 8
		if f.fragMore {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(ip[6:], fo)
		ip[8] = 64
		ip[9] = f.proto
		if f.ah {
			// next header, length (12 bytes: (1+2)*4), SPI, sequence
			l4 = append([]byte{f.proto, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, l4...)
			binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(l4)))
			ip[9] = 51
		}
		s, d := f.src.As4(), f.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], ^packet.Checksum(ip, 0))
		frame = append(frame, ip...)
	} else {
		binary.BigEndian.PutUint16(frame[12:], 0x86dd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		var hdrs []byte
		next := f.proto
		for i := len(f.exts) - 1; i >= 0; i-- {
			h := []byte{next, 0, 0, 0, 0, 0, 0, 0}
			if f.exts[i] == 44 {
				fo := f.fragOff
				if f.fragMore {
					fo |= 1
				}
				binary.BigEndian.PutUint16(h[2:], fo)
				binary.BigEndian.PutUint32(h[4:], f.fragID)
			} else if i < len(f.extLen) && f.extLen[i] > 0 {
				h[1] = f.extLen[i]
				h = append(h, make([]byte, 8*int(f.extLen[i]))...)
			}
			hdrs = append(h, hdrs...)
			next = f.exts[i]
		}
		binary.BigEndian.PutUint16(ip[4:], uint16(len(hdrs)+len(l4)))
		ip[6] = next
		ip[7] = 64
		s, d := f.src.As16(), f.dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		frame = append(append(frame, ip...), hdrs...)
	}
	return append(frame, l4...)
}

// flowGen makes packets that belong to a few flows, so that state entries
// are created, hit by replies and continued.
type flowGen struct {
	r       *rand.Rand
	flows   []flowPkt // the last packet sent on each flow
	pending []flowPkt // later fragments of datagrams sent
	fragID  uint32
	// wide adds shapes the other users of flowGen (and
	// TestDifferentialGroups, Runs, GroupMap, about groups) keep out of
	// their seeds' streams: IPv4 options, and a later fragment sent
	// before the first one of its datagram
	wide bool
}

func newFlowGen(r *rand.Rand) *flowGen { return &flowGen{r: r} }

func (g *flowGen) next() flowPkt {
	r := g.r
	if len(g.pending) > 0 && r.IntN(2) == 0 {
		// a later fragment of a datagram sent before
		p := g.pending[0]
		g.pending = g.pending[1:]
		return p
	}
	var p flowPkt
	if len(g.flows) > 0 && r.IntN(3) != 0 {
		i := r.IntN(len(g.flows))
		p = g.follow(g.flows[i])
		g.flows[i] = p
	} else {
		p = g.fresh()
		g.flows = append(g.flows, p)
	}
	p.exts, p.extLen, p.ah, p.opts = nil, nil, false, nil
	p.fragOff, p.fragMore, p.fragID = 0, false, 0
	if p.v6 && r.IntN(4) == 0 {
		// 0 to 16 extension headers in any order, repeats included
		// (a repeated hop-by-hop or routing header is bad), some longer
		// than 8 bytes
		for n := r.IntN(17); n > 0; n-- {
			p.exts = append(p.exts, pick(r, []uint8{0, 60, 60, 43, 44, 135, 51}))
			p.extLen = append(p.extLen, uint8(r.IntN(3)))
		}
	}
	if !p.v6 && r.IntN(6) == 0 {
		p.ah = true
	}
	if g.wide && !p.v6 && r.IntN(5) == 0 {
		// one or two options; lsrr/ssrr with a pointer past their one
		// address, as after the last hop
		for n := 1 + r.IntN(2); n > 0; n-- {
			p.opts = append(p.opts, pick(r, randOpts)...)
		}
	}
	hasFrag := false
	for _, e := range p.exts {
		hasFrag = hasFrag || e == 44
	}
	if r.IntN(8) == 0 || hasFrag {
		g.fragment(&p)
		if n := len(g.pending); g.wide && p.fragMore && r.IntN(4) == 0 {
			// out of order: the later fragment now, the first after
			p, g.pending[n-1] = g.pending[n-1], p
		}
	}
	return p
}

// randOpts are IPv4 options, each padded to 4 bytes: NOPs, record route,
// loose and strict source route, timestamp, router alert.
var randOpts = [][]byte{
	{1, 1, 1, 0},
	{7, 7, 4, 0, 0, 0, 0, 0},
	{131, 7, 8, 10, 0, 0, 9, 1},
	{137, 7, 8, 10, 0, 0, 9, 1},
	{68, 8, 5, 0, 0, 0, 0, 0},
	{148, 4, 0, 0},
}

// fragment makes p the first fragment of a datagram (or an atomic
// fragment) and queues a later fragment of it: in order, overlapping the
// first (bad-frag) or beyond it.
func (g *flowGen) fragment(p *flowPkt) {
	r := g.r
	if p.v6 {
		has := false
		for _, e := range p.exts {
			has = has || e == 44
		}
		if !has {
			at := r.IntN(len(p.exts) + 1)
			p.exts = append(p.exts[:at], append([]uint8{44}, p.exts[at:]...)...)
			if len(p.extLen) > 0 {
				p.extLen = append(p.extLen[:at], append([]uint8{0}, p.extLen[at:]...)...)
			}
		}
	}
	g.fragID++
	p.fragID = g.fragID
	p.fragMore = r.IntN(4) != 0
	if !p.fragMore {
		return
	}
	rest := *p
	first := 8 + p.payload
	if p.proto == 6 {
		first = 20 + p.payload
	}
	inOrder := (first + 7) &^ 7
	rest.fragOff = uint16(pick(r, []int{8, 16, inOrder, inOrder, inOrder + 8, 1024}))
	rest.fragMore = r.IntN(2) == 0
	g.pending = append(g.pending, rest)
}

func (g *flowGen) fresh() flowPkt {
	r := g.r
	p := flowPkt{v6: r.IntN(3) == 0, out: r.IntN(2) == 0, seq: r.Uint32(), id: uint16(r.IntN(4))}
	addrs := randAddr4
	if p.v6 {
		addrs = randAddr6
	}
	p.src = netip.MustParseAddr(pick(r, addrs))
	p.dst = netip.MustParseAddr(pick(r, addrs))
	switch r.IntN(3) {
	case 0:
		p.proto, p.flags = 6, 0x02
	case 1:
		p.proto = 17
	default:
		p.proto, p.icmp = 1, 8
		if p.v6 {
			p.proto, p.icmp = 58, 128
		}
	}
	if p.proto != 6 && r.IntN(4) == 0 {
		// multicast: the state entry has a wildcard destination
		p.dst = netip.MustParseAddr(randMcast[p.v6])
	}
	if p.proto == 6 && r.IntN(8) == 0 {
		p.flags = pick(r, []uint8{0x10, 0x04, 0x01 | 0x10})
	}
	p.sp, p.dp = pick(r, randPorts), pick(r, randPorts)
	if p.src == p.dst {
		p.src = netip.MustParseAddr(addrs[(indexOf(addrs, p.src.String())+1)%len(addrs)])
	}
	return p
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return 0
}

// follow returns the next packet of the flow whose last packet was p:
// mostly a reply, sometimes more from the same side.
func (g *flowGen) follow(p flowPkt) flowPkt {
	r := g.r
	reply := r.IntN(3) != 0
	n := p
	n.payload = 0
	if reply {
		n.src, n.dst, n.sp, n.dp, n.out = p.dst, p.src, p.dp, p.sp, !p.out
		if n.src.IsMulticast() {
			// a multicast query is answered from a unicast address
			addrs := randAddr4
			if p.v6 {
				addrs = randAddr6
			}
			n.src = netip.MustParseAddr(pick(r, addrs))
			if n.src == n.dst {
				n.src = netip.MustParseAddr(addrs[(indexOf(addrs, n.src.String())+1)%len(addrs)])
			}
		}
	}
	switch p.proto {
	case 6:
		switch {
		case reply && p.flags == 0x02:
			n.flags, n.seq, n.ack = 0x12, r.Uint32(), p.seq+1
		case reply:
			n.flags, n.seq, n.ack = 0x10, p.ack, p.seq+uint32(p.payload)+uint32(p.flags&0x03&^0x02)+1
			if p.flags&0x02 != 0 {
				n.ack = p.seq + 1
			}
		default:
			n.flags, n.seq = 0x10, p.seq+uint32(p.payload)
			if p.flags&0x03 != 0 {
				n.seq++
			}
		}
		if r.IntN(3) == 0 {
			n.payload = 1 + r.IntN(100)
		}
		if r.IntN(10) == 0 {
			n.flags = pick(r, []uint8{0x11, 0x14, 0x04, 0x18})
		}
	case 1:
		if reply && p.icmp == 8 {
			n.icmp = 0
		} else if !reply {
			n.icmp = 8
		}
	case 58:
		if reply && p.icmp == 128 {
			n.icmp = 129
		} else if !reply {
			n.icmp = 128
		}
	}
	return n
}

// TestGroupMapCall runs call now / deferred srcgrpmap and dstgrpmap rules
// through the program and the engine: an address in the group-map scans
// the group it names (most specific entry), quick there ends that group's
// scan only unless the rule it returns is itself quick, and an address
// that is not in the map or names a missing group leaves the call without
// effect (a deferred one then leaves command 0, which passes).
func TestGroupMapCall(t *testing.T) {
	h := newHarness(t)
	pf, err := ippool.Parse("ippool.conf", `group-map in role = ipf number = 5 group = 10 {
	10.1.0.0/16; 10.1.2.0/24, group = 20; 10.2.0.0/16, group = 30; };`)
	if err != nil {
		t.Fatal(err)
	}
	pools, err := pool.NewSet(pf, func() uint32 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	groups := `block in all group 10
pass in proto tcp from any to any port = 80 group 10
block in quick proto tcp from any to any port = 80 group 20
pass in all group 20
`
	type pkt struct {
		src, dst string
		dport    uint16
		want     string
	}
	for _, tc := range []struct {
		rules string
		pkts  []pkt
	}{
		{"pass in all\ncall now srcgrpmap/5 in all\nblock in proto tcp from any to any port = 23\n", []pkt{
			{"10.9.0.1", "10.0.0.1", 80, "pass"}, // not in the map
			{"10.9.0.1", "10.0.0.1", 23, "block"},
			{"10.1.0.1", "10.0.0.1", 80, "pass"}, // group 10: last match
			{"10.1.0.1", "10.0.0.1", 443, "block"},
			{"10.1.2.3", "10.0.0.1", 80, "block"}, // group 20: quick
			{"10.1.2.3", "10.0.0.1", 443, "pass"}, // group 20, scan goes on
			{"10.1.2.3", "10.0.0.1", 23, "block"}, // ... to the port 23 rule
			{"10.2.0.1", "10.0.0.1", 443, "pass"}, // group 30 does not exist
		}},
		{"pass in all\ncall now dstgrpmap/5 in all\n", []pkt{
			{"10.1.0.1", "10.9.0.1", 443, "pass"},
			{"10.9.0.1", "10.1.0.1", 443, "block"},
		}},
		{"block in all\ncall srcgrpmap/5 in all\nblock in proto tcp from any to any port = 23\n", []pkt{
			{"10.1.0.1", "10.0.0.1", 443, "block"}, // deferred: group 10
			{"10.1.0.1", "10.0.0.1", 80, "pass"},
			{"10.1.2.3", "10.0.0.1", 23, "block"}, // the call is not the last match
			{"10.1.2.3", "10.0.0.1", 443, "pass"},
			{"10.9.0.1", "10.0.0.1", 443, "pass"}, // unresolved: command 0
		}},
		{"call srcgrpmap/7 in all\n", []pkt{ // no such group-map
			{"10.1.0.1", "10.0.0.1", 443, "pass"},
		}},
	} {
		rules, err := ipf.Parse("r", []byte(tc.rules+groups), ipf.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		set, err := ruleset.Compile(rules)
		if err != nil {
			t.Fatal(err)
		}
		im, err := CompileSet(set, CompileOptions{Ifindex: func(s string) (int, bool) { return 1, s == "eth0" }, Pools: pools})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.d.LoadRules(im, Active); err != nil {
			t.Fatal(err)
		}
		eng := engine.New(engine.Config{Clock: &state.ManualClock{}, Pools: pools})
		eng.Sets().Store(0, set)
		for _, pk := range tc.pkts {
			frame := tcp4(pk.src, pk.dst, 1024, pk.dport, synF).build()
			var p engine.Packet
			p.Load(append([]byte(nil), frame[14:]...), "eth0", false, 0)
			engGot := "block"
			if eng.Check(&p).Verdict.Passed() {
				engGot = "pass"
			}
			ret, _ := h.run(false, frame)
			if got := verdictName(ret); got != pk.want || engGot != pk.want {
				t.Errorf("%s%s -> %s:%d: bpf %s, engine %s, want %s", tc.rules, pk.src, pk.dst, pk.dport, got, engGot, pk.want)
			}
		}
		eng.Close()
	}
}

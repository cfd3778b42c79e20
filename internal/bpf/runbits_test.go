package bpf

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestRunBitsLog checks the runs bitmap's size: 16 bits an IPv4 run entry
// rounded up to a power of two, at least a line, at most 16 MiB.
func TestRunBitsLog(t *testing.T) {
	for _, c := range []struct {
		n    int
		want uint32
	}{{1, 9}, {8, 9}, {32, 9}, {33, 10}, {1 << 16, 20}, {1<<16 + 1, 21}, {1000000, 24}, {1 << 23, 27}, {1 << 24, 27}} {
		if got := runBitsLog(c.n); got != c.want {
			t.Errorf("%d entries: 2^%d bits, want 2^%d", c.n, got, c.want)
		}
	}
}

// TestRunBitmap checks the bitmap of a blocklist's runs (two IPv4 runs of
// 50 000 consecutive hosts, and an IPv6 run, which has no place in it):
// every IPv4 entry's bit is set (a clear one would be a false negative:
// the program would pass a packet a rule of the run blocks), the entries
// take about as many bits as a random hash's would (a hash that kept
// consecutive hosts together would set far fewer), and about as many other
// addresses find their bit set as that many bits make.
func TestRunBitmap(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(blocklist(100000))
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&sb, "block in from 2001:db8::%x to any\n", i+1)
	}
	im := compileText(t, sb.String())
	n4, n6 := 0, 0
	members := map[[2]uint32]bool{}
	for i := range im.runs {
		e := &im.runs[i]
		if im.run4(e) {
			n4++
			members[[2]uint32{e.head, e.addr[0]}] = true
		} else {
			n6++
		}
	}
	if n4 != 100000 || n6 != 10 {
		t.Fatalf("%d IPv4 and %d IPv6 run entries, want 100000 and 10", n4, n6)
	}
	if want := uint32(64 - 21); im.runShift != want {
		t.Fatalf("shift %d, want %d (2^21 bits for 100 000 entries)", im.runShift, want)
	}
	words := im.runBitmap()
	if len(words) != 1<<21/64 {
		t.Fatalf("%d words, want %d", len(words), 1<<21/64)
	}
	bit := func(head, addr uint32) bool {
		h := runHash(head, addr) >> im.runShift
		return words[h>>6]&(1<<(h&63)) != 0
	}
	for k := range members {
		if !bit(k[0], k[1]) {
			t.Fatalf("entry (%d, %#x): bit clear", k[0], k[1])
		}
	}
	set := 0
	for _, w := range words {
		set += bits.OnesCount64(w)
	}
	// a random hash sets m(1 - e^(-n/m)) bits: 97 700 of 2^21 for 100 000
	if set < 97000 {
		t.Errorf("100 000 entries set %d bits, a random hash about 97 700", set)
	}
	// other addresses, of the runs' heads: the bit set for ~4.7 %
	heads := []uint32{}
	for i := range im.rules {
		if im.rules[i].RunLen > 1 && im.rules[i].Family == 4 {
			heads = append(heads, uint32(i))
		}
	}
	if rate := falsePositives(rand.New(rand.NewPCG(1, 2)), heads, members, bit); rate > 0.06 {
		t.Errorf("%.1f %% of other addresses find their bit set, want about 4.7 %%", 100*rate)
	}
}

// falsePositives returns the share of 200 000 other addresses (random
// ones, and half near the runs' hosts, 198.16.0.0/12 as stored) that a
// run head of heads finds set by mayHold: the bitmap's false positives.
func falsePositives(r *rand.Rand, heads []uint32, members map[[2]uint32]bool, mayHold func(head, addr uint32) bool) float64 {
	fp, tries := 0, 200000
	for i := 0; i < tries; i++ {
		k := [2]uint32{heads[r.IntN(len(heads))], r.Uint32()}
		if i%2 == 1 {
			k[1] = 0x10c6 | r.Uint32()&0xfffff0ff
		}
		if members[k] {
			continue
		}
		if mayHold(k[0], k[1]) {
			fp++
		}
	}
	return float64(fp) / float64(tries)
}

// runBitsSet is a rule set of two blocklists as runs, inbound sources and
// outbound destinations, of n addresses each: consecutive hosts and
// random ones.
func runBitsSet(r *rand.Rand, n int) (in, out []netip.Addr, text string) {
	seen := map[netip.Addr]bool{}
	addr := func(i int) netip.Addr {
		for {
			a := netip.AddrFrom4([4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)})
			if i%3 == 0 {
				a = netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
			}
			if !seen[a] && a != netip.MustParseAddr("10.1.0.1") {
				seen[a] = true
				return a
			}
			i += 7919
		}
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		a := addr(i)
		in = append(in, a)
		fmt.Fprintf(&b, "block in from %s/32 to any\n", a)
	}
	for i := 0; i < n; i++ {
		a := addr(n + i)
		out = append(out, a)
		fmt.Fprintf(&b, "block out from any to %s/32\n", a)
	}
	return in, out, b.String()
}

// TestPrivilegedRunBits checks the runs bitmap in the kernel, in a compact
// list as constants of the program (fast_scan), the same list read from
// its map (scan_hot, the program without constant lists) and in a list the
// scan walks (sl_cm_next): every address of every run is blocked (no false
// negative: the program's hash is runHash), addresses in no run pass (a
// false positive is decided by the hash), and with the slot's bitmap
// cleared every run's address passes — the program reads the bitmap and
// trusts a clear bit; on the constant lists it decides them itself (the
// scratch area untouched).
//
// It runs twice: runs of more entries than the small sets' bitmap takes
// (the large sets' array, run_flat_big, beside run_bits), and of 2 × 5 000
// (the small bitmap, run_flat: the bench's 10 000-rule blocklist's size),
// each with its own bitmap cleared. The large set also runs on programs
// bound to a one-entry large array (those a datapath made before the set
// needed it: they must read run_bits), and each program must trust only
// the bitmap it reads: clearing the other changes no verdict.
func TestPrivilegedRunBits(t *testing.T) {
	h := newHarness(t)
	r := rand.New(rand.NewPCG(3, 4))
	// more rules than the bitmap index covers (idxRules): with an index
	// the scan goes straight to the block of the rule that matches, inside
	// the run, and reads neither the runs table nor the bitmap
	testRunBits(t, h, r, idxRules/2+100, false)
	// fewer: compact lists only (a scanned list would use the index)
	testRunBits(t, h, r, 5000, true)
}

func testRunBits(t *testing.T, h *harness, r *rand.Rand, n int, flat bool) {
	in, out, text := runBitsSet(r, n)
	members := map[netip.Addr]bool{}
	for _, a := range append(append([]netip.Addr{}, in...), out...) {
		members[a] = true
	}
	// 40 rules after the runs make the lists too long for a compact list
	var tail strings.Builder
	for p := 1; p <= 40; p++ {
		fmt.Fprintf(&tail, "pass in proto udp from any to any port = %d\npass out proto udp from any to any port = %d\n", p, p)
	}
	peer := "10.1.0.1"
	clearScratch, scratchUsed := scratchProbe(t, h.d)
	var progs progPair
	piped := 0
	blocked := func(out bool, a netip.Addr) bool {
		p := tcp4(a.String(), peer, 40000, 80, ackF)
		prog := progs.in
		if out {
			p = tcp4(peer, a.String(), 80, 40000, ackF)
			prog = progs.out
		}
		frame := p.build()
		clearScratch()
		ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)})
		if err != nil {
			t.Fatal(err)
		}
		if scratchUsed() {
			piped++
		}
		return verdictName(ret) == "block"
	}
	for _, c := range []struct {
		name     string
		text     string
		hot      bool
		constant bool // the program made for the set: its lists as constants
		oneBig   bool // bound to a one-entry large sets' array
	}{
		{"compact list, constant", text, true, true, false},
		{"compact list, pipeline", text, true, false, false},
		{"scanned list", text + tail.String(), false, false, false},
		{"compact list, constant, one-entry large array", text, true, true, true},
	} {
		if flat && (!c.hot || c.oneBig) {
			continue
		}
		im := compileText(t, c.text)
		if im.runShift == 0 || im.runFlat != flat || im.runBig == flat {
			t.Fatalf("%s: bitmap shift %d, small bitmap %v, large %v, want small %v", c.name, im.runShift, im.runFlat, im.runBig, flat)
		}
		if err := h.d.LoadRules(im, Active); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		slot := h.d.slotOf(Active)
		s := currentSpec(t, h.d)
		if got, want := s.fast, map[bool]uint32{false: 0, true: 3 | fastRunsIn | fastRunsOut}[c.hot]; got != want {
			t.Fatalf("%s: constant lists %#b, want %#b", c.name, got, want)
		}
		progs = progPair{h.d.objs.SluiceIngress, h.d.objs.SluiceEgress}
		if c.hot && !c.constant {
			progs = progsFor(t, h.d, s.withoutFast())
		}
		if c.oneBig {
			progs = progsOneEntryBig(t, h.d, s)
		}
		for _, l := range []uint32{listIn, listOut} {
			var hl filterHotlist
			if err := h.d.objs.Hotlists.Lookup(slot*listGroup0+l, &hl); err != nil {
				t.Fatal(err)
			}
			if got := hl.Ok&hotCompact != 0; got != c.hot {
				t.Fatalf("%s: list %d compact %v, want %v", c.name, l, got, c.hot)
			}
		}
		missed := func() int {
			n := 0
			for _, a := range in {
				if !blocked(false, a) {
					n++
				}
			}
			for _, a := range out {
				if !blocked(true, a) {
					n++
				}
			}
			return n
		}
		if n := missed(); n > 0 {
			t.Errorf("%s: %d of the runs' %d addresses passed (a false negative)", c.name, n, len(in)+len(out))
		}
		wrong := 0
		for i := 0; i < 3000; i++ {
			a := netip.AddrFrom4([4]byte{198, 18 + byte(r.IntN(2)), byte(r.IntN(256)), byte(r.IntN(256))})
			if i%2 == 0 {
				a = netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
			}
			if members[a] || a.String() == peer {
				continue
			}
			if blocked(false, a) || blocked(true, a) {
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("%s: %d addresses in no run were blocked", c.name, wrong)
		}
		if !flat {
			// the bitmap these programs do not read: nothing changes
			clearRunBits(t, h.d, slot, false, !c.oneBig)
			if n := missed(); n > 0 {
				t.Errorf("%s: with the bitmap it does not read cleared %d of the runs' %d addresses passed",
					c.name, n, len(in)+len(out))
			}
		}
		clearRunBits(t, h.d, slot, flat, c.oneBig)
		piped = 0
		if n := missed(); n != len(in)+len(out) {
			t.Errorf("%s: with the bitmap cleared %d of the runs' %d addresses were still blocked: the bitmap was not consulted",
				c.name, len(in)+len(out)-n, len(in)+len(out))
		}
		if c.constant && piped > 0 {
			t.Errorf("%s: with the bitmap cleared %d of the runs' %d addresses went to the pipeline, want none",
				c.name, piped, len(in)+len(out))
		}
	}
}

// clearRunBits zeroes slot's runs bitmap in place: its words of the small
// sets' (run_flat) when flat, else of the large sets' array (run_flat_big)
// unless bits, else run_bits'.
func clearRunBits(t *testing.T, d *Datapath, slot uint32, flat, bits bool) {
	t.Helper()
	if !flat && !bits {
		keys := make([]uint32, runBigWords)
		for i := range keys {
			keys[i] = 1 + slot*runBigWords + uint32(i)
		}
		if _, err := d.objs.RunFlatBig.BatchUpdate(keys, make([]uint64, runBigWords), nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	if flat {
		fk := make([]uint32, runFlatWords)
		for i := range fk {
			fk[i] = slot*runFlatWords + uint32(i)
		}
		if _, err := d.objs.RunFlat.BatchUpdate(fk, make([]uint64, runFlatWords), nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	var id ebpf.MapID
	if err := d.objs.RunBits.Lookup(slot, &id); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMapFromID(id)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	n := int(m.MaxEntries())
	keys := make([]uint32, n)
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := m.BatchUpdate(keys, make([]uint64, n), nil); err != nil {
		t.Fatal(err)
	}
}

// mapMemlock reads the kernel's memory figure of a map (its fdinfo).
func mapMemlock(t *testing.T, m *ebpf.Map) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", m.FD()))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "memlock:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no memlock in the fdinfo of map %v", m)
	return 0
}

// TestPrivilegedSetMemory checks what docs/kernel-memory.md says a
// blocklist set costs the kernel, by map, from the kernel's own figures
// (each map's memlock): the IPv4 runs table at most 90 bytes an entry
// (its 8-byte key; the bucket array's share is largest just above a power
// of two), the bitmap its 16 bits an entry rounded up and the array's
// own, the whole set at most 520 bytes a rule (the per-rule maps made
// with an eighth more room). It loads 100 000 rules (SLUICE_MEMORY_RULES:
// another count; the docs' figures are a million's).
func TestPrivilegedSetMemory(t *testing.T) {
	h := newHarness(t)
	n := 100000
	if s := os.Getenv("SLUICE_MEMORY_RULES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	im := compileText(t, blocklist(n))
	if err := h.d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	defer h.d.LoadRules(&Image{}, Active)
	slot := h.d.slotOf(Active)
	sm, err := h.d.slotMaps(slot)
	if err != nil {
		t.Fatal(err)
	}
	defer sm.close()
	inner := func(outer *ebpf.Map) *ebpf.Map {
		var id ebpf.MapID
		if err := outer.Lookup(slot, &id); err != nil {
			t.Fatal(err)
		}
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	maps := []struct {
		name string
		m    *ebpf.Map
	}{
		{"sl_rules", sm.rules}, {"sl_pps", sm.pps}, {"sl_states", sm.states}, {"sl_cblocks", sm.cm},
		{"sl_runs4", inner(h.d.objs.Runs4)}, {"sl_run_bits", inner(h.d.objs.RunBits)},
	}
	var total uint64
	rules := len(im.rules)
	for _, x := range maps {
		b := mapMemlock(t, x.m)
		total += b
		t.Logf("%-12s %9d entries %11d bytes (%.1f a rule)", x.name, x.m.MaxEntries(), b, float64(b)/float64(rules))
	}
	// the texts share one map with the other slots: this set's chunks
	texts := uint64(len(textBlob(im.texts)) * textChunk)
	total += texts
	t.Logf("rule_texts   %9d chunks  %11d bytes (%.1f a rule); %d rules, %d in runs: %d bytes (%.1f a rule)",
		len(textBlob(im.texts)), texts, float64(texts)/float64(rules), rules, len(im.runs), total, float64(total)/float64(rules))
	runs4, bitmap := mapMemlock(t, maps[4].m), mapMemlock(t, maps[5].m)
	if per := float64(runs4) / float64(len(im.runs)); per > 90 {
		t.Errorf("the IPv4 runs table takes %.1f bytes an entry, over the 90 docs/kernel-memory.md gives", per)
	}
	if want := uint64(1) << (64 - im.runShift) / 8; bitmap < want || bitmap > want+want/8+4096 {
		t.Errorf("the runs bitmap takes %d bytes, want %d and the map's own", bitmap, want)
	}
	if per := float64(total) / float64(rules); per > 470 {
		t.Errorf("the set takes %.1f bytes a rule, over the 470 docs/kernel-memory.md gives", per)
	}
	// the large sets' array: every datapath's once a set took it (not
	// the set's: three slots' words), 6 MiB
	if im.runBig {
		big := mapMemlock(t, h.d.objs.RunFlatBig)
		t.Logf("run_flat_big %9d entries %11d bytes", h.d.objs.RunFlatBig.MaxEntries(), big)
		if want := uint64(runBigEntries * 8); big < want || big > want+want/8+4096 {
			t.Errorf("the large sets' array takes %d bytes, want %d and the map's own", big, want)
		}
	}
}

// BenchmarkRunsMiss measures the whole program (specialised for the set)
// for a packet no rule of a blocklist's runs has (blocklist(n), the
// bench's sluice-nomatch-n, an inbound TCP ACK), n = 10 000 and a million
// (BENCH_RUNS_MILLION=1: the load takes ~10 s): "warm" repeats one frame
// (its lines stay cached), "spread" runs each of 4 096 frames from other
// hosts once in turn, so that the runs' lines a packet reads are mostly
// not cached (the cost live traffic from many hosts sees).
func BenchmarkRunsMiss(b *testing.B) {
	h := benchHarness(b)
	sizes := []int{10000}
	if os.Getenv("BENCH_RUNS_MILLION") != "" {
		sizes = append(sizes, 1000000)
	}
	r := rand.New(rand.NewPCG(5, 6))
	frames := make([][]byte, 4096)
	for i := range frames {
		a := netip.AddrFrom4([4]byte{172, 16 + byte(r.IntN(16)), byte(r.IntN(256)), byte(1 + r.IntN(254))})
		frames[i] = tcp4(a.String(), "172.16.0.2", 40000, 8080, ackF).build()
	}
	for _, n := range sizes {
		if err := h.d.LoadRules(compileText(b, blocklist(n)), Active); err != nil {
			b.Fatal(err)
		}
		prog := h.d.objs.SluiceIngress
		b.Run(fmt.Sprintf("%d/warm", n), func(b *testing.B) {
			reportRuns(b, prog, frames[0], 1000)
		})
		b.Run(fmt.Sprintf("%d/spread", n), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				for _, f := range frames {
					ret, d, err := prog.Benchmark(f, 1, nil)
					if err != nil || verdictName(ret) != "pass" {
						b.Fatalf("%v %v", verdictName(ret), err)
					}
					total += d
				}
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*len(frames)), "ns/packet")
		})
	}
	if err := h.d.LoadRules(&Image{}, Active); err != nil {
		b.Fatal(err)
	}
}

// TestRunFlatBitmap checks the small sets' bitmap (run_flat) of the
// bench's 10 000-rule blocklist: the set gets it (and one of more than
// runFlatMax entries does not), the runs' compact matches carry RUN_FLAT,
// every IPv4 entry's three bits are set (a clear one would be a false
// negative), and other addresses find their bits set about as often as
// three random bits a word make (~5 %).
func TestRunFlatBitmap(t *testing.T) {
	if im := compileText(t, blocklist(runFlatMax+2)); im.runFlat {
		t.Fatalf("%d entries: small bitmap, want run_bits alone", runFlatMax+2)
	}
	im := compileText(t, blocklist(10000))
	if !im.runFlat || im.runShift == 0 {
		t.Fatalf("10 000 entries: small bitmap %v, shift %d", im.runFlat, im.runShift)
	}
	words := im.runFlatBitmap()
	if len(words) != runFlatWords {
		t.Fatalf("%d words, want %d", len(words), runFlatWords)
	}
	members := map[[2]uint32]bool{}
	var heads []uint32
	for i := range im.runs {
		e := &im.runs[i]
		if !im.run4(e) {
			continue
		}
		members[[2]uint32{e.head, e.addr[0]}] = true
		if !im.runMayHold(words, e.head, e.addr[0]) {
			t.Fatalf("entry (%d, %#x): a bit clear", e.head, e.addr[0])
		}
		if len(heads) == 0 || heads[len(heads)-1] != e.head {
			heads = append(heads, e.head)
			c := im.runMatch(int(e.head))
			if w := c.Src | c.Dst; w != im.runShift|runFlatBit {
				t.Fatalf("run at %d: shift word %#x, want %#x", e.head, w, im.runShift|runFlatBit)
			}
		}
	}
	if len(members) != 10000 {
		t.Fatalf("%d IPv4 run entries, want 10 000", len(members))
	}
	mayHold := func(head, addr uint32) bool { return im.runMayHold(words, head, addr) }
	if rate := falsePositives(rand.New(rand.NewPCG(5, 6)), heads, members, mayHold); rate > 0.07 || rate < 0.03 {
		t.Errorf("%.1f %% of other addresses find their bits set, want about 5 %%", 100*rate)
	}
}

// TestRunBigArray checks which sets take the large sets' array
// (run_flat_big, RUN_BIG): one of more entries than the small bitmap
// takes does, with RUN_BIG beside run_bits' shift in every run's compact
// match and a bitmap no larger than a slot's words of the array; and the
// largest set that takes it (runBigMax entries) has a bitmap that fits,
// one more entry a bitmap that would not (it keeps run_bits alone).
func TestRunBigArray(t *testing.T) {
	im := compileText(t, blocklist(runFlatMax+2))
	if !im.runBig || im.runFlat || im.runShift == 0 {
		t.Fatalf("%d entries: large %v, small %v, shift %d: want the large array", runFlatMax+2, im.runBig, im.runFlat, im.runShift)
	}
	if n := len(im.runBitmap()); n > runBigWords {
		t.Fatalf("%d words, more than a slot's %d", n, runBigWords)
	}
	runsSeen := 0
	for i := range im.rules {
		if im.rules[i].RunLen < 2 || im.rules[i].Family != 4 {
			continue
		}
		runsSeen++
		c := im.runMatch(i)
		if w := c.Src | c.Dst; w != im.runShift|runBigBit {
			t.Fatalf("run at %d: shift word %#x, want %#x", i, w, im.runShift|runBigBit)
		}
	}
	if runsSeen == 0 {
		t.Fatal("no IPv4 run")
	}
	if small := compileText(t, blocklist(10000)); small.runBig {
		t.Fatal("10 000 entries: the large array, want the small bitmap")
	}
	if runBitsLog(runBigMax) > runBigLog+6 {
		t.Fatalf("%d entries: a bitmap of 2^%d bits, more than a slot's 2^%d", runBigMax, runBitsLog(runBigMax), runBigLog+6)
	}
	if runBitsLog(runBigMax+1) <= runBigLog+6 {
		t.Fatalf("%d entries: a bitmap of 2^%d bits fits a slot: runBigMax is too small", runBigMax+1, runBitsLog(runBigMax+1))
	}
}

// progsOneEntryBig loads the programs of s over d's maps but for a large
// sets' array of one entry: the programs a datapath made before a set
// needed the large array (ensureRunBig), which must read run_bits.
func progsOneEntryBig(t *testing.T, d *Datapath, s progSpec) progPair {
	t.Helper()
	p, _ := specProgsEdit(t, d, s, true, nil, func(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map) {
		delete(repl, "run_flat_big")
		spec.Maps["run_flat_big"].MaxEntries = 1
	})
	return p
}

package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"sluice/internal/testutil/bpffs"
)

// dmHits is the packets decided through st_dm's slots since d was made
// (the slots' hits, which no clear resets).
func dmHits(t testing.TB, d *Datapath) uint64 {
	t.Helper()
	var (
		i uint32
		s filterStSlot
		n uint64
	)
	it := d.objs.StDm.Iterate()
	for it.Next(&i, &s) {
		n += s.Hits
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// canonKey4 is state.h's canonical key of an IPv4 TCP or UDP flow: its two
// ends in canon_order's order (the address words as the kernel loads
// them, then the ports).
func canonKey4(t testing.TB, src, dst string, sport, dport uint16, proto uint8) filterStateKey {
	t.Helper()
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	k := filterStateKey{Sport: sport, Dport: dport, Proto: proto, Family: 4}
	k.Src[0], k.Dst[0] = binary.LittleEndian.Uint32(s[:]), binary.LittleEndian.Uint32(d[:])
	if k.Src[0] > k.Dst[0] || (k.Src[0] == k.Dst[0] && k.Sport > k.Dport) {
		k.Src, k.Dst, k.Sport, k.Dport = k.Dst, k.Src, k.Dport, k.Sport
	}
	return k
}

// slotOf reads key k's slot: whether it holds k (valid) and
// what it holds.
func slotOf(t testing.TB, d *Datapath, k filterStateKey) (filterStSlot, bool) {
	t.Helper()
	var s filterStSlot
	if err := d.objs.StDm.Lookup(dmIdx(k), &s); err != nil {
		t.Fatal(err)
	}
	return s, slotHolds(&s, k) && s.Valid != 0
}

// collider returns a UDP flow from src:port to dst:53 whose canonical key
// has the slot of key k.
func collider(t testing.TB, k filterStateKey, src, dst string) uint16 {
	t.Helper()
	for p := 1024; p < 65536; p++ {
		c := canonKey4(t, src, dst, uint16(p), 53, 17)
		if c != k && dmIdx(c) == dmIdx(k) {
			return uint16(p)
		}
	}
	t.Fatal("no flow with the slot found")
	return 0
}

// TestStateSlotLife follows a flow's st_dm slot through its life: the
// established path fills it and decides the next packets through it; the
// listing adds what went through it; the sweeper keeps an entry whose
// packets renewed only the slot's lifetime and ends it once that is
// past; a flow whose slot is taken works through the hash and takes the
// slot when it frees; a twin made for the flow empties the slot (its
// flags lack SF_TWIN); ipf -FS empties it and the next reply is blocked.
func TestStateSlotLife(t *testing.T) {
	h := newHarness(t)
	h.load("block in all\nblock out all\npass out quick proto udp all keep state\n")
	fwd := testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 1000, dport: 53}
	reply := testPkt{src: "10.0.0.2", dst: "10.0.0.1", proto: 17, sport: 53, dport: 1000}
	k := canonKey4(t, fwd.src, fwd.dst, fwd.sport, fwd.dport, 17)
	hits0 := dmHits(t, h.d)
	h.expect(true, fwd, "pass") // the pipeline makes the entry
	if _, ok := slotOf(t, h.d, k); ok {
		t.Error("the slot was filled by the packet that made the entry")
	}
	h.expect(true, fwd, "pass") // the hash's path decides and fills
	s, ok := slotOf(t, h.d, k)
	if !ok {
		t.Fatalf("the established path did not fill the flow's slot (%+v)", s)
	}
	for range 3 {
		h.expect(true, fwd, "pass")
	}
	// the first reply: the slot lacks its interface, so it gives the
	// flow back to the element (EST_HASH) and the path, run once more,
	// decides by the element and fills the slot again
	h.expect(false, reply, "pass")
	if _, ok := slotOf(t, h.d, k); !ok {
		t.Error("the hash's path did not fill the slot again after the first reply")
	}
	for range 5 {
		h.expect(false, reply, "pass")
	}
	if n := dmHits(t, h.d) - hits0; n != 3+5 {
		t.Errorf("%d packets through the slot, want 8", n)
	}
	states, err := h.d.States()
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || states[0].Pkts != [4]uint64{0, 5, 6, 0} {
		t.Fatalf("listing %+v: want one entry with pkts [0 5 6 0]", states)
	}

	// the slot's lifetime is the entry's: the sweeper syncs it first
	if err := h.d.AdvanceClock(100 * time.Second); err != nil {
		t.Fatal(err)
	}
	h.expect(true, fwd, "pass") // through the slot: its lifetime renewed, not the element's
	if err := h.d.AdvanceClock(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Sweep(); err != nil {
		t.Fatal(err)
	}
	if n, err := h.d.StateEntries(); err != nil || n != 1 {
		t.Fatalf("after the sweep %d entries (%v): the sweeper ended an entry the slot kept alive", n, err)
	}
	h.expect(false, reply, "pass")
	if err := h.d.AdvanceClock(200 * time.Second); err != nil {
		t.Fatal(err)
	}
	h.expect(false, reply, "block") // expired: the pipeline ends it
	if _, ok := slotOf(t, h.d, k); ok {
		t.Error("the slot outlived its expired entry")
	}

	// a flow whose slot another holds
	h.expect(true, fwd, "pass")
	h.expect(true, fwd, "pass")
	if _, ok := slotOf(t, h.d, k); !ok {
		t.Fatal("the new entry did not take the slot")
	}
	p2 := collider(t, k, "10.0.0.3", "10.0.0.2")
	fwd2 := testPkt{src: "10.0.0.3", dst: "10.0.0.2", proto: 17, sport: p2, dport: 53}
	k2 := canonKey4(t, fwd2.src, fwd2.dst, p2, 53, 17)
	hits1 := dmHits(t, h.d)
	for range 3 {
		h.expect(true, fwd2, "pass")
	}
	if dmHits(t, h.d) != hits1 {
		t.Error("a flow went through a slot another flow holds")
	}
	// flow 1 alone removed, as ipf -FS removes entries: by sluice_ctl
	if err := h.d.objs.CtlKeys.Update(uint32(0), k, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := h.d.control(ctlKill, 1); err != nil || n != 1 {
		t.Fatalf("removing flow 1: %d %v", n, err)
	}
	if _, ok := slotOf(t, h.d, k); ok {
		t.Error("the slot outlived its entry's removal")
	}
	h.expect(false, reply, "block")
	h.expect(true, fwd2, "pass")
	if _, ok := slotOf(t, h.d, k2); !ok {
		t.Error("flow 2 did not take the freed slot")
	}

	// a twin: the slot's copy of the flags has no SF_TWIN
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	h.load("block in all\nblock out all\npass out quick proto udp all keep state\npass in quick proto udp all keep state\n")
	h.expect(true, fwd, "pass")
	h.expect(true, fwd, "pass")
	if _, ok := slotOf(t, h.d, k); !ok {
		t.Fatal("no slot before the twin")
	}
	h.expect(false, reply, "pass") // the first reply: none of its options for the replies
	h.expect(false, reply, "pass")
	if _, ok := slotOf(t, h.d, k); !ok {
		t.Fatal("no slot before the twin")
	}
	r := reply
	r.ipOpts = []byte{1, 1, 1, 0}
	h.expect(false, r, "pass") // options the replies do not have: a new entry the other way, the twin
	if n, err := h.d.StateEntries(); err != nil || n != 2 {
		t.Fatalf("%d entries (%v), want the flow's and its twin", n, err)
	}
	if s, ok := slotOf(t, h.d, k); ok && s.Flags&sfTwin == 0 {
		t.Errorf("the slot holds the flow without SF_TWIN after its twin was made: %+v", s)
	}
	for range 3 {
		h.expect(true, fwd, "pass") // the entry's own way: the slot may decide
		h.expect(false, r, "pass")  // the twin's: the pipeline
	}
	if s, ok := slotOf(t, h.d, k); ok && s.Flags&sfTwin == 0 {
		t.Errorf("the slot was filled without SF_TWIN: %+v", s)
	}

	// ipf -FS: every slot empty, the reply blocked
	if _, err := h.d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	h.load("block in all\nblock out all\npass out quick proto udp all keep state\n")
	for _, kk := range []filterStateKey{k, k2} {
		if s, _ := slotOf(t, h.d, kk); s.Kpfwt != 0 {
			t.Errorf("slot %d holds a key (%+v) after the flush", dmIdx(kk), s)
		}
	}
	h.expect(false, reply, "block")
}

// TestPrivilegedStateSlotRace (bounded, two CPUs): CPU 0 sends flow 1's
// replies without pause, which pass only by flow 1's entry (so through its
// slot once filled), while CPU 1 makes flow 1's entry and, in alternate
// rounds, first the entry of a flow whose key has the same slot, sends a
// few packets of the flow that holds the slot, and removes every entry.
// After each removal, with CPU 0 still sending: no slot may hold a key
// (no packet can pass by an ended entry) and a reply of flow 1 must be
// blocked; before it, a slot holding a key must hold that key's element
// (its creation time and verdict: no torn entry).
func TestPrivilegedStateSlotRace(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	h := newHarness(t)
	h.load("block in all\nblock out all\npass out quick proto udp all keep state\n")
	fwd := testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 1000, dport: 53}
	reply := testPkt{src: "10.0.0.2", dst: "10.0.0.1", proto: 17, sport: 53, dport: 1000}
	k1 := canonKey4(t, fwd.src, fwd.dst, fwd.sport, fwd.dport, 17)
	p2 := collider(t, k1, "10.0.0.3", "10.0.0.2")
	fwd2 := testPkt{src: "10.0.0.3", dst: "10.0.0.2", proto: 17, sport: p2, dport: 53}
	reply2 := testPkt{src: "10.0.0.2", dst: "10.0.0.3", proto: 17, sport: 53, dport: p2}
	k2 := canonKey4(t, fwd2.src, fwd2.dst, p2, 53, 17)
	replyFrame := reply.build()
	hits0 := dmHits(t, h.d)

	stop := make(chan struct{})
	done := make(chan error, 1)
	var sent, passed int
	go func() {
		undo, err := onCPU(0)
		if err != nil {
			done <- err
			return
		}
		defer undo()
		buf := make([]byte, len(replyFrame)+256)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			ret, err := h.d.objs.SluiceIngress.Run(&ebpf.RunOptions{Data: replyFrame, DataOut: buf})
			if err != nil {
				done <- err
				return
			}
			sent++
			if ret == tcNext {
				passed++
			}
		}
	}()
	undo, err := onCPU(1)
	if err != nil {
		close(stop)
		t.Fatal(err)
	}
	run := func(out bool, p testPkt) uint32 {
		ret, _ := h.run(out, p.build())
		return ret
	}
	whole := func(round int, k filterStateKey) {
		s, ok := slotOf(t, h.d, k)
		if !ok {
			return
		}
		var e filterStateEntry
		if err := h.d.objs.States.Lookup(k, &e); err != nil {
			t.Errorf("round %d: slot %d holds %+v, which has no element", round, dmIdx(k), k)
			return
		}
		if s.Created != e.Created || s.Pass != e.Pass {
			t.Errorf("round %d: slot of %+v: created %d pass %#x, element's %d %#x", round, k, s.Created, s.Pass, e.Created, e.Pass)
		}
	}
	const rounds = 300
	for r := 0; r < rounds && !t.Failed(); r++ {
		if r%2 == 1 {
			run(true, fwd2)
			run(true, fwd2)
		}
		for range 3 {
			run(true, fwd)
		}
		run(false, reply)
		run(false, reply)
		if r%2 == 1 {
			run(false, reply2)
		}
		whole(r, k1)
		whole(r, k2)
		if _, err := h.d.FlushStates(nil); err != nil {
			t.Fatal(err)
		}
		for _, k := range []filterStateKey{k1, k2} {
			if s, _ := slotOf(t, h.d, k); s.Kpfwt != 0 {
				t.Errorf("round %d: slot holds a key (%+v) after its entry's removal", r, s)
			}
		}
		if ret := run(false, reply); ret != tcShot {
			t.Errorf("round %d: flow 1's reply after its entry's removal: %s", r, verdictName(ret))
		}
	}
	close(stop)
	undo()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n := dmHits(t, h.d) - hits0
	t.Logf("CPU 0: %d replies of flow 1, %d passed; %d packets through slots", sent, passed, n)
	if passed == 0 || n == 0 {
		t.Errorf("the race was not run: %d replies passed, %d through slots", passed, n)
	}
}

// TestStateSlotMemory: st_dm, an array allocated whole at load, takes what
// docs/kernel-memory.md gives (8 MiB: 32 768 slots of 256 bytes, each
// four whole lines).
func TestStateSlotMemory(t *testing.T) {
	h := newHarness(t)
	if n := unsafe.Sizeof(filterStSlot{}); n != 256 {
		t.Errorf("a slot is %d bytes, docs/kernel-memory.md says 256", n)
	}
	f, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", h.d.objs.StDm.FD()))
	if err != nil {
		t.Fatal(err)
	}
	var memlock int64 = -1
	for _, l := range strings.Split(string(f), "\n") {
		if v, ok := strings.CutPrefix(l, "memlock:"); ok {
			memlock, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	t.Logf("st_dm: %d slots, memlock %d bytes", stDMSlots, memlock)
	if memlock < 0 || memlock > 8<<20+64<<10 {
		t.Errorf("st_dm takes %d bytes of memlock, over the 8 MiB docs/kernel-memory.md gives", memlock)
	}
}

// TestPrivilegedStateSlotUpgrade: a datapath an older Sluice pinned has no
// st_dm. Opening it (ipfstat, ipf -FS) fails with ErrIncomplete, creating
// nothing, until a load (ipf -f) creates and pins the array beside the
// maps it reuses: the rules and the state table stay, and the flow made
// before goes on, through its new slot once filled.
func TestPrivilegedStateSlotUpgrade(t *testing.T) {
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("Load: %+v", err)
	}
	h := &harness{t: t, d: d}
	h.load("block in all\nblock out all\npass out quick proto udp all keep state\n")
	fwd := testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 1000, dport: 53}
	reply := testPkt{src: "10.0.0.2", dst: "10.0.0.1", proto: 17, sport: 53, dport: 1000}
	h.expect(true, fwd, "pass") // the pipeline makes the entry; no slot yet
	d.Close()
	// the older datapath: everything but st_dm
	if err := os.Remove(filepath.Join(dir, "st_dm")); err != nil {
		t.Fatal(err)
	}
	// readers open it (the states hash holds every flow of the older
	// programs) and say what it lacks; writes wait for a load
	if o, err := OpenPinned(dir); err != nil {
		t.Fatalf("OpenPinned without st_dm: %v", err)
	} else {
		miss := o.MissingMaps()
		n, serr := o.StateEntries()
		werr := o.LoadRules(compileText(t, "block in all\n"), Inactive)
		o.Close()
		if !slices.Contains(miss, "st_dm") || serr != nil || n != 1 {
			t.Fatalf("OpenPinned without st_dm: missing %v, %d entries (%v); want st_dm named and the flow", miss, n, serr)
		}
		if !errors.Is(werr, ErrOlderLayout) {
			t.Fatalf("rules written over the older pins: %v, want ErrOlderLayout", werr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "st_dm")); !os.IsNotExist(err) {
		t.Fatalf("OpenPinned pinned st_dm (%v): it must create nothing", err)
	}
	d, err = Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("Load over the older pins: %+v", err)
	}
	defer d.Remove()
	if _, err := os.Stat(filepath.Join(dir, "st_dm")); err != nil {
		t.Fatalf("the load did not pin st_dm: %v", err)
	}
	if n, err := d.StateEntries(); err != nil || n != 1 {
		t.Fatalf("%d state entries after the load (%v), want the flow's", n, err)
	}
	h = &harness{t: t, d: d}
	if err := d.LoadRules(compileText(t, "block in all\nblock out all\npass out quick proto udp all keep state\n"), Active); err != nil {
		t.Fatal(err)
	}
	k := canonKey4(t, fwd.src, fwd.dst, fwd.sport, fwd.dport, 17)
	h.expect(false, reply, "pass") // by the entry made before
	h.expect(true, fwd, "pass")    // the element decides and fills the slot
	if _, ok := slotOf(t, d, k); !ok {
		t.Error("the flow made before the upgrade did not take its slot")
	}
	hits0 := dmHits(t, d)
	h.expect(true, fwd, "pass")
	if dmHits(t, d) != hits0+1 {
		t.Error("the flow's packet did not go through its slot")
	}
	if o, err := OpenPinned(dir); err != nil {
		t.Errorf("OpenPinned after the load: %v", err)
	} else {
		o.Close()
	}
}

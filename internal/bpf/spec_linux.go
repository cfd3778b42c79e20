package bpf

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"sluice/internal/ruleset"
)

// Load-time specialisation. The filter's ingress and egress programs are
// loaded with constants (k_* in c/filter.c, frozen .rodata) that say what
// the rule set they run needs: since dp9 a program is made for one slot,
// the active one (k_cfg: the slot, its FEAT_* word, default pass,
// min TTL, log flags and L2 mode are constants, so a packet reads one
// config word, the on/off switch), plus whether state entries may exist (either set keeping
// state or entries in the table, the same for both slots' programs); and
// — when both sets are empty, nothing can hit state, nothing is logged and
// every interface has a link-layer header — the default pass itself, so
// an idle packet reads no config at all (KM_IDLE). The verifier knows the
// constants and drops the code they rule out.
//
// The protocol: every change of what the programs were specialised for
// goes through setCfg (the config keys of specKeys) or LoadRules, under
// the config map's flock, and
//
//   - a program made for a slot reads that slot only, so publishing a set
//     is putting its program in place: LoadRules writes the new set into
//     the spare slot, then, under one hold of the lock, moves an idle
//     program (which reads the config for a packet it cannot pass at
//     once) to one made for the active slot if the new set is not idle,
//     publishes the slot, and the publishing write puts the new set's
//     program in place; packets see the old set with its program or the
//     new one with its own;
//   - with the active slot's program the inactive slot's is loaded too,
//     first (pinned as a variant, below): ipf -s then finds it and is one
//     link update per hook, and a set whose program cannot be loaded is
//     not published; ipf -I loads the inactive slot's program only
//     (unless the new set changes whether state may exist);
//   - setCfg writes the value, then specialises; a program that cannot be
//     loaded (or attached) puts the old value back and returns the error,
//     so the old value and program stay in force;
//   - the programs replace the attached ones atomically (TCX link.Update),
//     then the pins
//     prog_ingress / prog_egress (renamed over: ipfstat and the next
//     command find the attached program there);
//   - cfgSpec records what the attached programs were made for; it is
//     cleared while they are replaced, so a process killed half way makes
//     the next one load and attach again.
//
// On a kernel without TCX (the clsact fallback) the programs stay the
// generic ones: a tc filter is found by name in the network namespace of
// the process, and the process that changes the rules may be in another.
//
// State may outlive its rules (ipf -Fa keeps IPFilter's state entries), so
// "state may exist" also holds while the table is not empty; it is
// re-read after the programs were replaced, in case a packet of the old
// rules made an entry meanwhile.

// progSpec is what a pair of filter programs is specialised for.
type progSpec struct {
	feat    uint64 // FEAT_* bits the program may need (featAll: generic)
	mode    uint32 // kmConfig, kmOff, kmIdle
	defpass uint32 // kmIdle or cfg: default_pass
	state   bool   // state entries may exist
	// cfg: made for the active slot and the configuration in force (k_cfg):
	// a packet reads no config line. ipf -s puts the program made for the
	// other slot in place (loaded before: see specialiseLocked).
	cfg      bool
	slot     uint32 // the active slot
	sfeat    uint64 // its FEAT_* word (the IDX_* bits are read from config)
	minttl   uint32
	logflags uint32
	anyl3    bool
	// cfg: the slot's main lists as constants (k_fast, lib/fast.h), when
	// they are small and simple enough (fastLists): bit 0 inbound, bit 1
	// outbound
	fast              uint32
	nfastIn, nfastOut uint32
	fastIn, fastOut   [fastMax]filterHot
	// nat: NAT's established path inside the programs (natin_linux.go),
	// the length of a jiffy it stamps; 0: off. natBits: its halves
	// (natIngress, natEgress); natMap: the id of NAT's array the
	// programs read, so that a pinned variant is never taken for
	// another NAT datapath's array
	nat, natBits, natMap uint32
	// runBig: the id of the large sets' array the programs read (0: the
	// datapath's one-entry array), so that a program made before
	// ensureRunBig is never taken for one that reads it
	runBig uint32
}

// fastMax is how many entries a constant list holds (FAST_MAX).
const fastMax = 16

// fastRunsIn and fastRunsOut are the bits of progSpec.fast beside the
// directions' (FAST_RUNS_IN/_OUT): that direction's constant list holds
// an IPv4 run, whose bits in the runs bitmap the fast path reads before
// the scan (lib/fast.h; a list without one has no such code).
const (
	fastRunsIn  = 4
	fastRunsOut = 8
)

// featAll are the FEAT_* bits a program may be specialised without.
const featAll = featAcctIn | featAcctOut | featClock | featRoute | featLimits | featLog | featRet | featPool | featExpr | featFrags

// genericSpec is the program that reads everything from config (the
// object's defaults).
var genericSpec = progSpec{feat: ^uint64(0), mode: kmConfig, state: true}

// key encodes a progSpec for cfgSpec and the variant cache: 1 for the
// generic program, else a hash of the fields (never 0 or 1).
func (s progSpec) key() uint64 {
	if s == genericSpec {
		return 1
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%x/%d/%x/%t/%t/%d/%x/%d/%x/%t", s.feat, s.mode, s.defpass, s.state,
		s.cfg, s.slot, s.sfeat, s.minttl, s.logflags, s.anyl3)
	if s.fast != 0 {
		fmt.Fprintf(h, "/fast %d %d %d %v %v", s.fast, s.nfastIn, s.nfastOut, s.fastIn, s.fastOut)
	}
	if s.nat != 0 {
		fmt.Fprintf(h, "/nat %d %d %d", s.nat, s.natBits, s.natMap)
	}
	if s.runBig != 0 {
		fmt.Fprintf(h, "/big %d", s.runBig)
	}
	return h.Sum64() | 2
}

// specKeys are the config keys a specialised program depends on: a write
// of one of them re-specialises.
var specKeys = map[uint32]bool{cfgActive: true, cfgInactive: true, cfgEnabled: true, cfgDefPass: true,
	cfgLogFlags: true, cfgAnyL3: true, cfgClsact: true, cfgMinTTL: true, cfgNATInline: true, cfgNATOff: true}

// progPair is a loaded ingress/egress pair.
type progPair struct{ in, out *ebpf.Program }

// wantSpec computes the programs' specialisation from the config c, the
// state count, whether fragment entries exist, and the feature word of an
// extra slot about to be published (grow; -1: none).
//
// A program in KM_CONFIG mode is made for the active slot (cfg): its rules
// and feature word, default pass, min TTL, log flags and L2 mode are
// constants, so it never reads a slot another program is meant for, and
// publishing a slot is putting its program in place. What entries may
// need is the same for both slots' programs (so that ipf -s finds the
// other one as it was loaded): state entries and fragment entries outlive
// the sets whose rules made them, and carry those rules' flags, so while
// either set keeps state, or entries exist, the programs keep the state
// and fragment lookups, logging and return-* (FEAT_FRAGS, FEAT_LOG,
// FEAT_RET).
//
// The idle program (KM_IDLE) reads the config for a packet it cannot pass
// at once (no clean IPv4/IPv6 header), so a slot about to be published
// that is not idle makes it a KM_CONFIG program first (the grow step).
func wantSpec(c *filterConf, stateCount int64, frags bool, extra int) progSpec {
	if c.V[cfgClsact] != 0 {
		// the tc filters of the fallback cannot be found from another
		// network namespace to be replaced: they keep the generic
		// programs
		return genericSpec
	}
	if c.V[cfgEnabled] == 0 {
		return progSpec{mode: kmOff}
	}
	active := uint32(c.V[cfgActive]) % numSlots
	slots := []uint32{active, uint32(c.V[cfgInactive]) % numSlots}
	if j := c.V[cfgSwapLog]; j&swapLogValid != 0 {
		slots = append(slots, uint32(j)&0xff%numSlots)
	}
	var all uint64
	idle := extra < 0 || c.V[cfgIndex0+uint32(extra)%numSlots]&featIdle != 0
	for _, sl := range slots {
		f := c.V[cfgIndex0+sl]
		all |= f & featAll
		// a word being rewritten (0) is not idle
		idle = idle && f&featIdle != 0
	}
	var s progSpec
	s.state = all&featClock != 0 || stateCount != 0
	old := stateCount != 0 || frags
	defpass := uint32(c.V[cfgDefPass])
	var entries uint64
	if all&featClock != 0 || old {
		entries |= featFrags
	}
	if c.V[cfgLogFlags] != 0 || defpass&ruleset.FRLog != 0 || old {
		entries |= featLog
	}
	if defpass&ruleset.FRRetMask != 0 || old {
		entries |= featRet
	}
	if idle && !s.state && c.V[cfgLogFlags] == 0 && c.V[cfgAnyL3] == 0 &&
		defpass&(ruleset.FRLog|ruleset.FRRetMask) == 0 {
		s.feat = all | entries
		s.mode, s.defpass = kmIdle, defpass
		return s
	}
	s.cfg = true
	s.slot = active
	// whether the index is needed and its dimensions are read beside it
	// (hotlist.ok, the config): fewer programs to verify
	s.sfeat = c.V[cfgIndex0+active] &^ (idxOn | idxSrc | idxSport | featHotIn | featHotOut)
	s.feat = s.sfeat&featAll | entries
	s.defpass = defpass
	s.minttl = uint32(c.V[cfgMinTTL])
	s.logflags = uint32(c.V[cfgLogFlags])
	s.anyl3 = c.V[cfgAnyL3] != 0
	return s
}

// fastAction are the action bits of a rule a constant list may hold: its
// whole effect is the verdict (pass or block, quick or not), the direction
// and the address negations (in its compact match); FR_COPIED (every
// compiled rule has it) means nothing to the datapath. Anything else
// (keep state or frags, log, return-*, call, skip, auth, nomatch) needs
// the pipeline.
const fastAction = ruleset.FRCmdMask | ruleset.FRQuick | ruleset.FRInQue | ruleset.FROutQue |
	ruleset.FRNotSrcIP | ruleset.FRNotDstIP | ruleset.FRCopied

// fastFeat are the slot features that rule the constant lists out: the
// accounting lists, route, limits, logging and return-* need the
// pipeline; keep state/frags do (featClock), and pools and exp rules are
// matched whole. A slot with any of them is not a small simple set.
const fastFeat = featAll

// fastLists gives s (a program made for its slot) the slot's main lists as
// constants when every packet a clean parse takes is decided by them and
// default_pass alone: nothing is logged (no log flags, default_pass
// without log or return-*), every interface has a link-layer header, the
// slot uses no feature of fastFeat, and the direction's main list is
// empty or compact with at most fastMax entries, each a compact match
// (no CM_FULL; a run only as CM_RUN4, an IPv4 run with the slot's bitmap's
// shift) and an action of fastAction. A packet that may match a rule of a
// run (its bit in the bitmap is set) leaves the fast path for the
// pipeline, so a run's rules need not be simple beyond that; the lists
// hold their entries as compact matches, which name neither the run's
// addresses nor its bitmap, and the bitmap is written with the slot's
// other maps while the slot is spare (writeRuns), so a program made for
// the slot reads the bitmap its lists were written with. hot reads the
// hot list of a key (the hotlists map); the lists of a direction that
// cannot be constant leave it to the pipeline.
func fastLists(s progSpec, hot func(key uint32) (filterHotlist, error)) progSpec {
	if !s.cfg || s.mode != kmConfig || s.anyl3 || s.logflags != 0 ||
		s.defpass&(ruleset.FRLog|ruleset.FRRetMask) != 0 || s.sfeat&fastFeat != 0 {
		return s
	}
	for dir, l := range []uint32{listIn, listOut} {
		hl, err := hot(s.slot*listGroup0 + l)
		if err != nil || hl.Ok&hotNoIdx == 0 {
			// not written by this version, or not compact
			continue
		}
		n := int(hl.N)
		if hl.Ok&hotCompact == 0 {
			n = 0 // no rule
		}
		if n > fastMax {
			continue
		}
		var out [fastMax]filterHot
		ok, runs := true, false
		for i := 0; i < n && ok; i++ {
			e := &hl.R[i]
			cmd := e.Action & ruleset.FRCmdMask
			run := e.M.Flags&cmRun != 0
			runs = runs || run
			ok = e.M.Flags&cmFull == 0 && (!run || e.M.Flags&cmRun4 != 0) && e.Action&^fastAction == 0 &&
				(cmd == ruleset.FRPass || cmd == ruleset.FRBlock)
			out[i].M = e.M
			out[i].Pos, out[i].Action, out[i].Skip = e.Pos, e.Action, e.Skip
		}
		if !ok {
			continue
		}
		s.fast |= 1 << dir
		if runs {
			s.fast |= fastRunsIn << dir
		}
		if l == listIn {
			s.nfastIn, s.fastIn = uint32(n), out
		} else {
			s.nfastOut, s.fastOut = uint32(n), out
		}
	}
	return s
}

// withoutFast is s without constant lists: the program that runs the
// whole pipeline for the same set (tests and benchmarks compare the two).
func (s progSpec) withoutFast() progSpec {
	s.fast, s.nfastIn, s.nfastOut = 0, 0, 0
	s.fastIn, s.fastOut = [fastMax]filterHot{}, [fastMax]filterHot{}
	return s
}

// hotOf reads hot lists from d's hotlists map (fastLists).
func (d *Datapath) hotOf(key uint32) (filterHotlist, error) {
	var hl filterHotlist
	err := d.objs.Hotlists.Lookup(key, &hl)
	return hl, err
}

// otherSpec is the specialisation ipf -s will want: c with the active and
// inactive slots exchanged.
func otherSpec(c *filterConf, stateCount int64, frags bool) progSpec {
	o := *c
	o.V[cfgActive], o.V[cfgInactive] = c.V[cfgInactive], c.V[cfgActive]
	return wantSpec(&o, stateCount, frags, -1)
}

// specInputs reads what the wanted programs depend on beside the rule
// lists: the config, whether state entries may exist and whether fragment
// entries are present.
func (d *Datapath) specInputs() (c filterConf, n int64, frags bool, err error) {
	if err = d.objs.Config.Lookup(uint32(0), &c); err != nil {
		return c, 0, false, fmt.Errorf("reading config: %w", err)
	}
	return c, d.stateCount(), d.fragsPresent(), nil
}

// want is wantSpec with the slot's lists as constants where they can be
// (fastLists): the programs a live Datapath makes.
func (d *Datapath) want(c *filterConf, n int64, frags bool, extra int) progSpec {
	return d.withRunBig(d.natin.spec(fastLists(wantSpec(c, n, frags, extra), d.hotOf)))
}

// withRunBig is s with the large sets' array d's programs read, for a
// program that may read it: one whose main lists are not both constants,
// or whose constant lists hold a RUN_BIG run (made after the array: the
// id changes no key of a program made before it, so the first large set
// verifies no more programs than before). A program on constant lists
// without one reads the array only through the pipeline (a large run in
// a group's list): made before the array, it reads run_bits there —
// right, not faster.
func (d *Datapath) withRunBig(s progSpec) progSpec {
	if s != genericSpec && s.mode == kmConfig && (s.fast&3 != 3 || s.fastRunBig()) {
		s.runBig = d.runBigID()
	}
	return s
}

// fastRunBig says whether s's constant lists hold an IPv4 run that reads
// the large sets' array (RUN_BIG in its shift word).
func (s progSpec) fastRunBig() bool {
	for i := range s.fastIn[:min(s.nfastIn, fastMax)] {
		if runBigWord(&s.fastIn[i]) {
			return true
		}
	}
	for i := range s.fastOut[:min(s.nfastOut, fastMax)] {
		if runBigWord(&s.fastOut[i]) {
			return true
		}
	}
	return false
}

func runBigWord(h *filterHot) bool {
	if h.M.Flags&cmRun4 == 0 {
		return false
	}
	w := h.M.Dst
	if h.M.Flags&cmRunSrc != 0 {
		w = h.M.Src
	}
	return w&runBigBit != 0
}

// other is otherSpec as want is wantSpec.
func (d *Datapath) other(c *filterConf, n int64, frags bool) progSpec {
	return d.withRunBig(d.natin.spec(fastLists(otherSpec(c, n, frags), d.hotOf)))
}

// lockCfg takes the lock setCfg and the specialisation share: in this
// process cfgMu, between processes an flock on the pinned config map.
func (d *Datapath) lockCfg() func() {
	d.cfgMu.Lock()
	fd := -1
	if d.dir != "" {
		if f, err := unix.Open(filepath.Join(d.dir, "config"), unix.O_RDONLY, 0); err == nil {
			if unix.Flock(f, unix.LOCK_EX) == nil {
				fd = f
			} else {
				unix.Close(f)
			}
		}
	}
	return func() {
		if fd >= 0 {
			unix.Flock(fd, unix.LOCK_UN)
			unix.Close(fd)
		}
		d.cfgMu.Unlock()
	}
}

// Specialise re-specialises the programs for what the configuration and
// the state table need now (a no-op when they already are). Changes made
// through this package do it themselves; tests and tools that change the
// state table behind its back call it.
func (d *Datapath) Specialise() error {
	unlock := d.lockCfg()
	defer unlock()
	return d.specialiseLocked(-1, false)
}

// specialiseLocked loads (or finds) the programs for the wanted
// specialisation and puts them in place of the attached ones and the
// pins. With force they are put in place even when cfgSpec says they are.
// The caller holds lockCfg.
func (d *Datapath) specialiseLocked(extra int, force bool) error {
	if d.noSpecialise {
		return nil
	}
	c, n, frags, err := d.specInputs()
	if err != nil {
		return err
	}
	if err := d.syncNAT(&c); err != nil {
		return err
	}
	want := d.want(&c, n, frags, extra)
	if err := d.placeSpec(&c, want, n, frags, force); err != nil {
		return err
	}
	if want.feat&featFrags == 0 && want.mode != kmOff {
		// a packet of the rules just replaced may have made an entry
		// while the programs were swapped
		if n, f := d.stateCount(), d.fragsPresent(); n != 0 || f {
			return d.placeSpec(&c, d.want(&c, n, f, extra), n, f, false)
		}
	}
	return nil
}

// placeSpec puts the programs for want in place (putSpec). A program made
// for the active slot comes with the other slot's, for ipf -s to put in
// place without the verifier: loaded first, so that a set whose program
// cannot be loaded is not published (and one loaded already costs
// nothing).
func (d *Datapath) placeSpec(c *filterConf, want progSpec, n int64, frags, force bool) error {
	if want.cfg {
		// both at once (loadVariants) when want is not in place
		// already (putSpec then takes the attached programs); the
		// other slot's first, so that it is the older pin
		specs := []progSpec{d.other(c, n, frags)}
		if c.V[cfgSpec] != want.key() || force {
			specs = append(specs, want)
		}
		if err := d.loadVariants(specs...); err != nil {
			return err
		}
	}
	return d.putSpec(c, want, force)
}

// fragsPresent reports whether the fragment table holds an entry.
func (d *Datapath) fragsPresent() bool {
	var k filterFragKey
	err := d.objs.Frags.NextKey(nil, &k)
	return !errors.Is(err, ebpf.ErrKeyNotExist)
}

func (d *Datapath) stateCount() int64 {
	var n int64
	if err := d.objs.StateCount.Lookup(uint32(0), &n); err != nil {
		return 1 // unknown: state may exist
	}
	return n
}

// putSpec makes want the programs of d, the attached ones and the pins.
func (d *Datapath) putSpec(c *filterConf, want progSpec, force bool) error {
	k := want.key()
	placed := c.V[cfgSpec] == k
	if placed && !force && (d.progKey == k || d.opened) {
		// an OpenPinned handle runs and attaches nothing: the attached
		// programs are what it needs (and the prefix of the same set:
		// another process may have left it for the set before)
		return d.placePrefix(want)
	}
	if placed && !force && d.dir != "" {
		// another process placed them: use the pinned ones
		if pp, err := loadPinnedPair(d.dir); err == nil {
			d.setProgs(k, pp)
			return d.placePrefix(want)
		}
	}
	pp, err := d.variant(want)
	if err != nil {
		return err
	}
	if d.dir != "" && (!placed || force) {
		if err := d.writeCfgRaw(c, cfgSpec, 0); err != nil {
			return err
		}
		if err := d.replaceAttached(pp); err != nil {
			return err
		}
	}
	if err := d.writeCfgRaw(c, cfgSpec, k); err != nil {
		return err
	}
	d.progKey = k
	if !d.opened {
		d.objs.SluiceIngress, d.objs.SluiceEgress = pp.in, pp.out
	}
	return d.placePrefix(want)
}

// setProgs makes pp (loaded from the pins) d's programs for key k.
func (d *Datapath) setProgs(k uint64, pp progPair) {
	if old, ok := d.variants[k]; ok {
		old.in.Close()
		old.out.Close()
	}
	if d.variants == nil {
		d.variants = map[uint64]progPair{}
	}
	d.variants[k] = pp
	d.progKey = k
	d.objs.SluiceIngress, d.objs.SluiceEgress = pp.in, pp.out
}

func loadPinnedPair(dir string) (progPair, error) {
	in, err := ebpf.LoadPinnedProgram(filepath.Join(dir, "prog_ingress"), nil)
	if err != nil {
		return progPair{}, err
	}
	out, err := ebpf.LoadPinnedProgram(filepath.Join(dir, "prog_egress"), nil)
	if err != nil {
		in.Close()
		return progPair{}, err
	}
	return progPair{in, out}, nil
}

// writeCfgRaw writes one config value without re-specialising; the
// caller holds lockCfg.
func (d *Datapath) writeCfgRaw(c *filterConf, key uint32, v uint64) error {
	c.V[key] = v
	if err := d.objs.Config.Put(uint32(0), c); err != nil {
		return fmt.Errorf("writing config %d: %w", key, err)
	}
	return nil
}

// variant returns the programs specialised for s, loading them (the
// verifier runs) the first time this Datapath needs them.
func (d *Datapath) variant(s progSpec) (progPair, error) {
	if err := d.loadVariants(s); err != nil {
		return progPair{}, err
	}
	return d.variants[s.key()], nil
}

// loadVariants makes sure d has the programs of every spec: those it has
// neither loaded nor finds pinned are loaded, each program on its own
// thread (at most one per CPU). The verifier is most of a first load's
// kernel time for a big set (three pairs of ~0.4 s programs: the grow step,
// the new set's and the other slot's), and it runs on the loading thread,
// so on two CPUs the pairs take half the wall time they took one after
// the other. A pair that loads is kept (and pinned, in the order of
// specs: the last is the newest pin) even when another fails; the first
// error in the order of specs is returned.
func (d *Datapath) loadVariants(specs ...progSpec) error {
	var todo []progSpec
	seen := map[uint64]bool{}
	for _, s := range specs {
		k := s.key()
		if _, ok := d.variants[k]; ok || seen[k] {
			continue
		}
		seen[k] = true
		if d.dir != "" && d.specMutate == nil {
			// loaded by an earlier command: no verifier run
			if pp, err := loadPinnedPairAs(d.dir, variantPin(k, s.natMap)); err == nil {
				d.addVariant(k, pp)
				continue
			}
		}
		todo = append(todo, s)
	}
	if len(todo) == 0 {
		return nil
	}
	if d.OlderLayout() {
		return fmt.Errorf("%s: %w", d.dir, ErrOlderLayout)
	}
	// one parse of the object a pair, a copy of it for the second
	// program (a spec is not shared between loads)
	progs := make([]*ebpf.Program, 2*len(todo))
	errs := make([]error, 2*len(todo))
	specs2 := make([]*ebpf.CollectionSpec, 2*len(todo))
	for j, s := range todo {
		spec, err := d.variantSpec(s)
		if err != nil {
			errs[2*j] = err
			continue
		}
		specs2[2*j], specs2[2*j+1] = spec, spec.Copy()
	}
	load := func(i int) {
		if specs2[i] != nil {
			progs[i], errs[i] = d.loadVariantProg(specs2[i], i%2 == 1)
		}
	}
	if runtime.NumCPU() < 2 {
		for i := range progs {
			load(i)
		}
	} else {
		sem := make(chan struct{}, runtime.NumCPU())
		var wg sync.WaitGroup
		for i := range progs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				load(i)
			}()
		}
		wg.Wait()
	}
	var first error
	for j, s := range todo {
		in, out := progs[2*j], progs[2*j+1]
		if err := cmp.Or(errs[2*j], errs[2*j+1]); err != nil {
			if in != nil {
				in.Close()
			}
			if out != nil {
				out.Close()
			}
			if first == nil {
				first = wrapVerifier("loading the specialised filter programs", err)
			}
			continue
		}
		k := s.key()
		d.addVariant(k, progPair{in, out})
		if d.dir != "" && d.specMutate == nil {
			// kept for the next command (best effort: a missing pin only
			// costs a verifier run; a mutated program is not the key's)
			pinVariant(d.dir, variantPin(k, s.natMap), progPair{in, out})
		}
	}
	return first
}

// BenchStopAt makes the programs d specialises from now on end after the
// filter's STAGE n (c/filter.c, lib/est.h; 0: the whole program), with
// TC_ACT_UNSPEC: the live bisect of sluice bench's opt-in
// sluice-stateful-at-N and sluice-attach-at-N configurations, which
// attach such a cut program under netperf beside the trivial one. A
// packet so cut is passed without being filtered or counted: never for a
// datapath that filters anything. The programs in place are made again
// at once (with no rules they are Load's, and a later load of the same
// set would keep them); the cut programs are not pinned as variants for
// later commands.
func (d *Datapath) BenchStopAt(n uint32) error { return d.benchCut("stop_at", n) }

// BenchRunCut makes the programs d specialises from now on cut the
// constant lists' run probe at point n (lib/fast.h bench_runcut; 0: the
// whole probe): the live bisect of sluice bench's opt-in
// sluice-nomatch-10000-cut-N configurations. A cut program may pass what
// a run blocks: never for a datapath that filters anything. As
// BenchStopAt's, the programs in place are made again at once (under the
// configuration's lock) and the cut ones are not pinned as variants.
func (d *Datapath) BenchRunCut(n uint32) error { return d.benchCut("bench_runcut", n) }

// benchCut sets the program variable name (a __u32 of the bench's cuts)
// to n in the programs d specialises from now on, or leaves every
// variable at the object's value when n is 0 (one cut at a time), and
// makes the programs in place again.
func (d *Datapath) benchCut(name string, n uint32) error {
	unlock := d.lockCfg()
	defer unlock()
	if n == 0 {
		d.specMutate = nil
	} else {
		d.specMutate = func(spec *ebpf.CollectionSpec) {
			if v := spec.Variables[name]; v != nil {
				_ = v.Set(n) // a __u32 variable: Set fails only on a size mismatch
			}
		}
	}
	// every program made before is the whole program (or another cut)
	old := d.variants
	d.variants = nil
	err := d.specialiseLocked(-1, true)
	for k, pp := range old {
		if cur, ok := d.variants[k]; ok && cur == pp {
			continue
		}
		pp.in.Close()
		pp.out.Close()
	}
	return err
}

// variantSpec is the filter's spec specialised for s.
func (d *Datapath) variantSpec(s progSpec) (*ebpf.CollectionSpec, error) {
	return d.variantSpecNAT(s, natEgress)
}

// variantSpecNAT is variantSpec with the inline NAT path's bits (k_nat)
// when d has it.
func (d *Datapath) variantSpecNAT(s progSpec, natBits uint32) (*ebpf.CollectionSpec, error) {
	spec, err := filterSpec()
	if err != nil {
		return nil, fmt.Errorf("loading filter spec: %w", err)
	}
	if err := s.setVars(spec); err != nil {
		return nil, err
	}
	if d.specMutate != nil {
		d.specMutate(spec)
	}
	if err := d.natin.setVars(spec, s, natBits); err != nil {
		return nil, err
	}
	foldRodata(spec)
	return spec, nil
}

// loadVariantProg loads the ingress (or, with out, the egress) program
// of spec over d's maps.
func (d *Datapath) loadVariantProg(spec *ebpf.CollectionSpec, out bool) (*ebpf.Program, error) {
	opts := &ebpf.CollectionOptions{MapReplacements: d.replacements(spec)}
	if out {
		var o struct {
			P *ebpf.Program `ebpf:"sluice_egress"`
		}
		err := spec.LoadAndAssign(&o, opts)
		return o.P, err
	}
	var o struct {
		P *ebpf.Program `ebpf:"sluice_ingress"`
	}
	err := spec.LoadAndAssign(&o, opts)
	return o.P, err
}

func (d *Datapath) addVariant(k uint64, pp progPair) {
	if d.variants == nil {
		d.variants = map[uint64]progPair{}
	}
	d.variants[k] = pp
}

// Specialised programs are pinned beside the datapath's as
// spec_<object>_<key>_in / _out, so that the next command needing the same
// specialisation finds it without the verifier (seconds on a busy host).
// The object's hash, and the version of what the loader does to its
// programs (loadVersion), keep a newer Sluice from taking an older one's
// programs; at most maxVariantPins pairs are kept.
const maxVariantPins = 8

// loadVersion changes when the loader changes the programs it loads from
// the same object: 2 rewrites .rodata loads into immediates (foldRodata).
const loadVersion = "2"

var objHash = sync.OnceValue(func() string {
	h := sha256.Sum256(append(append([]byte(nil), _FilterBytes...), loadVersion...))
	return hex.EncodeToString(h[:6])
})

// variantPin names the pins of the variant with key k. A variant with NAT
// inside (natMap, the id of NAT's array it reads) carries the id in its
// name: each pin holds that array (8 MiB) alive, and dropNATVariants
// removes the ones NAT no longer uses by their names alone.
func variantPin(k uint64, natMap uint32) string {
	if natMap != 0 {
		return fmt.Sprintf("spec_%s_%x_m%d", objHash(), k, natMap)
	}
	return fmt.Sprintf("spec_%s_%x", objHash(), k)
}

// dropNATVariants removes the pinned variants (and prefixes) made with a
// NAT array other than keep (0: with any). Without it a pin made before
// NAT was removed or loaded again kept the old array until eight newer
// variants evicted it or ipf -D ran. Best effort: a pin is only a cache.
func dropNATVariants(dir string, keep uint32) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		i := strings.LastIndex(n, "_m")
		if !strings.HasPrefix(n, "spec_") || i < 0 {
			continue
		}
		id, _, ok := strings.Cut(n[i+2:], "_")
		if v, err := strconv.ParseUint(id, 10, 32); ok && err == nil && uint32(v) != keep {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
}

func loadPinnedPairAs(dir, name string) (progPair, error) {
	in, err := ebpf.LoadPinnedProgram(filepath.Join(dir, name+"_in"), nil)
	if err != nil {
		return progPair{}, err
	}
	out, err := ebpf.LoadPinnedProgram(filepath.Join(dir, name+"_out"), nil)
	if err != nil {
		in.Close()
		return progPair{}, err
	}
	return progPair{in, out}, nil
}

func pinVariant(dir, name string, pp progPair) {
	ents, _ := os.ReadDir(dir)
	type pin struct {
		name string
		made time.Time
	}
	var others []pin
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), "_in"); ok && strings.HasPrefix(n, "spec_") && n != name {
			var made time.Time
			if fi, err := e.Info(); err == nil {
				made = fi.ModTime()
			}
			others = append(others, pin{n, made})
		}
	}
	// the oldest go (a variant dropped is loaded again when needed): not
	// the other slot's program, pinned just before the active one's
	sort.SliceStable(others, func(i, j int) bool { return others[i].made.Before(others[j].made) })
	for len(others) >= maxVariantPins {
		_ = os.Remove(filepath.Join(dir, others[0].name+"_in"))
		_ = os.Remove(filepath.Join(dir, others[0].name+"_out"))
		_ = os.Remove(filepath.Join(dir, others[0].name+"_pre")) // inline NAT's prefix
		others = others[1:]
	}
	base := filepath.Join(dir, name)
	if pinOver(pp.out, base+"_out") == nil {
		_ = pinOver(pp.in, base+"_in")
	}
}

// setVars sets the specialisation constants of a filter spec.
func (s progSpec) setVars(spec *ebpf.CollectionSpec) error {
	if s == genericSpec {
		return nil // the object's defaults
	}
	for name, v := range map[string]any{"k_feat": s.feat, "k_mode": s.mode, "k_defpass": s.defpass, "k_state": b2u32(s.state),
		"k_cfg": b2u32(s.cfg), "k_slot": s.slot, "k_sfeat": s.sfeat, "k_minttl": s.minttl, "k_logflags": s.logflags,
		"k_anyl3": b2u32(s.anyl3), "k_fast": s.fast, "k_nfast_in": s.nfastIn, "k_nfast_out": s.nfastOut,
		"k_fast_in": s.fastIn, "k_fast_out": s.fastOut} {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("specialising the filter (%s): %w", name, err)
		}
	}
	return nil
}

// initialSpec is the specialisation Load starts from: for the config
// and state pinned in dir, or with fresh, a new datapath's. Anything it
// cannot read makes it the generic one (Load re-specialises under the
// lock anyway).
func initialSpec(dir string, fresh bool) progSpec {
	if fresh {
		c := defaultConf()
		return wantSpec(&c, 0, false, -1)
	}
	cm, err := ebpf.LoadPinnedMap(filepath.Join(dir, "config"), nil)
	if err != nil {
		return genericSpec
	}
	defer cm.Close()
	sm, err := ebpf.LoadPinnedMap(filepath.Join(dir, "state_count"), nil)
	if err != nil {
		return genericSpec
	}
	defer sm.Close()
	var c filterConf
	var n int64
	if cm.Lookup(uint32(0), &c) != nil || sm.Lookup(uint32(0), &n) != nil {
		return genericSpec
	}
	frags := true
	if fm, err := ebpf.LoadPinnedMap(filepath.Join(dir, "frags"), nil); err == nil {
		var k filterFragKey
		frags = !errors.Is(fm.NextKey(nil, &k), ebpf.ErrKeyNotExist)
		fm.Close()
	}
	s := wantSpec(&c, n, frags, -1)
	if hm, err := ebpf.LoadPinnedMap(filepath.Join(dir, "hotlists"), nil); err == nil {
		s = fastLists(s, func(k uint32) (filterHotlist, error) {
			var hl filterHotlist
			return hl, hm.Lookup(k, &hl)
		})
		hm.Close()
	}
	return s
}

func b2u32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// replacements is mapsByName for loading spec's programs over d's maps:
// spec's large sets' array takes the size of d's (ensureRunBig may have
// made it larger than the object's), so that d's is taken as compatible.
func (d *Datapath) replacements(spec *ebpf.CollectionSpec) map[string]*ebpf.Map {
	if ms, m := spec.Maps["run_flat_big"], d.objs.RunFlatBig; ms != nil && m != nil {
		ms.MaxEntries = m.MaxEntries()
	}
	return d.mapsByName()
}

// mapsByName lists d's maps by their names in the object.
func (d *Datapath) mapsByName() map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	v := reflect.ValueOf(&d.objs.filterMaps).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Tag.Get("ebpf")
		if m, ok := v.Field(i).Interface().(*ebpf.Map); ok && m != nil && name != "" {
			out[name] = m
		}
	}
	if d.natin.dm != nil {
		out["nat_dm"] = d.natin.dm
	}
	return out
}

// replaceAttached puts pp in place of the programs attached (TCX links
// pinned in d.dir, else the clsact fallback's filters) and pinned. On an
// error the links already updated get the pinned programs back.
func (d *Datapath) replaceAttached(pp progPair) error {
	old, oldErr := loadPinnedPair(d.dir)
	if oldErr == nil {
		defer old.in.Close()
		defer old.out.Close()
	}
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return err
	}
	type updated struct {
		l      *link.Link
		egress bool
	}
	var done []updated
	defer func() {
		for _, u := range done {
			(*u.l).Close()
		}
	}()
	fail := func(err error) error {
		if oldErr == nil {
			for _, u := range done {
				if u.egress {
					_ = (*u.l).Update(old.out)
				} else {
					_ = (*u.l).Update(old.in)
				}
			}
		}
		return err
	}
	for _, e := range ents {
		_, hook, ok := linkPin(e.Name())
		if !ok || hook == "natin" {
			// the inline NAT prefix's links: placePrefix
			continue
		}
		l, err := link.LoadPinnedLink(filepath.Join(d.dir, e.Name()), nil)
		if err != nil {
			return fail(fmt.Errorf("opening %s: %w", e.Name(), err))
		}
		p := pp.in
		if hook == "egress" {
			p = pp.out
		}
		if err := l.Update(p); err != nil {
			l.Close()
			return fail(fmt.Errorf("replacing the program of %s: %w", e.Name(), err))
		}
		done = append(done, updated{&l, hook == "egress"})
	}
	for name, p := range map[string]*ebpf.Program{"prog_ingress": pp.in, "prog_egress": pp.out} {
		if err := pinOver(p, filepath.Join(d.dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// pinOver pins p at path: pinned aside, then renamed over the old pin, so
// a reader never finds the name missing.
func pinOver(p *ebpf.Program, path string) error {
	next := path + "_next"
	_ = os.Remove(next)
	if err := p.Pin(next); err != nil {
		return fmt.Errorf("pinning %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(next, path); err != nil {
		_ = os.Remove(next)
		return fmt.Errorf("pinning %s: %w", filepath.Base(path), err)
	}
	return nil
}

// closeVariants closes the programs of every specialisation d loaded.
func (d *Datapath) closeVariants() {
	for _, pp := range d.variants {
		if pp.in == d.objs.SluiceIngress {
			d.objs.SluiceIngress = nil
		}
		if pp.out == d.objs.SluiceEgress {
			d.objs.SluiceEgress = nil
		}
		pp.in.Close()
		pp.out.Close()
	}
	d.variants = nil
}

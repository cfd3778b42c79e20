package bpf

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"

	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// Set names one of the two rule sets.
type Set int

// The sets of LoadRules, Flush and Rules.
const (
	Active   Set = 0
	Inactive Set = 1
)

func (s Set) String() string {
	if s == Inactive {
		return "inactive"
	}
	return "active"
}

func (d *Datapath) slotOf(s Set) uint32 {
	active, inactive := d.slots()
	if s == Inactive {
		return inactive
	}
	return active
}

// slots returns the active and inactive slots. While a Swap is being
// written (or after one was interrupted) the journal says which slot was
// active before, so readers never see both sets on one slot.
func (d *Datapath) slots() (active, inactive uint32) {
	active = uint32(d.cfg(cfgActive)) % numSlots
	inactive = uint32(d.cfg(cfgInactive)) % numSlots
	if j := d.cfg(cfgSwapLog); j&swapLogValid != 0 {
		if old := uint32(j) & 0xff % numSlots; old != active {
			// the new active slot is published: the old one is inactive
			inactive = old
		}
	}
	return active, inactive
}

// The swap journal (cfgSwapLog): valid bit, set number before the swap
// (bits 8..15), active slot before the swap (bits 0..7).
const swapLogValid = 1 << 16

// finishSwap completes a Swap that a killed process left half written.
// The caller holds the lock.
func (d *Datapath) finishSwap() error {
	j := d.cfg(cfgSwapLog)
	if j&swapLogValid == 0 {
		return nil
	}
	old := uint32(j) & 0xff % numSlots
	if uint32(d.cfg(cfgActive))%numSlots != old {
		// the new active slot was published: finish the rest
		if err := d.setCfg(cfgInactive, uint64(old)); err != nil {
			return err
		}
		if err := d.setCfg(cfgSetNo, (j>>8&1)^1); err != nil {
			return err
		}
	}
	return d.setCfg(cfgSwapLog, 0)
}

// LoadRules replaces set s with the compiled image. The image is written
// to the spare slot, the one neither set uses, and only then published
// by one config write (cfgActive or cfgInactive). So packets see either
// the old rules or the new ones, never a mix; and a load that fails or
// is killed half way leaves both sets as they were: a half-written slot
// is never one that Swap can activate or Rules can list.
func (d *Datapath) LoadRules(im *Image, s Set) error {
	unlock, err := d.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := d.SyncInterfaces(); err != nil {
		return fmt.Errorf("loading %s rules: %w", s, err)
	}
	active, inactive := d.slots()
	if active == inactive {
		return fmt.Errorf("corrupt config: active and inactive sets share slot %d", active)
	}
	target := 3 - active - inactive
	if err := d.writeSlot(target, im); err != nil {
		return fmt.Errorf("loading %s rules: %w", s, err)
	}
	// the programs grow to cover the new set before a packet can meet
	// it; publishing shrinks them to the sets in force (setCfg). Both
	// under one hold of the lock: no other change may shrink them between
	if err := d.growAndPublish(s, target); err != nil {
		return fmt.Errorf("loading %s rules: %w", s, err)
	}
	return nil
}

// growAndPublish specialises the programs for the sets in force and slot
// target, then makes target set s (the publishing write re-specialises).
func (d *Datapath) growAndPublish(s Set, target uint32) error {
	unlock := d.lockCfg()
	defer unlock()
	key := uint32(cfgActive)
	if s == Inactive {
		key = cfgInactive
	}
	if err := d.prefetchPublish(key, target); err != nil {
		return err
	}
	if err := d.specialiseLocked(int(target), false); err != nil {
		return err
	}
	return d.setCfgLocked(key, uint64(target))
}

// prefetchPublish loads at once (loadVariants) the programs the grow
// step and the publishing write of growAndPublish will want, as the
// config and the state table are now: on a first load that is three
// pairs, which one after the other took ~2.6 s of a million-rule load's
// ~10. A program that does not verify fails the load here, before
// anything is published; if the state table changes meanwhile the steps
// load what they want then (this is only a head start).
func (d *Datapath) prefetchPublish(key, target uint32) error {
	if d.noSpecialise {
		return nil
	}
	c, n, frags, err := d.specInputs()
	if err != nil {
		return err
	}
	var specs []progSpec
	add := func(c *filterConf, extra int) {
		want := d.want(c, n, frags, extra)
		if want.cfg {
			specs = append(specs, d.other(c, n, frags))
		}
		if c.V[cfgSpec] != want.key() {
			specs = append(specs, want)
		}
	}
	add(&c, int(target))
	pub := c
	pub.V[key] = uint64(target)
	add(&pub, -1)
	return d.loadVariants(specs...)
}

// Swap exchanges the active and inactive sets (ipf -s) and returns the
// slot number IPFilter would print ("Set %d now inactive": 0 or 1). It
// takes three config writes; a journal written first lets readers and
// the next writer finish a swap that a killed process left half done.
func (d *Datapath) Swap() (int, error) {
	unlock, err := d.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	active, inactive := d.slots()
	setNo := d.cfg(cfgSetNo) & 1
	if err := d.setCfg(cfgSwapLog, swapLogValid|setNo<<8|uint64(active)); err != nil {
		return 0, err
	}
	if err := d.setCfg(cfgActive, uint64(inactive)); err != nil {
		return 0, err
	}
	if err := d.finishSwap(); err != nil {
		return 0, err
	}
	return int(setNo), nil
}

// Token returns a word of user-space state kept with the pins (ipf keeps
// the token of an unconfirmed load there, see ipfctl); the programs never
// read it. 0 when never set.
func (d *Datapath) Token() uint64 { return d.cfg(cfgToken) }

// SetToken stores the word Token returns.
func (d *Datapath) SetToken(v uint64) error { return d.setCfg(cfgToken, v) }

// ActiveSetNumber is IPFilter's number (0 or 1) of the active set.
func (d *Datapath) ActiveSetNumber() int { return int(d.cfg(cfgSetNo)) }

func (d *Datapath) writeSlot(slot uint32, im *Image) error {
	if len(d.missing) > 0 {
		// the maps a slot's runs go to are not there (an older
		// Sluice's datapath, opened with OpenPinned): Load first
		return fmt.Errorf("%s lacks %s: %w", d.dir, strings.Join(d.missing, ", "), ErrOlderLayout)
	}
	// a new generation of rules: state entries and keep-limit counts of
	// the rules that held this slot before no longer count for these
	if err := d.setCfg(cfgGen0+slot, d.cfg(cfgGen0+slot)+1); err != nil {
		return err
	}
	n := len(im.rules)
	if n > RuleCap {
		return fmt.Errorf("%d rules: the kernel datapath holds at most %d in a set", n, RuleCap)
	}
	// pool tables and exp values before the rules that name them
	if err := d.writePools(slot, im); err != nil {
		return err
	}
	if len(im.exprs) > 0 {
		keys := make([]uint32, len(im.exprs))
		for i := range keys {
			keys[i] = slot*maxExprs + uint32(i)
		}
		if _, err := d.objs.Exprs.BatchUpdate(keys, im.exprs, nil); err != nil {
			return fmt.Errorf("writing exp values: %w", err)
		}
	}
	// the per-rule maps, sized to the set (no packet uses the slot while
	// it is written)
	sm, err := d.prepareSlot(slot, slotSizeOf(im))
	if err != nil {
		return err
	}
	defer sm.close()
	if n > 0 {
		keys := make([]uint32, n)
		for i := range keys {
			keys[i] = uint32(i)
		}
		if _, err := sm.rules.BatchUpdate(keys, im.rules, nil); err != nil {
			return fmt.Errorf("writing rules: %w", err)
		}
		cbs := im.cblocks()
		if _, err := sm.cm.BatchUpdate(keys[:len(cbs)], cbs, nil); err != nil {
			return fmt.Errorf("writing compact matches: %w", err)
		}
	}
	if err := d.writeTexts(slot, im.texts); err != nil {
		return err
	}
	if err := d.writeRuns(slot, im); err != nil {
		return err
	}
	// index and compact lists
	if err := d.writeIndex(slot, im); err != nil {
		return err
	}
	// the new rules start from zero (Flush's carry theirs in the rules)
	if err := d.zeroHotCounts(slot, -1); err != nil {
		return err
	}
	feat := im.features()
	for l := uint32(0); l < listGroup0; l++ {
		hl := im.hotList(int(l))
		if l == listIn && feat&featHotIn != 0 || l == listOut && feat&featHotOut != 0 {
			hl.Ok |= hotNoIdx
		}
		if err := d.objs.Hotlists.Put(slot*listGroup0+l, hl); err != nil {
			return fmt.Errorf("writing compact lists: %w", err)
		}
	}
	// lists last: until they change, the slot's old lists still describe
	// valid rule ranges
	lkeys := make([]uint32, MaxLists)
	lvals := make([]filterList, MaxLists)
	metas := make([]filterListMeta, MaxLists)
	for i := range lkeys {
		lkeys[i] = slot*MaxLists + uint32(i)
		if i < len(im.lists) {
			l := im.lists[i]
			lvals[i] = filterList{Start: uint32(l.start), Count: uint32(l.count)}
			metas[i].Dir = uint32(l.dir)
			if l.acct {
				metas[i].Acct = 1
			}
			copy(metas[i].Name[:], l.name)
		}
	}
	if _, err := d.objs.ListMetas.BatchUpdate(lkeys, metas, nil); err != nil {
		return fmt.Errorf("writing list names: %w", err)
	}
	if _, err := d.objs.Lists.BatchUpdate(lkeys, lvals, nil); err != nil {
		return fmt.Errorf("writing lists: %w", err)
	}
	return nil
}

func (d *Datapath) writeIndex(slot uint32, im *Image) error {
	// turn the index off for the slot while it is rewritten; the slot is
	// not running (or about to be replaced), this only keeps it coherent
	if err := d.setCfg(cfgIndex0+slot, 0); err != nil {
		return err
	}
	for _, m := range []*ebpf.Map{d.objs.IdxDst, d.objs.IdxSrc} {
		if err := clearLPMSlot(m, slot); err != nil {
			return err
		}
	}
	for _, m := range []*ebpf.Map{d.objs.IdxDport, d.objs.IdxSport} {
		if err := clearPortSlot(m, slot); err != nil {
			return err
		}
	}
	feat := im.features()
	if im.dst == nil {
		return d.setCfg(cfgIndex0+slot, feat)
	}
	on := uint64(idxOn) | feat
	if err := putLPM(d.objs.IdxDst, slot, im.dst); err != nil {
		return err
	}
	if err := putPorts(d.objs.IdxDport, slot, im.ports); err != nil {
		return err
	}
	if im.src != nil {
		if err := putLPM(d.objs.IdxSrc, slot, im.src); err != nil {
			return err
		}
		on |= idxSrc
	}
	if im.sports != nil {
		if err := putPorts(d.objs.IdxSport, slot, im.sports); err != nil {
			return err
		}
		on |= idxSport
	}
	return d.setCfg(cfgIndex0+slot, on)
}

// hotList is the compact form of main list l (struct hotlist): usable
// (Ok) when the list is short, a run counting as one entry, and has no
// head or call rules (nor skip rules beside runs: a skip counts rules).
// Its rules count their matches in hot_counts (readImage adds them).
func (im *Image) hotList(l int) filterHotlist {
	var h filterHotlist
	if l >= len(im.lists) {
		return h
	}
	li := im.lists[l]
	if li.count == 0 {
		return h
	}
	n, runs, skips := 0, false, false
	for i := li.start; i < li.start+li.count; n++ {
		if n == hotMax {
			return filterHotlist{}
		}
		r := &im.rules[i]
		if r.Head != 0 || r.Call != 0 || r.Action&ruleset.FRCallNow != 0 {
			return filterHotlist{}
		}
		skips = skips || r.Action&ruleset.FRCmdMask == ruleset.FRSkip
		e := &h.R[n]
		e.Pos, e.Action, e.Skip = uint32(i), r.Action, r.Skip
		e.M = im.runMatch(i)
		if r.RunLen > 1 {
			runs = true
			i += int(r.RunLen)
		} else {
			i++
		}
	}
	if runs && skips {
		return filterHotlist{}
	}
	h.N, h.Ok = uint32(n), hotCompact
	return h
}

// features are the FEAT_* bits of the image: what its rules use besides
// matching.
func (im *Image) features() uint64 {
	f := uint64(featIdle)
	for l := 0; l < listGroup0 && l < len(im.lists); l++ {
		if im.lists[l].count > 0 {
			f &^= featIdle
		}
	}
	if len(im.lists) > listAcctIn && im.lists[listAcctIn].count > 0 {
		f |= featAcctIn
	}
	if len(im.lists) > listAcctOut && im.lists[listAcctOut].count > 0 {
		f |= featAcctOut
	}
	for i := range im.rules {
		r := &im.rules[i]
		if r.Action&(ruleset.FRKeepState|ruleset.FRKeepFrag) != 0 || r.Pps != 0 || r.KeepLimit != 0 {
			f |= featClock
		}
		if r.Pps != 0 || r.KeepLimit != 0 {
			f |= featLimits
		}
		if r.Route != 0 {
			f |= featRoute
		}
		if r.Action&ruleset.FRLog != 0 {
			f |= featLog
		}
		if r.Action&ruleset.FRRetMask != 0 || r.LimitRet != 0 {
			f |= featRet
		}
		if r.Match&(mSrcPool|mDstPool) != 0 || r.Call != 0 {
			f |= featPool
		}
		if r.Match&mExpr != 0 {
			f |= featExpr
		}
	}
	// a direction whose scans all run from compact lists needs no index
	// lookups (groups are reached only from head or call rules, which a
	// compact list has none of); an empty list needs none either
	hot := func(l int) bool {
		return l >= len(im.lists) || im.lists[l].count == 0 || im.hotList(l).Ok&hotCompact != 0
	}
	if hot(listIn) {
		f |= featHotIn
	}
	if hot(listOut) && hot(listAcctOut) {
		f |= featHotOut
	}
	return f
}

func clearLPMSlot(m *ebpf.Map, slot uint32) error {
	var lk filterLpmKey
	var bl filterBlocks
	var keys []filterLpmKey
	it := m.Iterate()
	for it.Next(&lk, &bl) {
		if lk.Slot == slot {
			keys = append(keys, lk)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading index: %w", err)
	}
	for _, k := range keys {
		_ = m.Delete(&k)
	}
	return nil
}

func clearPortSlot(m *ebpf.Map, slot uint32) error {
	var pk filterPortKey
	var bl filterBlocks
	var keys []filterPortKey
	it := m.Iterate()
	for it.Next(&pk, &bl) {
		if pk.Slot == slot {
			keys = append(keys, pk)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading index: %w", err)
	}
	for _, k := range keys {
		_ = m.Delete(&k)
	}
	return nil
}

func putLPM(m *ebpf.Map, slot uint32, idx map[prefixKey]filterBlocks) error {
	for k, v := range idx {
		key := filterLpmKey{Prefixlen: 64 + uint32(k.bits), Slot: slot, Family: uint32(k.family)}
		for i := range key.Addr {
			key.Addr[i] = nativeWord(k.addr[4*i:])
		}
		if err := m.Put(&key, &v); err != nil {
			return fmt.Errorf("writing index: %w", err)
		}
	}
	return nil
}

func putPorts(m *ebpf.Map, slot uint32, idx map[uint32]filterBlocks) error {
	for p, v := range idx {
		if err := m.Put(&filterPortKey{Slot: slot, Port: p}, &v); err != nil {
			return fmt.Errorf("writing index: %w", err)
		}
	}
	return nil
}

// Which selects lists for Flush.
type Which int

// The lists Flush can empty (ipf -Fi, -Fo, -Fa).
const (
	FlushIn Which = 1 << iota
	FlushOut
	FlushAll = FlushIn | FlushOut
)

// Flush removes the rules of the given direction(s) from set s (including
// their groups and accounting rules) and returns how many were removed.
func (d *Datapath) Flush(which Which, s Set) (int, error) {
	im, err := d.readImage(d.slotOf(s))
	if err != nil {
		return 0, err
	}
	keep := &Image{}
	removed := 0
	for _, l := range im.lists {
		nl := imageList{start: len(keep.rules), dir: l.dir, acct: l.acct, name: l.name}
		for i := l.start; i < l.start+l.count; i++ {
			r := im.rules[i]
			out := r.Action&ruleset.FROutQue != 0
			if (out && which&FlushOut != 0) || (!out && which&FlushIn != 0) {
				removed++
				continue
			}
			nl.count++
			r.RuleNo = uint32(nl.count)
			keep.rules = append(keep.rules, r)
			keep.texts = append(keep.texts, im.texts[i])
		}
		keep.lists = append(keep.lists, nl)
	}
	// rule positions moved: the stored group numbers stay list ids, which
	// did not change; runs may have lost rules
	keep.findRuns()
	if keep.scanLength() >= indexThreshold && len(keep.rules) <= idxRules {
		keep.buildIndex()
	}
	if err := d.LoadRules(keep, s); err != nil {
		return 0, err
	}
	return removed, nil
}

// RuleCount returns how many rules set s holds (Rules would list as
// many) from its lists alone: ipf -Fa on a million-rule set needs the
// count it prints, not the rules' texts read back and parsed.
func (d *Datapath) RuleCount(s Set) (int, error) {
	slot := d.slotOf(s)
	n := 0
	for i := 0; i < MaxLists; i++ {
		var l filterList
		var m filterListMeta
		if err := d.objs.Lists.Lookup(slot*MaxLists+uint32(i), &l); err != nil {
			return 0, fmt.Errorf("reading lists: %w", err)
		}
		if i >= listGroup0 && l.Count == 0 {
			if err := d.objs.ListMetas.Lookup(slot*MaxLists+uint32(i), &m); err != nil {
				return 0, fmt.Errorf("reading lists: %w", err)
			}
			if m.Name[0] == 0 {
				break
			}
		}
		n += int(l.Count)
	}
	return n, nil
}

// readImage reads a slot back (rules, lists, texts).
func (d *Datapath) readImage(slot uint32) (*Image, error) {
	im := &Image{}
	total := 0
	for i := 0; i < MaxLists; i++ {
		var l filterList
		var m filterListMeta
		if err := d.objs.Lists.Lookup(slot*MaxLists+uint32(i), &l); err != nil {
			return nil, fmt.Errorf("reading lists: %w", err)
		}
		if err := d.objs.ListMetas.Lookup(slot*MaxLists+uint32(i), &m); err != nil {
			return nil, fmt.Errorf("reading lists: %w", err)
		}
		if i >= listGroup0 && l.Count == 0 && m.Name[0] == 0 {
			break
		}
		im.lists = append(im.lists, imageList{
			start: int(l.Start), count: int(l.Count), dir: ipf.Direction(m.Dir),
			acct: m.Acct != 0, name: cstr(m.Name[:]),
		})
		if end := int(l.Start + l.Count); end > total {
			total = end
		}
	}
	if total > MaxRules {
		return nil, fmt.Errorf("corrupt lists: %d rules", total)
	}
	im.rules = make([]filterRule, total)
	im.texts = make([]string, total)
	if total == 0 {
		return im, nil
	}
	sm, err := d.slotMaps(slot)
	if err != nil {
		return nil, err
	}
	defer sm.close()
	if sm.capacity() < total {
		return nil, fmt.Errorf("corrupt lists: %d rules in a map of %d", total, sm.capacity())
	}
	if err := lookupAll(sm.rules, im.rules); err != nil {
		return nil, fmt.Errorf("reading rules: %w", err)
	}
	// the hits and bytes each rule shows: its own and its hot list's
	err = d.hotCounts(slot, func(pos int, hits, bytes uint64) {
		if pos < len(im.rules) {
			im.rules[pos].Hits += hits
			im.rules[pos].Bytes += bytes
		}
	})
	if err != nil {
		return nil, err
	}
	if im.texts, err = d.readTexts(slot, total); err != nil {
		return nil, err
	}
	return im, nil
}

// lookupAll reads elements 0..len(out)-1 of an array map, in batches.
func lookupAll[T any](m *ebpf.Map, out []T) error {
	var cursor ebpf.MapBatchCursor
	keys := make([]uint32, min(4096, len(out)))
	for done := 0; done < len(out); {
		n := min(len(keys), len(out)-done)
		got, err := m.BatchLookup(&cursor, keys[:n], out[done:done+n], nil)
		done += got
		if err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) && done >= len(out) {
				return nil
			}
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("map of %d elements read %d", len(out), done)
			}
			return err
		}
		if got == 0 {
			return fmt.Errorf("map of %d elements read %d", len(out), done)
		}
	}
	return nil
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// RuleInfo is one loaded rule as ipfstat shows it.
type RuleInfo struct {
	Dir     ipf.Direction
	Acct    bool   // in an accounting list (count rules)
	Group   string // group name, "" for the main lists
	Number  int    // 1-based position within its list
	Text    string // the rule as printed when it was loaded
	Hits    uint64
	Bytes   uint64
	States  uint32 // state entries this rule has live (keep state)
	Flags   uint32 // action flags (FR_*), for tests and debugging
	IsHead  bool
	HeadFor string
	// Index is the rule's storage position in its set, for ZeroRule.
	Index int
	// List is the id of its list, as LogRecord.List numbers them.
	List uint32
}

// Rules returns the rules of set s: main lists first (in, out, accounting
// in, accounting out), then groups in the order they were defined.
func (d *Datapath) Rules(s Set) ([]RuleInfo, error) {
	slot := d.slotOf(s)
	im, err := d.readImage(slot)
	if err != nil {
		return nil, err
	}
	var out []RuleInfo
	var sm *slotMaps
	if len(im.rules) > 0 {
		if sm, err = d.slotMaps(slot); err != nil {
			return nil, err
		}
		defer sm.close()
	}
	for li, l := range im.lists {
		for i := 0; i < l.count; i++ {
			pos := l.start + i
			key := uint32(pos)
			ri := RuleInfo{Dir: l.dir, Acct: l.acct, Group: l.name, Number: i + 1, Text: im.texts[pos], Flags: im.rules[pos].Action,
				Index: pos, List: uint32(li), Hits: im.rules[pos].Hits, Bytes: im.rules[pos].Bytes}
			_ = sm.states.Lookup(key, &ri.States)
			if h := int(im.rules[pos].Head); h != 0 && h < len(im.lists) {
				ri.IsHead = true
				ri.HeadFor = im.lists[h].name
			}
			out = append(out, ri)
		}
	}
	return out, nil
}

// ZeroRule returns the hit and byte counters of the rule at storage
// position index (RuleInfo.Index) of set s and clears them, leaving the
// other rules' counters alone (ipf -z on one rule).
func (d *Datapath) ZeroRule(s Set, index int) (hits, bytes uint64, err error) {
	sm, err := d.slotMaps(d.slotOf(s))
	if err != nil {
		return 0, 0, err
	}
	defer sm.close()
	if index < 0 || index >= sm.capacity() {
		return 0, 0, fmt.Errorf("rule index %d out of range", index)
	}
	var r filterRule
	if err := sm.rules.Lookup(uint32(index), &r); err != nil {
		return 0, 0, fmt.Errorf("reading counters: %w", err)
	}
	hits, bytes = r.Hits, r.Bytes
	err = d.hotCounts(d.slotOf(s), func(pos int, h, b uint64) {
		if pos == index {
			hits += h
			bytes += b
		}
	})
	if err != nil {
		return 0, 0, err
	}
	// packets counted between the read and the write are lost, as in
	// IPFilter's ipf -z
	r.Hits, r.Bytes = 0, 0
	if err := sm.rules.Put(uint32(index), &r); err != nil {
		return 0, 0, fmt.Errorf("zeroing counters: %w", err)
	}
	if err := d.zeroHotCounts(d.slotOf(s), index); err != nil {
		return 0, 0, err
	}
	return hits, bytes, nil
}

// ListName returns the name of list id (LogRecord.List) in set s: the
// group name, "" for the main and accounting lists.
func (d *Datapath) ListName(s Set, id uint32) (string, error) {
	if id >= MaxLists {
		return "", fmt.Errorf("list id %d out of range", id)
	}
	if id < listGroup0 {
		return "", nil
	}
	var m filterListMeta
	if err := d.objs.ListMetas.Lookup(d.slotOf(s)*MaxLists+id, &m); err != nil {
		return "", fmt.Errorf("reading lists: %w", err)
	}
	return cstr(m.Name[:]), nil
}

// PoolEntriesUsed returns the pool-map entries held by the active and the
// inactive set. A load writes its image's entries (Image.PoolEntries)
// beside both, so it fits when they add up to at most MaxPoolEntries.
func (d *Datapath) PoolEntriesUsed() (active, inactive int, err error) {
	a, i := d.slots()
	var (
		k filterPoolKey
		v filterPoolVal
	)
	it := d.objs.Pools.Iterate()
	for it.Next(&k, &v) {
		switch k.Slot {
		case a:
			active++
		case i:
			inactive++
		}
	}
	if err := it.Err(); err != nil {
		return 0, 0, fmt.Errorf("reading pool tables: %w", err)
	}
	return active, inactive, nil
}

// ZeroRuleCounters clears the hit and byte counters of set s (ipf -z).
func (d *Datapath) ZeroRuleCounters(s Set) error {
	sm, err := d.slotMaps(d.slotOf(s))
	if errors.Is(err, errNoSlotMaps) {
		return nil
	}
	if err != nil {
		return err
	}
	defer sm.close()
	rules := make([]filterRule, sm.capacity())
	if err := lookupAll(sm.rules, rules); err != nil {
		return fmt.Errorf("reading rules: %w", err)
	}
	keys := make([]uint32, len(rules))
	for i := range rules {
		rules[i].Hits, rules[i].Bytes = 0, 0
		keys[i] = uint32(i)
	}
	if _, err := sm.rules.BatchUpdate(keys, rules, nil); err != nil {
		return fmt.Errorf("zeroing counters: %w", err)
	}
	return d.zeroHotCounts(d.slotOf(s), -1)
}

// writePools replaces the slot's pool table entries with the image's.
func (d *Datapath) writePools(slot uint32, im *Image) error {
	var (
		k    filterPoolKey
		v    filterPoolVal
		dels []filterPoolKey
	)
	it := d.objs.Pools.Iterate()
	for it.Next(&k, &v) {
		if k.Slot == slot {
			dels = append(dels, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading pool tables: %w", err)
	}
	for i := range dels {
		if err := d.objs.Pools.Delete(&dels[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clearing pool tables: %w", err)
		}
	}
	for _, e := range im.pools {
		k := filterPoolKey{Prefixlen: 96 + uint32(e.bits), Slot: slot, Table: e.table, Family: uint32(e.family), Addr: e.addr}
		v := filterPoolVal{Group: e.group}
		if e.neg {
			v.Neg = 1
		}
		if err := d.objs.Pools.Put(&k, &v); err != nil {
			return fmt.Errorf("writing pool tables: %w", err)
		}
	}
	return nil
}

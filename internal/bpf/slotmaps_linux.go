package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
	"sluice/internal/ruleset"
)

// RuleCap is the most rules a set may hold (RULE_CAP): each slot's
// per-rule maps are made to the size of the sets loaded into it, so a set
// costs memory in proportion to its rules (see docs/kernel-memory.md).
const RuleCap = MaxRules

// slotMaps are the per-rule maps of one slot: the inner maps of the
// outer arrays rules (which hold each rule's counters too), pps and
// rule_states.
type slotMaps struct {
	rules, pps, states *ebpf.Map
	cm                 *ebpf.Map // the rules' compact matches by block
}

func (sm *slotMaps) close() {
	for _, m := range []*ebpf.Map{sm.rules, sm.pps, sm.states, sm.cm} {
		if m != nil {
			m.Close()
		}
	}
}

// capacity is how many rules the maps hold.
func (sm *slotMaps) capacity() int { return int(sm.rules.MaxEntries()) }

// innerSpec is an inner array of n elements of value size vs
// (BPF_F_INNER_MAP: its size may differ from the outer map's template).
func innerSpec(name string, vs uint32, n int) *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: name, Type: ebpf.Array, KeySize: 4, ValueSize: vs, MaxEntries: uint32(max(n, 1)),
		Flags: unix.BPF_F_INNER_MAP}
}

// slotSize is what a set needs of a slot's per-rule maps: entries for
// its rules (and their compact matches), and for their rate windows and
// state counts only when a rule has pps or may hold state entries. The
// kernel allocates and zeroes every entry a map declares, so a set
// without them (a blocklist) has one-entry maps there: 25 MiB less
// for a million rules. The programs find no element past a map's end
// (slot_elem's lookup returns NULL), and read these only for such rules.
type slotSize struct {
	rules, pps, states int
}

// slotSizeOf is the size im's set needs.
func slotSizeOf(im *Image) slotSize {
	z := slotSize{rules: len(im.rules)}
	for i := range im.rules {
		r := &im.rules[i]
		if r.Pps != 0 {
			z.pps = len(im.rules)
		}
		if r.Action&(ruleset.FRKeepState|ruleset.FRKeepFrag) != 0 || r.KeepLimit != 0 || r.StateLimit != 0 || r.MaxSrcs != 0 {
			z.states = len(im.rules)
		}
	}
	return z
}

// room is the size maps are made with for a set of size z: a little
// more, so that a set growing a few rules at a time is written in place
// rather than into new maps each time. An eighth more, at most 4 096
// rules (an eighth of a million rules was 37 MiB the set never used).
func (z slotSize) room() slotSize {
	grow := func(n int) int {
		if n == 0 {
			return 0
		}
		return n + min(n/8, 4096) + 64
	}
	return slotSize{rules: grow(z.rules), pps: grow(z.pps), states: grow(z.states)}
}

// newSlotMaps makes the maps of a slot for sets of up to z.
func newSlotMaps(z slotSize) (*slotMaps, error) {
	sm := &slotMaps{}
	var err error
	for _, x := range []struct {
		m  **ebpf.Map
		sp *ebpf.MapSpec
	}{
		{&sm.rules, innerSpec("sl_rules", uint32(binary.Size(filterRule{})), z.rules)},
		{&sm.pps, innerSpec("sl_pps", uint32(binary.Size(filterPpsWindow{})), z.pps)},
		{&sm.states, innerSpec("sl_states", 4, z.states)},
		{&sm.cm, innerSpec("sl_cblocks", uint32(binary.Size(filterCblock{})), cblockCount(z.rules))},
	} {
		if *x.m, err = ebpf.NewMap(x.sp); err != nil {
			sm.close()
			return nil, fmt.Errorf("making a map for %d rules: %w", z.rules, err)
		}
	}
	return sm, nil
}

// fits reports whether sm holds a set of size z, and is not far too
// large for it (then new maps give the memory back).
func (sm *slotMaps) fits(z slotSize) bool {
	ok := func(m *ebpf.Map, n int) bool {
		c := int(m.MaxEntries())
		return c >= n && c <= 4*n+4096
	}
	return ok(sm.rules, z.rules) && ok(sm.pps, z.pps) && ok(sm.states, z.states)
}

// prepareSlot returns maps for a set of size z in slot: the slot's own
// when they fit it (rewriting maps in place spares the kernel's wait for
// running programs that replacing them in the outer maps costs), else
// new ones put in the slot. Rate windows and state counts of rules
// 0..n-1 are zero (the rules bring their own zero counters).
func (d *Datapath) prepareSlot(slot uint32, z slotSize) (*slotMaps, error) {
	sm, err := d.slotMaps(slot)
	if err != nil && !errors.Is(err, errNoSlotMaps) {
		return nil, err
	}
	if sm != nil && !sm.fits(z) {
		sm.close()
		sm = nil
	}
	fresh := sm == nil
	if fresh {
		if sm, err = newSlotMaps(z.room()); err != nil {
			return nil, err
		}
		if err := d.putSlotMaps(slot, sm); err != nil {
			sm.close()
			return nil, err
		}
	}
	// new maps are zero already (a million rules: two fewer passes
	// over the kernel's arrays)
	if !fresh {
		for _, x := range []struct {
			m    *ebpf.Map
			n    int
			zero any
			what string
		}{
			{sm.pps, z.pps, make([]filterPpsWindow, z.pps), "rate windows"},
			{sm.states, z.states, make([]uint32, z.states), "state counts"},
		} {
			if x.n == 0 {
				continue
			}
			keys := make([]uint32, x.n)
			for i := range keys {
				keys[i] = uint32(i)
			}
			if _, err := x.m.BatchUpdate(keys, x.zero, nil); err != nil {
				sm.close()
				return nil, fmt.Errorf("zeroing %s: %w", x.what, err)
			}
		}
	}
	return sm, nil
}

// putSlotMaps puts sm in slot; the maps it replaces go when the last
// program run that holds them ends.
func (d *Datapath) putSlotMaps(slot uint32, sm *slotMaps) error {
	for _, x := range []struct {
		outer, inner *ebpf.Map
	}{
		{d.objs.Rules, sm.rules}, {d.objs.Pps, sm.pps}, {d.objs.RuleStates, sm.states}, {d.objs.Cblocks, sm.cm},
	} {
		if err := x.outer.Put(slot, x.inner); err != nil {
			return fmt.Errorf("putting the rule maps in slot %d: %w", slot, err)
		}
	}
	return nil
}

// slotMaps opens the maps in slot; a slot no set was ever loaded into has
// none (errNoSlotMaps).
func (d *Datapath) slotMaps(slot uint32) (*slotMaps, error) {
	sm := &slotMaps{}
	for _, x := range []struct {
		m     **ebpf.Map
		outer *ebpf.Map
	}{
		{&sm.rules, d.objs.Rules}, {&sm.pps, d.objs.Pps}, {&sm.states, d.objs.RuleStates}, {&sm.cm, d.objs.Cblocks},
	} {
		var id ebpf.MapID
		if err := x.outer.Lookup(slot, &id); err != nil {
			sm.close()
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil, errNoSlotMaps
			}
			return nil, fmt.Errorf("reading slot %d: %w", slot, err)
		}
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			sm.close()
			return nil, fmt.Errorf("opening slot %d's maps: %w", slot, err)
		}
		*x.m = m
	}
	return sm, nil
}

var errNoSlotMaps = errors.New("no rules were loaded into the slot")

// textBlob packs the rule texts, each after its 16-bit length, into
// chunks.
func textBlob(texts []string) []filterTextChunk {
	// sized once: a million texts grew the blob by doublings, copying
	// tens of megabytes several times over
	n := 0
	for _, t := range texts {
		n += 2 + min(len(t), 0xffff)
	}
	// written straight into the chunks (a blob beside them doubled the
	// memory: 43 MB for a million rules)
	chunks := make([]filterTextChunk, (n+textChunk-1)/textChunk)
	at := 0
	put := func(s string) {
		for len(s) > 0 {
			k := copy(chunks[at/textChunk].B[at%textChunk:], s)
			s, at = s[k:], at+k
		}
	}
	var l [2]byte
	for _, t := range texts {
		if len(t) > 0xffff {
			t = t[:0xffff]
		}
		binary.LittleEndian.PutUint16(l[:], uint16(len(t)))
		put(string(l[:]))
		put(t)
	}
	return chunks
}

// writeTexts replaces slot's rule texts.
func (d *Datapath) writeTexts(slot uint32, texts []string) error {
	chunks := textBlob(texts)
	if len(chunks) > 0 {
		keys := make([]filterTextKey, len(chunks))
		for i := range keys {
			keys[i] = filterTextKey{Slot: slot, Chunk: uint32(i)}
		}
		if _, err := d.objs.RuleTexts.BatchUpdate(keys, chunks, nil); err != nil {
			return fmt.Errorf("writing rule texts: %w", err)
		}
	}
	// the chunks of a longer set before
	for i := uint32(len(chunks)); ; i++ {
		err := d.objs.RuleTexts.Delete(filterTextKey{Slot: slot, Chunk: i})
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("clearing rule texts: %w", err)
		}
	}
}

// readTexts unpacks slot's n texts.
func (d *Datapath) readTexts(slot uint32, n int) ([]string, error) {
	out := make([]string, n)
	var b []byte
	var ch filterTextChunk
	for i := uint32(0); ; i++ {
		err := d.objs.RuleTexts.Lookup(filterTextKey{Slot: slot, Chunk: i}, &ch)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading rule texts: %w", err)
		}
		b = append(b, ch.B[:]...)
	}
	unpackTexts(b, out)
	return out, nil
}

// unpackTexts fills out with the texts of a blob textBlob made.
func unpackTexts(b []byte, out []string) {
	for i := range out {
		if len(b) < 2 {
			break
		}
		l := int(binary.LittleEndian.Uint16(b))
		b = b[2:]
		if l > len(b) {
			l = len(b)
		}
		out[i] = string(b[:l])
		b = b[l:]
	}
}

// writeRuns puts the image's runs in slot: the IPv4 runs' entries in an
// 8-byte-key hash (runs4) and their bitmap (run_bits), the IPv6 runs' in
// runs, each made to its size. A table the set has no entries for is not
// made, unless the slot has one from a set before: then it gets an empty
// one, so no stale entry stays. The slot is not running while it is
// written (writeSlot), so the bitmap and the compact lists that carry its
// shift change together.
func (d *Datapath) writeRuns(slot uint32, im *Image) error {
	n4 := 0
	for i := range im.runs {
		if im.run4(&im.runs[i]) {
			n4++
		}
	}
	n6 := len(im.runs) - n4
	err := putInner(d.objs.Runs, slot, n6, &ebpf.MapSpec{Name: "sl_runs", Type: ebpf.Hash,
		KeySize: uint32(binary.Size(filterRunKey{})), ValueSize: 4, MaxEntries: uint32(max(n6, 1))},
		func(m *ebpf.Map) error {
			keys, vals := make([]filterRunKey, 0, n6), make([]uint32, 0, n6)
			for i := range im.runs {
				if r := &im.runs[i]; !im.run4(r) {
					keys, vals = append(keys, filterRunKey{Head: r.head, Addr: r.addr}), append(vals, r.idx)
				}
			}
			_, err := m.BatchUpdate(keys, vals, nil)
			return err
		})
	if err != nil {
		return fmt.Errorf("the runs table of %d rules: %w", n6, err)
	}
	err = putInner(d.objs.Runs4, slot, n4, &ebpf.MapSpec{Name: "sl_runs4", Type: ebpf.Hash,
		KeySize: uint32(binary.Size(filterRun4Key{})), ValueSize: 4, MaxEntries: uint32(max(n4, 1))},
		func(m *ebpf.Map) error {
			keys, vals := make([]filterRun4Key, 0, n4), make([]uint32, 0, n4)
			for i := range im.runs {
				if r := &im.runs[i]; im.run4(r) {
					keys, vals = append(keys, filterRun4Key{Head: r.head, Addr: r.addr[0]}), append(vals, r.idx)
				}
			}
			_, err := m.BatchUpdate(keys, vals, nil)
			return err
		})
	if err != nil {
		return fmt.Errorf("the IPv4 runs table of %d rules: %w", n4, err)
	}
	// the small sets' bitmap: the slot's words of run_flat, in place
	// (the slot is not running; no program reads them unless the
	// compact lists written with them carry RUN_FLAT)
	if flat := im.runFlatBitmap(); flat != nil {
		keys := make([]uint32, len(flat))
		for i := range keys {
			keys[i] = slot*runFlatWords + uint32(i)
		}
		if _, err := d.objs.RunFlat.BatchUpdate(keys, flat, nil); err != nil {
			return fmt.Errorf("the small runs bitmap: %w", err)
		}
	}
	words := im.runBitmap()
	// the large sets' array: run_bits' words at the slot's, in place
	// (ensureRunBig made it; the compact lists written with them carry
	// RUN_BIG). A slot's words past the set's bitmap are never read.
	if im.runBig {
		if err := d.ensureRunBig(); err != nil {
			return err
		}
		keys := make([]uint32, len(words))
		for i := range keys {
			keys[i] = 1 + slot*runBigWords + uint32(i)
		}
		if _, err := d.objs.RunFlatBig.BatchUpdate(keys, words, nil); err != nil {
			return fmt.Errorf("the large runs bitmap: %w", err)
		}
	}
	err = putInner(d.objs.RunBits, slot, len(words), innerSpec("sl_run_bits", 8, len(words)),
		func(m *ebpf.Map) error {
			keys := make([]uint32, len(words))
			for i := range keys {
				keys[i] = uint32(i)
			}
			_, err := m.BatchUpdate(keys, words, nil)
			return err
		})
	if err != nil {
		return fmt.Errorf("the runs bitmap of %d rules: %w", n4, err)
	}
	return nil
}

// putInner puts a new inner map of spec, filled by fill when n > 0, in
// slot of outer; when n is 0 and the slot holds no map, none.
func putInner(outer *ebpf.Map, slot uint32, n int, spec *ebpf.MapSpec, fill func(*ebpf.Map) error) error {
	var id ebpf.MapID
	if n == 0 && outer.Lookup(slot, &id) != nil {
		return nil
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return fmt.Errorf("making it: %w", err)
	}
	defer m.Close()
	if n > 0 {
		if err := fill(m); err != nil {
			return fmt.Errorf("writing it: %w", err)
		}
	}
	if err := outer.Put(slot, m); err != nil {
		return fmt.Errorf("putting it in slot %d: %w", slot, err)
	}
	return nil
}

// ensureRunBig gives d the large sets' array at its full size
// (runBigEntries, RUN_BIG): the one pinned, if another process made it,
// else a new one pinned over the one-entry array the datapath had. A slot
// is written into it only after this, so every program that reads a
// slot's RUN_BIG words was made with this array: the programs made before
// are bound to the one-entry array, find no word there and read run_bits
// (correct), and a program's key holds the array's id (progSpec.runBig;
// on constant lists, RUN_BIG in them), so none of them is taken for one
// made with it. It is not made smaller
// again (ipf -D removes it).
func (d *Datapath) ensureRunBig() error {
	if d.objs.RunFlatBig != nil && d.objs.RunFlatBig.MaxEntries() >= runBigEntries {
		return nil
	}
	var m *ebpf.Map
	if d.dir != "" {
		if p, err := ebpf.LoadPinnedMap(filepath.Join(d.dir, "run_flat_big"), nil); err == nil {
			if p.MaxEntries() >= runBigEntries {
				m = p
			} else {
				p.Close()
			}
		}
	}
	if m == nil {
		var err error
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "run_flat_big", Type: ebpf.Array, KeySize: 4, ValueSize: 8,
			MaxEntries: runBigEntries})
		if err != nil {
			return fmt.Errorf("the large runs bitmap (%d MiB): %w", runBigEntries*8>>20, err)
		}
		if d.dir != "" {
			if err := pinMapOver(m, filepath.Join(d.dir, "run_flat_big")); err != nil {
				m.Close()
				return err
			}
		}
	}
	if d.objs.RunFlatBig != nil {
		d.objs.RunFlatBig.Close()
	}
	d.objs.RunFlatBig = m
	return nil
}

// runBigID is the id of the large sets' array when d has it at its full
// size (0: the one-entry array), for the programs' key.
func (d *Datapath) runBigID() uint32 {
	m := d.objs.RunFlatBig
	if m == nil || m.MaxEntries() < runBigEntries {
		return 0
	}
	return mapID(m)
}

// pinMapOver pins m at path in one rename (as pinOver a program): a
// reader finds the old map or the new one.
func pinMapOver(m *ebpf.Map, path string) error {
	next := path + "_next"
	_ = os.Remove(next)
	if err := m.Pin(next); err != nil {
		return fmt.Errorf("pinning %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(next, path); err != nil {
		_ = os.Remove(next)
		return fmt.Errorf("pinning %s: %w", filepath.Base(path), err)
	}
	return nil
}

// fitRunBig sets spec's large sets' array to the size of the one pinned in
// dir (ensureRunBig may have made it larger than the object's), so that
// the pinned one is taken as compatible.
func fitRunBig(spec *ebpf.CollectionSpec, dir string) {
	ms := spec.Maps["run_flat_big"]
	if ms == nil {
		return
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "run_flat_big"), nil)
	if err != nil {
		return
	}
	defer m.Close()
	if m.MaxEntries() > ms.MaxEntries {
		ms.MaxEntries = m.MaxEntries()
	}
}

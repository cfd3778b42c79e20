package bpf

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// The rules of a hot list (struct hotlist) count their matches per CPU in
// hot_counts, by list entry, not in the rule; a program that carries the
// slot's main lists as constants (lib/fast.h) counts a packet it decides
// in its CPU's statistics block instead (statblock.fast, by slot,
// direction and entry: the page the packet counts in anyway). These read,
// add and clear them for user space, which shows a rule's hits as the sum
// of the three. User space never writes statblock.fast: an entry is
// cleared by writing minus its fast count into hot_counts (modulo 2^64,
// the sum is then what was counted since), so clearing loses none of the
// statistics that share the block.

// fastCounts returns each CPU's constant-list counts of slot, [cpu][list
// (in, out)][entry]; none for a datapath of an older layout (its
// programs counted in hot_counts).
func (d *Datapath) fastCounts(ncpu int, slot uint32) ([][2][fastMax]filterHotHits, error) {
	if statsLayoutOf(d.objs.Stats) != layoutCurrent || slot >= numSlots {
		return nil, nil
	}
	per, err := d.statBlocks(ncpu)
	if err != nil {
		return nil, err
	}
	out := make([][2][fastMax]filterHotHits, ncpu)
	for c := range per {
		out[c] = per[c].Fast[slot]
	}
	return out, nil
}

// hotCounts calls add with slot's hot-list counts, by the storage
// position of their rules: once an entry, the sum of every CPU's.
func (d *Datapath) hotCounts(slot uint32, add func(pos int, hits, bytes uint64)) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	fast, err := d.fastCounts(ncpu, slot)
	if err != nil {
		return err
	}
	per := make([]filterHotCount, ncpu)
	for l := uint32(0); l < listGroup0; l++ {
		var hl filterHotlist
		if err := d.objs.Hotlists.Lookup(slot*listGroup0+l, &hl); err != nil {
			return fmt.Errorf("reading compact lists: %w", err)
		}
		if hl.Ok&hotCompact == 0 {
			continue
		}
		if err := d.objs.HotCounts.Lookup(slot*listGroup0+l, &per); err != nil {
			return fmt.Errorf("reading compact list counters: %w", err)
		}
		for i := 0; i < int(hl.N) && i < hotMax; i++ {
			var hits, bytes uint64
			for c := range per {
				hits += per[c].C[i].Hits
				bytes += per[c].C[i].Bytes
			}
			if l < 2 && i < fastMax {
				for c := range fast {
					hits += fast[c][l][i].Hits
					bytes += fast[c][l][i].Bytes
				}
			}
			add(int(hl.R[i].Pos), hits, bytes)
		}
	}
	return nil
}

// zeroHotCounts clears slot's hot-list counts: all of them (index < 0) or
// those of the rule at storage position index. An entry's hot_counts
// become minus its constant-list count on the same CPU (none on an older
// layout), so that the sum hotCounts reads starts again from 0.
func (d *Datapath) zeroHotCounts(slot uint32, index int) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	fast, err := d.fastCounts(ncpu, slot)
	if err != nil {
		return err
	}
	// cleared is entry i of list l on CPU c: minus what it counted in
	// the statistics block
	cleared := func(c int, l uint32, i int) filterHotHits {
		if l >= 2 || i >= fastMax || c >= len(fast) {
			return filterHotHits{}
		}
		f := fast[c][l][i]
		return filterHotHits{Hits: -f.Hits, Bytes: -f.Bytes}
	}
	for l := uint32(0); l < listGroup0; l++ {
		k := slot*listGroup0 + l
		per := make([]filterHotCount, ncpu)
		if index >= 0 {
			var hl filterHotlist
			if err := d.objs.Hotlists.Lookup(k, &hl); err != nil {
				return fmt.Errorf("reading compact lists: %w", err)
			}
			if hl.Ok&hotCompact == 0 {
				continue
			}
			if err := d.objs.HotCounts.Lookup(k, &per); err != nil {
				return fmt.Errorf("reading compact list counters: %w", err)
			}
			found := false
			for i := 0; i < int(hl.N) && i < hotMax; i++ {
				if int(hl.R[i].Pos) == index {
					found = true
					for c := range per {
						per[c].C[i] = cleared(c, l, i)
					}
				}
			}
			if !found {
				continue
			}
		} else {
			for c := range per {
				for i := range per[c].C {
					per[c].C[i] = cleared(c, l, i)
				}
			}
		}
		// packets the pipeline counts between the read and the write
		// are lost, as in IPFilter's ipf -z (those the constant lists
		// count are kept: they are not written here)
		if err := d.objs.HotCounts.Put(k, per); err != nil {
			return fmt.Errorf("zeroing compact list counters: %w", err)
		}
	}
	return nil
}

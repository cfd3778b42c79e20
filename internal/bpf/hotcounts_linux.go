package bpf

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// The rules of a hot list (struct hotlist) count their matches per CPU in
// hot_counts, by list entry, not in the rule: these read, add and clear
// them for user space, which shows a rule's hits as the sum of the two.

// hotCounts calls add with slot's hot-list counts, by the storage
// position of their rules.
func (d *Datapath) hotCounts(slot uint32, add func(pos int, hits, bytes uint64)) error {
	ncpu, err := ebpf.PossibleCPU()
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
			for c := range per {
				add(int(hl.R[i].Pos), per[c].C[i].Hits, per[c].C[i].Bytes)
			}
		}
	}
	return nil
}

// zeroHotCounts clears slot's hot-list counts: all of them (index < 0) or
// those of the rule at storage position index.
func (d *Datapath) zeroHotCounts(slot uint32, index int) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	per := make([]filterHotCount, ncpu)
	for l := uint32(0); l < listGroup0; l++ {
		k := slot*listGroup0 + l
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
						per[c].C[i] = filterHotHits{}
					}
				}
			}
			if !found {
				continue
			}
		}
		// packets counted between the read and the write are lost, as in
		// IPFilter's ipf -z
		if err := d.objs.HotCounts.Put(k, per); err != nil {
			return fmt.Errorf("zeroing compact list counters: %w", err)
		}
	}
	return nil
}

package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
)

// Two older layouts of the counters are moved in place. A datapath loaded
// by a Sluice before at2 (session 9) counts in a one-entry per-CPU array
// of the statblock without its padding; one loaded from at2 to sl13
// (session 13) in a plain array of one padded statblock per CPU without
// the constant lists' rule counters (statblock.fast, which lived in
// hot_counts and still do for those programs' counts: they stay there,
// and hotCounts adds both). This Sluice counts in a plain array of the
// larger statblock (maps.h). A
// reload over such a datapath moves it in place: the new map is made with
// the old counts (upgradeStats), the programs are loaded over it and the
// pinned maps of the rest, attached in place of the old ones (one
// link.Update a hook: the rules stay in force throughout), and only then
// is it pinned over the old one (pinStats). A reload that fails before
// leaves the old map and programs as they were; a process killed before
// the pin leaves the old map pinned, and the next reload moves it again.
// The counts the old programs make while the new ones are verified are
// not carried over.

// oldStatblock is the statblock of the per-CPU layout.
type oldStatblock struct {
	V    [numStats]uint64
	Drop [numReasons]uint64
}

// at2Statblock is the statblock of at2's plain array.
type at2Statblock struct {
	V    [numStats]uint64
	Drop [numReasons]uint64
	Pad  [8]uint64
}

// The layouts of the statistics map.
const (
	layoutCurrent = iota
	layoutPerCPU  // before at2
	layoutAt2     // at2 to sl13
	layoutUnknown
)

// statsLayoutOf tells which layout the statistics map m has.
func statsLayoutOf(m *ebpf.Map) int {
	switch {
	case m == nil || m.KeySize() != 4:
		return layoutUnknown
	case m.Type() == ebpf.PerCPUArray && m.MaxEntries() == 1 && int(m.ValueSize()) == binary.Size(oldStatblock{}):
		return layoutPerCPU
	case m.Type() == ebpf.Array && int(m.ValueSize()) == binary.Size(at2Statblock{}):
		return layoutAt2
	case m.Type() == ebpf.Array && int(m.ValueSize()) == binary.Size(filterStatblock{}):
		return layoutCurrent
	}
	return layoutUnknown
}

// ErrOlderLayout is returned by what would load programs over a datapath
// an older Sluice loaded, or write rules into it, opened with OpenPinned
// before a reload moved it to this layout (OlderLayout): Load moves it.
var ErrOlderLayout = errors.New("the datapath was loaded by an older Sluice (its counters have another layout, " +
	"or maps this version's programs use are missing): " +
	"a load (ipf -f, ipf -y, ipfboot reload) moves it to this version in place, with its rules in force")

// OlderLayout reports whether d, opened with OpenPinned, is a datapath of
// an older Sluice: its counters have an older layout, or maps added
// since are missing (MissingMaps). It can be read, but programs cannot be
// loaded over its maps, nor rules written, before Load moved it.
func (d *Datapath) OlderLayout() bool {
	l := statsLayoutOf(d.objs.Stats)
	return l == layoutPerCPU || l == layoutAt2 || len(d.missing) > 0
}

// refuseOlder is ErrOlderLayout for a change that re-specialises the
// programs, over an older Sluice's datapath (loadVariants refuses to load
// programs over its maps), and nil otherwise. Such a change calls it
// before it writes anything: written first, the config said what the
// programs in force do not do (a NAT half dropped for a marker the
// half's TC_ACT_OK still skips) or, put back after the failure, was in
// force for the packets meanwhile (the filter off, for a failed ipf -D).
// A write either completes or changes nothing.
func (d *Datapath) refuseOlder() error {
	if d.noSpecialise || !d.OlderLayout() {
		return nil
	}
	return fmt.Errorf("%s: %w", d.dir, ErrOlderLayout)
}

// MissingMaps names the maps this Sluice's programs use that the datapath
// opened with OpenPinned lacks (an older Sluice loaded it; sorted): the
// next load (ipf -f, ipf -y) creates them. Nil when none is missing.
func (d *Datapath) MissingMaps() []string { return slices.Clone(d.missing) }

// errStatsLayout: the pinned counters have neither layout.
var errStatsLayout = errors.New("the pinned statistics map has an unknown layout")

// upgradeStats returns, when the datapath pinned in dir counts in the
// per-CPU layout, a new counters map of spec's layout holding its counts
// (unpinned: the caller loads with it and pins it with pinStats); nil
// when there is nothing to move.
func upgradeStats(spec *ebpf.CollectionSpec, dir string) (*ebpf.Map, error) {
	old, err := ebpf.LoadPinnedMap(filepath.Join(dir, "stats"), nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the pinned statistics: %w", err)
	}
	defer old.Close()
	ms := spec.Maps["stats"].Copy()
	if ms.Compatible(old) == nil {
		return nil, nil
	}
	if !oldStats(old) {
		return nil, fmt.Errorf("%s: %w (type %v, %d entries of %d bytes; another Sluice's?): nothing was changed, "+
			"the rules in force stay in force; to load this Sluice's, remove that datapath (ipf -D) and load again",
			dir, errStatsLayout, old.Type(), old.MaxEntries(), old.ValueSize())
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	var blocks []filterStatblock
	if statsLayoutOf(old) == layoutPerCPU {
		per := make([]oldStatblock, ncpu)
		if err := old.Lookup(uint32(0), &per); err != nil {
			return nil, fmt.Errorf("reading the pinned statistics: %w", err)
		}
		for _, b := range per {
			blocks = append(blocks, filterStatblock{V: b.V, Drop: b.Drop})
		}
	} else {
		for cpu := 0; cpu < ncpu && cpu < int(old.MaxEntries()); cpu++ {
			var b at2Statblock
			if err := old.Lookup(uint32(cpu), &b); err != nil {
				return nil, fmt.Errorf("reading the pinned statistics: %w", err)
			}
			blocks = append(blocks, filterStatblock{V: b.V, Drop: b.Drop})
		}
	}
	ms.Pinning = ebpf.PinNone
	m, err := ebpf.NewMap(ms)
	if err != nil {
		return nil, fmt.Errorf("making the statistics map: %w", err)
	}
	for cpu, b := range blocks {
		if cpu >= int(ms.MaxEntries) {
			break
		}
		if err := m.Put(uint32(cpu), &b); err != nil {
			m.Close()
			return nil, fmt.Errorf("moving the statistics: %w", err)
		}
	}
	return m, nil
}

// pinStats pins m as the statistics of the datapath in dir, over the old
// map: pinned aside, then renamed over it, so that a reader never finds
// the name missing.
func pinStats(m *ebpf.Map, dir string) error {
	path := filepath.Join(dir, "stats")
	next := path + "_next"
	_ = os.Remove(next)
	if err := m.Pin(next); err != nil {
		return fmt.Errorf("pinning the statistics: %w", err)
	}
	if err := os.Rename(next, path); err != nil {
		_ = os.Remove(next)
		return fmt.Errorf("pinning the statistics: %w", err)
	}
	return nil
}

// oldStats reports whether m is a statistics map of an older layout.
func oldStats(m *ebpf.Map) bool {
	l := statsLayoutOf(m)
	return l == layoutPerCPU || l == layoutAt2
}

package bpf

import (
	"sort"
	"unsafe"

	"sluice/internal/ruleset"
)

// Runs. A blocklist written as rules is a long stretch of rules that are
// the same but for one address: `block in from HOST to any`, thousands of
// times. Scanning them one by one costs a step each; the program instead
// looks the packet's address up once. A run is at least minRun
// consecutive rules of one list that differ only in their source (or
// destination) address, all with one mask and no two alike, and that
// test it positively with nothing that makes a rule special in the scan
// (no head, call, exp). Only one rule of a run can match a packet, so the
// lookup finds what the scan would have found; a skip that lands inside
// a run takes its rules one by one.
const minRun = 8

// runEntry is one rule of a run in the slot's runs table.
type runEntry struct {
	head uint32    // the run's first rule
	addr [4]uint32 // the rule's address, masked
	idx  uint32    // the rule
}

// runField says which address rules a and b differ in, if they differ in
// that alone (M_SRC or M_DST; 0 otherwise). It compares the rules' bytes
// in place, skipping the fields that do not make rules different (their
// numbers, the run marks, the counters): a million-rule blocklist calls it
// once per rule, and copying two rules per call cost a second.
func runField(a, b *filterRule) uint32 {
	if !runnable(a) || !runnable(b) {
		return 0
	}
	switch {
	case a.Src != b.Src && a.Dst == b.Dst:
		if a.Match&(mSrc|mNotSrc|mSrcPool) == mSrc && sameBut(a, b, cmpSrc) {
			return mSrc
		}
	case a.Dst != b.Dst && a.Src == b.Src:
		if a.Match&(mDst|mNotDst|mDstPool) == mDst && sameBut(a, b, cmpDst) {
			return mDst
		}
	}
	return 0
}

// The byte ranges runField compares when the rules differ in Src (or in
// Dst): all of filterRule but that address and the fields that do not make
// rules different (their numbers, the run marks, the counters). The struct
// mirrors the C layout (bpf2go writes its padding out as named fields), so
// equal bytes in these ranges are equal fields.
var cmpSrc, cmpDst = compared(fieldSpan(unsafe.Offsetof(filterRule{}.Src), unsafe.Sizeof(filterRule{}.Src))),
	compared(fieldSpan(unsafe.Offsetof(filterRule{}.Dst), unsafe.Sizeof(filterRule{}.Dst)))

func fieldSpan(off, size uintptr) [2]uintptr { return [2]uintptr{off, off + size} }

// compared returns the ranges of filterRule outside skip and the ignored
// fields, in order.
func compared(skip [2]uintptr) [][2]uintptr {
	var r filterRule
	skips := [][2]uintptr{skip,
		fieldSpan(unsafe.Offsetof(r.GroupNo), unsafe.Sizeof(r.GroupNo)),
		fieldSpan(unsafe.Offsetof(r.RuleNo), unsafe.Sizeof(r.RuleNo)),
		fieldSpan(unsafe.Offsetof(r.RunLen), unsafe.Sizeof(r.RunLen)),
		fieldSpan(unsafe.Offsetof(r.RunField), unsafe.Sizeof(r.RunField)),
		fieldSpan(unsafe.Offsetof(r.Hits), unsafe.Sizeof(r.Hits)),
		fieldSpan(unsafe.Offsetof(r.Bytes), unsafe.Sizeof(r.Bytes)),
	}
	sort.Slice(skips, func(i, j int) bool { return skips[i][0] < skips[j][0] })
	var out [][2]uintptr
	at := uintptr(0)
	for _, s := range skips {
		if s[0] > at {
			out = append(out, [2]uintptr{at, s[0]})
		}
		at = max(at, s[1])
	}
	if size := unsafe.Sizeof(r); at < size {
		out = append(out, [2]uintptr{at, size})
	}
	return out
}

// sameBut reports whether a and b hold the same bytes in the ranges.
func sameBut(a, b *filterRule, ranges [][2]uintptr) bool {
	x := unsafe.Slice((*byte)(unsafe.Pointer(a)), unsafe.Sizeof(*a))
	y := unsafe.Slice((*byte)(unsafe.Pointer(b)), unsafe.Sizeof(*b))
	for _, r := range ranges {
		if string(x[r[0]:r[1]]) != string(y[r[0]:r[1]]) {
			return false
		}
	}
	return true
}

func runnable(r *filterRule) bool {
	return r.Head == 0 && r.Call == 0 && r.Action&ruleset.FRCallNow == 0 && r.Match&mExpr == 0
}

// findRuns marks the runs of the image's lists (RunLen, RunField on each
// run's first rule) and lists their table entries.
func (im *Image) findRuns() {
	for i := range im.rules {
		im.rules[i].RunLen, im.rules[i].RunField = 0, 0
	}
	// one set of addresses for every run, cleared between runs unless a
	// new one is much shorter (clearing costs the set's size): a
	// blocklist's million rules made a map per run
	var seen map[[4]uint32]struct{}
	prev, total := 0, 0
	for _, l := range im.lists {
		end := l.start + l.count
		for i := l.start; i < end; {
			if i+1 >= end {
				break
			}
			f := runField(&im.rules[i], &im.rules[i+1])
			if f == 0 {
				i++
				continue
			}
			// the run's extent first, then its first repeated
			// address: the set of addresses is sized once (a
			// blocklist's run is the whole list)
			j := i + 1
			for j < end && runField(&im.rules[i], &im.rules[j]) == f {
				j++
			}
			if j-i < minRun {
				i++
				continue
			}
			if seen == nil || prev > 4*(j-i) {
				seen = make(map[[4]uint32]struct{}, j-i)
			} else {
				clear(seen)
			}
			prev = j - i
			for k := i; k < j; k++ {
				// one hash per rule: a repeat does not grow the set
				seen[runAddr(&im.rules[k], f)] = struct{}{}
				if len(seen) != k-i+1 {
					j = k
					break
				}
			}
			if j-i < minRun {
				i++
				continue
			}
			im.rules[i].RunLen, im.rules[i].RunField = uint32(j-i), f
			total += j - i
			i = j
		}
	}
	// the table, in rule order (lists are laid out in order), allocated
	// once at its size
	im.runs = make([]runEntry, 0, total)
	n4 := 0
	for i := 0; i < len(im.rules); i++ {
		r := &im.rules[i]
		if r.RunLen < 2 {
			continue
		}
		if r.Family == 4 {
			n4 += int(r.RunLen)
		}
		for k := i; k < i+int(r.RunLen); k++ {
			im.runs = append(im.runs, runEntry{head: uint32(i), addr: runAddr(&im.rules[k], r.RunField), idx: uint32(k)})
		}
		i += int(r.RunLen) - 1
	}
	im.runShift = 0
	if n4 > 0 {
		im.runShift = 64 - runBitsLog(n4)
	}
	im.runFlat = n4 > 0 && n4 <= runFlatMax
	im.runBig = n4 > runFlatMax && n4 <= runBigMax
}

// run4 says whether the run entry e is an IPv4 run's (in runs4 and the
// bitmap; scan.h decides by the run's family too).
func (im *Image) run4(e *runEntry) bool { return im.rules[e.head].Family == 4 }

// The runs bitmap (run_bits, filter.h): a bit per hash value of the IPv4
// runs' entries, 16 bits an entry rounded up to a power of two (a
// million entries: 2^24 bits, 2 MiB, ~6 % of other addresses finding
// their bit set), at least a line and at most 16 MiB.
const (
	runBitsMin = 9
	runBitsMax = 27
)

// runBitsLog is log2 of the bitmap's bits for n IPv4 run entries.
func runBitsLog(n int) uint32 {
	b := uint32(runBitsMin)
	for b < runBitsMax && 1<<b < 16*n {
		b++
	}
	return b
}

// The bitmap's hash multipliers (RUN_HASH_K1, RUN_HASH_K2).
const (
	runHashK1 = 0x9e3779b97f4a7c15
	runHashK2 = 0xbf58476d1ce4e5b9
)

// runHash is scan.h's run_hash of entry (head, addr): the bitmap's bit is
// its top 64 - shift bits.
func runHash(head, addr uint32) uint64 {
	x := (uint64(head)<<32 | uint64(addr)) * runHashK1
	x ^= x >> 32
	return x * runHashK2
}

// runBitmap is the image's runs bitmap, by 64-bit word (nil without IPv4
// runs): every IPv4 run entry's bit set.
func (im *Image) runBitmap() []uint64 {
	if im.runShift == 0 {
		return nil
	}
	words := make([]uint64, 1<<(64-im.runShift)/64)
	for i := range im.runs {
		e := &im.runs[i]
		if im.run4(e) {
			h := runHash(e.head, e.addr[0]) >> im.runShift
			words[h>>6] |= 1 << (h & 63)
		}
	}
	return words
}

// The small sets' bitmap (run_flat, filter.h RUN_FLAT; ten14): a set of
// at most runFlatMax IPv4 run entries also has them in its slot's
// runFlatWords words of one plain array, three bits of one word an
// entry. The fast path and the pipeline read it instead of run_bits: an
// inlined array lookup on one kmalloc'd object, where run_bits is a
// map-in-map lookup, a helper call and the inner array's own lines (a
// vmalloc'd one from 2 048 entries). At runFlatMax entries ~8 % of other
// addresses find their three bits set (10 000: ~5 %; run_bits' 16 bits an
// entry 3-6 %).
const (
	runFlatBit   = 0x100 // RUN_FLAT
	runFlatLog   = 10    // RUN_FLAT_LOG
	runFlatWords = 1 << runFlatLog
	runFlatMax   = 12288
)

// The large sets' bitmap (run_flat_big, filter.h RUN_BIG; mil15): a set
// of more than runFlatMax and at most runBigMax IPv4 run entries (a
// bitmap of at most 2^24 bits, 2 MiB) also has run_bits' words in its
// slot's runBigWords words of one plain array, after word 0: the probe is
// an inlined array lookup and the word, where run_bits' is a map-in-map
// lookup, a helper call and the word (ten14 measured the first two at
// ~75 ns live). The array is 1 + 3 slots' words (6 MiB), made when a set
// first needs it (ensureRunBig); until then the datapath has it with one
// entry and a program bound to that one reads run_bits.
const (
	runBigBit     = 0x200 // RUN_BIG
	runBigLog     = 18    // RUN_BIG_LOG: 2^18 words, 2^24 bits a slot
	runBigWords   = 1 << runBigLog
	runBigEntries = 1 + numSlots*runBigWords
	runBigMax     = runBigWords * 64 / 16 // runBitsLog's 16 bits an entry: 1 048 576
)

// runFlatBits is the small sets' bitmap's word and bits of entry hash x
// (scan.h run_flat_absent, run_flat_mask).
func runFlatBits(x uint64) (word uint32, mask uint64) {
	return uint32(x >> (64 - runFlatLog)), 1<<(x>>48&63) | 1<<(x>>42&63) | 1<<(x>>36&63)
}

// runFlatBitmap is the image's small sets' bitmap (nil without runFlat):
// every IPv4 run entry's three bits set.
func (im *Image) runFlatBitmap() []uint64 {
	if !im.runFlat {
		return nil
	}
	words := make([]uint64, runFlatWords)
	for i := range im.runs {
		if e := &im.runs[i]; im.run4(e) {
			w, m := runFlatBits(runHash(e.head, e.addr[0]))
			words[w] |= m
		}
	}
	return words
}

// runMayHold says whether the bitmap a packet reads (the small one with
// runFlat, else run_bits) may hold the IPv4 run entry (head, addr): false
// only for an entry no run has. words is runFlatBitmap's or runBitmap's.
func (im *Image) runMayHold(words []uint64, head, addr uint32) bool {
	x := runHash(head, addr)
	if im.runFlat {
		w, m := runFlatBits(x)
		return words[w]&m == m
	}
	x >>= im.runShift
	return words[x>>6]&(1<<(x&63)) != 0
}

// runMatch is compactMatch of rule i with, for an IPv4 run's first rule,
// the bitmap's shift in the address word the run leaves free (CM_RUN4),
// and RUN_FLAT when the set has the small bitmap, RUN_BIG the large one.
func (im *Image) runMatch(i int) filterCmatch {
	r := &im.rules[i]
	c := compactMatch(r, r.RunLen > 1)
	if c.Flags&cmRun4 != 0 {
		w := im.runShift
		if im.runFlat {
			w |= runFlatBit
		}
		if im.runBig {
			w |= runBigBit
		}
		if c.Flags&cmRunSrc != 0 {
			c.Src = w
		} else {
			c.Dst = w
		}
	}
	return c
}

func runAddr(r *filterRule, field uint32) [4]uint32 {
	if field == mSrc {
		return r.Src
	}
	return r.Dst
}

// scanLength is how many steps a scan of every rule takes: a run is one.
// The bitmap index pays for itself only when it is long.
func (im *Image) scanLength() int {
	n := len(im.rules)
	for i := range im.rules {
		if l := int(im.rules[i].RunLen); l > 1 {
			n -= l - 1
		}
	}
	return n
}

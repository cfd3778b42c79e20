package bpf

import "sluice/internal/ruleset"

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
// that alone (M_SRC or M_DST; 0 otherwise).
func runField(a, b *filterRule) uint32 {
	if !runnable(a) || !runnable(b) {
		return 0
	}
	x, y := *a, *b
	x.RuleNo, y.RuleNo, x.GroupNo, y.GroupNo = 0, 0, 0, 0
	x.RunLen, y.RunLen, x.RunField, y.RunField = 0, 0, 0, 0
	x.Hits, y.Hits, x.Bytes, y.Bytes = 0, 0, 0, 0
	switch {
	case x.Src != y.Src && x.Dst == y.Dst:
		x.Src, y.Src = [4]uint32{}, [4]uint32{}
		if x == y && x.Match&(mSrc|mNotSrc|mSrcPool) == mSrc {
			return mSrc
		}
	case x.Dst != y.Dst && x.Src == y.Src:
		x.Dst, y.Dst = [4]uint32{}, [4]uint32{}
		if x == y && x.Match&(mDst|mNotDst|mDstPool) == mDst {
			return mDst
		}
	}
	return 0
}

func runnable(r *filterRule) bool {
	return r.Head == 0 && r.Call == 0 && r.Action&ruleset.FRCallNow == 0 && r.Match&mExpr == 0
}

// findRuns marks the runs of the image's lists (RunLen, RunField on each
// run's first rule) and lists their table entries.
func (im *Image) findRuns() {
	im.runs = im.runs[:0]
	for i := range im.rules {
		im.rules[i].RunLen, im.rules[i].RunField = 0, 0
	}
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
			seen := map[[4]uint32]bool{runAddr(&im.rules[i], f): true}
			j := i + 1
			for j < end && runField(&im.rules[i], &im.rules[j]) == f && !seen[runAddr(&im.rules[j], f)] {
				seen[runAddr(&im.rules[j], f)] = true
				j++
			}
			if j-i < minRun {
				i++
				continue
			}
			im.rules[i].RunLen, im.rules[i].RunField = uint32(j-i), f
			for k := i; k < j; k++ {
				im.runs = append(im.runs, runEntry{head: uint32(i), addr: runAddr(&im.rules[k], f), idx: uint32(k)})
			}
			i = j
		}
	}
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

package bpf

import (
	"math/rand"
	"reflect"
	"testing"

	"sluice/internal/ruleset"
)

// runFieldCopy is runField as it was written first: copy both rules, zero
// what does not count and compare the structs. sameBut's byte ranges must
// agree with it for every field.
func runFieldCopy(a, b *filterRule) uint32 {
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

// setLeaf sets field f (an integer, or the last element of an array of
// integers) to v.
func setLeaf(f reflect.Value, v uint64) {
	switch f.Kind() {
	case reflect.Array:
		setLeaf(f.Index(f.Len()-1), v)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f.SetUint(v)
	}
}

// TestRunFieldEveryField changes each field of a run's second rule in turn
// and checks runField against the copying reference: a field runField
// skipped by mistake (or one added to the C struct later) shows here.
func TestRunFieldEveryField(t *testing.T) {
	base := func() (filterRule, filterRule) {
		var a filterRule
		a.Action = ruleset.FRBlock
		a.Match = mSrc
		a.Family = 4
		a.Smask = [4]uint32{0xffffffff}
		a.Src = [4]uint32{0x0a000001}
		b := a
		b.Src = [4]uint32{0x0a000002}
		return a, b
	}
	a, b := base()
	if got := runField(&a, &b); got != mSrc {
		t.Fatalf("two rules differing in Src: runField = %#x, want M_SRC", got)
	}
	rt := reflect.TypeOf(filterRule{})
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < rt.NumField(); i++ {
		if rt.Field(i).Name == "_" {
			continue
		}
		for _, dst := range []bool{false, true} {
			for k := 0; k < 4; k++ {
				a, b := base()
				if dst {
					a.Match, b.Match = mDst, mDst
					a.Dst, b.Dst, a.Src, b.Src = a.Src, b.Src, [4]uint32{}, [4]uint32{}
				}
				setLeaf(reflect.ValueOf(&b).Elem().Field(i), uint64(rng.Intn(250)+1))
				if got, want := runField(&a, &b), runFieldCopy(&a, &b); got != want {
					t.Errorf("field %s changed (dst=%v): runField = %#x, the copying reference %#x", rt.Field(i).Name, dst, got, want)
				}
			}
		}
	}
}

// BenchmarkFindRuns marks the runs of a 100 000-rule blocklist image (the
// step a million-rule load spends most of its rule comparisons in).
func BenchmarkFindRuns(b *testing.B) {
	im := &Image{rules: make([]filterRule, 100000)}
	for i := range im.rules {
		r := &im.rules[i]
		r.Action, r.Match, r.Family = ruleset.FRBlock, mSrc, 4
		r.Smask = [4]uint32{0xffffffff}
		r.Src = [4]uint32{0xc6120000 + uint32(i)}
		r.RuleNo = uint32(i + 1)
	}
	im.lists = []imageList{{start: 0, count: len(im.rules)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		im.findRuns()
	}
	if im.rules[0].RunLen != uint32(len(im.rules)) {
		b.Fatalf("RunLen %d, want %d", im.rules[0].RunLen, len(im.rules))
	}
}

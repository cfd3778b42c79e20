package ipfctl

import (
	"sluice/internal/rules/ipf"
)

// content is a rule set as staged in a transaction. Two contents with the
// same id have the same rules in the same order; every edit makes a new
// id.
type content struct {
	id    int
	rules []*ipf.Rule
}

// writeStep is one step that brings the kernel's sets towards the staged
// ones: write content c into set, or swap the sets.
type writeStep struct {
	swap bool
	set  Set
	c    content
}

// writeOrder returns the steps that turn the kernel's sets kv into cur.
// Each step is atomic in the kernel, and the order keeps the active set,
// between steps, either as it was or as it will be: never a set that is
// neither (a swap that would briefly activate a stale inactive set is
// done after the new content is in place, not before).
func writeOrder(cur, kv [2]content) []writeStep {
	a, i := cur[SetActive], cur[SetInactive]
	ka, ki := kv[SetActive], kv[SetInactive]
	if a.id == ka.id && i.id == ki.id {
		return nil
	}
	switch {
	case a.id == ki.id:
		// the active set becomes the loaded inactive one: swap, then write
		// the inactive set if it is new
		steps := []writeStep{{swap: true}}
		if i.id != ka.id {
			steps = append(steps, writeStep{set: SetInactive, c: i})
		}
		return steps
	case i.id == ka.id:
		// a new active set and the old one inactive: write the new one
		// into the inactive set, then swap, so it goes live in one step
		return []writeStep{{set: SetInactive, c: a}, {swap: true}}
	}
	// the inactive set first: a failure then leaves the rules that filter
	// traffic as they were
	var steps []writeStep
	if i.id != ki.id {
		steps = append(steps, writeStep{set: SetInactive, c: i})
	}
	if a.id != ka.id {
		steps = append(steps, writeStep{set: SetActive, c: a})
	}
	return steps
}

// listKey names one list of a set: main lists by direction and
// accounting, groups by name.
type listKey struct {
	group string
	dir   ipf.Direction
	acct  bool
}

// lists splits a set's rules into its lists, in order of first
// appearance, each with its rules' printed forms in order.
func lists(rules []*ipf.Rule) ([]listKey, map[listKey][]string) {
	var order []listKey
	m := map[listKey][]string{}
	for _, r := range rules {
		k := listKey{group: r.Group, dir: r.Dir, acct: r.Action == ipf.ActionCount}
		if r.Group != "" {
			// a group is one list whatever its rules' directions
			k.dir, k.acct = 0, false
		}
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = append(m[k], ipf.FormatRule(r))
	}
	return order, m
}

// diffSets compares the loaded sets with the staged ones, list by list.
// Rules are compared by their printed form, as a multiset: what is in one
// and not the other is added or removed; when the rules both have keep
// their relative order nothing else is said, otherwise the list is
// marked reordered (rule order decides the verdict).
func diffSets(orig, cur [2]content) *Diff {
	d := &Diff{Swapped: cur[SetActive].id == orig[SetInactive].id && orig[SetInactive].id != orig[SetActive].id}
	for _, s := range []Set{SetActive, SetInactive} {
		if orig[s].id == cur[s].id {
			continue
		}
		oo, om := lists(orig[s].rules)
		co, cm := lists(cur[s].rules)
		keys := append([]listKey(nil), co...)
		for _, k := range oo {
			if _, ok := cm[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			ld := diffList(om[k], cm[k])
			if len(ld.Added) == 0 && len(ld.Removed) == 0 && !ld.Reordered {
				continue
			}
			ld.Set, ld.Group, ld.Dir, ld.Acct = s, k.group, k.dir, k.acct
			d.Lists = append(d.Lists, ld)
		}
	}
	return d
}

// diffList compares two lists of printed rules.
func diffList(old, cur []string) ListDiff {
	var ld ListDiff
	left := map[string]int{}
	for _, r := range old {
		left[r]++
	}
	var keptCur []string
	for _, r := range cur {
		if left[r] > 0 {
			left[r]--
			keptCur = append(keptCur, r)
		} else {
			ld.Added = append(ld.Added, r)
		}
	}
	right := map[string]int{}
	for _, r := range cur {
		right[r]++
	}
	var keptOld []string
	for _, r := range old {
		if right[r] > 0 {
			right[r]--
			keptOld = append(keptOld, r)
		} else {
			ld.Removed = append(ld.Removed, r)
		}
	}
	for i := range keptOld {
		if keptOld[i] != keptCur[i] {
			ld.Reordered = true
			break
		}
	}
	return ld
}

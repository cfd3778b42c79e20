package bpf

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// Every scan of a list is one bpf_loop of at most scanBudget steps. A step
// looks at one rule, skips a run of index blocks or leaves a group; a head
// rule that matches scans its group too, and a group that heads groups
// scans those. So a set with many heads of one big group, or groups that
// head themselves, can need more steps than a scan has. checkScanSteps
// proves at load time that no packet can: it computes, for every list and
// nesting depth, the most steps a scan can take when every rule matches
// (an upper bound), and refuses a set whose main lists, accounting lists
// or called groups could exceed the budget, naming the heads that cost
// the most. The program still fails closed should a scan not end (it
// blocks the packet and counts ST_SCANCUT), so no rule is ever skipped.

// satAdd adds without passing the budget by more than one (the counts of
// self-heading groups grow exponentially with the depth).
func satAdd(a, b uint64) uint64 {
	if a+b > scanBudget+1 || a+b < a {
		return scanBudget + 1
	}
	return a + b
}

func (im *Image) checkScanSteps(where []*ipf.Rule) error {
	nl := len(im.lists)
	// steps[d][l]: the most steps a scan of list l entered at depth d takes
	steps := make([][]uint64, maxDepth+1)
	maxGroup := make([]uint64, maxDepth+2) // over the groups, by depth
	hasCall := false
	// lists with no head or call-now rule cost their length at any depth
	plain := make([]bool, nl)
	for l, li := range im.lists {
		plain[l] = true
		for i := li.start; i < li.start+li.count; i++ {
			r := &im.rules[i]
			if r.Call != 0 {
				hasCall = true
			}
			if r.Head != 0 || r.Action&ruleset.FRCallNow != 0 {
				plain[l] = false
			}
		}
	}
	for d := maxDepth; d >= 0; d-- {
		steps[d] = make([]uint64, nl)
		for l, li := range im.lists {
			n := uint64(1) // the step that ends the list
			if plain[l] {
				n = satAdd(n, uint64(li.count))
			}
			for i := li.start; i < li.start+li.count && !plain[l]; i++ {
				r := &im.rules[i]
				n = satAdd(n, 1)
				if d == maxDepth {
					continue // the scan pushes no deeper
				}
				if h := int(r.Head); h != 0 && h < nl && im.lists[h].count > 0 {
					n = satAdd(n, steps[d+1][h])
				}
				if r.Action&ruleset.FRCallNow != 0 {
					n = satAdd(n, maxGroup[d+1])
				}
			}
			steps[d][l] = n
			if l >= listGroup0 && n > maxGroup[d] {
				maxGroup[d] = n
			}
		}
	}
	check := func(l int) error {
		if steps[0][l] <= scanBudget {
			return nil
		}
		return im.scanError(l, steps, where)
	}
	for l := 0; l < listGroup0 && l < nl; l++ {
		if err := check(l); err != nil {
			return err
		}
	}
	if hasCall {
		// a deferred call scans the group the group-map names afresh
		for l := listGroup0; l < nl; l++ {
			if err := check(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanError explains why list l is too costly: the heads in it (or in the
// groups it leads to) that scan the same group the most times.
func (im *Image) scanError(l int, steps [][]uint64, where []*ipf.Rule) error {
	listName := func(id int) string {
		switch id {
		case listIn:
			return "the in list"
		case listOut:
			return "the out list"
		case listAcctIn:
			return "the count in list"
		case listAcctOut:
			return "the count out list"
		}
		return fmt.Sprintf("group %s", im.lists[id].name)
	}
	// walk down from l along the costliest head until a list whose own
	// heads make the excess
	d := 0
	for d < maxDepth {
		li := im.lists[l]
		cost := map[int]uint64{}
		heads := map[int][]int{}
		for i := li.start; i < li.start+li.count; i++ {
			if h := int(im.rules[i].Head); h != 0 && h < len(im.lists) && im.lists[h].count > 0 {
				cost[h] = satAdd(cost[h], steps[d+1][h])
				heads[h] = append(heads[h], i)
			}
		}
		worst, wc := -1, uint64(0)
		for h, c := range cost {
			if c > wc || (c == wc && h < worst) {
				worst, wc = h, c
			}
		}
		if worst < 0 {
			break
		}
		if steps[d+1][worst] > scanBudget && len(heads[worst]) == 1 {
			l, d = worst, d+1 // the excess is further down
			continue
		}
		// the heads of this list, costliest group first
		groups := make([]int, 0, len(heads))
		for g := range heads {
			groups = append(groups, g)
		}
		sort.Slice(groups, func(i, j int) bool {
			ci, cj := cost[groups[i]], cost[groups[j]]
			return ci > cj || (ci == cj && groups[i] < groups[j])
		})
		var parts []string
		for n, g := range groups {
			if n == 3 {
				parts = append(parts, fmt.Sprintf("and heads of %d more groups", len(groups)-3))
				break
			}
			idx := heads[g]
			sort.Ints(idx)
			var at []string
			for k, i := range idx {
				if k == 3 {
					at = append(at, fmt.Sprintf("and %d more", len(idx)-3))
					break
				}
				if i < len(where) {
					at = append(at, fmt.Sprintf("%s:%d", where[i].Pos.File, where[i].Pos.Line))
				}
			}
			parts = append(parts, fmt.Sprintf("%d head rules (%s) of group %s (%d rules, %s steps with the groups it heads)",
				len(idx), strings.Join(at, ", "), im.lists[g].name, im.lists[g].count, stepsText(steps[d+1][g])))
		}
		return fmt.Errorf("%s: a packet may take more than %d rule steps, the most a kernel scan takes: "+
			"each matching head rule scans its group again: %s; merge heads of the same group, "+
			"or break groups that head each other: %w",
			listName(l), scanBudget, strings.Join(parts, "; "), ErrTooCostly)
	}
	return fmt.Errorf("%s: a packet may take more than %d rule steps, the most a kernel scan takes "+
		"(groups nested %d deep); flatten the groups: %w", listName(l), scanBudget, maxDepth, ErrTooCostly)
}

// ErrTooCostly marks a rule set whose scans could take more steps than the
// kernel datapath's scan has: the load is refused, the running rules stay.
var ErrTooCostly = errors.New("rule set too costly for the kernel datapath")

func stepsText(n uint64) string {
	if n > scanBudget {
		return fmt.Sprintf("more than %d", scanBudget)
	}
	return fmt.Sprint(n)
}

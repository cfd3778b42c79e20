package ipfctl

import (
	"fmt"
	"strings"

	"sluice/internal/rules/ipf"
)

// groupDepth returns how deep the `head` groups of rules nest (a group
// headed from the main lists is at depth 1) and a deepest chain of group
// names. When groups head each other in a cycle the nesting has no bound:
// cycle is then set and chain is the cycle.
func groupDepth(rules []*ipf.Rule) (depth int, chain []string, cycle bool) {
	heads := map[string][]string{} // group -> groups its rules head
	for _, r := range rules {
		if r.Head != "" && !contains(heads[r.Group], r.Head) {
			heads[r.Group] = append(heads[r.Group], r.Head)
		}
	}
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	longest := map[string][]string{} // group -> deepest chain below it
	var stack []string
	var cyc []string
	var walk func(g string) []string
	walk = func(g string) []string {
		switch state[g] {
		case done:
			return longest[g]
		case active:
			if cyc == nil {
				i := len(stack) - 1
				for i > 0 && stack[i] != g {
					i--
				}
				cyc = append(append([]string(nil), stack[i:]...), g)
			}
			return nil
		}
		state[g] = active
		stack = append(stack, g)
		var best []string
		for _, h := range heads[g] {
			if c := walk(h); len(c)+1 > len(best) {
				best = append([]string{h}, c...)
			}
		}
		stack = stack[:len(stack)-1]
		state[g] = done
		longest[g] = best
		return best
	}
	chain = walk("")
	if cyc != nil {
		return 0, cyc, true
	}
	return len(chain), chain, false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// depthWarning says when a set nests groups deeper than the datapath
// follows ("" when it does not).
func depthWarning(s Set, rules []*ipf.Rule, limit int) string {
	n, chain, cycle := groupDepth(rules)
	if cycle {
		return fmt.Sprintf("%s set: groups head each other in a cycle (%s); the kernel datapath follows %d levels and does not enter the groups below",
			s, strings.Join(chain, " > "), limit)
	}
	if n <= limit {
		return ""
	}
	return fmt.Sprintf("%s set: groups nest %d deep (%s); the kernel datapath follows %d levels and does not enter the groups below",
		s, n, strings.Join(chain, " > "), limit)
}

package bpf

import (
	"runtime"

	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// streamMin is the set size from which Compile tries compileStream: a
// blocklist of a million rules compiled whole took 672 MB for the
// compiled set beside the image, and its pages' first touch was seconds
// of system time.
const streamMin = 100000

// streamWindow is how many rules compileStream compiles at once.
const streamWindow = 1 << 15

// compileStream is Compile for a set whose rules all go, in file order,
// to the main and accounting lists: no group, head, call, collection
// number or @N (a blocklist). Each window of rules is compiled into one
// reused buffer (ruleset.CompileRules, on every CPU) and laid out at
// its place in the image at once, so the compiled set never exists
// whole; the image is CompileSet's for ruleset.Compile's set. ok is
// false for a set of another shape and on any error: Compile then takes
// the general way, whose error is the one to report.
func compileStream(rules []*ipf.Rule, opts CompileOptions, window int) (im *Image, ok bool) {
	n := len(rules)
	if n == 0 || n > MaxRules {
		return nil, false
	}
	var count [listGroup0]int
	for _, r := range rules {
		if r.Group != "" || r.Head != "" || r.HasInsertAt || r.Collection != 0 ||
			r.Action == ipf.ActionCall || r.Call.Func != "" {
			return nil, false
		}
		count[mainList(r)]++
	}
	if n > 100000 {
		// as CompileSet: the heap grows by gigabytes
		defer gcAtLeast(400)()
	}
	opts = opts.withHostLookups()
	im = &Image{lists: make([]imageList, listGroup0), rules: make([]filterRule, n)}
	// the rules by position: each list's in file order, as ruleset.Set
	// places them (texts, errors)
	srcs := make([]*ipf.Rule, n)
	var next [listGroup0]int
	start := 0
	for l := range count {
		dir := ipf.DirIn
		if l == listOut || l == listAcctOut {
			dir = ipf.DirOut
		}
		im.lists[l] = imageList{start: start, count: count[l], dir: dir, acct: l >= listAcctIn}
		next[l] = start
		start += count[l]
	}
	for _, r := range rules {
		l := mainList(r)
		srcs[next[l]] = r
		next[l]++
	}
	// laid out list by list, as CompileSet does: pool tables and exp
	// values are numbered in that order
	pt := &poolTables{ids: map[string]uint16{}}
	seen := map[string]bool{}
	buf := make([]ruleset.Rule, min(window, n))
	for l, li := range im.lists {
		list := srcs[li.start : li.start+li.count]
		for lo := 0; lo < len(list); lo += len(buf) {
			w := buf[:min(len(buf), len(list)-lo)]
			if err := ruleset.CompileRules(w, list[lo:lo+len(w)], runtime.GOMAXPROCS(0)); err != nil {
				return nil, false
			}
			for k := range w {
				cr := &w[k]
				raw := &im.rules[li.start+lo+k]
				if err := im.compileRule(cr, raw, opts, pt, nil, nil); err != nil {
					return nil, false
				}
				for _, name := range cr.IfNames[:2] {
					if name != "" && name != "-" && name != "*" && !seen[name] {
						seen[name] = true
						im.ifaces = append(im.ifaces, name)
					}
				}
				raw.RuleNo = uint32(lo + k + 1)
				raw.GroupNo = uint32(l)
			}
		}
	}
	if err := im.finish(srcs, opts); err != nil {
		return nil, false
	}
	return im, true
}

// mainList is the list ruleset.Set places a rule of no group in.
func mainList(r *ipf.Rule) int {
	acct := r.Action == ipf.ActionCount
	switch {
	case acct && r.Dir == ipf.DirOut:
		return listAcctOut
	case acct:
		return listAcctIn
	case r.Dir == ipf.DirOut:
		return listOut
	}
	return listIn
}

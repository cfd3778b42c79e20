package bpf

import (
	"sort"
	"strings"
	"testing"

	"sluice/internal/ipflog"
)

// TestReasonNames compares the Go list of block reasons with the C
// program's #define RSN_*: every reason the program can count or log is
// in Reasons and has a name of its own (from ipflog's table, the only
// one), and Reasons holds nothing the program does not define.
func TestReasonNames(t *testing.T) {
	defs := headerDefines(t)
	c := map[uint32]string{}
	for name, v := range defs {
		if strings.HasPrefix(name, "RSN_") && name != "RSN_NONE" {
			if old, ok := c[uint32(v)]; ok {
				t.Errorf("%s and %s are both %d", old, name, v)
			}
			c[uint32(v)] = name
		}
	}
	if len(c) == 0 {
		t.Fatal("no #define RSN_* in c/include")
	}
	if n, ok := defs["NREASONS"]; !ok {
		t.Error("NREASONS not #defined")
	} else {
		for v, name := range c {
			if int64(v) >= n {
				t.Errorf("%s = %d: not below NREASONS %d (Stats.Drops has no slot for it)", name, v, n)
			}
		}
	}
	goSet := map[uint32]bool{}
	for _, r := range Reasons {
		if goSet[r] {
			t.Errorf("reason %d listed twice in Reasons", r)
		}
		goSet[r] = true
		if _, ok := c[r]; !ok {
			t.Errorf("Reasons has %d (%s), which no #define RSN_* has", r, ReasonName(r))
		}
	}
	var vals []int
	for v := range c {
		vals = append(vals, int(v))
	}
	sort.Ints(vals)
	names := map[string]string{}
	for _, v := range vals {
		r, cname := uint32(v), c[uint32(v)]
		if !goSet[r] {
			t.Errorf("%s = %d: missing from bpf.Reasons", cname, r)
		}
		name := ReasonName(r)
		if strings.HasPrefix(name, "reason-") {
			t.Errorf("%s = %d: no name (add it to ipflog's reasons table)", cname, r)
			continue
		}
		if other, ok := names[name]; ok {
			t.Errorf("%s and %s are both named %q", other, cname, name)
		}
		names[name] = cname
		// what ipmon prints for a logged packet blocked for r
		if got := ipflog.ReasonName(LogReason(r)); got != name {
			t.Errorf("%s: ipmon's name %q, ipfstat's %q", cname, got, name)
		}
	}
	// IPFilter's reasons keep IPFilter's names (its FRB_* numbering, from 1)
	for r, want := range map[uint32]string{RSNFilter: "filter-rule", RSNLogFail: "log-or-block_1", RSNPPS: "pps-rate",
		RSNJumbo: "jumbogram", RSNStateAdd: "state_add-fail", RSNPullup: "pullup-fail", RSNBadFrag: "bad-frag"} {
		if got := ReasonName(r); got != want {
			t.Errorf("ReasonName(%d) = %q, want IPFilter's %q", r, got, want)
		}
	}
	if got := ReasonName(RSNNone); got != "reason-0" {
		t.Errorf("ReasonName(RSNNone) = %q, want reason-0", got)
	}
	if got := ReasonName(numReasons + 1); got != "reason-33" {
		t.Errorf("ReasonName(33) = %q, want reason-33", got)
	}
}

package bpf

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"sluice/internal/engine"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// engineFor compiles text for the Go engine.
func engineFor(t *testing.T, text string) *engine.Engine {
	t.Helper()
	rules, err := ipf.Parse("r", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := ruleset.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(engine.Config{Clock: &state.ManualClock{}})
	eng.Sets().Store(0, set)
	t.Cleanup(eng.Close)
	return eng
}

// TestPrivilegedV6ExtensionChains (issue 10 item 1): an IPv6 SYN to a
// blocked port behind a chain of extension headers of any length gets the
// Go engine's verdict. The program walked six headers and then took the
// seventh for the transport (protocol 60, no ports), so such a SYN passed.
func TestPrivilegedV6ExtensionChains(t *testing.T) {
	h := newHarness(t)
	const rules = "block in quick proto tcp from any to any port = 22\npass in all\n"
	h.load(rules)
	eng := engineFor(t, rules)
	rep := func(n int, typ uint8) []uint8 {
		out := make([]uint8, n)
		for i := range out {
			out[i] = typ
		}
		return out
	}
	chains := map[string][]uint8{
		"none":                      nil,
		"6 dstopts":                 rep(6, 60),
		"7 dstopts":                 rep(7, 60),
		"hopopts + 6 dstopts":       append([]uint8{0}, rep(6, 60)...),
		"6 dstopts + atomic frag":   append(rep(6, 60), 44),
		"hop, routing, 14 dstopts":  append([]uint8{0, 43}, rep(14, 60)...),
		"16 dstopts":                rep(16, 60),
		"100 dstopts":               rep(100, 60),
		"400 dstopts":               rep(400, 60),
		"frag + 40 dstopts":         append([]uint8{44}, rep(40, 60)...),
		"two hopopts (bad), 6 dsto": append([]uint8{0, 0}, rep(6, 60)...),
	}
	for name, exts := range chains {
		t.Run(name, func(t *testing.T) {
			for _, dport := range []uint16{22, 80} {
				fp := flowPkt{v6: true, proto: 6, src: netip.MustParseAddr("2001:db8::1"), dst: netip.MustParseAddr("2001:db8::2"),
					sp: 40000, dp: dport, flags: synF, seq: 1, exts: exts}
				frame := fp.frame()
				var p engine.Packet
				p.Load(append([]byte(nil), frame[14:]...), "eth0", false, 0)
				want := eng.Check(&p).Verdict
				ret, _ := h.run(false, frame)
				got := verdictName(ret)
				if (got == "pass") != want.Passed() {
					t.Errorf("port %d: bpf %s, engine %s", dport, got, want)
				}
				if dport == 22 && name != "two hopopts (bad), 6 dsto" && got != "block" {
					t.Errorf("port %d: bpf %s, want block", dport, got)
				}
			}
		})
	}
}

// groupRules returns heads head rules of group g, members rules in g that
// an index cannot leave out for a TCP packet, and a trailing quick block of
// TCP port 22.
func groupRules(heads, members int) string {
	var b strings.Builder
	for i := 0; i < heads; i++ {
		b.WriteString("pass in all head g\n")
	}
	for i := 0; i < members; i++ {
		b.WriteString("block in proto udp all group g\n")
	}
	b.WriteString("block in quick proto tcp from any to any port = 22\n")
	return b.String()
}

// TestPrivilegedScanBudget (issue 10 item 2): a set whose scans are long
// (five heads of a group of 15 000 rules: 75 000 steps, past the old
// budget of 65 536) evaluates every rule, so the trailing block holds; a
// set that could need more steps than a scan has is refused when it is
// compiled, with an error that names the group and the heads.
func TestPrivilegedScanBudget(t *testing.T) {
	h := newHarness(t)
	h.load(groupRules(5, 15000))
	syn := tcp4("10.0.0.1", "10.0.0.2", 40000, 22, synF)
	h.expect(false, syn, "block")
	other := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF)
	h.expect(false, other, "pass")
	rules, err := h.d.Rules(Active)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if strings.Contains(r.Text, "port = 22") && r.Hits != 1 {
			t.Errorf("trailing rule %q: %d hits, want 1", r.Text, r.Hits)
		}
	}
	if s, _ := h.d.Stats(); s.ScanCut != 0 {
		t.Errorf("%d scans cut short", s.ScanCut)
	}

	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"600 heads of 15 000", groupRules(600, 15000), []string{"the in list", "600 head rules (big.conf:1, big.conf:2, big.conf:3, and 597 more) of group g (15000 rules"}},
		{"self-heading group", "pass in all head s\npass in all head s group s\npass in all head s group s\npass in all head s group s\n",
			[]string{"group s", "head rules"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, err := ipf.Parse("big.conf", []byte(c.text), ipf.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(rs, CompileOptions{})
			if !errors.Is(err, ErrTooCostly) {
				t.Fatalf("got %v, want ErrTooCostly", err)
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

package bpf

import (
	"net/netip"
	"strings"
	"testing"
)

// TestOptionsIPv4Only: a rule's IPv4 option and security tests match
// IPv4 packets only, as in the engine and IPFilter (its ipftest: `block in
// quick proto tcp from 2001:db8::/32 to any with not opt rr` leaves an
// IPv6 TCP packet to the next rule). The kernel tested an IPv6 packet's
// extension header bits, which share the word, as options and blocked it
// (dif18: TestDifferentialRandom seed 180305 with the generator's new
// `with opt` rules). Each rule set runs IPv6 and IPv4 packets, with and
// without options, through both; the IPv6 ones must reach `pass in all`.
func TestOptionsIPv4Only(t *testing.T) {
	h := newHarness(t)
	a := netip.MustParseAddr
	v6 := []flowPkt{{v6: true, proto: 6, src: a("2001:db8::1"), sp: 5000, dst: a("2001:db8::2"), dp: 1024, flags: 0x10, ack: 5},
		{v6: true, proto: 6, src: a("2001:db8::1"), sp: 5000, dst: a("2001:db8::2"), dp: 1024, flags: 0x10, ack: 5,
			exts: []uint8{44}, fragMore: true, fragID: 2}}
	v4 := []flowPkt{{proto: 6, src: a("10.0.0.1"), sp: 5000, dst: a("10.0.0.2"), dp: 1024, flags: 0x10, ack: 5},
		{proto: 6, src: a("10.0.0.1"), sp: 5000, dst: a("10.0.0.2"), dp: 1024, flags: 0x10, ack: 5, opts: randOpts[1]}}
	for _, rule := range []string{
		"block in quick proto tcp all with not opt rr",
		"block in quick proto tcp from 2001:db8::/32 to any with not opt rr",
		"block in quick proto tcp all with not opt lsrr,ssrr",
		// a flag test (FI_OPTIONS), not an option test: it matches IPv6
		"block in quick proto tcp all with not ipopts",
		"block in quick inet6 proto tcp all with not opt rr",
	} {
		text := rule + "\npass in all\n"
		h.load(text)
		eng := engineFor(t, text)
		for _, fp := range append(append([]flowPkt(nil), v6...), v4...) {
			res, got, _ := h.stepBoth(t, eng, fp)
			if (got == VerdictPass) != res.Verdict.Passed() {
				t.Errorf("%s: %s: engine %s, kernel %s", rule, fp, res.Verdict, got)
			}
			if fp.v6 && !strings.Contains(rule, "ipopts") && !res.Verdict.Passed() {
				t.Errorf("%s: %s: engine %s, want pass (the option test is IPv4's)", rule, fp, res.Verdict)
			}
		}
		eng.Close()
	}
}

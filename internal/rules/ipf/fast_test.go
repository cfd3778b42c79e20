package ipf

import (
	"fmt"
	"math/rand"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// parseWith is parseSerial with the fast path on or off; it returns the
// parser too (its count of fast rules).
func parseWith(name, src string, opts ParseOptions, slow, big bool) (*parser, *Config, error) {
	p := &parser{lx: newLexerAt(name, src, 1, opts.Vars), opts: opts, slow: slow, big: big}
	p.parseFile()
	fillGroups(p.rules)
	c := &Config{Settings: p.settings, Rules: p.rules}
	if len(p.errs) > 0 {
		return p, c, p.errs
	}
	return p, c, nil
}

// checkFast parses src with and without fastRule: the rules, settings
// and errors must be the same. It returns how many rules fastRule read.
func checkFast(t testing.TB, src string, opts ParseOptions) int {
	t.Helper()
	_, want, werr := parseWith("f.conf", src, opts, true, false)
	for _, big := range []bool{false, true} {
		p, got, gerr := parseWith("f.conf", src, opts, false, big)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) {
			t.Fatalf("%q %+v: errors differ:\nslow: %v\nfast: %v", src, opts, werr, gerr)
		}
		if !reflect.DeepEqual(want, got) {
			d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpopts.EquateEmpty())
			t.Fatalf("%q %+v: rules differ (-slow +fast):\n%s", src, opts, d)
		}
		if big {
			return p.fast
		}
	}
	return 0
}

// randLine is a line near a blocklist's rule: mostly the fast path's
// shape, often one piece off it (case, blanks, comments, a CR, other
// actions and options, masks out of range, host names, IPv6, ports,
// lists, variables, tails, a missing `to`, `;`).
func randLine(rng *rand.Rand) string {
	pick := func(xs ...string) string { return xs[rng.Intn(len(xs))] }
	often := func(usual string, xs ...string) string {
		if rng.Intn(12) > 0 {
			return usual
		}
		return pick(xs...)
	}
	octet := func() string {
		return often(fmt.Sprint(rng.Intn(256)), "256", "010", "0", "00", "255", "1000", "")
	}
	addr := func() string {
		a := often(octet()+"."+octet()+"."+octet()+"."+octet(),
			"10.1", "10", "167772161", "0x0a000001", "localhost", "test.host.dots", "::1", "2001:db8::1",
			"1.2.3.4.5", "1..2.3", "1.2.3.4x", "pool/1", "$v", "(lo0)", "{1.2.3.4,5.6.7.8}", "!1.2.3.4", "lo0")
		m := often("", "/"+fmt.Sprint(rng.Intn(40)), "/32", "/0", "/033", "/", "/ 24", "/255.255.0.0", " mask 255.0.0.0", "/0x8",
			"/24/", "/net", "/1a")
		if rng.Intn(2) == 0 && m == "" {
			m = "/" + fmt.Sprint(rng.Intn(33))
		}
		return a + m
	}
	obj := func() string {
		if rng.Intn(3) == 0 {
			return often("any", "ANY", "anyx", "any/24", "any port = 80")
		}
		return addr() + often("", " port = 80", " port 80", ",1.2.3.4")
	}
	sp := func() string { return often(" ", "  ", "\t", " \t") }
	var b strings.Builder
	b.WriteString(often("", " ", "\t", "\n", "# c\n", "\\\n", "  \n\t"))
	b.WriteString(often(pick("block", "pass"), "Block", "PASS", "auth", "log", "count", "blockx", "block1", "$a", "@1 block", "1 pass"))
	b.WriteString(often("", " return-rst"))
	b.WriteString(sp())
	b.WriteString(often(pick("in", "out"), "In", "inn", "out1", "in/"))
	b.WriteString(often(often("", " quick"), " quick quick", " on lo0", " log", " QUICK", " quick on lo0"))
	b.WriteString(sp())
	b.WriteString(often("from", "to", "all", "From", "proto tcp from"))
	b.WriteString(sp())
	b.WriteString(obj())
	if rng.Intn(8) > 0 {
		b.WriteString(sp())
		b.WriteString(often("to", "To", "port", "tos"))
		b.WriteString(sp())
		b.WriteString(obj())
	}
	b.WriteString(often("", " keep state", " group 1", " head 2", " # c", ";", " ; block in all", "\r", "  ", "\t", " \\"))
	return b.String()
}

// TestFastRuleSame is the property test of fastRule: files of random
// lines near its shape parse to the same rules and errors with it and
// without it (the general parser), and it reads most of the lines of
// its own shape.
func TestFastRuleSame(t *testing.T) {
	rng := rand.New(rand.NewSource(16))
	optss := []ParseOptions{{}, {Inet6: true}, {Inet4: true}, {Vars: map[string]string{"v": "1.2.3.4", "a": "block"}}}
	fast := 0
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := 1 + rng.Intn(4); n > 0; n-- {
			b.WriteString(randLine(rng))
			b.WriteString(often(rng, "\n", "", "\n\n", "\r\n"))
		}
		fast += checkFast(t, b.String(), optss[rng.Intn(len(optss))])
	}
	if fast < 5000 {
		t.Fatalf("fastRule read %d rules of 20 000 files: the test does not exercise it", fast)
	}
	t.Logf("fastRule read %d rules", fast)
}

func often(rng *rand.Rand, usual string, xs ...string) string {
	if rng.Intn(4) > 0 {
		return usual
	}
	return xs[rng.Intn(len(xs))]
}

// TestFastRuleBlocklist: a blocklist is read by fastRule line by line
// (every rule, after the first of the file and after a rule of the
// general parser), with the general parser's rules, positions and
// errors; the corpus of TestParseSplit parses the same either way.
func TestFastRuleBlocklist(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&b, "block in from 198.%d.%d.%d/32 to any\nblock out quick from any to 198.18.%d.%d\n", 18+i%2, i>>8&255, i&255, i>>8&255, i&255)
		if i%500 == 0 {
			b.WriteString("pass in proto tcp from any to any keep state\n")
		}
	}
	src := b.String()
	if n := checkFast(t, src, ParseOptions{}); n != 6000 {
		t.Fatalf("fastRule read %d of the 6000 blocklist rules", n)
	}
	for _, src := range splitCorpus(t) {
		for _, o := range []ParseOptions{{}, {Vars: map[string]string{"ext": "le1"}}} {
			checkFast(t, src, o)
		}
	}
	// an error after fast rules is reported where the general parser
	// reports it
	bad := "block in from 1.2.3.4 to any\nblock in from 1.2.3.4/33 to any\nblock in frum any\nblock in from 1.2.3.4 to any\n"
	checkFast(t, bad, ParseOptions{})
	if _, err := Parse("bad", []byte(bad), ParseOptions{}); err == nil || !strings.HasPrefix(err.Error(), "bad:2:") {
		t.Fatalf("errors: %v", err)
	}
}

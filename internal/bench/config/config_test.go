package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"sluice/internal/bench/topo"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ipnat"
	"sluice/internal/rules/ipqos"
)

// fakeKernel records the nftables messages a batch sends, by type.
type fakeKernel struct {
	counts map[uint16]int
	exprs  int // bytes of NEWRULE payloads, a proxy for rule size
	elems  int // bytes of NEWSETELEM payloads
	// maxElems is the largest NEWSETELEM payload: its elements are one
	// attribute, whose length must fit 16 bits
	maxElems int
}

func (f *fakeKernel) dial(req []netlink.Message) ([]netlink.Message, error) {
	for _, m := range req {
		if m.Header.Type>>8 != unix.NFNL_SUBSYS_NFTABLES {
			continue
		}
		typ := uint16(m.Header.Type & 0xff)
		f.counts[typ]++
		if typ == unix.NFT_MSG_NEWRULE {
			f.exprs += len(m.Data)
		}
		if typ == unix.NFT_MSG_NEWSETELEM {
			f.elems += len(m.Data)
			f.maxElems = max(f.maxElems, len(m.Data))
		}
	}
	return req, nil
}

func TestNFTBuildCounts(t *testing.T) {
	for _, tc := range []struct {
		name          string
		spec          NFTSpec
		chains, rules int
		sets, batches int // NEWSET, NEWSETELEM messages
	}{
		{"attach", NFTSpec{}, 2, 0, 0, 0},
		{"stateless", NFTSpec{Stateless: true}, 2, 6, 0, 0},
		{"stateful", NFTSpec{Stateful: true}, 2, 8, 0, 0},
		{"nomatch-100", NFTSpec{Stateless: true, NoMatch: 100}, 2, 106, 0, 0},
		{"nomatch-odd", NFTSpec{Stateless: true, NoMatch: 7}, 2, 13, 0, 0},
		{"nomatch-10000", NFTSpec{Stateless: true, NoMatch: 10000}, 2, 10006, 0, 0},
		{"dscp", NFTSpec{Mark: true, DSCP: 10}, 3, 1, 0, 0},
		// 5 000 addresses a set: three batches of batchElements each
		{"blocklist-10000", NFTSpec{Stateless: true, Blocklist: 10000}, 2, 8, 2, 6},
		{"blocklist-odd", NFTSpec{Stateless: true, Blocklist: 3}, 2, 8, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeKernel{counts: map[uint16]int{}}
			n := NewNFT(tc.spec)
			n.dial = f.dial
			if err := n.Apply(context.Background(), &topo.Host{}); err != nil {
				t.Fatal(err)
			}
			if got := f.counts[unix.NFT_MSG_NEWTABLE]; got != 1 {
				t.Errorf("tables: got %d, want 1", got)
			}
			if got := f.counts[unix.NFT_MSG_NEWCHAIN]; got != tc.chains {
				t.Errorf("chains: got %d, want %d", got, tc.chains)
			}
			if got := f.counts[unix.NFT_MSG_NEWRULE]; got != tc.rules {
				t.Errorf("rules: got %d, want %d", got, tc.rules)
			}
			if got := f.counts[unix.NFT_MSG_NEWSET]; got != tc.sets {
				t.Errorf("sets: got %d, want %d", got, tc.sets)
			}
			if got := f.counts[unix.NFT_MSG_NEWSETELEM]; got != tc.batches {
				t.Errorf("element batches: got %d, want %d", got, tc.batches)
			}
			if f.maxElems >= 1<<16 {
				t.Errorf("an element batch of %d bytes overflows its attribute's length", f.maxElems)
			}
			// an element is a nested key of 4 bytes: 16 bytes with
			// its attribute headers
			if tc.spec.Blocklist > 0 && (f.elems < 16*tc.spec.Blocklist || f.elems > 16*tc.spec.Blocklist+64*tc.batches) {
				t.Errorf("element bytes: got %d for %d addresses", f.elems, tc.spec.Blocklist)
			}
			if err := n.Remove(); err != nil {
				t.Fatal(err)
			}
			if got := f.counts[unix.NFT_MSG_DELTABLE]; got != 1 {
				t.Errorf("table deletions: got %d, want 1", got)
			}
			if err := n.Remove(); err != nil {
				t.Errorf("second Remove: %v", err)
			}
		})
	}
}

func TestNFTBadDSCP(t *testing.T) {
	n := NewNFT(NFTSpec{Mark: true, DSCP: 64})
	n.dial = (&fakeKernel{counts: map[uint16]int{}}).dial
	if err := n.Apply(context.Background(), &topo.Host{}); err == nil {
		t.Fatal("DSCP 64 accepted")
	}
}

func TestDSCPExpr(t *testing.T) {
	// ip dscp set 10 keeps version/IHL and ECN: 0x45 0x03 -> 0x45 0x2b.
	ex := dscpSet(10)
	if len(ex) != 3 {
		t.Fatalf("got %d expressions, want 3", len(ex))
	}
	bw, ok := ex[1].(*expr.Bitwise)
	if !ok {
		t.Fatalf("second expression is %T, want *expr.Bitwise", ex[1])
	}
	in := [2]byte{0x45, 0xff}
	mask, xor := bw.Mask, bw.Xor
	out := [2]byte{in[0]&mask[0] ^ xor[0], in[1]&mask[1] ^ xor[1]}
	if out != [2]byte{0x45, 0x2b} {
		t.Errorf("got % x, want 45 2b", out)
	}
}

func TestIPFRuleText(t *testing.T) {
	if got := strings.Count(IPFStateless(), "\n"); got != 6 {
		t.Errorf("stateless set has %d rules, want 6", got)
	}
	if !strings.Contains(IPFStateless(), "pass out proto icmp from any to any\n") {
		t.Errorf("stateless set lacks the outbound icmp rule:\n%s", IPFStateless())
	}
	if got := strings.Count(IPFStateful(), " keep state\n"); got != 6 {
		t.Errorf("stateful set has %d keep-state rules, want 6", got)
	}
	nm := IPFNoMatch(1000)
	if got := strings.Count(nm, "block in from 198."); got != 500 {
		t.Errorf("no-match set has %d inbound rules, want 500", got)
	}
	if got := strings.Count(IPFNoMatch(7), "block out from any to 198."); got != 3 {
		t.Errorf("7-rule no-match set has %d outbound rules, want 3", got)
	}
	if !strings.HasSuffix(nm, IPFStateless()) {
		t.Error("no-match set does not end with the stateless set")
	}
	// Addresses are distinct, so no rule is a duplicate of another; the
	// first 131 072 in 198.18.0.0/15, the rest of a blocklist's in
	// 240.0.0.0/4.
	seen := make(map[[4]byte]bool, Blocklist)
	for i := 0; i < Blocklist; i++ {
		a := noMatchAddr(i)
		in := a[0] == 198 && (a[1] == 18 || a[1] == 19)
		if i >= 1<<17 {
			in = a[0]&0xf0 == 240
		}
		if seen[a] || !in {
			t.Fatalf("address %d = %v repeated or outside its range", i, a)
		}
		seen[a] = true
	}
	if a, b := noMatchAddr(maxNoMatch-1), noMatchAddr(1<<17); a != [4]byte{255, 255, 255, 255} || b != [4]byte{240, 0, 0, 0} {
		t.Errorf("range ends: got %v and %v", a, b)
	}
	if !strings.Contains(QoSMarkTCP(10), "dscp 10") {
		t.Error("QoS configuration lacks dscp 10")
	}
}

func TestSelect(t *testing.T) {
	r := Builtin(Datapaths{})
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"nft-stateless", "none,nft-stateless"},
		{"nft-stateless,none", "none,nft-stateless"},
		{"nft-nomatch-*", "none,nft-nomatch-100,nft-nomatch-1000,nft-nomatch-10000"},
		{"none,nftables", "none,nft-attach,nft-stateless,nft-stateful,nft-nomatch-100,nft-nomatch-1000,nft-nomatch-10000,nft-dscp," +
			"nft-dscp-any,nft-dscp-nomatch,nft-masq,nft-dnat"},
		{"reference", "none,tcx-floor,tcx-floor-gw"},
		// the million-rule blocklists run only when named
		{"sluice-nomatch-*", "none,sluice-nomatch-100,sluice-nomatch-1000,sluice-nomatch-10000"},
		{"sluice-nomatch-1000000,nft-nomatch-set-1000000", "none,sluice-nomatch-1000000,nft-nomatch-set-1000000"},
	} {
		cs, err := r.Select(tc.in)
		if err != nil {
			t.Fatalf("Select(%q): %v", tc.in, err)
		}
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("Select(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "bogus", "zz*", "ipf=/nonexistent/file", "pf=x"} {
		if _, err := r.Select(bad); err == nil {
			t.Errorf("Select(%q) succeeded", bad)
		}
	}
	for _, sel := range []string{"all", "sluice", "nftables"} {
		cs, err := r.Select(sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.OptIn {
				t.Errorf("Select(%q) includes opt-in %s", sel, c.Name)
			}
		}
	}
}

// TestBlocklistConfig: the opt-in million-rule configuration loads the
// whole blocklist (its Rules only summarise it), whose rules all parse:
// a million distinct addresses, half in, half out, then the stateless
// set. Nothing is loaded into a kernel (that is the bench's). About 3 s.
func TestBlocklistConfig(t *testing.T) {
	var loaded string
	r := Builtin(Datapaths{IPF: func(rules string) (Applier, error) {
		loaded = rules
		return &recApplier{text: rules}, nil
	}})
	c, ok := r.Get("sluice-nomatch-1000000")
	if !ok || !c.OptIn || c.Suite != SuiteIPF {
		t.Fatalf("sluice-nomatch-1000000: %+v", c)
	}
	if len(c.Rules) > 1000 || !strings.Contains(c.Rules, "500000 such rules") {
		t.Errorf("Rules is not a summary:\n%s", c.Rules)
	}
	if _, err := c.New(); err != nil {
		t.Fatal(err)
	}
	if loaded != IPFNoMatch(Blocklist) {
		t.Fatal("the loader did not get IPFNoMatch(Blocklist)")
	}
	if got := strings.Count(loaded, "\n"); got != Blocklist+6 {
		t.Errorf("%d lines, want %d", got, Blocklist+6)
	}
	rules, err := ipf.Parse("blocklist", []byte(loaded), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != Blocklist+6 {
		t.Fatalf("%d rules, want %d", len(rules), Blocklist+6)
	}
	addrs := [2]map[[4]byte]bool{make(map[[4]byte]bool, Blocklist/2), make(map[[4]byte]bool, Blocklist/2)}
	for _, r := range rules[:Blocklist] {
		e, d := &r.From, 0
		if r.Dir == ipf.DirOut {
			e, d = &r.To, 1
		}
		if r.Action != ipf.ActionBlock || e.Addr.Kind != ipf.AddrHost {
			t.Fatalf("%s: not a blocklist rule", ipf.FormatRule(r))
		}
		a := e.Addr.IP.As4()
		if addrs[d][a] {
			t.Fatalf("%s: address repeated", ipf.FormatRule(r))
		}
		addrs[d][a] = true
	}
	if len(addrs[0]) != Blocklist/2 || len(addrs[1]) != Blocklist/2 {
		t.Errorf("%d in, %d out, want %d each", len(addrs[0]), len(addrs[1]), Blocklist/2)
	}
	// the summary parses as well (the report records it)
	if _, err := ipf.Parse("summary", []byte(c.Rules), ipf.ParseOptions{}); err != nil {
		t.Error(err)
	}
	n, ok := r.Get("nft-nomatch-set-1000000")
	if !ok || !n.OptIn || !strings.Contains(n.Rules, "ip saddr @blk_in drop") || !strings.Contains(n.Rules, "500000 addresses") {
		t.Errorf("nft-nomatch-set-1000000: %+v", n)
	}
}

// TestEstStageConfigs: the live bisect's configurations (est13) run only
// when named, load HP's stateful set through IPFStage with their own cut,
// and are unavailable without that loader (IPF alone does not make them
// available: it would load the whole program under a cut's name).
func TestEstStageConfigs(t *testing.T) {
	type call struct {
		rules string
		stage uint32
	}
	var got []call
	r := Builtin(Datapaths{IPF: func(string) (Applier, error) { return nil, nil },
		IPFStage: func(rules string, stage uint32) (Applier, error) {
			got = append(got, call{rules, stage})
			return nil, nil
		}})
	for _, sel := range []string{"sluice-stateful*", "sluice", "all"} {
		cs, err := r.Select(sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if strings.HasPrefix(c.Name, "sluice-stateful-at-") {
				t.Errorf("Select(%q) includes %s", sel, c.Name)
			}
		}
	}
	for i, n := range EstStages {
		name := fmt.Sprintf("sluice-stateful-at-%d", n)
		c, ok := r.Get(name)
		if !ok || !c.OptIn || c.Suite != SuiteIPF || !c.Available() {
			t.Fatalf("%s: %+v", name, c)
		}
		if _, err := c.New(); err != nil {
			t.Fatal(err)
		}
		if len(got) != i+1 || got[i] != (call{IPFStateful(), n}) {
			t.Fatalf("%s: loader calls %v", name, got)
		}
	}
	r = Builtin(Datapaths{IPF: func(string) (Applier, error) { return nil, nil }})
	c, _ := r.Get(fmt.Sprintf("sluice-stateful-at-%d", EstStages[0]))
	if _, err := c.New(); !errors.Is(err, ErrUnavailable) || c.Available() {
		t.Errorf("without IPFStage: %v, available %v", err, c.Available())
	}
}

// TestRunCutConfigs: the blocklist probe's live bisect (ten14) runs only
// when named, loads the 10 000-rule set through IPFRunCut with its own
// cut, and is unavailable without that loader.
func TestRunCutConfigs(t *testing.T) {
	type call struct {
		rules string
		cut   uint32
	}
	var got []call
	r := Builtin(Datapaths{IPF: func(string) (Applier, error) { return nil, nil },
		IPFRunCut: func(rules string, cut uint32) (Applier, error) {
			got = append(got, call{rules, cut})
			return nil, nil
		}})
	for _, sel := range []string{"sluice-nomatch*", "sluice", "all"} {
		cs, err := r.Select(sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if strings.HasPrefix(c.Name, "sluice-nomatch-10000-cut-") {
				t.Errorf("Select(%q) includes %s", sel, c.Name)
			}
		}
	}
	for i, n := range RunCuts {
		name := fmt.Sprintf("sluice-nomatch-10000-cut-%d", n)
		c, ok := r.Get(name)
		if !ok || !c.OptIn || c.Suite != SuiteIPF || !c.Available() {
			t.Fatalf("%s: %+v", name, c)
		}
		if _, err := c.New(); err != nil {
			t.Fatal(err)
		}
		if len(got) != i+1 || got[i] != (call{IPFNoMatch(10000), n}) {
			t.Fatalf("%s: loader calls %d", name, len(got))
		}
	}
	r = Builtin(Datapaths{IPF: func(string) (Applier, error) { return nil, nil }})
	c, _ := r.Get(fmt.Sprintf("sluice-nomatch-10000-cut-%d", RunCuts[0]))
	if _, err := c.New(); !errors.Is(err, ErrUnavailable) || c.Available() {
		t.Errorf("without IPFRunCut: %v, available %v", err, c.Available())
	}
}

func TestSluiceUnavailable(t *testing.T) {
	r := Builtin(Datapaths{})
	for _, n := range r.Names() {
		c, _ := r.Get(n)
		if c.Family != Sluice {
			continue
		}
		if _, err := c.New(); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: got %v, want ErrUnavailable", n, err)
		}
		if c.Available() {
			t.Errorf("%s: Available without a datapath", n)
		}
	}
	// Plugging one datapath makes exactly its configurations available.
	r = Builtin(Datapaths{QoS: func(string) (Applier, error) { return nil, nil }})
	for _, n := range r.Names() {
		c, _ := r.Get(n)
		if want := c.Family == NFTables || c.Family == Baseline || c.Family == Sluice && c.Suite == SuiteQoS; c.Available() != want {
			t.Errorf("%s: Available %v with only the QoS datapath, want %v", n, c.Available(), want)
		}
	}
}

type recApplier struct {
	text    string
	applied bool
}

func (a *recApplier) Apply(context.Context, *topo.Host) error { a.applied = true; return nil }
func (a *recApplier) Remove() error                           { a.applied = false; return nil }

func TestUserFilesAndLoaders(t *testing.T) {
	dir := t.TempDir()
	ipf := filepath.Join(dir, "my.conf")
	qos := filepath.Join(dir, "q.conf")
	if err := os.WriteFile(ipf, []byte("pass in all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(qos, []byte("adapter @LINK@ {\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []*recApplier
	r := Builtin(Datapaths{
		IPF: func(rules string) (Applier, error) {
			a := &recApplier{text: rules}
			got = append(got, a)
			return a, nil
		},
		QoS: func(conf string) (Applier, error) { a := &recApplier{text: conf}; got = append(got, a); return a, nil },
	})
	cs, err := r.Select("ipf=" + ipf + ",ipqos=" + qos)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 || cs[1].Name != "ipf:my.conf" || cs[2].Name != "ipqos:q.conf" {
		t.Fatalf("got %v", cs)
	}
	h := &topo.Host{Link: "veth7"}
	for _, c := range cs[1:] {
		a, err := c.New()
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Apply(context.Background(), h); err != nil {
			t.Fatal(err)
		}
		if err := a.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0].text != "pass in all\n" || got[1].text != "adapter veth7 {\n}\n" {
		t.Errorf("loaders got %+v", got)
	}
}

func TestSuites(t *testing.T) {
	r := Builtin(Datapaths{})
	for name, want := range map[string]string{"none": "", "nft-dscp": SuiteQoS, "sluice-qos": SuiteQoS, "nft-stateful": SuiteIPF, "sluice-nomatch-100": SuiteIPF} {
		c, ok := r.Get(name)
		if !ok || c.Suite != want {
			t.Errorf("%s: suite %q, want %q", name, c.Suite, want)
		}
	}
	c, _ := r.Get("nft-dscp")
	if !strings.Contains(c.Rules, "ip dscp set 10") {
		t.Errorf("nft-dscp does not mark:\n%s", c.Rules)
	}
}

// TestSubstQoS: @LINK@ and @SPEED@ are filled in for the host; on an
// unshaped link the speed line goes and the interface's speed applies.
func TestSubstQoS(t *testing.T) {
	conf := QoSMax(DSCPMark, 50)
	got := SubstQoS(conf, &topo.Host{Link: "veth9", Speed: 100_000_000})
	if !strings.Contains(got, "adapter veth9 {\n    speed 100000000\n") || strings.Contains(got, "@") {
		t.Errorf("shaped:\n%s", got)
	}
	got = SubstQoS(conf, &topo.Host{Link: "veth9"})
	if strings.Contains(got, "speed") || strings.Contains(got, "@") || !strings.Contains(got, "max 50%") {
		t.Errorf("unshaped:\n%s", got)
	}
	for _, c := range []string{QoSMarkAny(DSCPMark), QoSNoMatch(DSCPMark), QoSMax(DSCPMark, 50), NATMasq(), NATRdr()} {
		if !strings.Contains(c, "@LINK@") && !strings.Contains(c, "@OUT@") && !strings.Contains(c, "@IN@") {
			t.Errorf("configuration names no interface:\n%s", c)
		}
	}
}

// TestBuiltinRuleTexts: every Sluice configuration's rule text parses
// with the real parsers once filled in for a host, so none is skipped
// for a typo at run time.
func TestBuiltinRuleTexts(t *testing.T) {
	r := Builtin(Datapaths{})
	h := &topo.Host{Link: "veth0", Inside: "veth1", Speed: 1_000_000_000}
	for _, n := range r.Names() {
		c, _ := r.Get(n)
		if c.Family != Sluice {
			continue
		}
		var err error
		switch c.Suite {
		case SuiteQoS:
			_, err = ipqos.Parse(n, []byte(SubstQoS(c.Rules, h)))
		case SuiteNAT:
			text := strings.NewReplacer("@IN@", h.Inside, "@OUT@", h.Link).Replace(c.Rules)
			var msgs strings.Builder
			if _, perr := ipnat.Parse(n, text, &msgs); perr != nil {
				err = fmt.Errorf("%v: %s", perr, msgs.String())
			}
			if c.Filter != "" && err == nil {
				_, err = ipf.Parse(n, []byte(c.Filter), ipf.ParseOptions{})
			}
		case SuiteIPF:
			_, err = ipf.Parse(n, []byte(c.Rules), ipf.ParseOptions{})
		}
		if err != nil {
			t.Errorf("%s: %v\n%s", n, err, c.Rules)
		}
	}
}

// TestAttachStageConfigs: at14's live bisect of the attached program and
// the trivial program's variants run only when named, load what they say
// (no rules, through IPFStage with their own cut; FloorKind with their
// kind), and are unavailable without their loader.
func TestAttachStageConfigs(t *testing.T) {
	type call struct {
		rules string
		stage uint32
	}
	var got []call
	var kinds []string
	r := Builtin(Datapaths{IPF: func(string) (Applier, error) { return nil, nil },
		Floor: func() (Applier, error) { return nil, nil },
		IPFStage: func(rules string, stage uint32) (Applier, error) {
			got = append(got, call{rules, stage})
			return nil, nil
		},
		FloorKind: func(kind string) (Applier, error) {
			kinds = append(kinds, kind)
			return nil, nil
		}})
	for _, sel := range []string{"sluice-attach*", "tcx-floor*", "sluice", "reference", "all"} {
		cs, err := r.Select(sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if strings.HasPrefix(c.Name, "sluice-attach-at-") || strings.HasPrefix(c.Name, "tcx-floor-") && c.Name != "tcx-floor-gw" {
				t.Errorf("Select(%q) includes %s", sel, c.Name)
			}
		}
	}
	for i, n := range AttachStages {
		name := fmt.Sprintf("sluice-attach-at-%d", n)
		c, ok := r.Get(name)
		if !ok || !c.OptIn || c.Suite != SuiteIPF || !c.Available() {
			t.Fatalf("%s: %+v", name, c)
		}
		if _, err := c.New(); err != nil {
			t.Fatal(err)
		}
		if len(got) != i+1 || got[i] != (call{"", n}) {
			t.Fatalf("%s: loader calls %v", name, got)
		}
	}
	for i, k := range FloorKinds {
		c, ok := r.Get("tcx-floor-" + k)
		if !ok || !c.OptIn || c.Suite != SuiteIPF || !c.Available() {
			t.Fatalf("tcx-floor-%s: %+v", k, c)
		}
		if _, err := c.New(); err != nil {
			t.Fatal(err)
		}
		if len(kinds) != i+1 || kinds[i] != k {
			t.Fatalf("tcx-floor-%s: loader calls %v", k, kinds)
		}
	}
	r = Builtin(Datapaths{IPF: func(string) (Applier, error) { return nil, nil }, Floor: func() (Applier, error) { return nil, nil }})
	for _, name := range []string{fmt.Sprintf("sluice-attach-at-%d", AttachStages[0]), "tcx-floor-" + FloorKinds[0]} {
		c, _ := r.Get(name)
		if _, err := c.New(); !errors.Is(err, ErrUnavailable) || c.Available() {
			t.Errorf("%s without its loader: %v, available %v", name, err, c.Available())
		}
	}
}

package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sluice/internal/conformance"
	"sluice/internal/engine"
	"sluice/internal/pool"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ippool"
	"sluice/internal/ruleset"
	"sluice/internal/state"
	"sluice/internal/testutil"
)

// TestDifferentialKit runs the packets of the kit's f and ipv6 tests
// through the Go engine and through the BPF program, one rule line at a
// time as f_test does, and compares pass/block. Any disagreement fails.
func TestDifferentialKit(t *testing.T) {
	h := newHarness(t)
	kit, err := conformance.KitDir()
	if err != nil {
		testutil.SkipOrFail(t, "ipf-conformance kit: %v", err)
	}
	man, err := os.ReadFile(filepath.Join(kit, "manifest.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var compared, agreed, unsupported, inline int
	var unexpected []string
	hits0 := dmHits(t, h.d)
	for _, row := range strings.Split(string(man), "\n")[1:] {
		f := strings.Split(row, "\t")
		if len(f) < 7 || (f[1] != "f" && f[1] != "ipv6") || (f[2] != "f_test" && f[2] != "ipv6_test") {
			continue
		}
		name, fam, format := f[0], f[1], f[4]
		rulesText, err := os.ReadFile(filepath.Join(kit, fam, "regress", name))
		if err != nil {
			continue
		}
		input, err := os.ReadFile(filepath.Join(kit, fam, "input", name))
		if err != nil {
			continue
		}
		lines := []string{string(rulesText)}
		if f[2] == "f_test" {
			lines = strings.Split(strings.TrimRight(string(rulesText), "\n"), "\n")
		}
		for ln, ruleLine := range lines {
			if strings.TrimSpace(ruleLine) == "" {
				continue
			}
			rules, err := ipf.Parse("r", []byte(ruleLine+"\n"), ipf.ParseOptions{})
			if err != nil {
				continue
			}
			// inline pool=(...) tables become anonymous tables, as
			// ipftest and the kernel path make them
			rules, anon, err := ruleset.InlineTables(rules)
			if err != nil {
				continue
			}
			set, err := ruleset.Compile(rules)
			if err != nil {
				continue
			}
			if _, err := CompileSet(set, CompileOptions{}.withAnon(anon)); errors.Is(err, ErrUnsupported) {
				unsupported++
				continue
			}
			var pools *pool.Set
			if len(anon) > 0 {
				inline++
				if pools, err = pool.NewSet(&ippool.File{Tables: anon}, func() uint32 { return 1 }); err != nil {
					t.Fatal(err)
				}
			}
			eng := engine.New(engine.Config{Clock: &state.ManualClock{}, Pools: pools})
			eng.Sets().Store(0, set)
			if _, err := h.d.FlushStates(nil); err != nil {
				t.Fatal(err)
			}
			if _, err := h.d.FlushFrags(); err != nil {
				t.Fatal(err)
			}
			for n, pk := range readKitPackets(t, format, input) {
				ifn := pk.ifn
				frame := ethFrame(pk.data)
				var p engine.Packet
				p.Load(append([]byte(nil), pk.data...), ifn, pk.out, pk.link)
				want := eng.Check(&p).Verdict
				// the program sees every packet on ifindex 1: resolve the
				// packet's interface to 1 and every other name to none
				im, err := CompileSet(set, CompileOptions{Ifindex: func(s string) (int, bool) { return 1, s == ifn }}.withAnon(anon))
				if err != nil {
					t.Fatal(err)
				}
				if err := h.d.LoadRules(im, Active); err != nil {
					t.Fatal(err)
				}
				got, _, err := h.d.Run(pk.out, frame)
				if err != nil {
					t.Fatal(err)
				}
				compared++
				if (got == VerdictPass) == want.Passed() {
					agreed++
					continue
				}
				id := fmt.Sprintf("%s:%d:%d", name, ln+1, n+1)
				msg := fmt.Sprintf("%s rule %q packet %d (%s): engine %s, bpf %s", id, ruleLine, n+1, ifn, want, got)
				unexpected = append(unexpected, msg)
			}
			eng.Close()
		}
	}
	t.Logf("differential: %d rule lines with inline tables", inline)
	t.Logf("differential: %d packets compared, %d agree, %d rule lines unsupported by the kernel datapath",
		compared, agreed, unsupported)
	sort.Strings(unexpected)
	for _, m := range unexpected {
		t.Errorf("disagreement: %s", m)
	}
	if compared == 0 {
		t.Error("no packets compared")
	}
	// the kit's state cases reach st_dm's slots (est11)
	n := dmHits(t, h.d) - hits0
	t.Logf("differential: %d packets decided through st_dm's slots", n)
	if n == 0 {
		t.Error("no packet was decided through a slot of st_dm")
	}
}

// ethFrame puts an Ethernet header in front of an IP packet.
func ethFrame(ip []byte) []byte {
	f := make([]byte, 14+len(ip))
	copy(f[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{2, 0, 0, 0, 0, 1})
	f[12], f[13] = 0x08, 0x00
	if len(ip) > 0 && ip[0]>>4 == 6 {
		f[12], f[13] = 0x86, 0xdd
	}
	copy(f[14:], ip)
	return f
}

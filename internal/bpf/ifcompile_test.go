package bpf

import (
	"fmt"
	"strings"
	"testing"

	"sluice/internal/rules/ipf"
)

// BenchmarkCompileNamedInterface compiles a 20 000-rule blocklist whose
// rules all name an interface (`on lo`, a blocklist for one uplink):
// "host" resolves the names on the host, as ipf does; "given" with a
// lookup that costs nothing (the floor the host lookups add to).
func BenchmarkCompileNamedInterface(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&sb, "block in on lo from 198.18.%d.%d/32 to any\n", i>>8&255, i&255)
	}
	rules, err := ipf.Parse("bl.conf", []byte(sb.String()), ipf.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts CompileOptions
	}{
		{"host", CompileOptions{}},
		{"given", CompileOptions{Ifindex: func(string) (int, bool) { return 1, true }}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(rules, c.opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rules)), "ns/rule")
		})
	}
}

// TestMemo checks the interface lookups CompileSet keeps: one lookup per
// name, missing names too, each answered as the lookup did.
func TestMemo(t *testing.T) {
	calls := map[string]int{}
	f := memo(func(name string) (int, bool) {
		calls[name]++
		if name == "eth0" {
			return 7, true
		}
		return 0, false
	})
	for _, c := range []struct {
		name string
		idx  int
		ok   bool
	}{{"eth0", 7, true}, {"nope", 0, false}, {"eth0", 7, true}, {"nope", 0, false}, {"eth0", 7, true}} {
		if idx, ok := f(c.name); idx != c.idx || ok != c.ok {
			t.Errorf("%s: got (%d, %v), want (%d, %v)", c.name, idx, ok, c.idx, c.ok)
		}
	}
	if calls["eth0"] != 1 || calls["nope"] != 1 {
		t.Errorf("lookups %v, want one per name", calls)
	}
}

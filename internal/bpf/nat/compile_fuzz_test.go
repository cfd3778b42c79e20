//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sluice/internal/rules/ipnat"
	"sluice/internal/rules/netfmt"
)

// FuzzCompile feeds ipnat.conf text through the parser and the compiler
// (what ipnat -f does before anything reaches the kernel): no input may
// panic, a refusal wraps ErrUnsupported or ErrEngine or carries a position,
// and a compiled image holds every rule once, each direction's order is a
// permutation of the rules that apply to it, and the stored texts parse
// back to the same rules (ipnat re-reads them to add or remove rules).
//
//	go test -fuzz FuzzCompile ./internal/bpf/nat
func FuzzCompile(f *testing.F) {
	for _, dir := range []string{"../../nat/testdata/kit/n/regress", "../../cmd/ipnat/testdata/kit/in/regress"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
				f.Add(string(b))
			}
		}
	}
	f.Add("map eth0 10.0.0.0/8 -> 0/32 portmap tcp/udp auto\nrdr eth0 0/0 port 80 -> 10.0.0.5 port 8080 tcp\n")
	f.Add("map eth0 inet6 fd00::/64 -> 2001:db8::1/128 proxy port ftp ftp/tcp\n")
	// names in the rules would go to the resolver: not while fuzzing
	netfmt.LookupHost = func(string) ([]netip.Addr, error) { return nil, errors.New("no resolver in fuzzing") }
	f.Fuzz(func(t *testing.T, text string) {
		file, err := ipnat.Parse("fuzz.nat", text, io.Discard)
		if err != nil || file == nil {
			return
		}
		im, err := Compile(file.Rules, CompileOptions{File: "fuzz.nat", Ifindex: func(name string) (int, bool) {
			return len(name) + 1, len(name)%3 != 0
		}})
		if err != nil {
			if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrEngine) && !strings.Contains(err.Error(), "fuzz.nat") {
				t.Fatalf("refusal without a position or a reason: %v", err)
			}
			return
		}
		if im.Len() != len(file.Rules) || len(im.texts) != len(file.Rules) {
			t.Fatalf("%d rules in, %d compiled, %d texts", len(file.Rules), im.Len(), len(im.texts))
		}
		for dir := range 2 {
			idx := append([]uint16(nil), im.order[dir]...)
			sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
			for i := 1; i < len(idx); i++ {
				if idx[i] == idx[i-1] {
					t.Fatalf("rule %d twice in the order of direction %d", idx[i], dir)
				}
			}
			if len(idx) > 0 && int(idx[len(idx)-1]) >= im.Len() {
				t.Fatalf("order names rule %d of %d", idx[len(idx)-1], im.Len())
			}
			if len(im.bucket[dir]) != len(im.order[dir]) {
				t.Fatalf("%d buckets for %d rules", len(im.bucket[dir]), len(im.order[dir]))
			}
			for _, b := range im.bucket[dir] {
				if b >= 127 {
					t.Fatalf("bucket %d of a 127-bucket table", b)
				}
			}
			for f, ms := range im.masks[dir] {
				for i, m := range ms {
					if m > 32+96*uint8(f) || i > 0 && m >= ms[i-1] {
						t.Fatalf("family %d masks %v: not distinct prefix lengths, longest first", f, ms)
					}
				}
			}
		}
		back, err := ipnat.ParsePrinted("(loaded)", strings.Join(im.texts, "\n")+"\n", io.Discard)
		if err != nil {
			t.Fatalf("the stored texts do not parse back: %v\n%s", err, strings.Join(im.texts, "\n"))
		}
		if len(back.Rules) != len(file.Rules) {
			t.Fatalf("the stored texts give %d rules, want %d", len(back.Rules), len(file.Rules))
		}
		for i, r := range back.Rules {
			if r.String() != file.Rules[i].String() {
				t.Fatalf("rule %d: stored %q, loaded %q", i, r.String(), file.Rules[i].String())
			}
		}
	})
}

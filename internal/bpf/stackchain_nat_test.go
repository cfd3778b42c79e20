package bpf

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// maxCallFrames is the kernel's MAX_CALL_FRAMES: a chain of more
// functions (bpf-to-bpf calls, global functions and bpf_loop callbacks
// alike) is refused ("the call stack of 9 frames is too deep").
const maxCallFrames = 8

// natObjectStacks reads the NAT object as built (internal/bpf/nat's
// nat_bpfel.o): each program's functions, merged, and the programs.
func natObjectStacks(t *testing.T) (map[string]*stackFunc, []string) {
	t.Helper()
	spec, err := ebpf.LoadCollectionSpec(filepath.Join("nat", "nat_bpfel.o"))
	if err != nil {
		t.Fatal(err)
	}
	return specStacks(spec)
}

// longestCall is the chain with the most functions from root down the
// calls (bpf_loop callbacks counted as calls, as the kernel does).
func longestCall(fns map[string]*stackFunc, root string, seen []string) []string {
	f := fns[root]
	if f == nil || slices.Contains(seen, root) {
		return nil
	}
	var best []string
	for _, c := range f.calls {
		if ch := longestCall(fns, c, append(seen, root)); len(ch) > len(best) {
			best = ch
		}
	}
	return append([]string{root}, best...)
}

// TestStackChainNAT: the NAT object's chains, as TestStackChain the
// filter's: none over 512 bytes with frames rounded either way (16: the JIT
// from 6.10 on, this host's kernel, where session 20's first try at a
// function of its own for the clash check made 544 and failed the load;
// 32: kernels before 6.10, where main's object before natv20 was at 608),
// and none longer than eight functions (session 19's first try made nine).
func TestStackChainNAT(t *testing.T) {
	fns, roots := natObjectStacks(t)
	if fns["nat_slow_ingress"] == nil {
		t.Fatalf("no slow programs in the NAT object: %v", roots)
	}
	checkChains(t, fns, roots, false)
	for _, r := range roots {
		ch := longestCall(fns, r, nil)
		t.Logf("%s: %d frames: %s", r, len(ch), strings.Join(ch, " > "))
		if len(ch) > maxCallFrames {
			t.Errorf("%s: a chain of %d functions, more than the kernel's %d: %s", r, len(ch), maxCallFrames, strings.Join(ch, " > "))
		}
	}
}

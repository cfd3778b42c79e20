package bpf

// The verifier's combined stack, checked without a kernel: each BPF
// function's frame in filter_bpfel.o and the deepest chain of frames from
// every program's entry, as the kernel's check_max_stack_depth adds them
// (verifier.c): a frame rounded up (round_up_stack_depth: to 32 bytes, at
// least 32, on a kernel before 6.10 or without the JIT; to 16 with it),
// a bpf-to-bpf call or a function handed to a helper that runs it at once
// (bpf_loop: the verifier counts it as a call) a frame on top of its
// caller's, a callback run later (bpf_timer) a chain of its own. More than
// 512 bytes (MAX_BPF_STACK) on a chain and the kernel refuses the program
// ("combined stack size of N calls is M. Too large"): before this test
// only the package's load tests said so, and only where the kernel runs.

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// maxBPFStack is the kernel's MAX_BPF_STACK.
const maxBPFStack = 512

// stackMarginWant is the room every chain keeps below maxBPFStack, under
// both roundings (TestStackChainMargin). Session 16 made it (filter()'s
// frame 160 → 128 bytes): before, the established chain (sluice_ingress >
// est_path) and the scan's (sluice_ingress > sl_scan > sl_hot_run >
// sl_state_create > sl_src_undo) were exactly 512 and the next byte in
// any of their frames failed every load on a kernel before 6.10. A change
// that takes this room must say so here, lowering it, so that its cost
// is seen when it is made and not found by the next one.
const stackMarginWant = 32

// Helpers that take a callback: those that run it later start a chain of
// their own (the kernel's is_async_callback); bpf_loop and the other
// synchronous ones run it on top of the caller's frames.
const helperTimerSetCallback = 170 // BPF_FUNC_timer_set_callback

// stackFunc is one BPF function: the stack bytes it reaches below r10 and
// the functions whose frames go on top of its own.
type stackFunc struct {
	depth int
	calls []string // bpf-to-bpf calls and synchronous callbacks
	async []string // callbacks run later: roots of their own
	// loops counts the callbacks handed to bpf_loop, which the kernel
	// may inline after the check, adding 24 bytes a function to the
	// depth it reports (optimize_bpf_loop) but not to the checked one
	loops int
}

// roundFrame32 is the verifier's rounding of a frame before 6.10 and
// without the JIT: up to 32 bytes, at least 32.
func roundFrame32(d int) int { return (max(d, 1) + 31) / 32 * 32 }

// roundFrame16 is the rounding with the JIT from 6.10 on.
func roundFrame16(d int) int { return (d + 15) / 16 * 16 }

// stackFuncs splits a program's flattened instructions (its entry first,
// then the functions it reaches) into functions by their symbols, with
// each one's frame: the deepest byte an access through r10, or through a
// register holding r10 plus a constant, reaches (an upper bound of what
// the verifier counts, which sees only the paths it walks).
func stackFuncs(insns asm.Instructions) (order []string, fns map[string]*stackFunc) {
	fns = map[string]*stackFunc{}
	var f *stackFunc
	fp := map[asm.Register]int64{} // registers holding r10 + offset
	reach := func(off int64) {
		if f != nil && -off > int64(f.depth) {
			f.depth = int(-off)
		}
	}
	for i := range insns {
		ins := &insns[i]
		if sym := ins.Symbol(); sym != "" {
			f = &stackFunc{}
			fns[sym] = f
			order = append(order, sym)
			clear(fp)
		}
		if f == nil {
			continue
		}
		op := ins.OpCode
		switch {
		case ins.IsFunctionCall():
			f.calls = append(f.calls, ins.Reference())
			for r := asm.R0; r <= asm.R5; r++ {
				delete(fp, r)
			}
			continue
		case ins.IsLoadOfFunctionPointer():
			// sync or async by the helper it is handed to: the next
			// helper call of the function
			async := false
			for j := i + 1; j < len(insns) && insns[j].Symbol() == ""; j++ {
				if insns[j].IsBuiltinCall() {
					async = insns[j].Constant == helperTimerSetCallback
					if insns[j].Constant == int64(asm.FnLoop) {
						f.loops = 1
					}
					break
				}
			}
			if async {
				f.async = append(f.async, ins.Reference())
			} else {
				f.calls = append(f.calls, ins.Reference())
			}
			delete(fp, ins.Dst)
			continue
		case op.JumpOp() == asm.Call:
			for r := asm.R0; r <= asm.R5; r++ {
				delete(fp, r)
			}
			continue
		}
		switch op.Class() {
		case asm.LdXClass:
			if base, ok := fpOf(fp, ins.Src); ok {
				reach(base + int64(ins.Offset))
			}
			delete(fp, ins.Dst)
		case asm.StClass, asm.StXClass:
			if base, ok := fpOf(fp, ins.Dst); ok {
				reach(base + int64(ins.Offset))
			}
			if op.Mode() == asm.AtomicMode {
				// a fetching atomic writes its source register
				delete(fp, ins.Src)
				delete(fp, asm.R0)
			}
		case asm.ALU64Class:
			switch {
			case op.ALUOp() == asm.Mov && op.Source() == asm.RegSource:
				if base, ok := fpOf(fp, ins.Src); ok && ins.Offset == 0 {
					fp[ins.Dst] = base
				} else {
					delete(fp, ins.Dst)
				}
			case (op.ALUOp() == asm.Add || op.ALUOp() == asm.Sub) && op.Source() == asm.ImmSource:
				if base, ok := fp[ins.Dst]; ok {
					if op.ALUOp() == asm.Add {
						base += ins.Constant
					} else {
						base -= ins.Constant
					}
					fp[ins.Dst] = base
					// a pointer into the stack is handed on (a helper's
					// argument) or used: counted as reached
					reach(base)
				}
			default:
				delete(fp, ins.Dst)
			}
		case asm.ALUClass, asm.LdClass:
			delete(fp, ins.Dst)
		}
	}
	for _, f := range fns {
		// the verifier grows a frame by 8-byte slots (grow_stack_state)
		f.depth = (f.depth + 7) / 8 * 8
	}
	return order, fns
}

// fpOf is the offset from r10 that register r holds, if it holds one.
func fpOf(fp map[asm.Register]int64, r asm.Register) (int64, bool) {
	if r == asm.RFP {
		return 0, true
	}
	off, ok := fp[r]
	return off, ok
}

// deepestChain is the largest sum of rounded frames from root down the
// calls, and the chain that makes it (each function with its frame).
func deepestChain(fns map[string]*stackFunc, root string, round func(int) int) (int, []string) {
	var walk func(name string, seen []string) (int, []string)
	walk = func(name string, seen []string) (int, []string) {
		f := fns[name]
		if f == nil || slices.Contains(seen, name) {
			return 0, nil // an extern, or recursion (which the verifier refuses)
		}
		best, chain := 0, []string(nil)
		for _, c := range f.calls {
			if d, ch := walk(c, append(seen, name)); d > best {
				best, chain = d, ch
			}
		}
		return round(f.depth) + best, append([]string{fmt.Sprintf("%s(%d)", name, f.depth)}, chain...)
	}
	return walk(root, nil)
}

// stackChains checks every root (program entries) and the callbacks run
// later that they reach: the deepest chain of each, the largest first,
// and an error naming every chain over limit.
type chainResult struct {
	root  string
	depth int
	chain []string
}

func stackChains(fns map[string]*stackFunc, roots []string, round func(int) int, limit int) ([]chainResult, error) {
	todo := slices.Clone(roots)
	seen := map[string]bool{}
	var out []chainResult
	for len(todo) > 0 {
		r := todo[0]
		todo = todo[1:]
		if seen[r] {
			continue
		}
		seen[r] = true
		d, ch := deepestChain(fns, r, round)
		out = append(out, chainResult{r, d, ch})
		// callbacks run later, anywhere below r
		var visit func(string, map[string]bool)
		visit = func(n string, v map[string]bool) {
			if v[n] || fns[n] == nil {
				return
			}
			v[n] = true
			todo = append(todo, fns[n].async...)
			for _, c := range fns[n].calls {
				visit(c, v)
			}
		}
		visit(r, map[string]bool{})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].depth > out[j].depth })
	var errs []string
	for _, c := range out {
		if c.depth > limit {
			errs = append(errs, fmt.Sprintf("%s: combined stack %d bytes > %d: %s", c.root, c.depth, limit, strings.Join(c.chain, " > ")))
		}
	}
	if errs != nil {
		return out, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// objectStacks reads the filter's object as built (filter_bpfel.o, the
// bytes the package embeds): each program's functions, merged.
func objectStacks(t *testing.T) (map[string]*stackFunc, []string) {
	t.Helper()
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(_FilterBytes))
	if err != nil {
		t.Fatal(err)
	}
	return specStacks(spec)
}

// specStacks is each program's functions of spec, merged, and the
// programs' names in order.
func specStacks(spec *ebpf.CollectionSpec) (map[string]*stackFunc, []string) {
	all := map[string]*stackFunc{}
	var roots []string
	for name, p := range spec.Programs {
		roots = append(roots, name)
		_, fns := stackFuncs(p.Instructions)
		for n, f := range fns {
			all[n] = f
		}
	}
	sort.Strings(roots)
	return all, roots
}

// TestStackChain: no chain of frames from a program's entry (nor from a
// callback run later) passes the verifier's 512 bytes, rounded either
// way; the margin is logged.
func TestStackChain(t *testing.T) {
	fns, roots := objectStacks(t)
	if len(roots) == 0 || fns["sluice_ingress"] == nil {
		t.Fatalf("no programs in the object: %v", roots)
	}
	checkChains(t, fns, roots, true)
}

// checkChains fails when a chain of frames from one of roots passes the
// verifier's 512 bytes with frames rounded either way (32: kernels before
// 6.10, or no JIT; 16: the JIT from 6.10 on) and logs each root's deepest
// chain and margin; callees adds the deepest chain through each function
// a root calls (the filter's established path and scan are two).
func checkChains(t *testing.T, fns map[string]*stackFunc, roots []string, callees bool) {
	t.Helper()
	for _, r := range []struct {
		name  string
		round func(int) int
	}{{"32 (before 6.10, or no JIT)", roundFrame32}, {"16 (JIT, 6.10 on)", roundFrame16}} {
		res, err := stackChains(fns, roots, r.round, maxBPFStack)
		if err != nil {
			t.Errorf("frames rounded to %s:\n%v", r.name, err)
		}
		for _, c := range res {
			t.Logf("frames rounded to %s: %s %d bytes, margin %d: %s", r.name, c.root, c.depth, maxBPFStack-c.depth, strings.Join(c.chain, " > "))
			if !callees {
				continue
			}
			for _, b := range calleeChains(fns, c.root, r.round) {
				t.Logf("    margin %3d (%d bytes): %s", maxBPFStack-b.depth, b.depth, strings.Join(b.chain, " > "))
			}
		}
	}
}

// calleeChains is the deepest chain from root through each function it
// calls (once each), the deepest first.
func calleeChains(fns map[string]*stackFunc, root string, round func(int) int) []chainResult {
	f := fns[root]
	if f == nil {
		return nil
	}
	var out []chainResult
	seen := map[string]bool{}
	for _, c := range f.calls {
		if seen[c] || fns[c] == nil {
			continue
		}
		seen[c] = true
		d, ch := deepestChain(fns, c, round)
		top := fmt.Sprintf("%s(%d)", root, f.depth)
		out = append(out, chainResult{root, round(f.depth) + d, append([]string{top}, ch...)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].depth > out[j].depth })
	return out
}

// TestStackChainMargin: every chain keeps stackMarginWant bytes of room
// under both roundings (the deepest chain of each root decides).
func TestStackChainMargin(t *testing.T) {
	fns, roots := objectStacks(t)
	for _, r := range []struct {
		name  string
		round func(int) int
	}{{"32", roundFrame32}, {"16", roundFrame16}} {
		res, err := stackChains(fns, roots, r.round, maxBPFStack-stackMarginWant)
		for _, c := range res {
			t.Logf("rounded to %s: %s margin %d (want >= %d)", r.name, c.root, maxBPFStack-c.depth, stackMarginWant)
		}
		if err != nil {
			t.Errorf("frames rounded to %s: less than %d bytes of room:\n%v", r.name, stackMarginWant, err)
		}
	}
}

// TestStackChainSynthetic: the check itself, on made-up call graphs and
// instructions: a chain over 512 bytes fails naming it, a callback handed
// to bpf_loop counts on top of its caller and a timer's does not, and
// frames are read from accesses through r10 and pointers made from it.
func TestStackChainSynthetic(t *testing.T) {
	for _, c := range []struct {
		name  string
		fns   map[string]*stackFunc
		want  int
		chain string // in the error ("" for none)
	}{
		{"within", map[string]*stackFunc{
			"prog": {depth: 100, calls: []string{"a"}}, "a": {depth: 200, calls: []string{"b"}}, "b": {depth: 160}},
			128 + 224 + 160, ""},
		{"over by a rounding", map[string]*stackFunc{
			"prog": {depth: 100, calls: []string{"a", "c"}}, "a": {depth: 200, calls: []string{"b"}}, "b": {depth: 161}, "c": {depth: 8}},
			128 + 224 + 192, "prog(100) > a(200) > b(161)"},
		{"a loop callback on top", map[string]*stackFunc{
			"prog": {depth: 256, calls: []string{"scan"}}, "scan": {depth: 64, calls: []string{"step"}}, "step": {depth: 256}},
			576, "prog(256) > scan(64) > step(256)"},
		{"a timer callback apart", map[string]*stackFunc{
			"prog": {depth: 256, calls: []string{"arm"}}, "arm": {depth: 64, async: []string{"sweep"}}, "sweep": {depth: 480}},
			480, ""},
		{"a timer callback over alone", map[string]*stackFunc{
			"prog": {depth: 32, async: []string{"sweep"}}, "sweep": {depth: 500, calls: []string{"x"}}, "x": {depth: 40}},
			576, "sweep(500) > x(40)"},
	} {
		res, err := stackChains(c.fns, []string{"prog"}, roundFrame32, maxBPFStack)
		if got := res[0].depth; got != c.want {
			t.Errorf("%s: deepest %d, want %d (%+v)", c.name, got, c.want, res)
		}
		switch {
		case c.chain == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.name, err)
		case c.chain != "" && (err == nil || !strings.Contains(err.Error(), c.chain)):
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.chain)
		}
	}

	// frames from instructions: a store at r10-8, a pointer r10-40 handed
	// to a helper, a load through r3 = r10-16 at offset -8 (24), a call
	// and a callback for bpf_loop and one for a timer
	insns := asm.Instructions{
		asm.StoreImm(asm.RFP, -8, 0, asm.DWord).WithSymbol("prog"),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -40),
		asm.FnMapLookupElem.Call(),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -16),
		asm.LoadMem(asm.R0, asm.R3, -8, asm.DWord),
		asm.Call.Label("sub"),
		asm.LoadImm(asm.R1, 1, asm.DWord),
		asm.Instruction{OpCode: asm.LoadImmOp(asm.DWord), Dst: asm.R2, Src: asm.PseudoFunc}.WithReference("step"),
		asm.FnLoop.Call(),
		asm.Instruction{OpCode: asm.LoadImmOp(asm.DWord), Dst: asm.R2, Src: asm.PseudoFunc}.WithReference("later"),
		asm.FnTimerSetCallback.Call(),
		asm.Return(),
		asm.StoreMem(asm.RFP, -300, asm.R1, asm.Word).WithSymbol("sub"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("step"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("later"),
		asm.Return(),
	}
	order, fns := stackFuncs(insns)
	if !slices.Equal(order, []string{"prog", "sub", "step", "later"}) {
		t.Fatalf("functions %v", order)
	}
	if p := fns["prog"]; p.depth != 40 || !slices.Equal(p.calls, []string{"sub", "step"}) || !slices.Equal(p.async, []string{"later"}) {
		t.Errorf("prog: %+v, want depth 40, calls sub and step, later apart", *p)
	}
	if s := fns["sub"]; s.depth != 304 {
		t.Errorf("sub: depth %d, want 304 (300 in 8-byte slots)", s.depth)
	}
}

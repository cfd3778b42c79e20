package bpf

import (
	"fmt"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Why the attached (idle) program costs a one-packet run (BenchmarkModes
// single) about twice the trivial program's (docs/datapath-cost.md, "The
// attached program's cost (at1)"). Both benchmarks run their programs in
// turn, round after round, and log each one's median ns of every round:
// the steps are 10 ns (the run's clock), and only figures of one period
// compare. Run with -test.v to see every line.

// interleaved runs each program runs packets a round, one packet a run,
// for rounds rounds, and logs the median of each round.
func interleaved(b *testing.B, names []string, progs []*ebpf.Program, frame []byte) {
	b.Helper()
	const rounds, runs = 5, 2000
	res := make([][]float64, len(progs))
	for r := 0; r < rounds; r++ {
		for i, p := range progs {
			ds := make([]time.Duration, 0, runs)
			for j := 0; j < runs; j++ {
				_, d, err := p.Benchmark(frame, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, d)
			}
			res[i] = append(res[i], median(ds))
		}
	}
	for i, name := range names {
		b.Logf("%-22s %v", name, res[i])
	}
}

func trivialProg(b *testing.B) *ebpf.Program {
	b.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		b.Skipf("loading a program: %v", err)
	}
	return p
}

// BenchmarkIdleBisect: the attached program cut at its STAGE points (1:
// entry; 21: past the k_mode tests; 22: clean_family; 23: the statistics'
// lookup; 29: the idle path whole with the pipeline behind it removed
// from the image; 0: the program as it runs) beside the trivial one.
func BenchmarkIdleBisect(b *testing.B) {
	trivial := trivialProg(b)
	defer trivial.Close()
	h := benchHarness(b)
	if err := h.d.LoadRules(&Image{}, Active); err != nil {
		b.Fatal(err)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		b.Fatal(err)
	}
	s := currentSpec(b, h.d)
	names, progs := []string{"trivial"}, []*ebpf.Program{trivial}
	for _, n := range []uint32{1, 21, 22, 23, 29, 0} {
		p, err := stageVariant(h.d, "sluice_ingress", n, s)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		info, err := p.Info()
		if err != nil {
			b.Fatal(err)
		}
		js, _ := info.JitedSize()
		fl, _ := info.JitedFuncLens()
		names = append(names, fmt.Sprintf("stop_at %d (%d B, %d f)", n, js, len(fl)))
		progs = append(progs, p)
	}
	interleaved(b, names, progs, tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build())
}

// BenchmarkFastPages: the attached program with no rules (idle) and with
// HP's stateless set on constant lists (fast) and without them
// (pipeline), beside the trivial one, in turn in one process (sl13: the
// constant lists' rule counters moved from the per-CPU hot_counts, two
// pages a packet, into the statistics' block; the idle path's counters
// into one). What fast costs over idle is what the set adds: its parse,
// its rules' compares and the rule's counter in a page already reached.
func BenchmarkFastPages(b *testing.B) {
	trivial := trivialProg(b)
	defer trivial.Close()
	h := benchHarness(b)
	if _, err := h.d.FlushStates(nil); err != nil {
		b.Fatal(err)
	}
	names, progs := []string{"trivial"}, []*ebpf.Program{trivial}
	add := func(name string, s progSpec) {
		p, err := stageVariant(h.d, "sluice_ingress", 0, s)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		names, progs = append(names, name), append(progs, p)
	}
	if err := h.d.LoadRules(&Image{}, Active); err != nil {
		b.Fatal(err)
	}
	add("idle", currentSpec(b, h.d))
	if err := h.d.LoadRules(compileText(b, hpStatelessRules), Active); err != nil {
		b.Fatal(err)
	}
	s := currentSpec(b, h.d)
	if s.fast&1 == 0 {
		b.Fatalf("HP's set is not on constant lists: %#b", s.fast)
	}
	add("stateless (fast)", s)
	add("stateless (pipeline)", s.withoutFast())
	interleaved(b, names, progs, tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build())
}

// BenchmarkTouch: what reaching data costs a one-packet run, in programs
// written by hand: a context field, one and two lines of an array map's
// value, a per-CPU array's lookup with and without reading or
// incrementing its value, the same with a plain array, and a plain
// array's block chosen by CPU number (the statistics' layout).
func BenchmarkTouch(b *testing.B) {
	trivial := trivialProg(b)
	defer trivial.Close()
	const ncpu, block = 4, 1344 // more CPUs than the machine has, a statblock
	arr, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4096, MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer arr.Close()
	pc, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 256, MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	byCPU, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: ncpu * block, MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer byCPU.Close()
	with := func(ins asm.Instruction, m *ebpf.Map) asm.Instruction {
		if err := ins.AssociateMap(m); err != nil {
			b.Fatal(err)
		}
		return ins
	}
	ret := asm.Instructions{asm.Mov.Imm(asm.R0, -1).WithSymbol("out"), asm.Return()}
	load := func(off uint32) asm.Instructions {
		return asm.Instructions{with(asm.LoadMapValue(asm.R2, 0, off), arr), asm.LoadMem(asm.R3, asm.R2, 0, asm.Word)}
	}
	lookup := func(m *ebpf.Map, read, inc bool) asm.Instructions {
		is := asm.Instructions{
			asm.StoreImm(asm.R10, -4, 0, asm.Word), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, -4),
			with(asm.LoadMapPtr(asm.R1, 0), m), asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
		}
		if read {
			is = append(is, asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord))
		}
		if inc {
			is = append(is, asm.Add.Imm(asm.R1, 1), asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord))
		}
		return is
	}
	cpuInc := asm.Instructions{
		asm.FnGetSmpProcessorId.Call(),
		asm.JGE.Imm(asm.R0, ncpu, "out"),
		asm.Mul.Imm(asm.R0, block),
		with(asm.LoadMapValue(asm.R2, 0, 0), byCPU),
		asm.Add.Reg(asm.R2, asm.R0),
		asm.LoadMem(asm.R1, asm.R2, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R2, 0, asm.R1, asm.DWord),
	}
	cases := []struct {
		name string
		ins  []asm.Instructions
	}{
		{"ctx len", []asm.Instructions{{asm.LoadMem(asm.R2, asm.R1, 0, asm.Word)}}},
		{"array 1 line", []asm.Instructions{load(0)}},
		{"array 2 lines, 1 page", []asm.Instructions{load(0), load(1600)}},
		{"percpu lookup", []asm.Instructions{lookup(pc, false, false)}},
		{"percpu read", []asm.Instructions{lookup(pc, true, false)}},
		{"percpu inc", []asm.Instructions{lookup(pc, true, true)}},
		{"array lookup", []asm.Instructions{lookup(arr, false, false)}},
		{"array read", []asm.Instructions{lookup(arr, true, false)}},
		{"array inc", []asm.Instructions{lookup(arr, true, true)}},
		{"array by cpu inc", []asm.Instructions{cpuInc}},
	}
	names, progs := []string{"trivial"}, []*ebpf.Program{trivial}
	for _, c := range cases {
		var ins asm.Instructions
		for _, part := range c.ins {
			ins = append(ins, part...)
		}
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: append(ins, ret...)})
		if err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		defer p.Close()
		names = append(names, c.name)
		progs = append(progs, p)
	}
	interleaved(b, names, progs, tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build())
}

package bpf

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// rodataReaches counts, in the program as the kernel verified it (dead
// code removed; xlated), the instructions that may reach its .rodata
// (constLoads without rewriting: a load through a known address, a
// constant, counts as left) and checks that each indexed one is a load
// from one of tables (symbol names), found by the ld_imm64 before it,
// and each passed one a helper call.
func rodataReaches(t *testing.T, p *ebpf.Program, tables ...string) rodataFold {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, ok := info.MapIDs()
	if !ok {
		t.Fatal("no map IDs in the program's info")
	}
	ro := map[uint32]bool{}
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			t.Fatal(err)
		}
		if mi, err := m.Info(); err == nil && mi.Name == ".rodata" {
			ro[uint32(id)] = true
		}
		m.Close()
	}
	if len(ro) == 0 {
		t.Fatal("the program uses no .rodata map")
	}
	insns, err := info.Instructions()
	if err != nil {
		t.Fatal(err)
	}
	isRodata := func(ins *asm.Instruction) bool {
		return ins.IsLoadFromMap() && ins.Src == asm.PseudoMapValue && ro[uint32(ins.Constant)]
	}
	f := constLoads(insns, func(ins *asm.Instruction) (string, []byte, int64, bool) {
		if !isRodata(ins) {
			return "", nil, 0, false
		}
		return "rodata", nil, int64(uint64(ins.Constant) >> 32), true
	}, binary.NativeEndian, false)
	syms := rodataSymbols(t)
	for _, r := range f.at {
		i := r.i
		if r.kind == 'L' {
			continue // a constant load: counted
		}
		what := "?"
		switch r.kind {
		case 'I':
			for j := i - 1; j >= max(0, i-8); j-- {
				if isRodata(&insns[j]) {
					off := uint64(insns[j].Constant) >> 32
					for _, name := range tables {
						if s := syms[name]; off >= s.Value && off < s.Value+s.Size {
							what = name
						}
					}
					break
				}
			}
		case 'P':
			// a helper gets R1-R5 whether it takes them or not: an
			// address left in one it does not take reaches nothing
			// (a BPF function's might)
			if insns[i].IsBuiltinCall() {
				what = "a helper call"
			}
		}
		t.Logf("%s: reaches .rodata at %d (%c: %s): %v", p, i, r.kind, what, insns[max(0, i-6):i+1])
		if what == "?" {
			t.Errorf("%s: instruction %d reaches .rodata, not as one of the tables %v or a helper's argument", p, i, tables)
		}
	}
	return f
}

// rodataSymbols are the filter object's symbols in .rodata, by name.
func rodataSymbols(t *testing.T) map[string]elf.Symbol {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(_FilterBytes))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]elf.Symbol{}
	for _, s := range syms {
		if int(s.Section) < len(ef.Sections) && ef.Sections[s.Section].Name == ".rodata" {
			out[s.Name] = s
		}
	}
	return out
}

// specProgs loads the filter programs specialised as s over d's maps
// (not attached), with the test-only variables in vars set (k_est), with
// or without foldRodata: the one way the tests load a program the
// Datapath did not, so that each loads it as the Datapath would.
func specProgs(t testing.TB, d *Datapath, s progSpec, fold bool, vars map[string]uint32) (progPair, rodataFold) {
	t.Helper()
	return specProgsEdit(t, d, s, fold, vars, nil)
}

// specProgsEdit is specProgs with edit, if not nil, run on the spec and
// its map replacements just before the load (a map bound otherwise than
// the Datapath binds it).
func specProgsEdit(t testing.TB, d *Datapath, s progSpec, fold bool, vars map[string]uint32,
	edit func(*ebpf.CollectionSpec, map[string]*ebpf.Map)) (progPair, rodataFold) {
	t.Helper()
	spec, err := filterSpec()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.setVars(spec); err != nil {
		t.Fatal(err)
	}
	for name, v := range vars {
		if err := spec.Variables[name].Set(v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var f rodataFold
	if fold {
		f = foldRodata(spec)
	}
	var progs struct {
		In  *ebpf.Program `ebpf:"sluice_ingress"`
		Out *ebpf.Program `ebpf:"sluice_egress"`
	}
	repl := d.replacements(spec)
	if edit != nil {
		edit(spec, repl)
	}
	if err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		t.Fatal(wrapVerifier("loading the filter", err))
	}
	t.Cleanup(func() {
		progs.In.Close()
		progs.Out.Close()
	})
	return progPair{progs.In, progs.Out}, f
}

// TestRodataImmediates: the programs a Datapath attaches have their
// .rodata loads rewritten into immediates (foldRodata): as verified, the
// idle program, a small set's program on constant lists and a set that
// runs the pipeline load no constant from .rodata, where the same
// programs loaded as compiled do; what reaches .rodata is the IPv4 option
// walk's tables (indexed by the option: no constant), which a packet
// without options never reaches. Each reach is logged.
func TestRodataImmediates(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, rules string
		fast        uint32 // the constant lists the set must have
		zero        bool   // no reach of .rodata but the option tables
	}{
		{"idle", "", 0, true},
		{"HP stateless (constant lists)", hpStatelessRules, 3, true},
		{"keep state (pipeline)", "pass in proto tcp all keep state\npass out proto tcp all keep state\n", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			h.load(tc.rules)
			s := currentSpec(t, h.d)
			if s.fast != tc.fast {
				t.Fatalf("constant lists %#b, want %#b", s.fast, tc.fast)
			}
			if h.d.progKey != s.key() {
				t.Fatalf("attached program %#x, want %#x", h.d.progKey, s.key())
			}
			unfolded, _ := specProgs(t, h.d, s, false, nil)
			folded, f := specProgs(t, h.d, s, true, nil)
			t.Logf("whole object: %v", f)
			if f.Folded == 0 {
				t.Errorf("nothing folded")
			}
			// the IPv4 option walk's tables, indexed by the option: no
			// constant, and no clean packet (without options) reaches
			// them
			tables := []string{"optbit_tab", "ipso_tab"}
			for _, side := range []struct {
				dir                string
				attached, old, new *ebpf.Program
			}{
				{"in", h.d.objs.SluiceIngress, unfolded.in, folded.in},
				{"out", h.d.objs.SluiceEgress, unfolded.out, folded.out},
			} {
				att := rodataReaches(t, side.attached, tables...)
				old := rodataReaches(t, side.old, tables...)
				nw := rodataReaches(t, side.new, tables...)
				t.Logf("%s: as compiled %v; folded %v", side.dir, old, nw)
				if old.Left == 0 {
					t.Errorf("%s: the program as compiled loads no constant from .rodata: the count sees nothing", side.dir)
				}
				if att.Left != nw.Left || att.Indexed != nw.Indexed {
					t.Errorf("%s: the attached program %v, the folded one %v", side.dir, att, nw)
				}
				if nw.Left != 0 {
					t.Errorf("%s: constants read from .rodata after folding: %v", side.dir, nw)
				}
				if tc.zero && nw.Indexed > len(tables) {
					t.Errorf("%s: %d indexed reaches of .rodata", side.dir, nw.Indexed)
				}
			}
		})
	}
}

// TestRodataVerdicts: the programs with immediates decide as the ones
// with .rodata loads, packet by packet (the differential tests compare
// them with the engine; this is the direct comparison, for the idle
// program and two sets, each on constant lists and on the pipeline).
func TestRodataVerdicts(t *testing.T) {
	h := newHarness(t)
	verdicts := map[uint32]int{}
	for _, tc := range []struct{ name, rules string }{{"idle", ""}, {"HP stateless", hpStatelessRules},
		{"pass and block", "block in all\npass in quick proto tcp from 10.0.0.0/8 to any port = 22\n" +
			"pass in proto udp from any to any port = 53\nblock out proto tcp from any to any port = 8080\n"}} {
		h.t = t
		h.load(tc.rules)
		for _, s := range []progSpec{currentSpec(t, h.d), currentSpec(t, h.d).withoutFast()} {
			old, _ := specProgs(t, h.d, s, false, nil)
			nw, _ := specProgs(t, h.d, s, true, nil)
			for i, frame := range [][]byte{
				tcp4("10.0.0.1", "10.0.0.2", 40000, 22, synF).build(),
				tcp4("10.0.0.1", "10.0.0.2", 40000, 80, ackF).build(),
				tcp4("10.0.0.1", "10.0.0.2", 40000, 8080, ackF).build(),
				testPkt{src: "10.0.0.1", dst: "10.0.0.2", proto: 17, sport: 5353, dport: 53}.build(),
			} {
				for _, pp := range []struct {
					dir      string
					old, new *ebpf.Program
				}{{"in", old.in, nw.in}, {"out", old.out, nw.out}} {
					a, err := pp.old.Run(&ebpf.RunOptions{Data: frame})
					if err != nil {
						t.Fatal(err)
					}
					b, err := pp.new.Run(&ebpf.RunOptions{Data: frame})
					if err != nil {
						t.Fatal(err)
					}
					verdicts[a]++
					if a != b {
						t.Errorf("%s, fast %#b, packet %d %s: %d with .rodata loads, %d with immediates",
							tc.name, s.fast, i, pp.dir, a, b)
					}
				}
			}
		}
	}
	if verdicts[tcNext] == 0 || verdicts[tcShot] == 0 {
		t.Errorf("verdicts %v: want packets passed and blocked", verdicts)
	}
}

// BenchmarkRodataFold: one packet a run (as BenchmarkIdleBisect), the
// idle program and HP's set on constant lists, each as compiled (loading
// its constants from .rodata) and with them as immediates, beside the
// trivial program, in turn round after round: the difference is the
// .rodata page a packet no longer reaches.
func BenchmarkRodataFold(b *testing.B) {
	trivial := trivialProg(b)
	defer trivial.Close()
	h := benchHarness(b)
	names, progs := []string{"trivial"}, []*ebpf.Program{trivial}
	for _, set := range []struct{ name, rules string }{{"idle", ""}, {"stateless", hpStatelessRules}} {
		if err := h.d.LoadRules(compileText(b, set.rules), Active); err != nil {
			b.Fatal(err)
		}
		if _, err := h.d.FlushStates(nil); err != nil {
			b.Fatal(err)
		}
		s := currentSpec(b, h.d)
		old, _ := specProgs(b, h.d, s, false, nil)
		nw, _ := specProgs(b, h.d, s, true, nil)
		names = append(names, set.name+" .rodata", set.name+" immediates")
		progs = append(progs, old.in, nw.in)
	}
	interleaved(b, names, progs, tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build())
}

package bpf

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// The specialisation's constants (k_* in c/filter.c, the constant lists of
// lib/fast.h) live in the program's frozen .rodata. The verifier knows
// their values and prunes the branches they rule out, but it keeps the
// loads that read them: a packet that tests k_mode still reads the
// .rodata value, a page a one-packet run pays 10-20 ns to reach first
// (docs/datapath-cost.md, at1). foldRodata rewrites, before the load,
//
//	rX = map_value(.rodata) + off    (ld_imm64, kept: it reaches no memory)
//	...
//	rY = *(size *)(rX + d)           (becomes rY = the value, a mov)
//
// wherever rX provably holds that address on every path to the load. The
// value is the one the kernel will see (the map is created from the same
// contents and frozen before the program is loaded), and the verifier
// tracks a mov's immediate exactly as it tracks the frozen load's value,
// so the program's meaning and its pruning do not change.
//
// The proof is a forward data-flow over the instructions: a register
// holds ".rodata + off" after the ld_imm64 and after copies (mov64) and
// constant additions (add64 imm) of such a register; anything else that
// writes it, a call (R0-R5), and the meeting of two paths that disagree
// make it unknown. Jump targets are computed from every jump's offset (or
// label); function entries (the program's first instruction, call and
// callback targets, any instruction no path reaches) start with every
// register unknown.

// bpfFRdonlyProg is BPF_F_RDONLY_PROG: a map the program cannot write.
const bpfFRdonlyProg = 0x80

// rodataFold counts what foldRodata did: the loads rewritten into
// immediates, and the instructions that may still reach .rodata.
type rodataFold struct {
	Folded int
	// Left: a load or store through a known address that was not
	// rewritten (a DW wider than a mov's immediate, out of bounds), or
	// the address stored (what loads it back is not followed)
	Left int
	// Indexed: a load or store through an address computed with a
	// variable (a table: no constant), or different ones on two paths
	Indexed int
	// Passed: a call with an address in R1-R5 (the callee may load
	// through it; the register may be one the call does not take)
	Passed int
	at     []rodataReach // constLoads: the instructions counted
}

// rodataReach is an instruction counted in rodataFold: which, and in
// which count ('L' left, 'I' indexed, 'P' passed).
type rodataReach struct {
	i    int
	kind byte
}

// foldRodata rewrites the loads of frozen .rodata values in every program
// of spec into immediates (above), with the values the variables of spec
// hold now: call it after the last Set and right before the load. Maps
// replaced at load (MapReplacements) must not include a .rodata map.
func foldRodata(spec *ebpf.CollectionSpec) rodataFold {
	data := map[string][]byte{}
	for name, ms := range spec.Maps {
		if !strings.HasPrefix(name, ".rodata") || ms.Flags&bpfFRdonlyProg == 0 ||
			ms.Type != ebpf.Array || ms.MaxEntries != 1 || len(ms.Contents) != 1 {
			continue
		}
		v, ok := ms.Contents[0].Value.([]byte)
		if k, kok := ms.Contents[0].Key.(uint32); !ok || !kok || k != 0 || len(v) != int(ms.ValueSize) {
			continue
		}
		// what the loader will write: the contents with the variables
		// of the section over them
		v = append([]byte(nil), v...)
		for _, vs := range spec.Variables {
			if vs.SectionName == name && int(vs.Offset)+len(vs.Value) <= len(v) {
				copy(v[vs.Offset:], vs.Value)
			}
		}
		data[name] = v
	}
	bo := spec.ByteOrder
	if bo == nil {
		bo = binary.NativeEndian
	}
	var total rodataFold
	for _, p := range spec.Programs {
		insns := append(asm.Instructions(nil), p.Instructions...)
		f := constLoads(insns, func(ins *asm.Instruction) (string, []byte, int64, bool) {
			if !ins.IsLoadFromMap() || ins.Src != asm.PseudoMapValue {
				return "", nil, 0, false
			}
			d, ok := data[ins.Reference()]
			return ins.Reference(), d, int64(uint64(ins.Constant) >> 32), ok
		}, bo, true)
		p.Instructions = insns
		total.Folded += f.Folded
		total.Left += f.Left
		total.Indexed += f.Indexed
		total.Passed += f.Passed
	}
	return total
}

// ptrVal is what the data-flow knows of a register: must is nothing yet
// (top), the address base+off of constant data, or unknown; may says
// whether it may hold an address of constant data at all (an address
// computed on, or different ones on two paths: the uses counted as left).
type ptrVal struct {
	must uint8 // mustTop, mustAddr, mustUnknown
	may  bool
	base int32 // which constant data (index into the keys seen)
	off  int64
}

const (
	mustTop = iota
	mustAddr
	mustUnknown
)

var unknownVal = ptrVal{must: mustUnknown}

func meetVal(a, b ptrVal) ptrVal {
	switch {
	case a.must == mustTop:
		return b
	case b.must == mustTop:
		return a
	case a == b:
		return a
	}
	return ptrVal{must: mustUnknown, may: a.may || b.may}
}

type regState [asm.R10 + 1]ptrVal

// constData says whether an instruction is a ld_imm64 of the address of
// constant data: which data (key), its bytes (nil: contents unknown, so
// nothing is rewritten but the uses are counted) and the offset.
type constData func(*asm.Instruction) (key string, d []byte, off int64, ok bool)

// constLoads runs the data-flow over insns and, with rewrite, rewrites in
// place the loads from an address of constant data into immediates, and
// counts what may reach constant data still (rodataFold). A program whose
// jumps cannot be resolved is left as it is, every ld_imm64 of constant
// data counted as left.
func constLoads(insns asm.Instructions, data constData, bo binary.ByteOrder, rewrite bool) rodataFold {
	n := len(insns)
	// raw offsets, for the jumps
	raw := make([]int64, n)
	at := map[int64]int{}
	syms := map[string]int{}
	var off int64
	for i := range insns {
		raw[i] = off
		at[off] = i
		if s := insns[i].Symbol(); s != "" {
			syms[s] = i
		}
		off += int64(insns[i].Width())
	}
	var keys []string
	var bytesOf [][]byte
	keyIdx := map[string]int32{}
	base := func(k string, d []byte) int32 {
		if b, ok := keyIdx[k]; ok {
			return b
		}
		keys, bytesOf = append(keys, k), append(bytesOf, d)
		keyIdx[k] = int32(len(keys) - 1)
		return keyIdx[k]
	}
	// target resolves the jump at i (-1: none; -2: cannot be resolved),
	// or the function a call or function pointer at i reaches (-1 when
	// it cannot be resolved: any instruction no path reaches is an
	// entry anyway)
	target := func(i int) int {
		ins := &insns[i]
		op := ins.OpCode
		fn := ins.IsFunctionReference()
		switch {
		case fn:
		case !op.Class().IsJump(), op.JumpOp() == asm.Exit, op.JumpOp() == asm.Call:
			return -1
		}
		fail := -2
		if fn {
			fail = -1
		}
		if ref := ins.Reference(); ref != "" {
			if j, ok := syms[ref]; ok {
				return j
			}
			return fail
		}
		rel := int64(ins.Offset)
		switch {
		case fn && ins.Offset != 0:
			// a call as the kernel dumps it (xlated): the offset in
			// off, the function's index in imm
		case fn, op.JumpOp() == asm.Ja && op.Class() == asm.Jump32Class:
			rel = int64(int32(ins.Constant))
		}
		if j, ok := at[raw[i]+1+rel]; ok {
			return j
		}
		return fail
	}
	tgt := make([]int, n)
	entry := make([]bool, n)
	for i := range insns {
		tgt[i] = target(i)
		if tgt[i] == -2 {
			var f rodataFold
			for i := range insns {
				if _, _, _, ok := data(&insns[i]); ok {
					f.Left++
				}
			}
			return f
		}
	}
	// the program's and its functions' entries (a symbol a jump names is
	// a label, not an entry)
	if n > 0 {
		entry[0] = true
	}
	for i := range insns {
		if tgt[i] >= 0 && insns[i].IsFunctionReference() {
			entry[tgt[i]] = true
		}
	}
	var unknownRegs regState
	for r := range unknownRegs {
		unknownRegs[r] = unknownVal
	}
	in := make([]regState, n)
	seen := make([]bool, n)
	var work []int
	push := func(j int, s *regState) {
		changed := !seen[j]
		seen[j] = true
		for r := range s {
			if m := meetVal(in[j][r], s[r]); m != in[j][r] {
				in[j][r] = m
				changed = true
			}
		}
		if changed {
			work = append(work, j)
		}
	}
	clobber := func(s *regState) {
		for r := asm.R0; r <= asm.R5; r++ {
			s[r] = unknownVal
		}
	}
	// transfer is the state after instruction i
	transfer := func(i int, s regState) regState {
		ins := &insns[i]
		op := ins.OpCode
		switch cls := op.Class(); {
		case cls == asm.LdClass && op.IsDWordLoad():
			s[ins.Dst] = unknownVal
			if k, d, o, ok := data(ins); ok {
				s[ins.Dst] = ptrVal{must: mustAddr, may: true, base: base(k, d), off: o}
			}
		case cls == asm.LdClass: // ld_abs, ld_ind: like a call
			clobber(&s)
		case cls == asm.LdXClass:
			s[ins.Dst] = unknownVal
		case cls == asm.StXClass && op.Mode() == asm.AtomicMode:
			// a fetch writes src, cmpxchg R0
			s[ins.Src], s[asm.R0] = unknownVal, unknownVal
		case cls.IsALU():
			d, src := s[ins.Dst], s[ins.Src]
			v := unknownVal
			switch {
			case cls != asm.ALU64Class || ins.Offset != 0:
				// 32 bits of an address are no address
			case op.ALUOp() == asm.Mov && op.Source() == asm.RegSource:
				v = src
			case op.ALUOp() == asm.Add && op.Source() == asm.ImmSource:
				v = ptrVal{must: mustUnknown, may: d.may}
				if d.must == mustAddr {
					v, v.off = d, d.off+ins.Constant
				}
			case (op.ALUOp() == asm.Add || op.ALUOp() == asm.Sub) && op.Source() == asm.RegSource:
				// an address plus a variable: still one, unknown
				v.may = d.may || (op.ALUOp() == asm.Add && src.may)
			}
			if v.must == mustTop {
				v = unknownVal
			}
			s[ins.Dst] = v
		case cls.IsJump() && op.JumpOp() == asm.Call:
			clobber(&s)
		}
		return s
	}
	flow := func(i int, s *regState) {
		op := insns[i].OpCode
		if op.Class().IsJump() {
			switch op.JumpOp() {
			case asm.Exit:
				return
			case asm.Call:
			case asm.Ja:
				push(tgt[i], s)
				return
			default:
				push(tgt[i], s)
			}
		}
		if i+1 < n {
			push(i+1, s)
		}
	}
	for i := range insns {
		if entry[i] {
			push(i, &unknownRegs)
		}
	}
	for next := 0; ; {
		for len(work) > 0 {
			i := work[len(work)-1]
			work = work[:len(work)-1]
			out := transfer(i, in[i])
			flow(i, &out)
		}
		// what no path reached (a callback whose pointer was not
		// resolved) starts with every register unknown
		for next < n && seen[next] {
			next++
		}
		if next == n {
			break
		}
		push(next, &unknownRegs)
	}
	var f rodataFold
	note := func(n *int, i int) {
		*n++
		kind := byte('L')
		switch n {
		case &f.Indexed:
			kind = 'I'
		case &f.Passed:
			kind = 'P'
		}
		f.at = append(f.at, rodataReach{i, kind})
	}
	// through: a load or store through the address in r
	through := func(i int, r asm.Register) {
		switch v := in[i][r]; {
		case v.must == mustAddr:
			note(&f.Left, i)
		case v.may:
			note(&f.Indexed, i)
		}
	}
	for i := range insns {
		ins := &insns[i]
		op := ins.OpCode
		switch cls := op.Class(); {
		case cls == asm.LdXClass:
			if v := in[i][ins.Src]; op.Mode() == asm.MemMode && v.must == mustAddr && btf.CORERelocationMetadata(ins) == nil {
				if c, ok := constValue(bytesOf[v.base], v.off+int64(ins.Offset), op.Size(), bo); ok {
					f.Folded++
					if rewrite {
						*ins = immLoad(*ins, c)
					}
					continue
				}
			}
			through(i, ins.Src)
		case cls == asm.LdClass && op.Mode() == asm.IndMode:
			through(i, ins.Src)
		case cls == asm.StXClass && in[i][ins.Src].may:
			// the address stored: whatever loads it back is not followed
			note(&f.Left, i)
		case cls == asm.StXClass, cls == asm.StClass:
			through(i, ins.Dst)
		case cls.IsJump() && op.JumpOp() == asm.Call:
			for r := asm.R1; r <= asm.R5; r++ {
				if in[i][r].may {
					note(&f.Passed, i)
					break
				}
			}
		}
	}
	return f
}

// constValue reads the size bytes at off of d as an immediate a mov can
// load: B, H and W always (a 32-bit mov zero-extends as the load does),
// DW when it is its sign-extended low 32 bits.
func constValue(d []byte, off int64, size asm.Size, bo binary.ByteOrder) (int64, bool) {
	w := int64(size.Sizeof())
	if d == nil || w <= 0 || off < 0 || off+w > int64(len(d)) {
		return 0, false
	}
	b := d[off : off+w]
	switch size {
	case asm.Byte:
		return int64(b[0]), true
	case asm.Half:
		return int64(bo.Uint16(b)), true
	case asm.Word:
		// the mov's immediate is 32 bits, zero-extended by a 32-bit mov
		return int64(int32(bo.Uint32(b))), true
	case asm.DWord:
		v := int64(bo.Uint64(b))
		return v, v == int64(int32(v))
	}
	return 0, false
}

// immLoad is the load ins rewritten as a mov of c into its destination:
// 32-bit for B/H/W (zero-extending, as the load does), 64-bit for DW (c
// sign-extended: constValue checked it is the value). The instruction
// keeps its metadata (line info).
func immLoad(ins asm.Instruction, c int64) asm.Instruction {
	cls := asm.ALUClass
	if ins.OpCode.Size() == asm.DWord {
		cls = asm.ALU64Class
	}
	ins.OpCode = asm.OpCode(cls).SetALUOp(asm.Mov).SetSource(asm.ImmSource)
	ins.Src, ins.Offset, ins.Constant = asm.R0, 0, c
	return ins
}

func (f rodataFold) String() string {
	return fmt.Sprintf(".rodata loads as immediates %d; left %d, indexed %d, passed to calls %d",
		f.Folded, f.Left, f.Indexed, f.Passed)
}

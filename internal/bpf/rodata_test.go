package bpf

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// rodataAt is the ld_imm64 of .rodata + off as the ELF reader makes it.
func rodataAt(dst asm.Register, off uint32) asm.Instruction {
	return asm.LoadMapValue(dst, 0, off).WithReference(".rodata")
}

// testRodata: 0..7 = 0x11223344_55667788 (DW, too wide for a mov), 8..15
// = 7 (DW that fits), 16..19 = 0xfffffffe (W), 20..21 = 0xbeef (H), 22 =
// 0xab (B), 24..27 = 0x12345678 (W, overwritten by the variable k_x)
func testRodata() []byte {
	d := make([]byte, 32)
	binary.LittleEndian.PutUint64(d[0:], 0x1122334455667788)
	binary.LittleEndian.PutUint64(d[8:], 7)
	binary.LittleEndian.PutUint32(d[16:], 0xfffffffe)
	binary.LittleEndian.PutUint16(d[20:], 0xbeef)
	d[22] = 0xab
	binary.LittleEndian.PutUint32(d[24:], 0x12345678)
	return d
}

func rodataSpec(insns asm.Instructions) *ebpf.CollectionSpec {
	x := make([]byte, 4)
	binary.LittleEndian.PutUint32(x, 42)
	return &ebpf.CollectionSpec{
		ByteOrder: binary.LittleEndian,
		Maps: map[string]*ebpf.MapSpec{
			".rodata": {Name: ".rodata", Type: ebpf.Array, KeySize: 4, ValueSize: 32, MaxEntries: 1,
				Flags: bpfFRdonlyProg, Contents: []ebpf.MapKV{{Key: uint32(0), Value: testRodata()}}},
			// writable: never folded
			".data": {Name: ".data", Type: ebpf.Array, KeySize: 4, ValueSize: 32, MaxEntries: 1,
				Contents: []ebpf.MapKV{{Key: uint32(0), Value: testRodata()}}},
		},
		Variables: map[string]*ebpf.VariableSpec{
			"k_x": {Name: "k_x", SectionName: ".rodata", Offset: 24, Value: x},
		},
		Programs: map[string]*ebpf.ProgramSpec{"p": {Name: "p", Type: ebpf.SchedCLS, Instructions: insns}},
	}
}

// TestFoldRodata: which loads of .rodata become immediates, with which
// value and width, and which are left (and counted).
func TestFoldRodata(t *testing.T) {
	mov32 := func(dst asm.Register, v int64) asm.Instruction { return asm.Mov.Imm32(dst, int32(v)) }
	mov64 := func(dst asm.Register, v int64) asm.Instruction { return asm.Mov.Imm(dst, int32(v)) }
	ldx := func(dst, src asm.Register, off int16, size asm.Size) asm.Instruction {
		return asm.LoadMem(dst, src, off, size)
	}
	exit := asm.Return()
	for _, tc := range []struct {
		name string
		in   asm.Instructions
		want map[int]asm.Instruction // index: the rewritten instruction
		// folded, left, indexed, passed (rodataFold)
		counts [4]int
	}{
		{"W right after the address", asm.Instructions{rodataAt(asm.R1, 16), ldx(asm.R2, asm.R1, 0, asm.Word), exit},
			map[int]asm.Instruction{1: mov32(asm.R2, -2)}, [4]int{1, 0, 0, 0}},
		{"B, H, W and DW, one address", asm.Instructions{rodataAt(asm.R1, 0),
			ldx(asm.R2, asm.R1, 22, asm.Byte), ldx(asm.R3, asm.R1, 20, asm.Half),
			ldx(asm.R4, asm.R1, 8, asm.DWord), ldx(asm.R5, asm.R1, 0, asm.DWord), exit},
			map[int]asm.Instruction{1: mov32(asm.R2, 0xab), 2: mov32(asm.R3, 0xbeef), 3: mov64(asm.R4, 7)}, [4]int{3, 1, 0, 0}},
		{"the variable's value, not the section's", asm.Instructions{rodataAt(asm.R1, 24), ldx(asm.R0, asm.R1, 0, asm.Word), exit},
			map[int]asm.Instruction{1: mov32(asm.R0, 42)}, [4]int{1, 0, 0, 0}},
		{"the address loaded into itself", asm.Instructions{rodataAt(asm.R1, 16), ldx(asm.R1, asm.R1, 4, asm.Half), exit},
			map[int]asm.Instruction{1: mov32(asm.R1, 0xbeef)}, [4]int{1, 0, 0, 0}},
		{"past the end", asm.Instructions{rodataAt(asm.R1, 30), ldx(asm.R2, asm.R1, 0, asm.Word), exit}, nil, [4]int{0, 1, 0, 0}},
		{"copied and moved on", asm.Instructions{rodataAt(asm.R1, 16), asm.Mov.Reg(asm.R3, asm.R1), asm.Add.Imm(asm.R3, 4),
			ldx(asm.R2, asm.R3, 2, asm.Byte), exit},
			map[int]asm.Instruction{3: mov32(asm.R2, 0xab)}, [4]int{1, 0, 0, 0}},
		{"plus a variable: a table, left", asm.Instructions{rodataAt(asm.R1, 0), asm.Add.Reg(asm.R1, asm.R6),
			ldx(asm.R2, asm.R1, 0, asm.Byte), exit}, nil, [4]int{0, 0, 1, 0}},
		{"32 bits of the address", asm.Instructions{rodataAt(asm.R1, 16), asm.Mov.Reg32(asm.R3, asm.R1),
			ldx(asm.R2, asm.R3, 0, asm.Word), exit}, nil, [4]int{}},
		{"register written over", asm.Instructions{rodataAt(asm.R1, 16), mov64(asm.R1, 0),
			ldx(asm.R2, asm.R1, 0, asm.Word), exit}, nil, [4]int{}},
		{"loaded over, the address elsewhere", asm.Instructions{rodataAt(asm.R1, 16), ldx(asm.R1, asm.R10, -8, asm.DWord),
			ldx(asm.R2, asm.R1, 0, asm.Word), exit}, nil, [4]int{}},
		{"spilled: left", asm.Instructions{rodataAt(asm.R1, 16), asm.StoreMem(asm.R10, -8, asm.R1, asm.DWord), exit}, nil, [4]int{0, 1, 0, 0}},
		{"writable data", asm.Instructions{asm.LoadMapValue(asm.R1, 0, 16).WithReference(".data"),
			ldx(asm.R2, asm.R1, 0, asm.Word), exit}, nil, [4]int{}},
		// a call clobbers R0-R5, keeps R6-R9; the address passed in R1
		// is counted (the callee may load through it)
		{"across a call", asm.Instructions{rodataAt(asm.R6, 16), rodataAt(asm.R1, 16), asm.FnKtimeGetNs.Call(),
			ldx(asm.R2, asm.R6, 0, asm.Word), ldx(asm.R3, asm.R1, 0, asm.Word), exit},
			map[int]asm.Instruction{3: mov32(asm.R2, -2)}, [4]int{1, 0, 0, 1}},
		// a jump target: folded when every path brings the same address
		{"two paths, one address", asm.Instructions{
			rodataAt(asm.R1, 16),
			asm.JEq.Imm(asm.R2, 0, "join"),
			rodataAt(asm.R1, 16),
			ldx(asm.R3, asm.R1, 0, asm.Word).WithSymbol("join"),
			exit},
			map[int]asm.Instruction{3: mov32(asm.R3, -2)}, [4]int{1, 0, 0, 0}},
		{"two paths, two addresses", asm.Instructions{
			rodataAt(asm.R1, 16),
			asm.JEq.Imm(asm.R2, 0, "join"),
			rodataAt(asm.R1, 20),
			ldx(asm.R3, asm.R1, 0, asm.Half).WithSymbol("join"),
			exit}, nil, [4]int{0, 0, 1, 0}},
		{"two paths, one not an address", asm.Instructions{
			rodataAt(asm.R1, 16),
			asm.JEq.Imm(asm.R2, 0, "join"),
			mov64(asm.R1, 0),
			ldx(asm.R3, asm.R1, 0, asm.Half).WithSymbol("join"),
			exit}, nil, [4]int{0, 0, 1, 0}},
		// the same by raw offsets (as the ELF reader leaves jumps), and
		// the ld_imm64 counts two raw instructions
		{"raw jump over a ld_imm64", asm.Instructions{
			rodataAt(asm.R1, 16),
			{OpCode: asm.JEq.Op(asm.ImmSource), Dst: asm.R2, Offset: 2},
			rodataAt(asm.R1, 20),
			ldx(asm.R3, asm.R1, 0, asm.Half),
			exit}, nil, [4]int{0, 0, 1, 0}},
		{"raw jump, the load after the join", asm.Instructions{
			{OpCode: asm.JEq.Op(asm.ImmSource), Dst: asm.R2, Offset: 2},
			rodataAt(asm.R1, 20),
			rodataAt(asm.R1, 20),
			ldx(asm.R3, asm.R1, 0, asm.Half),
			exit}, map[int]asm.Instruction{3: mov32(asm.R3, 0xbeef)}, [4]int{1, 0, 0, 0}},
		// a loop that writes the register meets itself: not folded
		{"loop", asm.Instructions{
			rodataAt(asm.R1, 16),
			ldx(asm.R3, asm.R1, 0, asm.Word).WithSymbol("top"),
			asm.Add.Imm(asm.R1, 4),
			asm.JNE.Imm(asm.R3, 0, "top"),
			exit}, nil, [4]int{0, 0, 1, 0}},
		{"loop keeping the address", asm.Instructions{
			rodataAt(asm.R1, 16),
			ldx(asm.R3, asm.R1, 0, asm.Word).WithSymbol("top"),
			asm.Add.Imm(asm.R4, 4),
			asm.JNE.Imm(asm.R4, 0, "top"),
			exit}, map[int]asm.Instruction{1: mov32(asm.R3, -2)}, [4]int{1, 0, 0, 0}},
		// a function starts knowing nothing: its caller's address is
		// counted at the call
		{"subprogram", asm.Instructions{
			rodataAt(asm.R1, 16),
			asm.Call.Label("fn"),
			exit,
			ldx(asm.R0, asm.R1, 0, asm.Word).WithSymbol("fn"),
			exit}, nil, [4]int{0, 0, 0, 1}},
		// a jump that lands nowhere: nothing is rewritten
		{"unresolved jump", asm.Instructions{
			rodataAt(asm.R1, 16),
			{OpCode: asm.JEq.Op(asm.ImmSource), Dst: asm.R2, Offset: 100},
			ldx(asm.R3, asm.R1, 0, asm.Word),
			exit}, nil, [4]int{0, 1, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := append(asm.Instructions(nil), tc.in...)
			spec := rodataSpec(tc.in)
			got := foldRodata(spec)
			if c := [4]int{got.Folded, got.Left, got.Indexed, got.Passed}; c != tc.counts {
				t.Errorf("folded, left, indexed, passed %v; want %v", c, tc.counts)
			}
			out := spec.Programs["p"].Instructions
			if len(out) != len(orig) {
				t.Fatalf("%d instructions, were %d", len(out), len(orig))
			}
			for i := range out {
				want, ok := tc.want[i]
				if !ok {
					want = orig[i]
				}
				if out[i].OpCode != want.OpCode || out[i].Dst != want.Dst || out[i].Src != want.Src ||
					out[i].Offset != want.Offset || out[i].Constant != want.Constant {
					t.Errorf("instruction %d: %v, want %v", i, out[i], want)
				}
				if out[i].Symbol() != orig[i].Symbol() {
					t.Errorf("instruction %d lost its symbol %q", i, orig[i].Symbol())
				}
			}
			// the input slice is not changed (a spec's programs may
			// share their instructions)
			for i := range tc.in {
				if tc.in[i].OpCode != orig[i].OpCode || tc.in[i].Constant != orig[i].Constant {
					t.Errorf("input instruction %d changed", i)
				}
			}
			// the rewritten program still marshals (offsets unchanged)
			if err := spec.Programs["p"].Instructions.Marshal(discard{}, binary.LittleEndian); err != nil {
				t.Errorf("marshal: %v", err)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

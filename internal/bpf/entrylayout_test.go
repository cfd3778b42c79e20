//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package bpf

import (
	"testing"
	"unsafe"
)

// The state entry's lines (filter.h, struct state_entry): the kernel puts
// a hash element's value 32 bytes into a cache line (a 512-byte object, 8
// bytes of allocator header, 48 of element header, the 40-byte key), so
// these offsets decide which lines a packet of an established flow reads
// and writes. A field moved across a line boundary would make both
// directions' CPUs write one more line, silently: this test says so.
func TestStateEntryLines(t *testing.T) {
	var e filterStateEntry
	const valueAt = 8 + 48 + 40 // the value's offset in its 512-byte object
	line := func(off uintptr) uintptr { return (valueAt + off) / 64 }
	if k := unsafe.Sizeof(filterStateKey{}); k != 40 {
		t.Fatalf("state key is %d bytes, the layout assumes 40", k)
	}
	if n := valueAt + unsafe.Sizeof(e); n > 512 {
		t.Errorf("a state element takes %d bytes: over the 512-byte allocation", n)
	}
	// what packets of both ways write: one line
	w0, w1 := unsafe.Offsetof(e.Expire), unsafe.Offsetof(e.Tcp)+unsafe.Sizeof(e.Tcp)-1
	if line(w0) != line(w1) || line(unsafe.Offsetof(e.Last)) != line(w0) {
		t.Errorf("expire..tcp span value bytes %d..%d: lines %d..%d, want one", w0, w1, line(w0), line(w1))
	}
	// nothing read per packet in that line but created (set once)
	if line(unsafe.Offsetof(e.Wdst)+15) == line(w0) {
		t.Errorf("the read part shares the written line")
	}
	// each counter stripe is a line of its own
	for i := range e.Cnt {
		a := unsafe.Offsetof(e.Cnt) + uintptr(i)*unsafe.Sizeof(e.Cnt[0])
		if (valueAt+a)%64 != 0 || unsafe.Sizeof(e.Cnt[0]) != 64 {
			t.Errorf("counter stripe %d at value byte %d: not a line of its own", i, a)
		}
		if line(a) == line(w1) {
			t.Errorf("counter stripe %d shares the window line", i)
		}
	}
}

// TestStateCounts: a reader adds every CPU's stripe.
func TestStateCounts(t *testing.T) {
	var e filterStateEntry
	for i := range e.Cnt {
		for j := range 4 {
			e.Cnt[i].Pkts[j] = uint64(1+i) << (8 * j)
			e.Cnt[i].Bytes[j] = uint64(100*(1+i)) << (8 * j)
		}
	}
	pkts, bytes := e.counts()
	for j := range 4 {
		if want := uint64(1+2+3+4) << (8 * j); pkts[j] != want {
			t.Errorf("pkts[%d] = %d, want %d", j, pkts[j], want)
		}
		if want := uint64(100*(1+2+3+4)) << (8 * j); bytes[j] != want {
			t.Errorf("bytes[%d] = %d, want %d", j, bytes[j], want)
		}
	}
}

// TestConfigHotKeys: what the attached path reads of the config (filter.c
// before the packet info: active slot, enabled, default pass, L2 mode,
// log flags, the slot's features) is keys 1..8, the line after key 0 when
// the array's value starts 56 bytes into a line (filter.h).
func TestConfigHotKeys(t *testing.T) {
	hot := map[int]bool{}
	for _, k := range []int{cfgActive, cfgEnabled, cfgDefPass, cfgAnyL3, cfgLogFlags, cfgIndex0, cfgIndex0 + 1, cfgIndex0 + 2} {
		hot[k] = true
	}
	for k := 1; k <= 8; k++ {
		if !hot[k] {
			t.Errorf("config key %d is not one the attached path reads: the hot keys are not 1..8", k)
		}
	}
}

package ipf

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// vmFlags returns the VmFlags of the mapping of /proc/self/smaps that
// holds address a.
func vmFlags(t *testing.T, a uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			lo, hi, _ := strings.Cut(r, "-")
			l, e1 := strconv.ParseUint(lo, 16, 64)
			h, e2 := strconv.ParseUint(hi, 16, 64)
			in = e1 == nil && e2 == nil && uintptr(l) <= a && a < uintptr(h)
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return line
		}
	}
	t.Fatalf("no mapping holds %#x", a)
	return ""
}

// TestHugeHeap: after hugeHeap(n), what the load allocates next takes
// the addresses it marked, a mapping with MADV_HUGEPAGE ("hg"): the
// rules of a big file, allocated after it, fault in huge pages where
// the kernel has them. Before it (and for memory the heap had already),
// the flag is not there.
func TestHugeHeap(t *testing.T) {
	pct := debug.SetGCPercent(-1) // as bigFileGC: nothing collects what the test holds
	defer debug.SetGCPercent(pct)
	before := make([]byte, 8<<20)
	if f := vmFlags(t, uintptr(unsafe.Pointer(&before[4<<20]))); strings.Contains(f, " hg") {
		t.Skipf("the heap is marked for huge pages already (%s)", f)
	}
	hugeHeap(256 << 20)
	hit := 0
	var held [][]byte
	for i := 0; i < 16; i++ {
		// the rules' slabs and the image: blocks of a few MB
		b := make([]byte, 8<<20)
		held = append(held, b)
		if f := vmFlags(t, uintptr(unsafe.Pointer(&b[4<<20]))); strings.Contains(f, " hg") {
			hit++
		}
	}
	if hit < 12 {
		t.Fatalf("%d of 16 allocations after hugeHeap are in a MADV_HUGEPAGE mapping, want most", hit)
	}
	t.Logf("%d of %d blocks in the marked range", hit, len(held))
}

// TestHugeHeapSize: the reservation is capped at half the host's memory,
// and left as asked below that.
func TestHugeHeapSize(t *testing.T) {
	for _, c := range []struct {
		n    int
		ram  uint64
		want int
	}{
		{1 << 30, 8 << 30, 1 << 30},
		{6 << 30, 8 << 30, 4 << 30},
		{4 << 30, 8 << 30, 4 << 30},
		{1 << 20, 0, 1 << 20}, // unknown: as asked
	} {
		if got := hugeHeapSize(c.n, c.ram); got != c.want {
			t.Errorf("hugeHeapSize(%d, %d) = %d, want %d", c.n, c.ram, got, c.want)
		}
	}
}

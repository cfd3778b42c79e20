package ipf

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of the pages hugeHeap asks for (x86-64's and
// arm64's usual transparent huge page).
const hugePage = 2 << 20

// hugeHeap asks that the next n bytes of heap a big load fills come from
// transparent huge pages: it allocates them (fresh memory the runtime
// maps and does not touch), marks the range MADV_HUGEPAGE and frees it,
// so that the rules, the image and the texts allocated after it take
// those addresses again. A page a first touch faults in costs the same
// whatever its size, and on a virtual machine far more than the copy
// into it: a million-rule load touched 1.5 GB in 4 KiB pages, 370 000
// faults. Where huge pages are off (or madvise fails) nothing changes.
func hugeHeap(n int) {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		n = hugeHeapSize(n, uint64(si.Totalram)*uint64(si.Unit))
	}
	if n <= 0 {
		return
	}
	b := make([]byte, n)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	beg := (p + hugePage - 1) &^ (hugePage - 1)
	end := (p + uintptr(n)) &^ (hugePage - 1)
	if beg < end {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, beg, end-beg, unix.MADV_HUGEPAGE)
	}
	runtime.KeepAlive(b)
	runtime.GC()
}

// hugeHeapSize is what hugeHeap reserves of the n bytes asked for on a
// host of ram bytes: at most half of it. The estimate is per byte of the
// file, so a file of long comments asks for more than its load needs, and
// a reservation the host cannot commit (vm.overcommit_memory=2) would end
// ipf with the runtime's out-of-memory error before it read a rule; the
// load itself then runs as it did without huge pages.
func hugeHeapSize(n int, ram uint64) int {
	if ram > 0 && uint64(n) > ram/2 {
		return int(ram / 2)
	}
	return n
}

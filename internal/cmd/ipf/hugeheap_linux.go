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

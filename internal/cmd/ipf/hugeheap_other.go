//go:build !linux

package ipf

// hugeHeap does nothing where transparent huge pages are not Linux's.
func hugeHeap(int) {}

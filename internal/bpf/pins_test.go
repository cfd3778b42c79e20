//go:build linux

package bpf

import "testing"

// TestMaxPoolEntriesMatchesSpec keeps the Go mirror of the pool map's size
// (which ipfctl checks loads against) equal to the C definition.
func TestMaxPoolEntriesMatchesSpec(t *testing.T) {
	spec, err := loadFilter()
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Maps["pools"].MaxEntries; got != MaxPoolEntries {
		t.Errorf("pools map holds %d entries, MaxPoolEntries = %d", got, MaxPoolEntries)
	}
}

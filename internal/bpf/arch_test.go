package bpf

import (
	"errors"
	"testing"
)

// The datapath loads only where its lock-free readers are correct.
func TestCheckMemoryModel(t *testing.T) {
	for _, c := range []struct {
		arch string
		ok   bool
	}{
		{"amd64", true}, {"386", true},
		{"arm64", false}, {"arm", false}, {"ppc64le", false}, {"riscv64", false}, {"loong64", false}, {"mips64le", false},
	} {
		err := checkMemoryModel(c.arch)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.arch, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrWeakMemory) {
			t.Errorf("%s: %v is not ErrWeakMemory", c.arch, err)
		}
	}
}

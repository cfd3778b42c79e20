package bpf

import (
	"errors"
	"fmt"
	"runtime"
)

// ErrWeakMemory is returned by Load on a CPU architecture whose memory
// model the datapath's lock-free readers do not support.
var ErrWeakMemory = errors.New("the eBPF datapath needs a CPU that keeps loads in order (x86: total store order)")

// The datapath's lock-free readers — st_dm's slots (lib/est.h), NAT's
// fast entries, sessions and slots (nat/c) — read a sequence word, then
// the data, then commit or read the word again, with only compiler
// barriers between: correct where the CPU does not reorder a load with
// an earlier load (x86's total store order), not on a weakly ordered CPU
// (arm64, ppc64, riscv64...), where a packet could be decided by a slot
// torn by a concurrent write and its commit still succeed. Their fix is
// a load-acquire (BPF_LOAD_ACQ, Linux 6.15, clang 20) or an ordered
// atomic read on those CPUs, not done: until then the datapath refuses
// to load there, loudly, rather than filter with a rare silent race
// (the reference engine, ipftest and netperf work everywhere).
var tsoArch = map[string]bool{"amd64": true, "386": true}

// checkMemoryModel returns ErrWeakMemory, wrapped with the architecture,
// unless goarch's CPUs keep loads in order.
func checkMemoryModel(goarch string) error {
	if tsoArch[goarch] {
		return nil
	}
	return fmt.Errorf("GOARCH=%s: %w", goarch, ErrWeakMemory)
}

// CheckMemoryModel is checkMemoryModel for the running binary: the NAT
// datapath's Load calls it too.
func CheckMemoryModel() error { return checkMemoryModel(runtime.GOARCH) }

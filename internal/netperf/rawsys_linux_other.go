//go:build linux && !amd64

package netperf

import "syscall"

// rawSyscall6 is syscall.RawSyscall6 on the architectures without the
// assembly version (rawsys_linux_amd64.s). nosplit: the stack cannot move
// between the caller's pointer conversions and the call.
//
//go:nosplit
func rawSyscall6(num, a1, a2, a3, a4, a5, a6 uintptr) (r1, errno uintptr) {
	r1, _, e := syscall.RawSyscall6(num, a1, a2, a3, a4, a5, a6)
	return r1, uintptr(e)
}

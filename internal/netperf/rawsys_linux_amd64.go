package netperf

// rawSyscall6 is syscall.RawSyscall6 (a system call the Go scheduler does
// not see) written in this package, so that a data loop and the system
// call instruction it runs sit on two pages of text rather than four or
// five: syscall.RawSyscall6 goes through internal/runtime/syscall, far
// away in the runtime's text, and every system call here empties the TLB
// (see clientLoop.tcpRRLoop). It returns the result and the errno (0 for
// none); the caller converts its pointer arguments in the call itself,
// as for syscall.Syscall.
//
//go:noescape
func rawSyscall6(num, a1, a2, a3, a4, a5, a6 uintptr) (r1, errno uintptr)

//go:build !linux || !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipfctl

import "io"

// NAT is ipnat's kernel device; there is none outside Linux.
type NAT struct{}

// NATDevice returns nil: there is no kernel NAT here, ipnat only checks
// and prints rules (-n).
func NATDevice(dir string) *NAT { return nil }

// Apply is not reached (NATDevice returns nil).
func (n *NAT) Apply(NATChange) (int, int, error) { return 0, 0, nil }

// List is not reached.
func (n *NAT) List(io.Writer, bool, bool) error { return nil }

// Stats is not reached.
func (n *NAT) Stats(io.Writer, bool) error { return nil }

func removeNAT(string) error { return nil }

func checkNATNetNS(string) error { return nil }

func natKeepOrder(string) error { return nil }

func natEgressOff(string) error { return nil }

// Package bpf is Sluice's kernel datapath for the IPFilter filter: a TC/TCX
// eBPF program (c/filter.c) that evaluates compiled ipf.conf rule sets kept
// in maps, with connection state, counters and a log ring, and the Go side
// that loads, pins, attaches and feeds it.
//
// Life cycle: Load (or OpenPinned) → Attach(ifaces) → Compile + LoadRules
// (active or inactive set) → Swap / Flush / Rules / Stats / States /
// OpenLog → Detach or Remove. Everything is pinned under one bpffs
// directory, so separate processes (ipf, ipfstat, ipmon) share it without a
// daemon.
package bpf

// regen.sh runs this; `regen.sh --check` fails when the committed output is
// stale. gen.sh picks the include directory for GOARCH.
//go:generate ./gen.sh

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
// stale.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -Ic/include" filter c/filter.c

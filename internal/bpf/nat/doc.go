// Package nat is Sluice's kernel NAT datapath: IPFilter's ipnat as the Go
// reference engine (sluice/internal/nat) implements it, in a pair of
// eBPF programs (c/nat.c, compiled with bpf2go) of its own, separate from
// the filter's (sluice/internal/bpf).
//
// The programs are attached with TCX so that inbound packets are
// translated before the filter sees them and outbound ones after it, as
// IPFilter orders NAT and filtering: ingress at the head of the chain,
// egress at its tail (tc clsact filters on kernels without TCX). They are
// attached only while NAT rules or sessions exist, to the interfaces the
// rules name, so a host without NAT pays nothing.
//
// Rules are compiled from the engine's compiled rules field by field
// (Compile) and published atomically: a new set is written into the
// spare slot and switched to with one config write. Sessions live in a
// hash map, two entries per session (one per direction) whose values
// carry the rewrite and its checksum differences; the forward entry holds
// a bpf_timer that ends the session when IPFilter's timeouts say so, with
// no daemon; a session whose timer the kernel would not allocate is the
// sweeper's (one timer, started at load, that gives it a timer later or
// ends it on IPFilter's tick). Everything is pinned under one bpffs directory
// (DefaultPinDir, or $SLUICE_BPF_DIR with "-nat" appended), so ipnat runs
// as separate processes share it.
package nat

// DefaultPinDir is where the NAT datapath is pinned.
const DefaultPinDir = "/sys/fs/bpf/sluice-nat"

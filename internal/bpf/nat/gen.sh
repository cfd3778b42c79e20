#!/bin/sh
# Regenerates the bpf2go output for c/nat.c (`go generate ./internal/bpf/nat`).
# Needs clang and the libbpf headers. The output is committed so builds
# need no clang; .ci/run regenerates it and fails on any difference.
set -eu
cd "$(dirname "$0")"
ARCH_INC="/usr/include/$(uname -m)-linux-gnu"
exec go run github.com/cilium/ebpf/cmd/bpf2go \
	-target bpfel -go-package nat \
	-type nat_rule -type nat_op -type nat_rstate -type nat_order -type nat_key -type nat_tuple \
	-type nat_sess -type nat_frag_key -type nat_hm_key -type nat_hm -type nat_ifaddr -type nat_text \
	-type nat_ftp -type nat_fkey -type nat_fast -type nat_fast4 -type nat_fast6 -type nat_hot -type nat_slot -type nat_sweeper \
	nat c/nat.c -- -O2 -g -Wall -Werror -I"$ARCH_INC" -Ic

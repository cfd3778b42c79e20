#!/bin/sh
# Regenerates the bpf2go output for c/filter.c (filter_bpfel.go and
# filter_bpfel.o); go generate runs it, regen.sh wraps it. Needs clang and
# the kernel UAPI headers. The object is the same for every little-endian
# target; only the directory of <asm/types.h> depends on the build
# machine, so it follows GOARCH (set by go generate).
set -eu
cd "$(dirname "$0")"
arch=${GOARCH:-$(go env GOARCH)}
case "$arch" in
amd64) triple=x86_64-linux-gnu ;;
arm64) triple=aarch64-linux-gnu ;;
386) triple=i386-linux-gnu ;;
arm) triple=arm-linux-gnueabihf ;;
ppc64le) triple=powerpc64le-linux-gnu ;;
riscv64) triple=riscv64-linux-gnu ;;
s390x) triple=s390x-linux-gnu ;;
loong64) triple=loongarch64-linux-gnu ;;
*) echo "gen.sh: no multiarch include directory known for GOARCH=$arch" >&2; exit 1 ;;
esac
exec go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -cc clang \
	-cflags "-O2 -g -Wall -Werror -I/usr/include/$triple -Ic/include" \
	-type tcp_side -type rule -type pps_window -type text_chunk -type text_key -type run_key -type run4_key \
	-type cmatch -type hot_count -type hot_hits -type cblock -type state_cnt \
	filter c/filter.c

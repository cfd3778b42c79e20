#!/bin/sh
# Regenerates the bpf2go output for qos.c. Run from this directory
# (`go generate ./internal/bpf/qosmark`). Needs clang and libbpf headers.
set -eu
cd "$(dirname "$0")"
ARCH_INC="/usr/include/$(uname -m)-linux-gnu"
exec go run github.com/cilium/ebpf/cmd/bpf2go \
	-target bpfel -go-package qosmark \
	-type qos_rule -type qos_adapter -type qos_policy -type qos_counter -type qos_conf_chunk \
	qos qos.c -- -O2 -g -Wall -Werror -I"$ARCH_INC"

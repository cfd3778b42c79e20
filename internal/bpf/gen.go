package bpf

// The filter object is compiled from filter.c by bpf2go; regen.sh runs this
// and check-generated.sh verifies that the committed output is current.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -Ic/include" filter c/filter.c

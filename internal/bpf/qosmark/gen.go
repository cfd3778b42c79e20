package qosmark

// Regenerate qos_bpfel.go and qos_bpfel.o after editing qos.c (needs clang;
// see gen.sh). The generated files are committed so builds need no clang.
//go:generate ./gen.sh

package nat

// Regenerate nat_bpfel.go and nat_bpfel.o after editing c/nat.c or
// c/nat.h (needs clang; see gen.sh). The generated files are committed.
//go:generate ./gen.sh

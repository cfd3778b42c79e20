#!/usr/bin/env bash
# Regenerates filter_bpfel.go and filter_bpfel.o from c/filter.c (bpf2go,
# clang -target bpfel). With --check it regenerates into the tree, compares
# with what was there and restores it, failing when they differ: .ci/run
# calls `internal/bpf/regen.sh --check` so a stale object cannot be committed.
set -euo pipefail
cd "$(dirname "$0")"
if [ "${1:-}" != "--check" ]; then
	exec go generate ./
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp filter_bpfel.go filter_bpfel.o "$tmp"/
go generate ./
stale=0
for f in filter_bpfel.go filter_bpfel.o; do
	if ! cmp -s "$f" "$tmp/$f"; then
		echo "internal/bpf/$f is stale: run internal/bpf/regen.sh and commit the result" >&2
		stale=1
	fi
	cp "$tmp/$f" "$f"
done
exit $stale

#!/bin/sh
# old (main a5c5dc6), new (mil16: fast parse, slot sizes, hugeHeap), nohuge (new without hugeHeap), alternated
cd /tmp/mil16
for r in 1 2; do
  for c in 0,1 1; do
    case $r in 1) order="old new nohuge";; 2) order="nohuge new old";; esac
    for v in $order; do
      case $v in old) b=/tmp/s16/old/ipf;; new) b=/tmp/mil16/new/ipf;; nohuge) b=/tmp/mil16/nohuge/ipf;; esac
      echo "== round $r cpus $c $v $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
      ./run1.sh $b /tmp/mil16/million.conf $c 2>&1 | grep wall
    done
  done
done

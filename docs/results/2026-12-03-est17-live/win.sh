#!/bin/bash
# est17: main's binary (old), st_dm kmalloc'd (a: 64 slots, not mmapable, hot lines
# whole at the 312-byte value offset) and est16-cfg-wip on main (b), alternated.
# usage: win.sh OUTDIR RUN...   (RUN: variant and round, e.g. old1 a1 b1 b2 a2 old2)
set -u
O=$1; shift; mkdir -p $O
NP="--netperf /work/shared/netperf-c/bin/netperf --netserver /work/shared/netperf-c/bin/netserver --no-progress"
F='--configs none,tcx-floor,sluice-attach,sluice-stateless,sluice-stateful'
for r in "$@"; do
  v=${r%%[0-9]*}
  case $v in old) B=/tmp/s17/old/sluice ;; a) B=/tmp/est17/a/sluice ;; b) B=/tmp/est17/b/sluice ;; esac
  echo "$(date -u +%T) start $r load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times
  ( sleep 40; grep -E 'array_map_alloc' /proc/vmallocinfo | awk '{print $2, $3, $4, $6}' | sort | uniq -c > $O/vmalloc-$r.txt ) &
  $B bench --quick --reps 2 --duration 3s --cpus 0 --tests "TCP_RR 1/1 inbound" $F $NP --out $O/$r > $O/$r.log 2>&1
  wait
done
echo "$(date -u +%T) done load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/times

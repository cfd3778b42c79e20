#!/bin/bash
# measure.sh OUTDIR PAIRS — alternates old and new, old first in odd pairs
set -u
O=$1; mkdir -p $O
NP="--netperf /work/shared/netperf-c/bin/netperf --netserver /work/shared/netperf-c/bin/netserver --no-progress"
for i in $(seq 1 $2); do
 order="old new"; [ $((i % 2)) = 0 ] && order="new old"
 for v in $order; do
  echo start $v$i $(date -u +%T) $(cat /proc/loadavg)
  /tmp/est15/$v bench --quick --reps 3 --duration 3s --cpus 0 --tests "TCP_RR 1/1 inbound" --configs none,tcx-floor,sluice-stateful $NP --out $O/$v$i > $O/$v$i.log 2>&1
  echo end $v$i $(date -u +%T) $?
 done
done
echo done $(date -u +%T)

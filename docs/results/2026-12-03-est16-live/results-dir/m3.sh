#!/bin/bash
set -u
O=(this directory); mkdir -p $O
NP="--netperf /work/shared/netperf-c/bin/netperf --netserver /work/shared/netperf-c/bin/netserver --no-progress"
F='--configs none,tcx-floor,sluice-attach,sluice-stateless,sluice-stateful'
date > $O/times
for i in 1 2 3; do
 for v in old new; do
  B=/tmp/s16/old/sluice; [ $v = new ] && B=/tmp/est16/sluice-new
  $B bench --quick --reps 2 --duration 3s --cpus 0 --tests "TCP_RR 1/1 inbound" $F $NP --out $O/$v$i > $O/$v$i.log 2>&1
  date >> $O/times
 done
done
echo done

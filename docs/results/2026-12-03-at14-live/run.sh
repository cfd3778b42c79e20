#!/bin/bash
C=none,tcx-floor,sluice-attach,sluice-stateless,sluice-stateful,nft-stateless
for p in 1 2 3; do
 for b in old new; do
  [ $(date +%s) -gt $(date -d 05:02:30 +%s) ] && exit 0
  /tmp/at14/$b/sluice bench --quick --reps 3 --duration 3s --cpus 0 --tests "TCP_RR 1/1 inbound" --configs $C --netperf /work/shared/netperf-c/bin/netperf --netserver /work/shared/netperf-c/bin/netserver --no-progress --out /tmp/at14/p$p$b > /tmp/at14/p$p$b.log 2>&1
  echo "$b $p done $(date +%T) $(cut -d' ' -f1 /proc/loadavg)"
 done
done

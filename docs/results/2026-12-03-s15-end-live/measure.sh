#!/bin/bash
# usage: measure.sh OUTDIR — alternates new (/tmp/s15/new) and old (/tmp/s15/sluice)
set -u
O=$1; mkdir -p $O
NP="--netperf /work/shared/netperf-c/bin/netperf --netserver /work/shared/netperf-c/bin/netserver --no-progress"
F='--configs none,tcx-floor,sluice-attach,sluice-stateless,sluice-stateful,sluice-nomatch-10000,sluice-nomatch-1000000,nft-stateless,nft-stateful,nft-nomatch-10000,nft-nomatch-set-1000000'
C='--configs none,tcx-floor,sluice-stateful,nft-stateful'
for i in 1 2; do
 for v in new old; do
  B=/tmp/s15/sluice; [ $v = new ] && B=/tmp/s15/new
  $B bench --quick --reps 3 --duration 3s --cpus 0 --tests "TCP_RR 1/1 inbound" $F $NP --out $O/f-$v$i > $O/f-$v$i.log 2>&1
 done
done
for v in new old; do
  B=/tmp/s15/sluice; [ $v = new ] && B=/tmp/s15/new
  $B bench --quick --reps 3 --duration 3s --cpus 0 --tests "TCP_CRR 1/1 inbound" $C $NP --out $O/crr-$v > $O/crr-$v.log 2>&1
done
echo done

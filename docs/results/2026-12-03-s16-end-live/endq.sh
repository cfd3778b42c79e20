#!/bin/bash
# end of session 16: the million's load (old/new alternated), then one pair of the filter suite
set -u
O=$1; mkdir -p $O
R=/work/main/docs/results/2026-12-03-mil16-load/run1.sh
for r in 1 2; do
  for v in old new; do
    echo "== round $r $v" >> $O/load.txt
    sh $R /tmp/s16/$v/ipf /tmp/mil16/million.conf 0,1 >> $O/load.txt 2>&1
  done
done
NP="--netperf /work/shared/netperf-c/bin/netperf --netserver /work/shared/netperf-c/bin/netserver --no-progress"
F='--configs none,tcx-floor,sluice-attach,sluice-stateless,sluice-stateful,sluice-nomatch-10000,sluice-nomatch-1000000,nft-stateless,nft-stateful,nft-nomatch-10000,nft-nomatch-set-1000000'
for v in new old; do
  /tmp/s16/$v/sluice bench --quick --reps 3 --duration 3s --cpus 0 --tests "TCP_RR 1/1 inbound" $F $NP --out $O/f-${v}1 > $O/f-${v}1.log 2>&1
done
echo done >> $O/load.txt

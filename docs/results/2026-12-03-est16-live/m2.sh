#!/bin/bash
set -u
O=(this directory); mkdir -p $O
NP="--netperf /work/shared/netperf-c/bin/netperf --netserver /work/shared/netperf-c/bin/netserver --no-progress"
A='--configs none,tcx-floor,sluice-stateful-at-0,sluice-stateful-at-55,sluice-stateful-at-53,sluice-stateful-at-50,sluice-stateful-at-52'
R='--configs none,tcx-floor,sluice-stateful-at-52,sluice-stateful-at-50,sluice-stateful-at-53,sluice-stateful-at-55,sluice-stateful-at-0'
date > $O/times
/tmp/est16/xsluice bench --quick --reps 3 --duration 3s --cpus 0 --tests "TCP_RR 1/1 inbound" $A $NP --out $O/a > $O/a.log 2>&1
date >> $O/times
/tmp/est16/xsluice bench --quick --reps 3 --duration 3s --cpus 0 --tests "TCP_RR 1/1 inbound" $R $NP --out $O/b > $O/b.log 2>&1
date >> $O/times
echo done

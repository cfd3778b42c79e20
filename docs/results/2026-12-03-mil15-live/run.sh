#!/bin/bash
# run.sh BIN OUT CONFIGS [reps] [dur]
/bin/echo start $2 $(date -u +%T) $(cat /proc/loadavg)
$1 bench --quick --reps ${4:-3} --duration ${5:-3s} --cpus 0 --tests "TCP_RR 1/1 inbound" --configs $3 --netperf /work/shared/netperf-c/bin/netperf --netserver /work/shared/netperf-c/bin/netserver --no-progress --out $2 > $2.log 2>&1
/bin/echo end $2 $(date -u +%T) $?

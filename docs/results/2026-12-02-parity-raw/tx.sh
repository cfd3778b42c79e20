#!/bin/bash
# tx.sh GOBIN TEST SIZE — Go sender: TCP_STREAM client (to C netserver) or TCP_MAERTS server (from C netperf)
GOBIN=$1; T=$2; M=$3; L=3; C=${NETPERF_C_BIN:-/work/shared/netperf-c/bin}; SF=""; [ "$GOBIN" = C ] && { GOBIN=$C; SF=-f; }
EV=raw_syscalls:sys_enter,syscalls:sys_enter_nanosleep,syscalls:sys_enter_futex,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_tgkill,context-switches
PORT=$((20000 + RANDOM % 20000))
if [ "$T" = TCP_STREAM ]; then
  taskset -c 1 $C/netserver -D -p $PORT >/dev/null 2>&1 & SP=$!; sleep 0.3
  taskset -c 0 perf stat -x, -e $EV -o ${TMPDIR:-/tmp}/tperf.$$ $GOBIN/netperf -H 127.0.0.1 -p $PORT -t $T -l $L -P 0 -- -m $M > ${TMPDIR:-/tmp}/tout.$$ 2>&1
  kill $SP; wait $SP 2>/dev/null
else
  taskset -c 1 $GOBIN/netserver -D $SF -p $PORT >/dev/null 2>&1 & SP=$!; sleep 0.3
  (perf stat -x, -e $EV -p $SP -o ${TMPDIR:-/tmp}/tperf.$$ ) & PP=$!; sleep 0.2
  taskset -c 0 $C/netperf -H 127.0.0.1 -p $PORT -t $T -l $L -P 0 -- -m $M > ${TMPDIR:-/tmp}/tout.$$ 2>&1
  sleep 0.1; kill -INT $PP; wait $PP; kill $SP; wait $SP 2>/dev/null
fi
tp=$(grep -E '^[ ]*[0-9]' ${TMPDIR:-/tmp}/tout.$$ | tail -1)
echo "== $T $M: $tp"
awk -F, -v tp="$tp" 'BEGIN{split(tp,a," "); kb=a[5]*a[4]*1e6/8/1024} !/^#/ && NF>2 {n=$3; sub(/.*:sys_enter_?/,"",n); if(n=="")n="ALL"; printf "%s=%s(%.5f/KB) ", n, $1, $1/kb} END{print ""}' ${TMPDIR:-/tmp}/tperf.$$
rm -f ${TMPDIR:-/tmp}/tperf.$$ ${TMPDIR:-/tmp}/tout.$$

#!/bin/bash
# rx.sh GOBIN TEST SIZE [secs]  — measure the Go receiver's counts
# TCP_STREAM/UDP_STREAM: Go netserver receives (C netperf client sends)
# TCP_MAERTS: Go netperf client receives (C netserver sends)
GOBIN=$1; T=$2; M=$3; L=${4:-3}; SF=""; [ "$GOBIN" = C ] && { GOBIN=${NETPERF_C_BIN:-/work/shared/netperf-c/bin}; SF=-f; }
C=${NETPERF_C_BIN:-/work/shared/netperf-c/bin}
EV=raw_syscalls:sys_enter,syscalls:sys_enter_nanosleep,syscalls:sys_enter_futex,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_tgkill,context-switches
PORT=$((20000 + RANDOM % 20000))
ctx() { local s=0; for f in /proc/$1/task/*/status; do v=$(awk '/ctxt_switches/{s+=$2} END{print s}' $f 2>/dev/null); s=$((s+${v:-0})); done; echo $s; }
if [ "$T" = TCP_MAERTS ]; then
  taskset -c 1 $C/netserver -D -p $PORT >/dev/null 2>&1 & SP=$!
  sleep 0.3
  taskset -c 0 perf stat -x, -e $EV -o ${TMPDIR:-/tmp}/perf.$$ $GOBIN/netperf -H 127.0.0.1 -p $PORT -t $T -l $L -P 0 -- -M $M > ${TMPDIR:-/tmp}/out.$$ 2>&1
  kill $SP; wait $SP 2>/dev/null
else
  taskset -c 1 $GOBIN/netserver -D $SF -p $PORT >/dev/null 2>&1 & SP=$!
  sleep 0.3
  (perf stat -x, -e $EV -p $SP -o ${TMPDIR:-/tmp}/perf.$$ ) & PP=$!
  sleep 0.2
  c0=$(ctx $SP)
  taskset -c 0 $C/netperf -H 127.0.0.1 -p $PORT -t $T -l $L -P 0 -- -m $M > ${TMPDIR:-/tmp}/out.$$ 2>&1
  c1=$(ctx $SP)
  sleep 0.1; kill -INT $PP; wait $PP; kill $SP; wait $SP 2>/dev/null
fi
# throughput line: last numeric line
tp=$(grep -E '^[ ]*[0-9]' ${TMPDIR:-/tmp}/out.$$ | tail -1)
echo "== $T $M: $tp"
awk -F, -v tp="$tp" -v t=$T 'BEGIN{split(tp,a," "); if (t=="UDP_STREAM") {kb=a[3]/1.0; unit="msg"} else {kb=a[5]*a[4]*1e6/8/1024; unit="KB"}} !/^#/ && NF>2 {n=$3; sub(/.*:sys_enter_?/,"",n); if(n=="")n="ALL"; printf "%s=%s(%.5f/%s) ", n, $1, $1/kb, unit} END{print ""}' ${TMPDIR:-/tmp}/perf.$$
rm -f ${TMPDIR:-/tmp}/perf.$$ ${TMPDIR:-/tmp}/out.$$

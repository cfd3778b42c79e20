#!/bin/sh
# usage: run1.sh IPFBIN CONF CPUS  -- in a fresh netns+bpffs: first load, then -Fa -f reload
set -e
BIN=$1; CONF=$2; CPUS=$3
exec unshare -n -m sh -c "
mount -t bpf bpf /tmp/mil16/bpffs 2>/dev/null || { mkdir -p /tmp/mil16/bpffs; mount -t bpf bpf /tmp/mil16/bpffs; }
ip link set lo up
ip link add mil16a type veth peer name mil16b; ip link set mil16a up; ip link set mil16b up
export SLUICE_BPF_DIR=/tmp/mil16/bpffs/sluice
echo first; taskset -c $CPUS /usr/bin/time -f 'wall %e user %U sys %S maxrss %M KB minflt %R' $BIN -f $CONF
echo reload; taskset -c $CPUS /usr/bin/time -f 'wall %e user %U sys %S maxrss %M KB minflt %R' $BIN -Fa -f $CONF
$BIN -D >/dev/null 2>&1 || true
"

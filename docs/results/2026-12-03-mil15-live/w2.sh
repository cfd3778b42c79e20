#!/bin/bash
cd /tmp/mil15/live
until mkdir /work/helpers/QUIET.lock 2>/dev/null; do sleep 5; done
echo mil15 > /work/helpers/QUIET
echo locked $(date -u +%T) $(cat /proc/loadavg)
sleep 60
R=./run.sh; O=/tmp/mil15/old/sluice; N=/tmp/mil15/new/sluice
C=none,tcx-floor,sluice-nomatch-10000,sluice-nomatch-1000000,nft-nomatch-set-1000000
$R $O o1 $C
$R $N n1 $C
$R $N n2 $C
$R $O o2 $C
rm -f /work/helpers/QUIET; rmdir /work/helpers/QUIET.lock
echo released $(date -u +%T)

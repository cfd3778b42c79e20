#!/bin/bash
# waits for the QUIET lock, measures, releases
cd /tmp/ten14/live
until mkdir /work/helpers/QUIET.lock 2>/dev/null; do sleep 5; done
echo ten14 > /work/helpers/QUIET
echo locked $(date -u +%T) $(cat /proc/loadavg)
sleep 60
R=./run.sh; O=/tmp/ten14/old/sluice; N=/tmp/ten14/new/sluice
C=none,tcx-floor,sluice-stateless,sluice-nomatch-10000
$R $O o1 $C,nft-nomatch-10000
$R $N n1 $C,sluice-nomatch-10000-cut-1,sluice-nomatch-10000-cut-2,sluice-nomatch-10000-cut-3,sluice-nomatch-10000-cut-4,sluice-nomatch-10000-cut-5,sluice-nomatch-10000-cut-0,nft-nomatch-10000
$R $O o2 $C
$R $N n2 $C,sluice-nomatch-10000-cut-0,sluice-nomatch-10000-cut-5,sluice-nomatch-10000-cut-4,sluice-nomatch-10000-cut-3,sluice-nomatch-10000-cut-2,sluice-nomatch-10000-cut-1
$R $O o3 $C
rm -f /work/helpers/QUIET; rmdir /work/helpers/QUIET.lock
echo released $(date -u +%T)

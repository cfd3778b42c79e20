#!/bin/bash
cd /tmp/mil15/live
until mkdir /work/helpers/QUIET.lock 2>/dev/null; do sleep 5; done
echo mil15 > /work/helpers/QUIET
echo locked $(date -u +%T) $(cat /proc/loadavg)
sleep 60
./run.sh /tmp/mil15/old/sluice m0 none,tcx-floor,sluice-nomatch-10000,sluice-nomatch-1000000,nft-nomatch-set-1000000
echo loadbench $(date -u +%T) $(cat /proc/loadavg)
(cd /work/mil15/internal/bpf && GOMAXPROCS=1 /usr/bin/time -v taskset -c 1 /tmp/mil15/old/bpf.test -test.run '^$' -test.bench 'BenchmarkLoadMillion' -test.benchtime 1x -test.benchmem) > loadm0.txt 2>&1
echo done $(date -u +%T) $(cat /proc/loadavg)
rm -f /work/helpers/QUIET; rmdir /work/helpers/QUIET.lock
echo released $(date -u +%T)

#!/bin/bash
# counts.sh: before (main) / after (np4) / C, receivers and senders, N reps
cd "$(dirname "$0")"
for rep in 1 2; do
for b in ${BEFORE:?Go binaries of main} ${AFTER:?Go binaries of this branch} C; do
  w=$(basename $(dirname $b)); [ $b = C ] && w=C
  for t in "TCP_STREAM 16K" "TCP_STREAM 64K" "TCP_STREAM 1K" "TCP_MAERTS 16K" "UDP_STREAM 1K"; do
    echo "RX $w $t $(./rx.sh $b $t 3 | tr '\n' ' ')"
  done
  for t in "TCP_STREAM 16K" "TCP_MAERTS 16K"; do
    echo "TX $w $t $(./tx.sh $b $t | tr '\n' ' ')"
  done
done
done

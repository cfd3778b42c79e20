. /tmp/ops17/env.sh
cd /tmp/ops17/adm
printf 'pass in quick proto tcp from any to any port = 22 flags S keep state\nblock in all\n' > a.conf
printf 'pass in quick proto tcp from any to any port = 22 flags S keep state\npass in quick proto tcp from any to any port = 80 flags S keep state\nblock in all\n' > b.conf
A ipf -Fa -f a.conf
SA=$(A ipfstat -io 2>&1 | sed 's/^[0-9]* //'); 
A ipf -Fa -f b.conf
SB=$(A ipfstat -io 2>&1 | sed 's/^[0-9]* //')
for i in $(seq 1 ${1:-30}); do
  if [ $((i%2)) = 0 ]; then f=a.conf; else f=b.conf; fi
  mode=$((i%3))
  case $mode in
   0) nsenter --net=/run/netns/ops17a ipf -Fa -f $f & ;;
   1) nsenter --net=/run/netns/ops17a ipf -I -Fa -f $f -s & ;;
   2) nsenter --net=/run/netns/ops17a ipf -Fa -f $f & nsenter --net=/run/netns/ops17a ipf -Fa -f $( [ $f = a.conf ] && echo b.conf || echo a.conf) & ;;
  esac
  d=$(python3 -c "import random;print(round(random.uniform(6,13),2))")
  sleep $d
  # SIGKILL only the ipf processes started here (children of this shell)
  for p in $(jobs -p); do kill -9 $p 2>/dev/null; done
  wait 2>/dev/null
  now=$(A ipfstat -io 2>&1 | sed 's/^[0-9]* //')
  w=NEITHER; [ "$now" = "$SA" ] && w=A; [ "$now" = "$SB" ] && w=B
  # traffic: what a SYN to 22 and to 80 get
  printf '%2d mode=%d f=%s kill@%ss -> %s' $i $mode $f $d $w
  [ $w = NEITHER ] && { echo; echo "$now"; }
  A ipf -V 2>&1 | grep -E '^Running|warn|pending' | tr '\n' ' '
  echo
done

. /tmp/ops17/env.sh
cd /tmp/ops17/adm
base=$(A ipfstat -io 2>&1)
run() { # name, then the command
  n=$1; shift
  out=$(timeout 20 "$@" 2>&1); rc=$?
  now=$(A ipfstat -io 2>&1)
  ch=same; [ "$now" != "$base" ] && ch=CHANGED
  printf '%-26s rc=%-3s rules=%-7s | %s\n' "$n" "$rc" "$ch" "$(echo "$out" | head -3 | tr '\n' '|' | cut -c1-230)"
  A ipf -Fa -f /tmp/ops17/att.conf >/dev/null 2>&1
}
printf 'pass in all\n' > ok.conf
: > empty.conf
printf 'pass in all\n\0block in all\n' > nul.conf
python3 -c "print('pass in all'); print('#'+'x'*10*1024*1024); print('block in all')" > longcomment.conf
python3 -c "print('pass in from ' + '1.2.3.4,'*1000000 + '1.2.3.5 to any')" > longrule.conf
python3 -c "print('pass in all ' + 'x'*10*1024*1024)" > longjunk.conf
printf 'pass in all\r\nblock in quick proto tcp from any to any port = 23\r\n' > crlf.conf
printf '\xef\xbb\xbfpass in all\n' > bom.conf
printf 'pass in all\nblock in all with bogus\n' > err.conf
mkdir -p adir
rm -f fifo; mkfifo fifo
run wrong-flag nsenter --net=/run/netns/ops17a ipf -Q
run missing-file nsenter --net=/run/netns/ops17a ipf -Fa -f /nonexistent.conf
run directory nsenter --net=/run/netns/ops17a ipf -Fa -f adir
run empty nsenter --net=/run/netns/ops17a ipf -Fa -f empty.conf
run nul nsenter --net=/run/netns/ops17a ipf -Fa -f nul.conf
run longcomment nsenter --net=/run/netns/ops17a ipf -Fa -f longcomment.conf
run longrule nsenter --net=/run/netns/ops17a ipf -Fa -f longrule.conf
run longjunk nsenter --net=/run/netns/ops17a ipf -Fa -f longjunk.conf
run crlf nsenter --net=/run/netns/ops17a ipf -Fa -f crlf.conf
run bom nsenter --net=/run/netns/ops17a ipf -Fa -f bom.conf
run error nsenter --net=/run/netns/ops17a ipf -Fa -f err.conf
run fifo-noeof nsenter --net=/run/netns/ops17a ipf -Fa -f fifo
run dev-zero nsenter --net=/run/netns/ops17a ipf -Fa -f /dev/zero
run dev-urandom nsenter --net=/run/netns/ops17a ipf -Fa -f /dev/urandom
run nat-missing nsenter --net=/run/netns/ops17a ipnat -CF -f /nonexistent
run nat-dir nsenter --net=/run/netns/ops17a ipnat -CF -f adir
run nat-nul nsenter --net=/run/netns/ops17a ipnat -CF -f nul.conf
run nat-fifo nsenter --net=/run/netns/ops17a ipnat -CF -f fifo
run pool-missing nsenter --net=/run/netns/ops17a ippool -F -f /nonexistent
run pool-dir nsenter --net=/run/netns/ops17a ippool -f adir
run pool-fifo nsenter --net=/run/netns/ops17a ippool -f fifo
run pool-nul nsenter --net=/run/netns/ops17a ippool -f nul.conf
run ipfstat-badflag nsenter --net=/run/netns/ops17a ipfstat -Q
run ipmon-badfile nsenter --net=/run/netns/ops17a ipmon -a -f adir
run qos-missing nsenter --net=/run/netns/ops17a ipqosadmin -load /nonexistent
run qos-dir nsenter --net=/run/netns/ops17a ipqosadmin -load adir
run qos-fifo nsenter --net=/run/netns/ops17a ipqosadmin -load fifo
run qos-nul nsenter --net=/run/netns/ops17a ipqosadmin -load nul.conf
run ipftest-fifo ipftest -r fifo -i /dev/null
run ipf-n-fifo ipf -Rnvf fifo

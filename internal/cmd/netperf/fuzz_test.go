package netperf

import (
	"io"
	"strings"
	"testing"
	"time"

	"sluice/internal/netperf"
)

// FuzzParseArgs feeds arbitrary argv (words separated by NUL, which no real
// argument can contain) to the command-line parser. It must not panic, and
// whatever it accepts must print without panicking, because Main prints
// the report of any command line it accepted.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"-H 10.0.0.2 -p12866 -l -500 -t tcp_rr -cC -f m -P 0 -v 2 -i 10,3 -I 95,2 -B br -L 10.0.0.1 -4 -T 1,3 -Z pw -- -r 64,128 -s 64K -S 1M -D -P 5001,5002 -o",
		"-l1 -- -O THROUGHPUT,ELAPSED_TIME -m 1024",
		"-t UDP_STREAM -- -m 64K -M 1G -k ?",
		"-t TCP_MAERTS -f G -v 0 -- -k all",
		"-l -9223372036854775808",
		"-D -0.5,100 -c 50 -C 7 -t TCP_CRR",
		"-- -o -O",
		"-T , -i ,",
		"-- -m 4611686018427387903",
		"-- -r 3G,1 -s 2147483647 -S -2G",
		"-t TCP_RR -- -O all;THROUGHPUT -u x",
	} {
		f.Add(strings.Join(strings.Fields(s), "\x00"))
	}
	f.Fuzz(func(t *testing.T, argv string) {
		var args []string
		if argv != "" {
			args = strings.Split(argv, "\x00")
		}
		o, err := Parse(args)
		if err != nil {
			return
		}
		c := o.Config
		for _, v := range []int{c.SendSize, c.RecvSize, c.LocalSendSize, c.RemoteSendSize, c.LocalRecvSize, c.RemoteRecvSize,
			c.ReqSize, c.RespSize, c.LocalSendBuf, c.LocalRecvBuf, c.RemoteSendBuf, c.RemoteRecvBuf} {
			if v > 1<<31-1 || v < 0 {
				t.Fatalf("accepted size %d, which the wire cannot carry", v)
			}
		}
		r := &netperf.Result{Test: o.Config.Test, Elapsed: time.Second, LocalCPU: -1, RemoteCPU: -1}
		if o.ConfActive {
			r.Confidence = &netperf.Confidence{Iterations: 1, Level: o.Config.ConfLevel, Width: o.Config.ConfWidth}
		}
		o.Print(io.Discard, o.Report(r))
	})
}

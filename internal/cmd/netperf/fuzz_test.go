package netperf

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"sluice/internal/netperf"
)

// FuzzParseArgs feeds arbitrary argv (words separated by NUL, which no real
// argument can contain) to both command-line parsers. Neither may panic, and
// whatever netperf accepts must also print without panicking, because
// NetperfMain prints the report of any command line it accepted.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"-H 10.0.0.2 -p12866 -l -500 -t tcp_rr -cC -f m -P 0 -v 2 -i 10,3 -I 95,2 -B br -L 10.0.0.1 -4 -T 1,3 -Z pw -- -r 64,128 -s 64k -S 1M -D -P 5001,5002 -o",
		"-l1 -- -O THROUGHPUT,ELAPSED_TIME -m 1024",
		"-t UDP_STREAM -- -m 64k -M 1g -k ?",
		"-t TCP_MAERTS -f G -v 0 -- -k",
		"-l -9223372036854775808",
		"-p 12000 -L 127.0.0.1 -D -4 -f",
		"-- -o -O",
		"-T , -i ,",
		"-- -m 4611686018427387903",
		"-- -r 3g,1 -s 2147483647 -S -2g",
	} {
		f.Add(strings.Join(strings.Fields(s), "\x00"))
	}
	f.Fuzz(func(t *testing.T, argv string) {
		var args []string
		if argv != "" {
			args = strings.Split(argv, "\x00")
		}
		_, _ = ParseNetserver(args)
		o, err := ParseNetperf(args)
		if err != nil {
			return
		}
		c := o.Config
		for _, v := range []int{c.SendSize, c.RecvSize, c.ReqSize, c.RespSize, c.LocalSockBuf, c.RemoteSockBuf} {
			if v > math.MaxInt32 || v < math.MinInt32 {
				t.Fatalf("accepted size %d, which the wire cannot carry", v)
			}
		}
		r := &netperf.Result{Test: strings.ToUpper(o.Config.Test), Elapsed: time.Second, LocalCPU: -1, RemoteCPU: -1}
		if o.Config.ConfMax > 1 {
			r.Confidence = &netperf.Confidence{Iterations: 1, Level: o.Config.ConfLevel, Width: o.Config.ConfWidth}
		}
		o.Print(io.Discard, o.Report(r, "netperf "+strings.Join(args, " ")))
	})
}

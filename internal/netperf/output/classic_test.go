package output

import (
	"os"
	"strings"
	"testing"
	"time"

	"sluice/internal/netperf"
)

const examples = "/work/shared/netperf-wire/output-examples.raw.txt"

// loadExamples splits the captured outputs by command line; the ⏎ markers
// are the real line ends.
func loadExamples(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(examples)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var cmd string
	var body strings.Builder
	flush := func() {
		if cmd != "" {
			out[cmd] = body.String()
		}
		body.Reset()
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "$ netperf -H 127.0.0.1 -l 1 ") {
			flush()
			cmd = strings.TrimSpace(strings.TrimPrefix(line, "$ netperf -H 127.0.0.1 -l 1 "))
			continue
		}
		if line == "" {
			continue
		}
		body.WriteString(strings.TrimSuffix(line, "⏎") + "\n")
	}
	flush()
	return out
}

func cpu(u float64) netperf.CPUStats { return netperf.CPUStats{Util: u, Method: 'S', NumCPUs: 2} }

// base returns a report with the socket sizes the captures show.
func base(test string) *Report {
	r := &netperf.Result{Test: test, Elapsed: time.Second, LocalCPU: -1, RemoteCPU: -1, LocalSD: -1, RemoteSD: -1}
	switch test {
	case netperf.UDPStream, netperf.UDPRR:
		r.LSS, r.LSR, r.RSS, r.RSR = 212992, 212992, 212992, 212992
		r.LocalSendSize = 65507
	default:
		r.LSS, r.LSR, r.RSS, r.RSR = 16384, 131072, 16384, 131072
		r.LocalSendSize, r.RemoteSendSize = 16384, 16384
	}
	r.ReqSize, r.RespSize = 1, 1
	return &Report{Result: r, Host: "127.0.0.1", Verbosity: 1}
}

func withCPU(r *Report, util, sd float64) *Report {
	r.ShowLocalCPU, r.ShowRemoteCPU = true, true
	r.Result.LocalCPU, r.Result.RemoteCPU = util, util
	r.LocalSD, r.RemoteSD = sd, sd
	r.LocalCPUStats, r.RemoteCPUStats = cpu(util), cpu(util)
	return r
}

func tput(r *Report, v float64) *Report {
	if isRR(r.Test) {
		r.TransPerSec = v
	} else {
		r.ThroughputMbps = v
	}
	return r
}

func TestClassicMatchesCaptures(t *testing.T) {
	ex := loadExamples(t)
	type tc struct {
		cmd string
		rep *Report
	}
	udp := func(sent, got int64, lt, rt float64) *Report {
		r := base(netperf.UDPStream)
		r.LocalSendCalls, r.RemoteRecvCalls = sent, got
		r.SendThroughputMbps, r.ThroughputMbps = lt, rt
		// netperf prints the two rows from the byte counts.
		r.BytesSent, r.RemoteBytesRecv = int64(lt*1e6/8+0.5), int64(rt*1e6/8+0.5)
		return r
	}
	v := func(r *Report, n int) *Report { r.Verbosity = n; return r }
	p0 := func(r *Report) *Report { r.NoHeaders = true; return r }
	onlyLocal := func(r *Report) *Report { r.ShowRemoteCPU = false; return r }
	cases := []tc{
		{"-t TCP_STREAM", tput(base(netperf.TCPStream), 26358.71)},
		{"-t TCP_STREAM -c -C", tput(withCPU(base(netperf.TCPStream), 88.31, 0.526), 27496.08)},
		{"-t TCP_STREAM -v 0", v(tput(base(netperf.TCPStream), 26277.04), 0)},
		{"-t TCP_STREAM -v 0 -c", onlyLocal(v(withCPU(base(netperf.TCPStream), 88, 0.512), 0))},
		{"-t TCP_STREAM -P 0", p0(tput(base(netperf.TCPStream), 28681.66))},
		{"-t TCP_MAERTS", tput(base(netperf.TCPMaerts), 29244.77)},
		{"-t TCP_MAERTS -c -C", tput(withCPU(base(netperf.TCPMaerts), 86.92, 0.552), 25789.06)},
		{"-t TCP_MAERTS -v 0", v(tput(base(netperf.TCPMaerts), 28482.80), 0)},
		{"-t TCP_MAERTS -v 0 -c", onlyLocal(v(withCPU(base(netperf.TCPMaerts), 88, 0.593), 0))},
		{"-t TCP_MAERTS -P 0", p0(tput(base(netperf.TCPMaerts), 26451.28))},
		{"-t TCP_RR", tput(base(netperf.TCPRR), 46791.58)},
		{"-t TCP_RR -c -C", tput(withCPU(base(netperf.TCPRR), 44.46, 20.302), 43798.82)},
		{"-t TCP_RR -v 0", v(tput(base(netperf.TCPRR), 42198.94), 0)},
		{"-t TCP_RR -v 0 -c", onlyLocal(v(withCPU(base(netperf.TCPRR), 40, 20.611), 0))},
		{"-t TCP_RR -P 0", p0(tput(base(netperf.TCPRR), 45075.25))},
		{"-t TCP_RR -v 2", v(tput(base(netperf.TCPRR), 41802.102), 2)},
		{"-t TCP_CRR", tput(base(netperf.TCPCRR), 20881.85)},
		{"-t TCP_CRR -v 0", v(tput(base(netperf.TCPCRR), 21554.03), 0)},
		{"-t TCP_CRR -v 0 -c", onlyLocal(v(withCPU(base(netperf.TCPCRR), 60, 59.000), 0))},
		{"-t TCP_CRR -P 0", p0(tput(base(netperf.TCPCRR), 18900.36))},
		{"-t TCP_CRR -v 2", v(tput(base(netperf.TCPCRR), 19657.02), 2)},
		{"-t UDP_STREAM", udp(98166, 97492, 51440.99, 51087.80)},
		{"-t UDP_STREAM -c -C", withCPU(udp(93003, 92667, 48732.3, 48556.3), 87.50, 0.294)},
		{"-t UDP_STREAM -v 0", v(udp(1, 1, 47447.85, 0), 0)},
		{"-t UDP_STREAM -v 0 -c", onlyLocal(v(withCPU(udp(1, 1, 1, 1), 80, 0.29), 0))},
		{"-t UDP_STREAM -P 0", p0(udp(90446, 87745, 47395.73, 45980.35))},
		{"-t UDP_STREAM -v 2", v(udp(136375, 67420, 71462.63, 35329.13), 2)},
		{"-t UDP_RR", tput(base(netperf.UDPRR), 90035.64)},
		{"-t UDP_RR -c -C", tput(withCPU(base(netperf.UDPRR), 99.50, 24.677), 80643.05)},
		{"-t UDP_RR -v 0", v(tput(base(netperf.UDPRR), 77569.35), 0)},
		{"-t UDP_RR -v 0 -c", onlyLocal(v(withCPU(base(netperf.UDPRR), 99, 15.281), 0))},
		{"-t UDP_RR -P 0", p0(tput(base(netperf.UDPRR), 48701.01))},
		{"-t UDP_RR -v 2", v(tput(base(netperf.UDPRR), 51981.98), 2)},
	}
	// Cases whose numbers need more than a headline value.
	sv2 := v(tput(base(netperf.TCPStream), 25570.37), 2)
	sv2.BytesSent, sv2.LocalSendCalls, sv2.RemoteBytesRecv, sv2.RemoteRecvCalls, sv2.MSS = 3196862464, 195121, 3196862464, 54164, 65483
	cases = append(cases, tc{"-t TCP_STREAM -v 2", sv2})
	mv2 := v(tput(base(netperf.TCPMaerts), 27729.05), 2)
	mv2.BytesRecv, mv2.LocalRecvCalls, mv2.RemoteBytesSent, mv2.RemoteSendCalls, mv2.MSS = 3466526720, 47942, 3466526720, 211580, 32768
	cases = append(cases, tc{"-t TCP_MAERTS -v 2", mv2})
	crr := tput(withCPU(base(netperf.TCPCRR), 0, 0), 20809.86)
	crr.Result.LocalCPU, crr.Result.RemoteCPU, crr.LocalSD, crr.RemoteSD = 61.43, 58.37, 59.037, 56.100
	cases = append(cases, tc{"-t TCP_CRR -c -C", crr})

	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			want, ok := ex[c.cmd]
			if !ok {
				t.Fatalf("no captured output for %q", c.cmd)
			}
			seen[c.cmd] = true
			if got := noDemo(String(c.rep)); got != want {
				t.Errorf("output mismatch\ngot:\n%s\nwant:\n%s", strings.ReplaceAll(got, " \n", "·\n"), strings.ReplaceAll(want, " \n", "·\n"))
			}
		})
	}
	for cmd := range ex {
		if !seen[cmd] {
			t.Errorf("captured case %q not covered", cmd)
		}
	}
}

// noDemo removes the " : demo" this netperf's banner has, like the
// reference C build (configured with --enable-demo), but which the
// captures (a default build) lack.
func noDemo(s string) string { return strings.Replace(s, " : demo", "", 1) }

// Package output prints netperf results exactly as netperf 2.7.1 does: the
// banner, the classic per-test tables (the "migrated" tests' legacy
// output), demo mode's interim results, and the -o (CSV), -O (columns) and
// -k (key=value) output selectors of the omni catalogue. Printing is a pure
// function of a Report, so saved results can be re-printed.
package output

import (
	"fmt"
	"io"
	"strings"

	"sluice/internal/netperf"
)

// Report is everything the printers need: the measurement plus the options
// that shape the text.
type Report struct {
	*netperf.Result
	Host string // as given to -H (the banner's destination)
	IPv6 bool
	// Units is the -f letter after netperf's defaulting: 'x' for RR tests
	// and 'm' otherwise when not given; 'x' on a stream test becomes 'm'.
	// 0 means that default.
	Units         byte
	Verbosity     int // -v
	NoHeaders     bool
	Brand         string // -B
	ShowLocalCPU  bool   // -c
	ShowRemoteCPU bool   // -C
	ConfActive    bool   // -i or -I given: confidence intervals
	ConfLevel     int    // 95 or 99
	ConfWidth     float64
	ResultOnly    bool // -r: confidence on the result only
	// CommandLine is the invocation, for the COMMAND_LINE selector.
	CommandLine string
	NoDelay     bool // test option -D (banner " : nodelay")
	CPUBind     bool // -T given (banner " : cpu bind")
	// LocalCPUBind and RemoteCPUBind are the -T CPUs, -1 for none.
	LocalCPUBind, RemoteCPUBind int
	UUID                        string
	// Requested socket buffer sizes (-s, -S), -1 when not given.
	LSSReq, LSRReq, RSSReq, RSRReq int
	// Data connection addressing as the test options gave it (-P, -L,
	// -H, -4/-6 after "--"): ports as strings ("0" default), families as
	// Linux AF_ numbers (0 = unspecified).
	SourcePort, DestPort     string
	SourceAddr, DestAddr     string
	SourceFamily, DestFamily int
}

var testTitles = map[string]string{
	netperf.TCPStream: "TCP STREAM",
	netperf.TCPMaerts: "TCP MAERTS",
	netperf.TCPRR:     "TCP REQUEST/RESPONSE",
	netperf.TCPCRR:    "TCP Connect/Request/Response",
	netperf.UDPStream: "UDP STREAM",
	netperf.UDPRR:     "UDP REQUEST/RESPONSE",
}

func isRR(test string) bool {
	return test == netperf.TCPRR || test == netperf.TCPCRR || test == netperf.UDPRR
}

// Banner writes netperf's print_top_test_header line. Its remote address
// prints as "()" because of a buffer-size bug in the C tool (quirk Q4);
// " : demo" is there because this netperf, like the reference build,
// has demo mode.
func Banner(w io.Writer, r *Report) {
	fmt.Fprint(w, BannerLine(r))
}

// BannerLine returns the banner with its newline.
func BannerLine(r *Report) string {
	var b strings.Builder
	fam, any := "AF_INET", "0.0.0.0"
	if r.IPv6 {
		fam, any = "AF_INET6", "::"
	}
	fmt.Fprintf(&b, "MIGRATED %s TEST from %s (%s) port 0 %s to %s () port 0 %s", testTitles[r.Test], any, any, fam, r.Host, fam)
	if r.ConfActive {
		only := ""
		if r.ResultOnly {
			only = " on result only"
		}
		fmt.Fprintf(&b, " : +/-%.3f%% @ %2d%% conf. %s", r.ConfWidth/2, r.ConfLevel, only)
	}
	if r.NoDelay {
		b.WriteString(" : nodelay")
	}
	b.WriteString(" : demo")
	if r.Test == netperf.TCPRR || r.Test == netperf.UDPRR {
		b.WriteString(" : first burst 0")
	}
	if r.CPUBind {
		b.WriteString(" : cpu bind")
	}
	b.WriteString("\n")
	return b.String()
}

// ConfidenceWarning writes netperf's block for intervals not achieved.
func ConfidenceWarning(w io.Writer, r *Report) {
	c := r.Confidence
	if c == nil || c.Met {
		return
	}
	fmt.Fprintf(w, "!!! WARNING\n"+
		"!!! Desired confidence was not achieved within the specified iterations.\n"+
		"!!! This implies that there was variability in the test environment that\n"+
		"!!! must be investigated before going further.\n"+
		"!!! Confidence intervals: Throughput      : %4.3f%%\n"+
		"!!!                       Local CPU util  : %4.3f%%\n"+
		"!!!                       Remote CPU util : %4.3f%%\n\n",
		c.Throughput, c.LocalCPU, c.RemoteCPU)
}

// units returns the effective -f letter.
func (r *Report) units() byte {
	u := r.Units
	if u == 0 {
		if isRR(r.Test) {
			return 'x'
		}
		return 'm'
	}
	if u == 'x' && !isRR(r.Test) {
		return 'm' // netperf resets 'x' silently on non-RR tests
	}
	return u
}

// Throughput returns netperf's headline number ("thruput") in the
// report's units: transactions per second under 'x'; otherwise the bytes
// the test moved per second (for RR tests both directions, for
// UDP_STREAM what netserver received).
func (r *Report) Throughput() float64 {
	u := r.units()
	if isRR(r.Test) {
		if u == 'x' {
			return r.TransPerSec
		}
		return Rate(r.TransPerSec*float64(r.ReqSize+r.RespSize), 1, u)
	}
	return Rate(r.ThroughputMbps*1e6/8, 1, u)
}

// sideRate expresses bytes moved by one side over the test in the
// report's units ('m' for RR tests under 'x').
func (r *Report) sideRate(bytes int64) float64 {
	u := r.units()
	if u == 'x' {
		u = 'm'
	}
	return Rate(float64(bytes), r.Elapsed.Seconds(), u)
}

// localSD and remoteSD are the service demands netperf prints: per
// transaction under 'x', otherwise per KB of what the client moved.
func (r *Report) localSD() float64  { return r.sd(r.LocalSD) }
func (r *Report) remoteSD() float64 { return r.sd(r.RemoteSD) }

func (r *Report) sd(perUnit float64) float64 {
	if perUnit < 0 || !isRR(r.Test) || r.units() == 'x' {
		return perUnit
	}
	// Per transaction to per KB of the client's bytes.
	bytes := float64(r.ReqSize + r.RespSize)
	if bytes <= 0 {
		return perUnit
	}
	return perUnit * 1024 / bytes
}

func (r *Report) cpuShown() bool { return r.ShowLocalCPU || r.ShowRemoteCPU }

// localMethod is the local CPU method letter: 'S' (/proc/stat) when -c
// measured it, else netperf's 'U' (unknown).
func (r *Report) localMethod() byte {
	if r.ShowLocalCPU && r.LocalCPUStats.Method != 0 {
		return r.LocalCPUStats.Method
	}
	if r.ShowLocalCPU {
		return 'S'
	}
	return 'U'
}

// remoteMethod is what netserver reported: 'S' once it has measured, 'U'
// before.
func (r *Report) remoteMethod() byte {
	if r.RemoteCPUStats.Method != 0 {
		return r.RemoteCPUStats.Method
	}
	if r.ShowRemoteCPU {
		return 'S'
	}
	return 'U'
}

func secs(r *Report) float64 { return r.Elapsed.Seconds() }

// brand is appended to result lines only without headers (-P 0).
func (r *Report) brand() string {
	if r.NoHeaders {
		return r.Brand
	}
	return ""
}

// Classic writes netperf's classic (legacy) output for the report: the
// banner, then the test's table. Verbosity above 2 prints no table, as in
// netperf.
func Classic(w io.Writer, r *Report) {
	if !r.NoHeaders {
		Banner(w, r)
	}
	Table(w, r)
}

// Table writes the classic output after the banner.
func Table(w io.Writer, r *Report) {
	ConfidenceWarning(w, r)
	switch r.Test {
	case netperf.TCPStream, netperf.TCPMaerts:
		stream(w, r)
	case netperf.UDPStream:
		udpStream(w, r)
	case netperf.TCPCRR:
		crr(w, r)
	default:
		rr(w, r)
	}
}

// terseSD is the -v 0 line with CPU: the local service demand, else the
// remote one.
func terseSD(r *Report) (float64, byte) {
	if r.ShowLocalCPU {
		return r.localSD(), r.localMethod()
	}
	return r.remoteSD(), r.remoteMethod()
}

func stream(w io.Writer, r *Report) {
	maerts := r.Test == netperf.TCPMaerts
	ut := UnitsTitle(r.units())
	v := r.Verbosity
	if r.cpuShown() {
		switch v {
		case 0:
			sd, m := terseSD(r)
			fmt.Fprintf(w, "%6.3f %c %s\n", sd, m, r.brand())
		case 1, 2:
			if !r.NoHeaders {
				a, b := "Send", "Recv"
				if maerts {
					a, b = b, a
				}
				fmt.Fprintf(w, "Recv   Send    Send                          Utilization       Service Demand\n"+
					"Socket Socket  Message  Elapsed              %s     %s     %s    %s\n"+
					"Size   Size    Size     Time     Throughput  local    remote   local   remote\n"+
					"bytes  bytes   bytes    secs.    %-8.8s/s  %% %c      %% %c      us/KB   us/KB\n\n",
					a, b, a, b, ut, r.localMethod(), r.remoteMethod())
			}
			msg := r.LocalSendSize
			if maerts {
				msg = r.RemoteSendSize
			}
			// netperf prints remote recv and local send buffers here even
			// for TCP_MAERTS.
			fmt.Fprintf(w, "%6d %6d %6d    %-6.2f     %7.2f   %-6.2f   %-6.2f   %-6.3f  %-6.3f %s\n",
				r.RSR, r.LSS, msg, secs(r), r.Throughput(), r.Result.LocalCPU, r.Result.RemoteCPU, r.localSD(), r.remoteSD(), r.brand())
		}
	} else {
		switch v {
		case 0:
			fmt.Fprintf(w, "%7.2f %s\n", r.Throughput(), r.brand())
		case 1, 2:
			if !r.NoHeaders {
				fmt.Fprintf(w, "Recv   Send    Send                          \n"+
					"Socket Socket  Message  Elapsed              \n"+
					"Size   Size    Size     Time     Throughput  \n"+
					"bytes  bytes   bytes    secs.    %s/sec  \n\n", ut)
			}
			rcv, snd, msg := r.RSR, r.LSS, r.LocalSendSize
			if maerts {
				rcv, snd, msg = r.LSR, r.RSS, r.RemoteSendSize
			}
			fmt.Fprintf(w, "%6d %6d %6d    %-6.2f   %7.2f   %s\n", rcv, snd, msg, secs(r), r.Throughput(), r.brand())
		}
	}
	if v < 2 {
		return
	}
	if maerts {
		fmt.Fprintf(w, "\nAlignment      Offset         %-8.8s %-8.8s    Recvs   %-8.8s Sends\n"+
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n"+
			"Recv   Send    Recv   Send             Recv (avg)          Send (avg)\n"+
			"%5d   %5d  %5d   %5d %6d  %6.2f    %6d   %6.2f %6d\n",
			"Bytes", "Bytes", "Bytes", 8, 8, 0, 0, r.BytesRecv, div(float64(r.BytesRecv), r.LocalRecvCalls), r.LocalRecvCalls,
			div(float64(r.RemoteBytesSent), r.RemoteSendCalls), r.RemoteSendCalls)
	} else {
		fmt.Fprintf(w, "\nAlignment      Offset         %-8.8s %-8.8s    Sends   %-8.8s Recvs\n"+
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n"+
			"Send   Recv    Send   Recv             Send (avg)          Recv (avg)\n"+
			"%5d   %5d  %5d   %5d %6d  %6.2f    %6d   %6.2f %6d\n",
			"Bytes", "Bytes", "Bytes", 8, 8, 0, 0, r.BytesSent, div(float64(r.BytesSent), r.LocalSendCalls), r.LocalSendCalls,
			div(float64(r.BytesSent), r.RemoteRecvCalls), r.RemoteRecvCalls)
	}
	fmt.Fprintf(w, "\nMaximum\nSegment\nSize (bytes)\n%6d\n", r.MSS)
}

// div is C's double division, which prints inf or nan for a zero count.
func div(a float64, b int64) float64 {
	return a / float64(b)
}

func rr(w io.Writer, r *Report) {
	u := r.units()
	v := r.Verbosity
	if r.cpuShown() {
		switch v {
		case 0:
			sd, m := terseSD(r)
			fmt.Fprintf(w, "%6.3f %c %s\n", sd, m, r.brand())
		case 1, 2:
			if !r.NoHeaders {
				if u == 'x' {
					fmt.Fprintf(w, "Local /Remote\n"+
						"Socket Size   Request Resp.  Elapsed Trans.   CPU    CPU    S.dem   S.dem\n"+
						"Send   Recv   Size    Size   Time    Rate     local  remote local   remote\n"+
						"bytes  bytes  bytes   bytes  secs.   per sec  %% %c    %% %c    us/Tr   us/Tr\n\n",
						r.localMethod(), r.remoteMethod())
				} else {
					fmt.Fprintf(w, "Local /Remote\n"+
						"Socket Size   Request Resp.  Elapsed Tput     CPU    CPU    S.dem   S.dem\n"+
						"Send   Recv   Size    Size   Time    %-8.8s local  remote local   remote\n"+
						"bytes  bytes  bytes   bytes  secs.   per sec  %% %c    %% %c    us/KB   us/KB\n\n",
						UnitsTitle(u), r.localMethod(), r.remoteMethod())
				}
			}
			format := "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f  %-6.2f %-6.2f %-6.3f  %-6.3f %s\n"
			if r.Test == netperf.UDPRR {
				format = "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f   %-6.2f %-6.2f %-6.3f  %-6.3f %s\n"
			}
			fmt.Fprintf(w, format, r.LSS, r.LSR, r.ReqSize, r.RespSize, secs(r), r.Throughput(),
				r.Result.LocalCPU, r.Result.RemoteCPU, r.localSD(), r.remoteSD(), r.brand())
			fmt.Fprintf(w, "%-6d %-6d\n", r.RSS, r.RSR)
		}
	} else {
		switch v {
		case 0:
			fmt.Fprintf(w, "%7.2f %s\n", r.Throughput(), r.brand())
		case 1, 2:
			if !r.NoHeaders {
				if u == 'x' {
					fmt.Fprint(w, "Local /Remote\n"+
						"Socket Size   Request  Resp.   Elapsed  Trans.\n"+
						"Send   Recv   Size     Size    Time     Rate         \n"+
						"bytes  Bytes  bytes    bytes   secs.    per sec   \n\n")
				} else {
					fmt.Fprintf(w, "Local /Remote\n"+
						"Socket Size   Request  Resp.   Elapsed  \n"+
						"Send   Recv   Size     Size    Time     Throughput \n"+
						"bytes  Bytes  bytes    bytes   secs.    %s/sec   \n\n", UnitsTitle(u))
				}
			}
			fmt.Fprintf(w, "%-6d %-6d %-6d   %-6d  %-6.2f   %7.2f   %s\n",
				r.LSS, r.LSR, r.ReqSize, r.RespSize, secs(r), r.Throughput(), r.brand())
			fmt.Fprintf(w, "%-6d %-6d\n", r.RSS, r.RSR)
		}
	}
	if v < 2 || r.Test != netperf.TCPRR {
		return
	}
	ku := u
	if ku == 'x' {
		ku = 'm'
	}
	lat := 1e6 / r.TransPerSec
	fmt.Fprintf(w, "Alignment      Offset         RoundTrip  Trans    Throughput\n"+
		"Local  Remote  Local  Remote  Latency    Rate     %-8.8s/s\n"+
		"Send   Recv    Send   Recv    usec/Tran  per sec  Outbound   Inbound\n"+
		"%5d  %5d   %5d  %5d   %-6.3f   %-6.3f %-6.3f    %-6.3f\n",
		UnitsTitle(ku), 8, 0, 0, 0, lat, r.TransPerSec,
		Rate(r.TransPerSec*float64(r.ReqSize), 1, ku), Rate(r.TransPerSec*float64(r.RespSize), 1, ku))
}

func crr(w io.Writer, r *Report) {
	v := r.Verbosity
	if r.cpuShown() {
		switch v {
		case 0:
			sd, _ := terseSD(r)
			fmt.Fprintf(w, "%6.3f\n", sd)
		case 1, 2:
			if !r.NoHeaders {
				fmt.Fprint(w, "Local /Remote\n"+
					"Socket Size   Request Resp.  Elapsed Trans.   CPU    CPU    S.dem   S.dem\n"+
					"Send   Recv   Size    Size   Time    Rate     local  remote local   remote\n"+
					"bytes  bytes  bytes   bytes  secs.   per sec  %      %      us/Tr   us/Tr\n\n")
			}
			fmt.Fprintf(w, "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f   %-6.2f %-6.2f %-6.3f  %-6.3f\n",
				r.LSS, r.LSR, r.ReqSize, r.RespSize, secs(r), r.Throughput(),
				r.Result.LocalCPU, r.Result.RemoteCPU, r.localSD(), r.remoteSD())
			fmt.Fprintf(w, "%-6d %-6d\n", r.RSS, r.RSR)
		}
	} else {
		switch v {
		case 0:
			fmt.Fprintf(w, "%7.2f\n", r.Throughput())
		case 1, 2:
			if !r.NoHeaders {
				// netperf's CRR title always says Trans., whatever -f says.
				fmt.Fprint(w, "Local /Remote\n"+
					"Socket Size   Request  Resp.   Elapsed  Trans.\n"+
					"Send   Recv   Size     Size    Time     Rate         \n"+
					"bytes  Bytes  bytes    bytes   secs.    per sec   \n\n")
			}
			fmt.Fprintf(w, "%-6d %-6d %-6d   %-6d  %-6.2f   %7.2f   \n",
				r.LSS, r.LSR, r.ReqSize, r.RespSize, secs(r), r.Throughput())
			fmt.Fprintf(w, "%-6d %-6d\n", r.RSS, r.RSR)
		}
	}
	if v >= 2 {
		fmt.Fprintf(w, "\nAlignment      Offset\n"+
			"Local  Remote  Local  Remote\n"+
			"Send   Recv    Send   Recv\n"+
			"%5d  %5d   %5d  %5d\n", 8, 8, 0, 0)
	}
}

func udpStream(w io.Writer, r *Report) {
	ut := UnitsTitle(r.units())
	v := r.Verbosity
	local, remote := r.sideRate(r.BytesSent), r.sideRate(r.RemoteBytesRecv)
	if r.cpuShown() {
		switch v {
		case 0:
			if r.ShowLocalCPU {
				fmt.Fprintf(w, "%6.2f %c\n", r.localSD(), r.localMethod())
			} else {
				fmt.Fprintf(w, "%6.2f %c\n", r.remoteSD(), r.localMethod())
			}
		case 1, 2:
			if !r.NoHeaders {
				fmt.Fprintf(w, "Socket  Message  Elapsed      Messages                   CPU      Service\n"+
					"Size    Size     Time         Okay Errors   Throughput   Util     Demand\n"+
					"bytes   bytes    secs            #      #   %s/sec %% %c%c     us/KB\n\n",
					ut, r.localMethod(), r.remoteMethod())
			}
			fmt.Fprintf(w, "%6d  %6d   %-7.2f   %7d %6d    %7.1f     %-6.2f   %-6.3f\n"+
				"%6d           %-7.2f   %7d           %7.1f     %-6.2f   %-6.3f\n\n",
				r.LSS, r.LocalSendSize, secs(r), r.LocalSendCalls, r.FailedSends, local, r.Result.LocalCPU, r.localSD(),
				r.RSR, secs(r), r.RemoteRecvCalls, remote, r.Result.RemoteCPU, r.remoteSD())
		}
		return
	}
	switch v {
	case 0:
		fmt.Fprintf(w, "%7.2f\n", local)
	case 1, 2:
		if !r.NoHeaders {
			fmt.Fprintf(w, "Socket  Message  Elapsed      Messages                \n"+
				"Size    Size     Time         Okay Errors   Throughput\n"+
				"bytes   bytes    secs            #      #   %s/sec\n\n", ut)
		}
		fmt.Fprintf(w, "%6d  %6d   %-7.2f   %7d %6d    %7.2f\n"+
			"%6d           %-7.2f   %7d           %7.2f\n\n",
			r.LSS, r.LocalSendSize, secs(r), r.LocalSendCalls, r.FailedSends, local,
			r.RSR, secs(r), r.RemoteRecvCalls, remote)
	}
}

// String renders the classic output; handy in tests and logs.
func String(r *Report) string {
	var b strings.Builder
	Classic(&b, r)
	return b.String()
}

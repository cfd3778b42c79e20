// Package output prints netperf results exactly as netperf 2.7 does: the
// classic per-test tables, and the -o (CSV), -O (columns) and -k
// (key=value) selectors of the omni output catalogue. Printing is a pure
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
	Host          string // as given to -H
	IPv6          bool
	Units         byte // -f: k m g K M G, 0 = default (m streams, x RR)
	Verbosity     int  // -v
	NoHeaders     bool // -P 0
	Brand         string
	ShowLocalCPU  bool // -c
	ShowRemoteCPU bool // -C
	ConfActive    bool // -i was given with max > 1
	ConfLevel     int
	ConfWidth     float64 // percent
	// CommandLine is the invocation, for the COMMAND_LINE selector.
	CommandLine string
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

// Banner writes the "MIGRATED ... TEST" line.
func Banner(w io.Writer, r *Report) {
	fam, any := "AF_INET", "0.0.0.0"
	if r.IPv6 {
		fam, any = "AF_INET6", "::"
	}
	fmt.Fprintf(w, "MIGRATED %s TEST from %s (%s) port 0 %s to %s () port 0 %s", testTitles[r.Test], any, any, fam, r.Host, fam)
	if r.ConfActive {
		fmt.Fprintf(w, " : +/-%.3f%% @ %2d%% conf. ", r.ConfWidth/2, r.ConfLevel)
	}
	if r.Test == netperf.TCPRR || r.Test == netperf.UDPRR {
		fmt.Fprint(w, " : first burst 0")
	}
	fmt.Fprint(w, "\n")
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

// UnitsTitle returns netperf's name for a -f unit ("10^6bits").
func UnitsTitle(u byte) string {
	switch u {
	case 'g':
		return "10^9bits"
	case 'k':
		return "10^3bits"
	case 'G':
		return "GBytes"
	case 'M':
		return "MBytes"
	case 'K':
		return "KBytes"
	case 'x':
		return "Trans"
	}
	return "10^6bits"
}

// units returns the effective -f letter.
func (r *Report) units() byte {
	if r.Units != 0 {
		return r.Units
	}
	if isRR(r.Test) {
		return 'x'
	}
	return 'm'
}

// convert expresses a bit rate (in 10^6 bits/s) in the report's units.
func convert(mbps float64, u byte) float64 {
	bytesPerSec := mbps * 1e6 / 8
	switch u {
	case 'g':
		return mbps / 1e3
	case 'k':
		return mbps * 1e3
	case 'G':
		return bytesPerSec / (1 << 30)
	case 'M':
		return bytesPerSec / (1 << 20)
	case 'K':
		return bytesPerSec / (1 << 10)
	}
	return mbps
}

// Throughput returns the headline number in the report's units: Trans/s
// for RR tests under 'x', otherwise a data rate.
func (r *Report) Throughput() float64 {
	u := r.units()
	if isRR(r.Test) {
		if u == 'x' {
			return r.TransPerSec
		}
		mbps := r.TransPerSec * float64(r.ReqSize+r.RespSize) * 8 / 1e6
		return convert(mbps, u)
	}
	return convert(r.ThroughputMbps, u)
}

// UDP_STREAM rows: what the client sent and what the server received.
func (r *Report) localThroughput() float64 { return convert(r.SendThroughputMbps, r.units()) }

func (r *Report) remoteThroughput() float64 { return convert(r.ThroughputMbps, r.units()) }

func (r *Report) cpuShown() bool { return r.ShowLocalCPU || r.ShowRemoteCPU }

// letter is the CPU method shown after "%": the measured method, else 'S'
// (the only method this build has, which netperf prints even for a side it
// did not measure).
func letter(s netperf.CPUStats, _ bool) byte {
	if s.Method != 0 {
		return s.Method
	}
	return 'S'
}

func secs(r *Report) float64 { return r.Elapsed.Seconds() }

// Classic writes netperf's classic output for the report.
func Classic(w io.Writer, r *Report) {
	if !r.NoHeaders {
		Banner(w, r)
	}
	ConfidenceWarning(w, r)
	brand := ""
	if r.NoHeaders {
		brand = r.Brand
	}
	if r.Verbosity <= 0 {
		terse(w, r, brand)
		return
	}
	switch r.Test {
	case netperf.TCPStream, netperf.TCPMaerts:
		stream(w, r, brand)
	case netperf.UDPStream:
		udpStream(w, r)
	default:
		rr(w, r, brand)
	}
}

func terse(w io.Writer, r *Report, brand string) {
	sd, lc := r.RemoteSD, r.RemoteCPUStats
	if r.ShowLocalCPU {
		sd, lc = r.LocalSD, r.LocalCPUStats
	}
	m := letter(lc, true)
	switch {
	case r.cpuShown() && r.Test == netperf.TCPCRR:
		fmt.Fprintf(w, "%6.3f%s\n", sd, brand)
	case r.cpuShown() && r.Test == netperf.UDPStream:
		fmt.Fprintf(w, "%6.2f %c%s\n", sd, m, brand)
	case r.cpuShown():
		fmt.Fprintf(w, "%6.3f %c %s\n", sd, m, brand)
	case r.Test == netperf.TCPCRR || r.Test == netperf.UDPStream:
		fmt.Fprintf(w, "%7.2f%s\n", r.Throughput(), brand)
	default:
		fmt.Fprintf(w, "%7.2f %s\n", r.Throughput(), brand)
	}
}

func stream(w io.Writer, r *Report, brand string) {
	maerts := r.Test == netperf.TCPMaerts
	rcv, snd, msg := r.RSR, r.LSS, r.LocalSendSize
	if maerts {
		rcv, snd, msg = r.LSR, r.RSS, r.RemoteSendSize
	}
	ut := UnitsTitle(r.units())
	if r.cpuShown() {
		if !r.NoHeaders {
			a, b := "Send", "Recv"
			if maerts {
				a, b = b, a
			}
			fmt.Fprintf(w, "Recv   Send    Send                          Utilization       Service Demand\n"+
				"Socket Socket  Message  Elapsed              %s     %s     %s    %s\n"+
				"Size   Size    Size     Time     Throughput  local    remote   local   remote\n"+
				"bytes  bytes   bytes    secs.    %-8.8s/s  %% %c      %% %c      us/KB   us/KB\n\n",
				a, b, a, b, ut, letter(r.LocalCPUStats, r.ShowLocalCPU), letter(r.RemoteCPUStats, r.ShowRemoteCPU))
		}
		fmt.Fprintf(w, "%6d %6d %6d    %-6.2f     %7.2f   %-6.2f   %-6.2f   %-6.3f  %-6.3f %s\n",
			rcv, snd, msg, secs(r), r.Throughput(), r.Result.LocalCPU, r.Result.RemoteCPU, r.LocalSD, r.RemoteSD, brand)
	} else {
		if !r.NoHeaders {
			fmt.Fprintf(w, "Recv   Send    Send                          \n"+
				"Socket Socket  Message  Elapsed              \n"+
				"Size   Size    Size     Time     Throughput  \n"+
				"bytes  bytes   bytes    secs.    %s/sec  \n\n", ut)
		}
		fmt.Fprintf(w, "%6d %6d %6d    %-6.2f   %7.2f   %s\n", rcv, snd, msg, secs(r), r.Throughput(), brand)
	}
	if r.Verbosity < 2 {
		return
	}
	if maerts {
		fmt.Fprintf(w, "\nAlignment      Offset         Bytes    Bytes       Recvs   Bytes    Sends\n"+
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n"+
			"Recv   Send    Recv   Send             Recv (avg)          Send (avg)\n")
		fmt.Fprintf(w, "%5d   %5d  %5d   %5d %6.0f  %6.2f    %6d   %6.2f %6d\n",
			8, 8, 0, 0, float64(r.BytesRecv), per(r.BytesRecv, r.LocalRecvCalls), r.LocalRecvCalls,
			per(r.RemoteBytesSent, r.RemoteSendCalls), r.RemoteSendCalls)
	} else {
		fmt.Fprintf(w, "\nAlignment      Offset         Bytes    Bytes       Sends   Bytes    Recvs\n"+
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n"+
			"Send   Recv    Send   Recv             Send (avg)          Recv (avg)\n")
		fmt.Fprintf(w, "%5d   %5d  %5d   %5d %6.0f  %6.2f    %6d   %6.2f %6d\n",
			8, 8, 0, 0, float64(r.BytesSent), per(r.BytesSent, r.LocalSendCalls), r.LocalSendCalls,
			per(r.RemoteBytesRecv, r.RemoteRecvCalls), r.RemoteRecvCalls)
	}
	fmt.Fprintf(w, "\nMaximum\nSegment\nSize (bytes)\n%6d\n", r.MSS)
}

func per(bytes, calls int64) float64 {
	if calls == 0 {
		return 0
	}
	return float64(bytes) / float64(calls)
}

func rr(w io.Writer, r *Report, brand string) {
	crr := r.Test == netperf.TCPCRR
	u := r.units()
	if r.cpuShown() {
		if !r.NoHeaders {
			lm, rm := fmt.Sprintf("%% %c", letter(r.LocalCPUStats, r.ShowLocalCPU)), fmt.Sprintf("%% %c", letter(r.RemoteCPUStats, r.ShowRemoteCPU))
			if crr {
				lm, rm = "%  ", "%  "
			}
			rateTitle, rateUnits := "Trans.   ", "per sec  "
			fmt.Fprintf(w, "Local /Remote\n"+
				"Socket Size   Request Resp.  Elapsed %sCPU    CPU    S.dem   S.dem\n"+
				"Send   Recv   Size    Size   Time    Rate     local  remote local   remote\n"+
				"bytes  bytes  bytes   bytes  secs.   %s%s    %s    us/Tr   us/Tr\n\n",
				rateTitle, rateUnits, lm, rm)
		}
		if crr {
			fmt.Fprintf(w, "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f   %-6.2f %-6.2f %-6.3f  %-6.3f%s\n",
				r.LSS, r.LSR, r.ReqSize, r.RespSize, secs(r), r.Throughput(), r.Result.LocalCPU, r.Result.RemoteCPU, r.LocalSD, r.RemoteSD, brand)
		} else if r.Test == netperf.UDPRR {
			fmt.Fprintf(w, "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f   %-6.2f %-6.2f %-6.3f  %-6.3f %s\n",
				r.LSS, r.LSR, r.ReqSize, r.RespSize, secs(r), r.Throughput(), r.Result.LocalCPU, r.Result.RemoteCPU, r.LocalSD, r.RemoteSD, brand)
		} else {
			fmt.Fprintf(w, "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f  %-6.2f %-6.2f %-6.3f  %-6.3f %s\n",
				r.LSS, r.LSR, r.ReqSize, r.RespSize, secs(r), r.Throughput(), r.Result.LocalCPU, r.Result.RemoteCPU, r.LocalSD, r.RemoteSD, brand)
		}
	} else {
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
			r.LSS, r.LSR, r.ReqSize, r.RespSize, secs(r), r.Throughput(), brand)
	}
	fmt.Fprintf(w, "%-6d %-6d\n", r.RSS, r.RSR)
	if r.Verbosity < 2 {
		return
	}
	switch r.Test {
	case netperf.TCPCRR:
		fmt.Fprintf(w, "\nAlignment      Offset\n"+
			"Local  Remote  Local  Remote\n"+
			"Send   Recv    Send   Recv\n"+
			"%5d  %5d   %5d  %5d\n", 8, 8, 0, 0)
	case netperf.TCPRR:
		lat := 0.0
		if r.TransPerSec > 0 {
			lat = 1e6 / r.TransPerSec
		}
		fmt.Fprintf(w, "Alignment      Offset         RoundTrip  Trans    Throughput\n"+
			"Local  Remote  Local  Remote  Latency    Rate     10^6bits/s\n"+
			"Send   Recv    Send   Recv    usec/Tran  per sec  Outbound   Inbound\n"+
			"%5d  %5d   %5d  %5d   %-6.3f   %-6.3f %-6.3f    %-6.3f\n",
			8, 0, 0, 0, lat, r.TransPerSec,
			r.TransPerSec*float64(r.ReqSize)*8/1e6, r.TransPerSec*float64(r.RespSize)*8/1e6)
	}
}

func udpStream(w io.Writer, r *Report) {
	ut := UnitsTitle(r.units())
	if r.cpuShown() {
		if !r.NoHeaders {
			fmt.Fprintf(w, "Socket  Message  Elapsed      Messages                   CPU      Service\n"+
				"Size    Size     Time         Okay Errors   Throughput   Util     Demand\n"+
				"bytes   bytes    secs            #      #   %s/sec %% %c%c     us/KB\n\n",
				ut, letter(r.LocalCPUStats, r.ShowLocalCPU), letter(r.RemoteCPUStats, r.ShowRemoteCPU))
		}
		fmt.Fprintf(w, "%6d  %6d   %-7.2f   %7d %6d    %7.1f     %-6.2f   %-6.3f\n",
			r.LSS, r.LocalSendSize, secs(r), r.LocalSendCalls, r.FailedSends, r.localThroughput(), r.Result.LocalCPU, r.LocalSD)
		fmt.Fprintf(w, "%6d           %-7.2f   %7d           %7.1f     %-6.2f   %-6.3f\n\n",
			r.RSR, secs(r), r.RemoteRecvCalls, r.remoteThroughput(), r.Result.RemoteCPU, r.RemoteSD)
		return
	}
	if !r.NoHeaders {
		fmt.Fprintf(w, "Socket  Message  Elapsed      Messages                \n"+
			"Size    Size     Time         Okay Errors   Throughput\n"+
			"bytes   bytes    secs            #      #   %s/sec\n\n", ut)
	}
	fmt.Fprintf(w, "%6d  %6d   %-7.2f   %7d %6d    %7.2f\n",
		r.LSS, r.LocalSendSize, secs(r), r.LocalSendCalls, r.FailedSends, r.localThroughput())
	fmt.Fprintf(w, "%6d           %-7.2f   %7d           %7.2f\n\n",
		r.RSR, secs(r), r.RemoteRecvCalls, r.remoteThroughput())
}

// String renders the classic output; handy in tests and logs.
func String(r *Report) string {
	var b strings.Builder
	Classic(&b, r)
	return b.String()
}

package output

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"

	"sluice/internal/netperf"
)

// field is one entry of netperf's omni output catalogue
// (print_omni_init_list): its name, up to four title lines and its value.
type field struct {
	name  string
	lines [4]string
	// value returns the printed value and false when netperf's display
	// value is NULL: -k skips the field, -o and -O leave it blank.
	value func(r *Report) (string, bool)
}

// cnum formats like C's printf for the values Go prints differently:
// NaN and infinities.
func cnum(format string, v float64) string {
	switch {
	case math.IsNaN(v):
		if math.Signbit(v) {
			return "-nan"
		}
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return fmt.Sprintf(format, v)
}

func vInt(f func(r *Report) int) func(*Report) (string, bool) {
	return func(r *Report) (string, bool) { return fmt.Sprintf("%d", f(r)), true }
}

func vI64(f func(r *Report) int64) func(*Report) (string, bool) {
	return func(r *Report) (string, bool) { return fmt.Sprintf("%d", f(r)), true }
}

func vF(format string, f func(r *Report) float64) func(*Report) (string, bool) {
	return func(r *Report) (string, bool) { return cnum(format, f(r)), true }
}

func vStr(f func(r *Report) string) func(*Report) (string, bool) {
	return func(r *Report) (string, bool) { return f(r), true }
}

func vConst(s string) func(*Report) (string, bool) {
	return func(*Report) (string, bool) { return s, true }
}

// deprecated is what netperf 2.7.1 prints for the system, driver and
// security facts it no longer gathers.
var deprecated = vConst("Deprecated")

// unknownID is netperf's value for PCI ids it does not know (-2), printed
// with "0x%.4x".
var unknownID = vConst("0xfffffffe")

func f(name string, l0, l1, l2, l3 string, v func(*Report) (string, bool)) field {
	return field{name: name, lines: [4]string{l0, l1, l2, l3}, value: v}
}

func (r *Report) isRR() bool { return isRR(r.Test) }

func (r *Report) udp() bool { return strings.HasPrefix(r.Test, "UDP") }

func (r *Report) direction() string {
	switch r.Test {
	case netperf.TCPStream, netperf.UDPStream:
		return "Send"
	case netperf.TCPMaerts:
		return "Receive"
	case netperf.TCPCRR:
		return "Connect|Send|Recv"
	}
	return "Send|Recv"
}

func perCall(bytes, calls int64) float64 {
	if calls > 0 {
		return float64(bytes) / float64(calls)
	}
	return 0
}

func cpuFields(local bool) []field {
	side, up := "Remote", "REMOTE"
	get := func(r *Report) (netperf.CPUStats, float64, bool) {
		return r.RemoteCPUStats, r.Result.RemoteCPU, r.ShowRemoteCPU
	}
	if local {
		side, up = "Local", "LOCAL"
		get = func(r *Report) (netperf.CPUStats, float64, bool) {
			return r.LocalCPUStats, r.Result.LocalCPU, r.ShowLocalCPU
		}
	}
	pct := func(what string, sel func(s netperf.CPUStats) float64) field {
		return f(up+"_CPU_PERCENT_"+what, side, "CPU", map[string]string{"USER": "User", "SYSTEM": "System", "IOWAIT": "I/O", "IRQ": "IRQ", "SWINTR": "swintr"}[what], "%",
			vF("%.2f", func(r *Report) float64 {
				s, _, ok := get(r)
				if !ok {
					return 0
				}
				return sel(s)
			}))
	}
	method := func(r *Report) (string, bool) {
		if local {
			return string(r.localMethod()), true
		}
		return string(r.remoteMethod()), true
	}
	sd := func(r *Report) float64 {
		if local {
			return r.localSD()
		}
		return r.remoteSD()
	}
	return []field{
		f(up+"_CPU_UTIL", side, "CPU", "Util", "%", vF("%.2f", func(r *Report) float64 {
			_, u, ok := get(r)
			if !ok {
				return -1
			}
			return u
		})),
		pct("USER", func(s netperf.CPUStats) float64 { return s.User }),
		pct("SYSTEM", func(s netperf.CPUStats) float64 { return s.System }),
		pct("IOWAIT", func(s netperf.CPUStats) float64 { return s.IOWait }),
		pct("IRQ", func(s netperf.CPUStats) float64 { return s.IRQ }),
		pct("SWINTR", func(s netperf.CPUStats) float64 { return s.SoftIRQ }),
		f(up+"_CPU_METHOD", side, "CPU", "Util", "Method", method),
		f(up+"_SD", side, "Service", "Demand", "", vF("%.3f", sd)),
	}
}

// cpuFacts are the *_CPU_BIND .. *_CPU_FREQUENCY fields.
func cpuFacts(local bool) []field {
	side, up := "Remote", "REMOTE"
	if local {
		side, up = "Local", "LOCAL"
	}
	stats := func(r *Report) (netperf.CPUStats, bool) {
		if local {
			return r.LocalCPUStats, r.ShowLocalCPU
		}
		return r.RemoteCPUStats, r.ShowRemoteCPU
	}
	return []field{
		f(up+"_CPU_BIND", side, "CPU", "Bind", "", vInt(func(r *Report) int {
			if local {
				return r.LocalCPUBind
			}
			return r.RemoteCPUBind
		})),
		f(up+"_CPU_COUNT", side, "CPU", "Count", "", vInt(func(r *Report) int {
			s, ok := stats(r)
			if local && !ok {
				return 0
			}
			return s.NumCPUs
		})),
		f(up+"_CPU_PEAK_UTIL", side, "Peak", "Per CPU", "Util %", vF("%.2f", func(r *Report) float64 {
			s, ok := stats(r)
			if !ok {
				if local {
					return -1
				}
				return 0
			}
			return s.Peak
		})),
		f(up+"_CPU_PEAK_ID", side, "Peak", "Per CPU", "ID", vInt(func(r *Report) int {
			s, ok := stats(r)
			if !ok {
				if local {
					return -1
				}
				return 0
			}
			return s.PeakID
		})),
		f(up+"_CPU_MODEL", side, "CPU", "Model", "", deprecated),
		f(up+"_CPU_FREQUENCY", side, "CPU", "Frequency", "MHz", vConst("0")),
	}
}

// sideFields are the per-side call, byte, buffer and option fields
// (LOCAL_SEND_CALLS .. LOCAL_CORK and their REMOTE_ twins).
func sideFields(local bool) []field {
	side, up := "Remote", "REMOTE"
	if local {
		side, up = "Local", "LOCAL"
	}
	type counts struct {
		sent, recvd, sendCalls, recvCalls int64
		sendWidth, recvWidth              int
	}
	get := func(r *Report) counts {
		if local {
			return counts{r.BytesSent, r.BytesRecv, r.LocalSendCalls, r.LocalRecvCalls, r.LocalSendWidth, r.LocalRecvWidth}
		}
		return counts{r.RemoteBytesSent, r.RemoteBytesRecv, r.RemoteSendCalls, r.RemoteRecvCalls, r.RemoteSendWidth, r.RemoteRecvWidth}
	}
	nodelay := func(r *Report) int {
		if r.NoDelay {
			return 1
		}
		return 0
	}
	return []field{
		f(up+"_SEND_CALLS", side, "Send", "Calls", "", vI64(func(r *Report) int64 { return get(r).sendCalls })),
		f(up+"_RECV_CALLS", side, "Recv", "Calls", "", vI64(func(r *Report) int64 { return get(r).recvCalls })),
		f(up+"_BYTES_PER_RECV", side, "Bytes", "Per", "Recv", vF("%.2f", func(r *Report) float64 {
			c := get(r)
			return perCall(c.recvd, c.recvCalls)
		})),
		f(up+"_BYTES_PER_SEND", side, "Bytes", "Per", "Send", vF("%.2f", func(r *Report) float64 {
			c := get(r)
			return perCall(c.sent, c.sendCalls)
		})),
		f(up+"_BYTES_SENT", side, "Bytes", "Sent", "", vI64(func(r *Report) int64 { return get(r).sent })),
		f(up+"_BYTES_RECVD", side, "Bytes", "Received", "", vI64(func(r *Report) int64 { return get(r).recvd })),
		f(up+"_BYTES_XFERD", side, "Bytes", "Xferred", "", vF("%.0f", func(r *Report) float64 {
			c := get(r)
			return float64(c.sent + c.recvd)
		})),
		f(up+"_SEND_OFFSET", side, "Send", "Offset", "", vConst("0")),
		f(up+"_RECV_OFFSET", side, "Recv", "Offset", "", vConst("0")),
		f(up+"_SEND_ALIGN", side, "Send", "Alignment", "", vConst("8")),
		f(up+"_RECV_ALIGN", side, "Recv", "Alignment", "", vConst("8")),
		f(up+"_SEND_WIDTH", side, "Send", "Width", "", vInt(func(r *Report) int { return get(r).sendWidth })),
		f(up+"_RECV_WIDTH", side, "Recv", "Width", "", vInt(func(r *Report) int { return get(r).recvWidth })),
		f(up+"_SEND_DIRTY_COUNT", side, "Send", "Dirty", "Count", vConst("-1")),
		f(up+"_RECV_DIRTY_COUNT", side, "Recv", "Dirty", "Count", vConst("-1")),
		f(up+"_RECV_CLEAN_COUNT", side, "Recv", "Clean", "Count", vConst("-1")),
		f(up+"_NODELAY", side, "NODELAY", "", "", vInt(nodelay)),
		f(up+"_CORK", side, "Cork", "", "", vConst("0")),
	}
}

func sysFields(side string) []field {
	up := strings.ToUpper(side)
	return []field{
		f(up+"_SYSNAME", side, "Sysname", "", "", deprecated),
		f(up+"_SYSTEM_MODEL", side, "System", "Model", "", deprecated),
		f(up+"_RELEASE", side, "Release", "", "", deprecated),
		f(up+"_VERSION", side, "Version", "", "", deprecated),
		f(up+"_MACHINE", side, "Machine", "", "", deprecated),
	}
}

func ifFields(side string) []field {
	up := strings.ToUpper(side)
	return []field{
		f(up+"_INTERFACE_NAME", side, "Interface", "Name", "", deprecated),
		f(up+"_INTERFACE_VENDOR", side, "Interface", "Vendor", "", unknownID),
		f(up+"_INTERFACE_DEVICE", side, "Interface", "Device", "", unknownID),
		f(up+"_INTERFACE_SUBVENDOR", side, "Interface", "Subvendor", "", unknownID),
		f(up+"_INTERFACE_SUBDEVICE", side, "Interface", "Subdevice", "", unknownID),
		f(up+"_DRIVER_NAME", side, "Driver", "Name", "", deprecated),
		f(up+"_DRIVER_VERSION", side, "Driver", "Version", "", deprecated),
		f(up+"_DRIVER_FIRMWARE", side, "Driver", "Firmware", "", deprecated),
		f(up+"_DRIVER_BUS", side, "Driver", "Bus", "", deprecated),
		f(up+"_INTERFACE_SLOT", side, "Interface", "Slot", "", deprecated),
	}
}

func securityFields(side string) []field {
	up := strings.ToUpper(side)
	enabledNum := "Enabled Num"
	typeID := "Type ID"
	if side == "Remote" { // netserver's titles lose the suffixes
		enabledNum, typeID = "Enabled", "Type"
	}
	return []field{
		f(up+"_SECURITY_TYPE_ID", side, "OS", "Security", typeID, vConst("0")),
		f(up+"_SECURITY_TYPE", side, "OS", "Security", "Type", deprecated),
		f(up+"_SECURITY_ENABLED_NUM", side, "OS", "Security", enabledNum, vConst("0")),
		f(up+"_SECURITY_ENABLED", side, "OS", "Security", "Enabled", deprecated),
		f(up+"_SECURITY_SPECIFIC", side, "OS", "Security", "Specific", deprecated),
	}
}

// statsFields are the latency statistics (netperf's OMNI_WANT_STATS
// group); asking for any of them makes the test time its calls.
var statsFields = map[string]bool{
	"MIN_LATENCY": true, "MAX_LATENCY": true, "P50_LATENCY": true, "P90_LATENCY": true,
	"P99_LATENCY": true, "MEAN_LATENCY": true, "STDDEV_LATENCY": true,
}

// catalogue is netperf 2.7.1's output catalogue in the order of its enum
// netperf_output_name, which is the order of "-o ?" and the ranges of
// "all". Every name is netperf's; values netperf no longer gathers print
// as netperf prints them ("Deprecated", 0xfffffffe, 0). Built on first use:
// a classic run never asks for it, and at start-up it was a millisecond of
// the client's CPU, which netperf's own CPU figures count.
var catalogue = sync.OnceValue(func() []field {
	c := []field{
		f("OUTPUT_NONE", " ", "", "", "", vConst(" ")),
		f("SOCKET_TYPE", "Socket", "Type", "", "", vStr(func(r *Report) string {
			if r.udp() {
				return "Datagram"
			}
			return "Stream"
		})),
		f("PROTOCOL", "Protocol", "", "", "", vStr(func(r *Report) string {
			if r.udp() {
				return "UDP"
			}
			return "TCP"
		})),
		f("DIRECTION", "Direction", "", "", "", vStr(func(r *Report) string { return r.direction() })),
		f("ELAPSED_TIME", "Elapsed", "Time", "(sec)", "", vF("%.2f", secs)),
		f("THROUGHPUT", "Throughput", "", "", "", vF("%.2f", func(r *Report) float64 { return r.Throughput() })),
		f("THROUGHPUT_UNITS", "Throughput", "Units", "", "", vStr(func(r *Report) string { return UnitsTitle(r.units()) + "/s" })),
		f("LSS_SIZE_REQ", "Local", "Send Socket", "Size", "Requested", vInt(func(r *Report) int { return r.LSSReq })),
		f("LSS_SIZE", "Local", "Send Socket", "Size", "Initial", vInt(func(r *Report) int { return r.LSS })),
		f("LSS_SIZE_END", "Local", "Send Socket", "Size", "Final", vInt(func(r *Report) int { return r.LSSEnd })),
		f("LSR_SIZE_REQ", "Local", "Recv Socket", "Size", "Requested", vInt(func(r *Report) int { return r.LSRReq })),
		f("LSR_SIZE", "Local", "Recv Socket", "Size", "Initial", vInt(func(r *Report) int { return r.LSR })),
		f("LSR_SIZE_END", "Local", "Recv Socket", "Size", "Final", vInt(func(r *Report) int { return r.LSREnd })),
		f("RSS_SIZE_REQ", "Remote", "Send Socket", "Size", "Requested", vInt(func(r *Report) int { return r.RSSReq })),
		f("RSS_SIZE", "Remote", "Send Socket", "Size", "Initial", vInt(func(r *Report) int { return r.RSS })),
		f("RSS_SIZE_END", "Remote", "Send Socket", "Size", "Final", vInt(func(r *Report) int { return r.RSSEnd })),
		f("RSR_SIZE_REQ", "Remote", "Recv Socket", "Size", "Requested", vInt(func(r *Report) int { return r.RSRReq })),
		f("RSR_SIZE", "Remote", "Recv Socket", "Size", "Initial", vInt(func(r *Report) int { return r.RSR })),
		f("RSR_SIZE_END", "Remote", "Recv Socket", "Size", "Final", vInt(func(r *Report) int { return r.RSREnd })),
		f("LOCAL_SEND_SIZE", "Local", "Send", "Size", "", vInt(func(r *Report) int { return r.LocalSendSize })),
		f("LOCAL_RECV_SIZE", "Local", "Recv", "Size", "", vInt(func(r *Report) int { return r.LocalRecvSize })),
		f("REMOTE_SEND_SIZE", "Remote", "Send", "Size", "", vInt(func(r *Report) int { return r.RemoteSendSize })),
		f("REMOTE_RECV_SIZE", "Remote", "Recv", "Size", "", vInt(func(r *Report) int { return r.RemoteRecvSize })),
		f("REQUEST_SIZE", "Request", "Size", "Bytes", "", vInt(func(r *Report) int {
			if !r.isRR() {
				return -1
			}
			return r.ReqSize
		})),
		f("RESPONSE_SIZE", "Response", "Size", "Bytes", "", vInt(func(r *Report) int {
			if !r.isRR() {
				return -1
			}
			return r.RespSize
		})),
	}
	c = append(c, cpuFields(true)...)
	c = append(c, cpuFields(false)...)
	c = append(c,
		f("SD_UNITS", "Service", "Demand", "Units", "", vStr(func(r *Report) string {
			if r.units() == 'x' {
				return "usec/Tran"
			}
			return "usec/KB"
		})),
		f("CONFIDENCE_LEVEL", "Confidence", "Level", "Percent", "", vInt(func(r *Report) int {
			if !r.ConfActive {
				return 0
			}
			return r.ConfLevel
		})),
		f("CONFIDENCE_INTERVAL", "Confidence", "Width", "Target", "", vF("%f", func(r *Report) float64 {
			if !r.ConfActive {
				return -1
			}
			return r.ConfWidth
		})),
		f("CONFIDENCE_ITERATION", "Confidence", "Iterations", "Run", "", vInt(func(r *Report) int {
			if r.Confidence == nil {
				return 1
			}
			return r.Confidence.Iterations
		})),
		f("THROUGHPUT_CONFID", "Throughput", "Confidence", "Width (%)", "", vF("%.3f", func(r *Report) float64 {
			if r.Confidence == nil {
				return -1
			}
			return r.Confidence.Throughput
		})),
		f("LOCAL_CPU_CONFID", "Local", "CPU", "Confidence", "Width (%)", vF("%.3f", func(r *Report) float64 {
			if r.Confidence == nil {
				return -1
			}
			return r.Confidence.LocalCPU
		})),
		f("REMOTE_CPU_CONFID", "Remote", "CPU", "Confidence", "Width (%)", vF("%.3f", func(r *Report) float64 {
			if r.Confidence == nil {
				return -1
			}
			return r.Confidence.RemoteCPU
		})),
		f("TRANSACTION_RATE", "Transaction", "Rate", "Tran/s", "", vF("%.3f", func(r *Report) float64 {
			if !r.isRR() {
				return 1 // netperf's initial value, printed as is for streams
			}
			return r.TransPerSec
		})),
		f("RT_LATENCY", "Round", "Trip", "Latency", "usec/tran", vF("%.3f", func(r *Report) float64 {
			if !r.isRR() {
				return -1
			}
			return 1e6 / r.TransPerSec
		})),
		f("BURST_SIZE", "Initial", "Burst", "Requests", "", vConst("0")),
		f("LOCAL_TRANSPORT_RETRANS", "Local", "Transport", "Retransmissions", "", vInt(func(r *Report) int { return r.LocalRetrans })),
		f("REMOTE_TRANSPORT_RETRANS", "Remote", "Transport", "Retransmissions", "", vInt(func(r *Report) int { return r.RemoteRetrans })),
		f("TRANSPORT_MSS", "Transport", "MSS", "bytes", "", vInt(func(r *Report) int { return r.MSS })),
		f("LOCAL_SEND_THROUGHPUT", "Local", "Send", "Throughput", "", vF("%.2f", func(r *Report) float64 { return r.sideRate(r.BytesSent) })),
		f("LOCAL_RECV_THROUGHPUT", "Local", "Recv", "Throughput", "", vF("%.2f", func(r *Report) float64 { return r.sideRate(r.BytesRecv) })),
		f("REMOTE_SEND_THROUGHPUT", "Remote", "Send", "Throughput", "", vF("%.2f", func(r *Report) float64 { return r.sideRate(r.RemoteBytesSent) })),
		f("REMOTE_RECV_THROUGHPUT", "Remote", "Recv", "Throughput", "", vF("%.2f", func(r *Report) float64 { return r.sideRate(r.RemoteBytesRecv) })),
	)
	c = append(c, cpuFacts(true)...)
	c = append(c, cpuFacts(false)...)
	c = append(c,
		f("SOURCE_PORT", "Source", "Port", "", "", vStr(func(r *Report) string { return orZero(r.SourcePort) })),
		f("SOURCE_ADDR", "Source", "Address", "", "", vStr(func(r *Report) string { return r.SourceAddr })),
		f("SOURCE_FAMILY", "Source", "Family", "", "", vInt(func(r *Report) int { return r.SourceFamily })),
		f("DEST_PORT", "Destination", "Port", "", "", vStr(func(r *Report) string { return orZero(r.DestPort) })),
		f("DEST_ADDR", "Destination", "Address", "", "", vStr(func(r *Report) string { return r.DestAddr })),
		f("DEST_FAMILY", "Destination", "Family", "", "", vInt(func(r *Report) int { return r.DestFamily })),
	)
	c = append(c, sideFields(true)...)
	c = append(c, sideFields(false)...)
	c = append(c, sysFields("Local")...)
	c = append(c, sysFields("Remote")...)
	c = append(c, ifFields("Local")...)
	c = append(c, ifFields("Remote")...)
	c = append(c,
		f("LOCAL_INTERVAL_USECS", "Local", "Interval", "Usecs", "", vConst("0")),
		f("LOCAL_INTERVAL_BURST", "Local", "Interval", "Burst", "", vConst("0")),
		f("REMOTE_INTERVAL_USECS", "Remote", "Interval", "Usecs", "", vConst("0")),
		f("REMOTE_INTERVAL_BURST", "Remote", "Interval", "Burst", "", vConst("0")),
	)
	c = append(c, securityFields("Local")...)
	c = append(c, securityFields("Remote")...)
	lat := func(name, l0, l1, l2, l3, format string, get func(r *netperf.Result) float64) field {
		return f(name, l0, l1, l2, l3, vF(format, func(r *Report) float64 { return get(r.Result) }))
	}
	c = append(c,
		f("RESULT_BRAND", "Result", "Tag", "", "", func(r *Report) (string, bool) {
			return `"` + r.Brand + `"`, r.Brand != ""
		}),
		f("UUID", "Test", "UUID", "", "", vStr(func(r *Report) string { return r.UUID })),
		lat("MIN_LATENCY", "Minimum", "Latency", "Microseconds", "", "%.0f", func(r *netperf.Result) float64 { return r.MinLatency }),
		lat("MAX_LATENCY", "Maximum", "Latency", "Microseconds", "", "%.0f", func(r *netperf.Result) float64 { return r.MaxLatency }),
		lat("P50_LATENCY", "50th", "Percentile", "Latency", "Microseconds", "%.0f", func(r *netperf.Result) float64 { return r.P50Latency }),
		lat("P90_LATENCY", "90th", "Percentile", "Latency", "Microseconds", "%.0f", func(r *netperf.Result) float64 { return r.P90Latency }),
		lat("P99_LATENCY", "99th", "Percentile", "Latency", "Microseconds", "%.0f", func(r *netperf.Result) float64 { return r.P99Latency }),
		lat("MEAN_LATENCY", "Mean", "Latency", "Microseconds", "", "%.2f", func(r *netperf.Result) float64 { return r.MeanLatency }),
		lat("STDDEV_LATENCY", "Stddev", "Latency", "Microseconds", "", "%.2f", func(r *netperf.Result) float64 { return r.StddevLatency }),
		f("LOCAL_SOCKET_PRIO", "Local", "Socket", "Priority", "", vConst("-1")),
		f("REMOTE_SOCKET_PRIO", "Remote", "Socket", "Priority", "", vConst("-1")),
		f("LOCAL_SOCKET_TOS", "Local", "Socket", "TOS", "", vConst("0xffffffff")),
		f("REMOTE_SOCKET_TOS", "Remote", "Socket", "TOS", "", vConst("0xffffffff")),
		f("LOCAL_CONG_CONTROL", "Local", "Congestion", "Control", "Algorithm", vStr(func(r *Report) string { return r.LocalCongControl })),
		f("REMOTE_CONG_CONTROL", "Remote", "Congestion", "Control", "Algorithm", vStr(func(r *Report) string { return r.RemoteCongControl })),
		f("LOCAL_FILL_FILE", "Local", "Fill", "File", "", vConst("")),
		f("REMOTE_FILL_FILE", "Remote", "Fill", "File", "", vConst("")),
		f("COMMAND_LINE", "Command", "Line", "", "", vStr(func(r *Report) string { return `"` + r.CommandLine + `"` })),
		f("OUTPUT_END", "This", "Is", "The", "End", func(*Report) (string, bool) { return "", false }),
	)
	return c
})

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

var byName = sync.OnceValue(func() map[string]int {
	m := make(map[string]int, len(catalogue()))
	for i, fl := range catalogue() {
		m[fl.name] = i
	}
	return m
})

// FieldNames lists every selector name in netperf's order, as "-o ?"
// prints them (OUTPUT_NONE and OUTPUT_END included).
func FieldNames() []string {
	names := make([]string, len(catalogue()))
	for i, fl := range catalogue() {
		names[i] = fl.name
	}
	return names
}

// ListNames writes the "?" listing: comma-separated for -o and -k, one per
// line for -O.
func ListNames(w io.Writer, style Style) {
	sep := ","
	if style == Columns {
		sep = "\n"
	}
	fmt.Fprintln(w, strings.Join(FieldNames(), sep))
}

// Selection is a parsed output selection: up to four blocks (lines) of
// field indexes.
type Selection [][]int

// maxBlocks is NETPERF_MAX_BLOCKS.
const maxBlocks = 4

// Names returns the selection's field names.
func (s Selection) Names() []string {
	var n []string
	for _, b := range s {
		for _, i := range b {
			n = append(n, catalogue()[i].name)
		}
	}
	return n
}

// WantsStats reports whether the selection includes latency statistics,
// which netperf gathers only then.
func (s Selection) WantsStats() bool {
	for _, n := range s.Names() {
		if statsFields[n] {
			return true
		}
	}
	return false
}

// ErrUnknownSelector is wrapped by errors about names not in the
// catalogue. (netperf ignores unknown names in a list; this netperf
// refuses them.)
var ErrUnknownSelector = errors.New("unknown output selector")

// AllSelection is "all": four blocks spanning the catalogue as netperf's
// set_output_list_all does.
func AllSelection() Selection {
	span := func(from, to string) []int {
		var b []int
		for i := byName()[from]; i <= byName()[to]; i++ {
			b = append(b, i)
		}
		return b
	}
	return Selection{
		span("SOCKET_TYPE", "RESPONSE_SIZE"),
		span("LOCAL_CPU_UTIL", "TRANSPORT_MSS"),
		span("LOCAL_SEND_THROUGHPUT", "REMOTE_CORK"),
		span("LOCAL_SYSNAME", "COMMAND_LINE"),
	}
}

// ParseSelection reads a -o/-O/-k argument as netperf does: "all"; a list
// (names separated by commas or blanks, blocks by ';'), also when it is a
// single known name; otherwise the name of a file with one block per line
// and names, or title texts, separated by commas.
func ParseSelection(spec string) (Selection, error) {
	if strings.EqualFold(spec, "all") {
		return AllSelection(), nil
	}
	if _, known := byName()[strings.ToUpper(spec)]; strings.ContainsAny(spec, ",;") || known {
		return parseDirect(spec)
	}
	return parseFile(spec)
}

func parseDirect(spec string) (Selection, error) {
	var sel Selection
	for bi, line := range strings.Split(spec, ";") {
		if bi >= maxBlocks {
			break // netperf ignores blocks past the fourth
		}
		var b []int
		for _, tok := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' }) {
			i, ok := byName()[strings.ToUpper(tok)]
			if !ok {
				return nil, fmt.Errorf("%w %q (-o ? lists them)", ErrUnknownSelector, tok)
			}
			b = append(b, i)
		}
		if len(b) > 0 || bi == 0 {
			sel = append(sel, b)
		}
	}
	if len(sel) == 0 || len(sel[0]) == 0 {
		return nil, fmt.Errorf("empty output selection %q", spec)
	}
	return sel, nil
}

// matchTitle finds a field by name or by its title lines joined with
// blanks, as netperf's match_string_to_output does for selection files;
// an unknown entry is OUTPUT_NONE (an empty column).
func matchTitle(s string) int {
	if i, ok := byName()[strings.ToUpper(s)]; ok {
		return i
	}
	for i, fl := range catalogue() {
		if strings.EqualFold(joinTitle(fl.lines), s) {
			return i
		}
	}
	return byName()["OUTPUT_NONE"]
}

func parseFile(path string) (Selection, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("could not open output selection file %q: %w", path, err)
	}
	defer fh.Close()
	var sel Selection
	sc := bufio.NewScanner(fh)
	for sc.Scan() && len(sel) < maxBlocks {
		var b []int
		for _, name := range strings.Split(sc.Text(), ",") {
			b = append(b, matchTitle(strings.Map(func(r rune) rune {
				if r < ' ' || r > '~' {
					return -1 // netperf keeps only printable characters
				}
				return r
			}, name)))
		}
		sel = append(sel, b)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading output selection file %q: %w", path, err)
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("output selection file %q is empty", path)
	}
	return sel, nil
}

// DefaultSelection is what -o/-O/-k without a list print for a test, as
// netperf's set_output_list_by_test.
func DefaultSelection(test string, cpu bool) Selection {
	var names []string
	switch {
	case test == netperf.TCPMaerts:
		names = []string{"RSS_SIZE_END", "LSR_SIZE_END", "REMOTE_SEND_SIZE"}
	case isRR(test):
		names = []string{"LSS_SIZE_END", "LSR_SIZE_END", "RSR_SIZE_END", "RSS_SIZE_END", "REQUEST_SIZE", "RESPONSE_SIZE"}
	default:
		names = []string{"LSS_SIZE_END", "RSR_SIZE_END", "LOCAL_SEND_SIZE"}
	}
	names = append(names, "ELAPSED_TIME", "THROUGHPUT", "THROUGHPUT_UNITS")
	if cpu {
		names = append(names, "LOCAL_CPU_UTIL", "LOCAL_CPU_PERCENT_USER", "LOCAL_CPU_PERCENT_SYSTEM", "LOCAL_CPU_PERCENT_IOWAIT",
			"LOCAL_CPU_PERCENT_IRQ", "LOCAL_CPU_PERCENT_SWINTR", "LOCAL_CPU_METHOD",
			"REMOTE_CPU_UTIL", "REMOTE_CPU_PERCENT_USER", "REMOTE_CPU_PERCENT_SYSTEM", "REMOTE_CPU_PERCENT_IOWAIT",
			"REMOTE_CPU_PERCENT_IRQ", "REMOTE_CPU_PERCENT_SWINTR", "REMOTE_CPU_METHOD",
			"LOCAL_SD", "REMOTE_SD", "SD_UNITS")
	}
	b := make([]int, len(names))
	for i, n := range names {
		b[i] = byName()[n]
	}
	return Selection{b}
}

// Style is the selector output style.
type Style int

// Selector styles.
const (
	CSV      Style = iota // -o
	Columns               // -O
	KeyValue              // -k
)

// Selected writes the selection in the given style, as netperf's
// print_omni_csv, print_omni_human and print_omni_keyword. The banner is
// the caller's business; NoHeaders drops the title lines.
func Selected(w io.Writer, r *Report, style Style, sel Selection) {
	type cell struct {
		s  string
		ok bool
	}
	vals := make([][]cell, len(sel))
	for bi, b := range sel {
		vals[bi] = make([]cell, len(b))
		for j, i := range b {
			s, ok := catalogue()[i].value(r)
			vals[bi][j] = cell{s, ok}
		}
	}
	switch style {
	case KeyValue:
		for bi, b := range sel {
			for j, i := range b {
				if vals[bi][j].ok {
					fmt.Fprintf(w, "%s=%s\n", catalogue()[i].name, vals[bi][j].s)
				}
			}
		}
	case CSV:
		// One line for all blocks, as netperf writes them: each field is
		// "value," and a field without a value ", " (netperf skips a
		// character it never writes); the last character goes.
		var hdr, val strings.Builder
		n := 0
		for bi, b := range sel {
			for j, i := range b {
				n++
				hdr.WriteString(joinTitle(catalogue()[i].lines))
				hdr.WriteByte(',')
				if c := vals[bi][j]; c.ok {
					val.WriteString(c.s)
					val.WriteByte(',')
				} else {
					val.WriteString(", ")
				}
			}
		}
		if n == 0 {
			return
		}
		if !r.NoHeaders {
			h := hdr.String()
			fmt.Fprintln(w, h[:len(h)-1])
		}
		v := val.String()
		fmt.Fprintln(w, v[:len(v)-1])
	case Columns:
		// Column widths are shared by a field wherever it appears: the
		// longest title line, or the value's length plus one.
		width := map[int]int{}
		for bi, b := range sel {
			for j, i := range b {
				wd := width[i]
				for _, l := range catalogue()[i].lines {
					wd = max(wd, len(l))
				}
				if c := vals[bi][j]; c.ok {
					wd = max(wd, len(c.s)+1)
				}
				width[i] = wd
			}
		}
		for bi, b := range sel {
			if len(b) == 0 {
				continue
			}
			if bi > 0 {
				fmt.Fprint(w, "\n")
			}
			if !r.NoHeaders {
				for k := range 4 {
					var line strings.Builder
					for _, i := range b {
						fmt.Fprintf(&line, "%-*s ", width[i], catalogue()[i].lines[k])
					}
					fmt.Fprintln(w, line.String())
				}
			}
			var line strings.Builder
			for j, i := range b {
				s := ""
				if c := vals[bi][j]; c.ok {
					s = c.s
				}
				fmt.Fprintf(&line, "%-*s ", width[i], s)
			}
			fmt.Fprintln(w, line.String())
		}
	}
}

// joinTitle is a field's title lines up to the first empty one, joined
// with blanks: its -o column title.
func joinTitle(t [4]string) string {
	var parts []string
	for _, s := range t {
		if s == "" {
			break
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

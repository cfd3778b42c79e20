package output

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"sluice/internal/netperf"
)

// field is one entry of the omni output catalogue.
type field struct {
	title [4]string // -O column title lines; joined for -o
	pad   int       // extra -O padding the C tool uses for this field
	value func(r *Report) string
}

func i(v int) string     { return strconv.Itoa(v) }
func i64(v int64) string { return strconv.FormatInt(v, 10) }
func f2(v float64) string {
	return strconv.FormatFloat(v, 'f', 2, 64)
}
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func cpuFields(side string, get func(r *Report) (netperf.CPUStats, float64, bool)) map[string]field {
	title := strings.ToUpper(side[:1]) + side[1:]
	mk := func(what string, f func(s netperf.CPUStats) float64) field {
		return field{title: [4]string{title, "CPU", what, "%"}, value: func(r *Report) string {
			s, u, ok := get(r)
			if !ok {
				return "-1.00"
			}
			if what == "Util" {
				return f2(u)
			}
			return f2(f(s))
		}}
	}
	up := strings.ToUpper(side)
	return map[string]field{
		up + "_CPU_UTIL":           mk("Util", nil),
		up + "_CPU_PERCENT_USER":   mk("User", func(s netperf.CPUStats) float64 { return s.User }),
		up + "_CPU_PERCENT_SYSTEM": mk("System", func(s netperf.CPUStats) float64 { return s.System }),
		up + "_CPU_PERCENT_IOWAIT": mk("I/O Wait", func(s netperf.CPUStats) float64 { return s.IOWait }),
		up + "_CPU_PERCENT_IRQ":    mk("IRQ", func(s netperf.CPUStats) float64 { return s.IRQ }),
		up + "_CPU_PERCENT_SWINTR": mk("swintr", func(s netperf.CPUStats) float64 { return s.SoftIRQ }),
		up + "_CPU_PEAK_UTIL":      mk("Peak Util", func(s netperf.CPUStats) float64 { return s.Peak }),
		up + "_CPU_PEAK_ID": {title: [4]string{title, "Peak", "CPU", "Id"}, value: func(r *Report) string {
			s, _, _ := get(r)
			return i(s.PeakID)
		}},
		up + "_CPU_COUNT": {title: [4]string{title, "CPU", "Count"}, value: func(r *Report) string {
			s, _, _ := get(r)
			return i(s.NumCPUs)
		}},
		up + "_CPU_METHOD": {title: [4]string{title, "CPU", "Util", "Method"}, value: func(r *Report) string {
			s, _, _ := get(r)
			if s.Method == 0 {
				return "S"
			}
			return string(s.Method)
		}},
	}
}

var catalogue = func() map[string]field {
	c := map[string]field{
		"LSS_SIZE_END":     {title: [4]string{"Local", "Send Socket", "Size", "Final"}, value: func(r *Report) string { return i(r.LSSEnd) }},
		"LSR_SIZE_END":     {title: [4]string{"Local", "Recv Socket", "Size", "Final"}, value: func(r *Report) string { return i(r.LSREnd) }},
		"RSS_SIZE_END":     {title: [4]string{"Remote", "Send Socket", "Size", "Final"}, value: func(r *Report) string { return i(r.RSSEnd) }},
		"RSR_SIZE_END":     {title: [4]string{"Remote", "Recv Socket", "Size", "Final"}, value: func(r *Report) string { return i(r.RSREnd) }},
		"LSS_SIZE":         {title: [4]string{"Local", "Send Socket", "Size", "Initial"}, value: func(r *Report) string { return i(r.LSS) }},
		"LSR_SIZE":         {title: [4]string{"Local", "Recv Socket", "Size", "Initial"}, value: func(r *Report) string { return i(r.LSR) }},
		"RSS_SIZE":         {title: [4]string{"Remote", "Send Socket", "Size", "Initial"}, value: func(r *Report) string { return i(r.RSS) }},
		"RSR_SIZE":         {title: [4]string{"Remote", "Recv Socket", "Size", "Initial"}, value: func(r *Report) string { return i(r.RSR) }},
		"LOCAL_SEND_SIZE":  {title: [4]string{"Local", "Send", "Size"}, pad: 1, value: func(r *Report) string { return i(r.LocalSendSize) }},
		"LOCAL_RECV_SIZE":  {title: [4]string{"Local", "Recv", "Size"}, pad: 1, value: func(r *Report) string { return i(r.LocalRecvSize) }},
		"REMOTE_SEND_SIZE": {title: [4]string{"Remote", "Send", "Size"}, pad: 1, value: func(r *Report) string { return i(r.RemoteSendSize) }},
		"REMOTE_RECV_SIZE": {title: [4]string{"Remote", "Recv", "Size"}, pad: 1, value: func(r *Report) string { return i(r.RemoteRecvSize) }},
		"REQUEST_SIZE":     {title: [4]string{"Request", "Size", "Bytes"}, value: func(r *Report) string { return i(r.ReqSize) }},
		"RESPONSE_SIZE":    {title: [4]string{"Response", "Size", "Bytes"}, value: func(r *Report) string { return i(r.RespSize) }},
		"ELAPSED_TIME":     {title: [4]string{"Elapsed", "Time", "(sec)"}, value: func(r *Report) string { return f2(secs(r)) }},
		"THROUGHPUT":       {title: [4]string{"Throughput"}, value: func(r *Report) string { return f2(r.Throughput()) }},
		"THROUGHPUT_UNITS": {title: [4]string{"Throughput", "Units"}, pad: 1, value: func(r *Report) string {
			return UnitsTitle(r.units()) + "/s"
		}},
		"TRANSACTION_RATE": {title: [4]string{"Transaction", "Rate", "Tran/s"}, value: func(r *Report) string { return f3(r.TransPerSec) }},
		"MIN_LATENCY":      {title: [4]string{"Minimum", "Latency", "Microseconds"}, value: func(r *Report) string { return i(int(r.MinLatency)) }},
		"MAX_LATENCY":      {title: [4]string{"Maximum", "Latency", "Microseconds"}, value: func(r *Report) string { return i(int(r.MaxLatency)) }},
		"MEAN_LATENCY":     {title: [4]string{"Mean", "Latency", "Microseconds"}, value: func(r *Report) string { return f2(r.MeanLatency) }},
		"P50_LATENCY":      {title: [4]string{"50th", "Percentile", "Latency", "Microseconds"}, value: func(r *Report) string { return i(int(r.P50Latency)) }},
		"P90_LATENCY":      {title: [4]string{"90th", "Percentile", "Latency", "Microseconds"}, value: func(r *Report) string { return i(int(r.P90Latency)) }},
		"P99_LATENCY":      {title: [4]string{"99th", "Percentile", "Latency", "Microseconds"}, value: func(r *Report) string { return i(int(r.P99Latency)) }},
		"LOCAL_SD":         {title: [4]string{"Local", "Service", "Demand"}, value: func(r *Report) string { return f3(r.LocalSD) }},
		"REMOTE_SD":        {title: [4]string{"Remote", "Service", "Demand"}, value: func(r *Report) string { return f3(r.RemoteSD) }},
		"SD_UNITS": {title: [4]string{"Service", "Demand", "Units"}, value: func(r *Report) string {
			if isRR(r.Test) {
				return "usec/Tran"
			}
			return "usec/KB"
		}},
		"PROTOCOL": {title: [4]string{"Protocol"}, value: func(r *Report) string {
			if strings.HasPrefix(r.Test, "UDP") {
				return "UDP"
			}
			return "TCP"
		}},
		"DIRECTION": {title: [4]string{"Direction"}, value: func(r *Report) string {
			switch r.Test {
			case netperf.TCPStream, netperf.UDPStream:
				return "Send"
			case netperf.TCPMaerts:
				return "Receive"
			}
			return "Send|Recv"
		}},
		"REMOTE_HOST":        {title: [4]string{"Remote", "Host"}, value: func(r *Report) string { return r.Host }},
		"LOCAL_BYTES_SENT":   {title: [4]string{"Local", "Bytes", "Sent"}, value: func(r *Report) string { return i64(r.BytesSent) }},
		"LOCAL_BYTES_RECVD":  {title: [4]string{"Local", "Bytes", "Received"}, value: func(r *Report) string { return i64(r.BytesRecv) }},
		"LOCAL_SEND_CALLS":   {title: [4]string{"Local", "Send", "Calls"}, value: func(r *Report) string { return i64(r.LocalSendCalls) }},
		"LOCAL_RECV_CALLS":   {title: [4]string{"Local", "Recv", "Calls"}, value: func(r *Report) string { return i64(r.LocalRecvCalls) }},
		"REMOTE_BYTES_SENT":  {title: [4]string{"Remote", "Bytes", "Sent"}, value: func(r *Report) string { return i64(r.RemoteBytesSent) }},
		"REMOTE_BYTES_RECVD": {title: [4]string{"Remote", "Bytes", "Received"}, value: func(r *Report) string { return i64(r.RemoteBytesRecv) }},
		"REMOTE_SEND_CALLS":  {title: [4]string{"Remote", "Send", "Calls"}, value: func(r *Report) string { return i64(r.RemoteSendCalls) }},
		"REMOTE_RECV_CALLS":  {title: [4]string{"Remote", "Recv", "Calls"}, value: func(r *Report) string { return i64(r.RemoteRecvCalls) }},
		"TRANSACTIONS":       {title: [4]string{"Transactions"}, value: func(r *Report) string { return i64(r.Transactions) }},
		"CONFIDENCE_ITERATION": {title: [4]string{"Confidence", "Iterations", "Run"}, value: func(r *Report) string {
			if r.Confidence == nil {
				return "1"
			}
			return i(r.Confidence.Iterations)
		}},
		"THROUGHPUT_CONFID": {title: [4]string{"Throughput", "Confidence", "Width (%)"}, value: func(r *Report) string {
			if r.Confidence == nil {
				return "-1.000"
			}
			return f3(r.Confidence.Throughput)
		}},
		"TRANSPORT_MSS":                 {title: [4]string{"Transport", "MSS", "bytes"}, value: func(r *Report) string { return i(r.MSS) }},
		"REMOTE_TRANSPORT_CONG_CONTROL": {title: [4]string{"Remote", "Transport", "Congestion", "Control"}, value: func(r *Report) string { return r.RemoteCongControl }},
		"COMMAND_LINE":                  {title: [4]string{"Command", "Line"}, value: func(r *Report) string { return r.CommandLine }},
	}
	for k, v := range cpuFields("local", func(r *Report) (netperf.CPUStats, float64, bool) {
		return r.LocalCPUStats, r.Result.LocalCPU, r.ShowLocalCPU
	}) {
		c[k] = v
	}
	for k, v := range cpuFields("remote", func(r *Report) (netperf.CPUStats, float64, bool) {
		return r.RemoteCPUStats, r.Result.RemoteCPU, r.ShowRemoteCPU
	}) {
		c[k] = v
	}
	return c
}()

// FieldNames lists the selector names this implementation knows.
func FieldNames() []string {
	names := make([]string, 0, len(catalogue))
	for n := range catalogue {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var cpuDefault = []string{
	"LOCAL_CPU_UTIL", "LOCAL_CPU_PERCENT_USER", "LOCAL_CPU_PERCENT_SYSTEM", "LOCAL_CPU_PERCENT_IOWAIT",
	"LOCAL_CPU_PERCENT_IRQ", "LOCAL_CPU_PERCENT_SWINTR", "LOCAL_CPU_METHOD",
	"REMOTE_CPU_UTIL", "REMOTE_CPU_PERCENT_USER", "REMOTE_CPU_PERCENT_SYSTEM", "REMOTE_CPU_PERCENT_IOWAIT",
	"REMOTE_CPU_PERCENT_IRQ", "REMOTE_CPU_PERCENT_SWINTR", "REMOTE_CPU_METHOD",
	"LOCAL_SD", "REMOTE_SD", "SD_UNITS",
}

// DefaultFields returns the selectors netperf prints for -o/-O/-k with no list.
func DefaultFields(test string, cpu bool) []string {
	var f []string
	switch {
	case test == netperf.TCPMaerts:
		f = []string{"RSS_SIZE_END", "LSR_SIZE_END", "REMOTE_SEND_SIZE", "ELAPSED_TIME", "THROUGHPUT", "THROUGHPUT_UNITS"}
	case isRR(test):
		f = []string{"LSS_SIZE_END", "LSR_SIZE_END", "RSR_SIZE_END", "RSS_SIZE_END", "REQUEST_SIZE", "RESPONSE_SIZE", "ELAPSED_TIME", "THROUGHPUT", "THROUGHPUT_UNITS"}
	default:
		f = []string{"LSS_SIZE_END", "RSR_SIZE_END", "LOCAL_SEND_SIZE", "ELAPSED_TIME", "THROUGHPUT", "THROUGHPUT_UNITS"}
	}
	if cpu {
		f = append(f, cpuDefault...)
	}
	return f
}

// ParseFieldList turns a -o/-O/-k argument into selector names: a comma or
// space separated list, or the name of a file holding one. Names are case
// insensitive.
func ParseFieldList(arg string) ([]string, error) {
	text := arg
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, err
		}
		text = string(b)
	}
	var names []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		for _, n := range strings.FieldsFunc(sc.Text(), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == ';' }) {
			n = strings.ToUpper(n)
			if _, ok := catalogue[n]; !ok {
				return nil, fmt.Errorf("unknown output selector %q (use ? for the list)", n)
			}
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("empty output selector list")
	}
	return names, nil
}

// Style is the selector output style.
type Style int

// Selector styles.
const (
	CSV      Style = iota // -o
	Columns               // -O
	KeyValue              // -k
)

// Selected writes the chosen fields in the given style. The banner is the
// caller's business; NoHeaders suppresses the title lines.
func Selected(w io.Writer, r *Report, style Style, names []string) {
	vals := make([]string, len(names))
	for k, n := range names {
		vals[k] = catalogue[n].value(r)
	}
	switch style {
	case KeyValue:
		for k, n := range names {
			fmt.Fprintf(w, "%s=%s\n", n, vals[k])
		}
	case CSV:
		if !r.NoHeaders {
			titles := make([]string, len(names))
			for k, n := range names {
				titles[k] = joinTitle(catalogue[n].title)
			}
			fmt.Fprintln(w, strings.Join(titles, ","))
		}
		fmt.Fprintln(w, strings.Join(vals, ","))
	case Columns:
		widths := make([]int, len(names))
		lines := 0
		for k, n := range names {
			f := catalogue[n]
			for l, s := range f.title {
				widths[k] = max(widths[k], len(s))
				if s != "" {
					lines = max(lines, l+1)
				}
			}
			widths[k] += f.pad
			widths[k] = max(widths[k], len(vals[k]))
		}
		if !r.NoHeaders {
			for l := range lines {
				for k, n := range names {
					fmt.Fprintf(w, "%-*s ", widths[k], catalogue[n].title[l])
				}
				fmt.Fprint(w, "\n")
			}
		}
		for k := range names {
			fmt.Fprintf(w, "%-*s ", widths[k], vals[k])
		}
		fmt.Fprint(w, "\n")
	}
}

func joinTitle(t [4]string) string {
	var parts []string
	for _, s := range t {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

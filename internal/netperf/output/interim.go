package output

import (
	"fmt"
	"io"

	"sluice/internal/netperf"
)

// InterimMode is how demo mode prints: netperf's output mode.
type InterimMode int

// Interim result styles: classic output and -O print "Interim result:"
// lines, -o comma-separated ones, -k numbered key=value groups.
const (
	InterimHuman InterimMode = iota
	InterimCSV
	InterimKeyVal
)

// Interim writes one demo-mode interim result as netperf's
// demo_interval_display does. u is the report's -f letter (as Report
// resolves it); index numbers the -k groups from 0.
func Interim(w io.Writer, in netperf.Interim, u byte, mode InterimMode, index int) {
	secs := in.Interval.Seconds()
	units := in.Bytes
	if u == 'x' && isRR(in.Test) {
		units = in.Transactions
	}
	rate := Rate(units, secs, u)
	ms := in.End.Nanosecond() / 1e6
	switch mode {
	case InterimCSV:
		fmt.Fprintf(w, "%7.2f,%s/s,%.3f,%d.%03d\n", rate, UnitsTitle(u), secs, in.End.Unix(), ms)
	case InterimKeyVal:
		fmt.Fprintf(w, "NETPERF_INTERIM_RESULT[%d]=%.2f\n"+
			"NETPERF_UNITS[%d]=%s/s\n"+
			"NETPERF_INTERVAL[%d]=%.3f\n"+
			"NETPERF_ENDING[%d]=%d.%03d\n",
			index, rate, index, UnitsTitle(u), index, secs, index, in.End.Unix(), ms)
	default:
		fmt.Fprintf(w, "Interim result: %7.2f %s/s over %.3f seconds ending at %d.%03d\n",
			rate, UnitsTitle(u), secs, in.End.Unix(), ms)
	}
}

// ResolveUnits is the -f letter netperf uses for a test: the given one,
// 'x' for RR tests and 'm' otherwise when none was given, and 'm' for an
// 'x' given to a stream test.
func ResolveUnits(test string, given byte) byte {
	r := Report{Result: &netperf.Result{Test: test}, Units: given}
	return r.units()
}

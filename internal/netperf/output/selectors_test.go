package output

import (
	"os"
	"strings"
	"testing"

	"sluice/internal/netperf"
)

func loadOutputs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("/work/shared/netperf-wire/outputs.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var cmd string
	for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		if strings.HasPrefix(line, "$ ") {
			cmd = line[2:]
			out[cmd] = ""
			continue
		}
		out[cmd] += line + "\n"
	}
	return out
}

// render prints a report the way cmd/netperf does for the given style.
func render(r *Report, style Style, names []string) string {
	var b strings.Builder
	if !r.NoHeaders {
		Banner(&b, r)
	}
	Selected(&b, r, style, names)
	return b.String()
}

func TestOutputsTxt(t *testing.T) {
	ex := loadOutputs(t)
	check := func(cmd, got string) {
		t.Helper()
		want, ok := ex[cmd]
		if !ok {
			t.Fatalf("no capture for %q", cmd)
		}
		// outputs.txt strips trailing blanks on some lines; compare exactly
		// where it kept them and modulo trailing blanks elsewhere.
		if got != want && trimLines(got) != trimLines(want) {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", cmd, got, want)
		}
	}
	stream := func(lss, rsr int, tp float64) *Report {
		r := base(netperf.TCPStream)
		r.LSSEnd, r.RSREnd, r.ThroughputMbps = lss, rsr, tp
		return r
	}
	check("-t TCP_STREAM -- -o", render(stream(4194304, 1149031, 27068.85), CSV, DefaultFields(netperf.TCPStream, false)))
	check("-t TCP_STREAM -- -O", render(stream(4194304, 844814, 27852.72), Columns, DefaultFields(netperf.TCPStream, false)))
	check("-t TCP_STREAM -- -k", render(stream(3939840, 962635, 27403.13), KeyValue, DefaultFields(netperf.TCPStream, false)))

	rr := base(netperf.TCPRR)
	rr.LSSEnd, rr.LSREnd, rr.RSREnd, rr.RSSEnd, rr.TransPerSec = 3939840, 131072, 131072, 3939840, 30776.43
	rr.NoHeaders = true
	check("-t TCP_RR -P 0 -- -o", render(rr, CSV, DefaultFields(netperf.TCPRR, false)))

	rk := withCPU(base(netperf.TCPRR), 70.38, 27.997)
	rk.LSSEnd, rk.LSREnd, rk.RSREnd, rk.RSSEnd, rk.TransPerSec = 3939840, 131072, 131072, 3939840, 50278.31
	st := netperf.CPUStats{Util: 70.38, User: 5.06, System: 43.33, SoftIRQ: 21.99, Method: 'S'}
	rk.LocalCPUStats, rk.RemoteCPUStats = st, st
	check("-t TCP_RR -c -C -- -k", render(rk, KeyValue, DefaultFields(netperf.TCPRR, true)))

	lat := base(netperf.TCPRR)
	lat.MinLatency, lat.MeanLatency, lat.P99Latency, lat.TransPerSec = 7, 20.40, 67, 48569.831
	names, err := ParseFieldList("min_latency,mean_latency,p99_latency,transaction_rate")
	if err != nil {
		t.Fatal(err)
	}
	check("-t TCP_RR -- -O min_latency,mean_latency,p99_latency,transaction_rate", render(lat, Columns, names))

	conf := tput(base(netperf.TCPRR), 48078.90)
	conf.ConfActive, conf.ConfLevel, conf.ConfWidth = true, 99, 5
	conf.Confidence = &netperf.Confidence{Iterations: 3, Throughput: 75.429}
	check("-t TCP_RR -i 3,3 -I 99,5", String(conf))

	brand := withCPU(base(netperf.TCPStream), 90, 0.485)
	brand.Verbosity, brand.NoHeaders, brand.Brand = 0, true, "brand"
	check("-t TCP_STREAM -v 0 -c -C -B brand -P 0", String(brand))

	m := tput(withCPU(base(netperf.TCPMaerts), 86.63, 0.488), 29086.80)
	check("-t TCP_MAERTS -c -C", String(m))

	rv2 := tput(withCPU(base(netperf.TCPRR), 58.91, 17.086), 68951.418)
	rv2.Verbosity = 2
	check("-t TCP_RR -c -C -v 2", String(rv2))

	fm := tput(base(netperf.TCPRR), 47500)
	fm.Units = 'm'
	check("-t TCP_RR -f m", String(fm))

	if _, err := ParseFieldList("THROUGHPUT,NOT_A_FIELD"); err == nil {
		t.Error("unknown selector accepted")
	}
}

func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for k := range lines {
		lines[k] = strings.TrimRight(lines[k], " ")
	}
	return strings.Join(lines, "\n")
}

func TestFieldListFromFile(t *testing.T) {
	p := t.TempDir() + "/fields"
	if err := os.WriteFile(p, []byte("throughput,elapsed_time\nLOCAL_CPU_UTIL\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ParseFieldList(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "THROUGHPUT,ELAPSED_TIME,LOCAL_CPU_UTIL" {
		t.Errorf("got %v", got)
	}
	if len(FieldNames()) < 60 {
		t.Errorf("catalogue has only %d names", len(FieldNames()))
	}
}

package output

import (
	"errors"
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
func render(r *Report, style Style, sel Selection) string {
	var b strings.Builder
	if !r.NoHeaders {
		Banner(&b, r)
	}
	Selected(&b, r, style, sel)
	return noDemo(b.String())
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
	check("-t TCP_STREAM -- -o", render(stream(4194304, 1149031, 27068.85), CSV, DefaultSelection(netperf.TCPStream, false)))
	check("-t TCP_STREAM -- -O", render(stream(4194304, 844814, 27852.72), Columns, DefaultSelection(netperf.TCPStream, false)))
	check("-t TCP_STREAM -- -k", render(stream(3939840, 962635, 27403.13), KeyValue, DefaultSelection(netperf.TCPStream, false)))

	rr := base(netperf.TCPRR)
	rr.LSSEnd, rr.LSREnd, rr.RSREnd, rr.RSSEnd, rr.TransPerSec = 3939840, 131072, 131072, 3939840, 30776.43
	rr.NoHeaders = true
	check("-t TCP_RR -P 0 -- -o", render(rr, CSV, DefaultSelection(netperf.TCPRR, false)))

	rk := withCPU(base(netperf.TCPRR), 70.38, 27.997)
	rk.LSSEnd, rk.LSREnd, rk.RSREnd, rk.RSSEnd, rk.TransPerSec = 3939840, 131072, 131072, 3939840, 50278.31
	st := netperf.CPUStats{Util: 70.38, User: 5.06, System: 43.33, SoftIRQ: 21.99, Method: 'S'}
	rk.LocalCPUStats, rk.RemoteCPUStats = st, st
	check("-t TCP_RR -c -C -- -k", render(rk, KeyValue, DefaultSelection(netperf.TCPRR, true)))

	lat := base(netperf.TCPRR)
	lat.MinLatency, lat.MeanLatency, lat.P99Latency, lat.TransPerSec = 7, 20.40, 67, 48569.831
	names, err := ParseSelection("min_latency,mean_latency,p99_latency,transaction_rate")
	if err != nil {
		t.Fatal(err)
	}
	check("-t TCP_RR -- -O min_latency,mean_latency,p99_latency,transaction_rate", render(lat, Columns, names))

	conf := tput(base(netperf.TCPRR), 48078.90)
	conf.ConfActive, conf.ConfLevel, conf.ConfWidth = true, 99, 5
	conf.Confidence = &netperf.Confidence{Iterations: 3, Throughput: 75.429}
	check("-t TCP_RR -i 3,3 -I 99,5", noDemo(String(conf)))

	brand := withCPU(base(netperf.TCPStream), 90, 0.485)
	brand.Verbosity, brand.NoHeaders, brand.Brand = 0, true, "brand"
	check("-t TCP_STREAM -v 0 -c -C -B brand -P 0", noDemo(String(brand)))

	m := tput(withCPU(base(netperf.TCPMaerts), 86.63, 0.488), 29086.80)
	check("-t TCP_MAERTS -c -C", noDemo(String(m)))

	rv2 := tput(withCPU(base(netperf.TCPRR), 58.91, 17.086), 68951.418)
	rv2.Verbosity = 2
	check("-t TCP_RR -c -C -v 2", noDemo(String(rv2)))

	fm := tput(base(netperf.TCPRR), 47500)
	fm.Units = 'm'
	check("-t TCP_RR -f m", noDemo(String(fm)))

	if _, err := ParseSelection("THROUGHPUT,NOT_A_FIELD"); !errors.Is(err, ErrUnknownSelector) {
		t.Errorf("unknown selector: got %v, want ErrUnknownSelector", err)
	}
}

func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for k := range lines {
		lines[k] = strings.TrimRight(lines[k], " ")
	}
	return strings.Join(lines, "\n")
}

func TestSelectionFromFile(t *testing.T) {
	p := t.TempDir() + "/fields"
	// Names or title texts, case-insensitive; an unknown entry is an empty
	// column (OUTPUT_NONE), as in netperf; one block per line.
	if err := os.WriteFile(p, []byte("throughput,Elapsed Time (sec),nope\nLOCAL_CPU_UTIL\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ParseSelection(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || strings.Join(got.Names(), ",") != "THROUGHPUT,ELAPSED_TIME,OUTPUT_NONE,LOCAL_CPU_UTIL" {
		t.Errorf("got %v", got.Names())
	}
	if _, err := ParseSelection(t.TempDir() + "/missing"); err == nil {
		t.Error("missing selection file accepted")
	}
}

// TestCatalogueIsNetperfs checks the catalogue against netperf 2.7.1's
// enum netperf_output_name (175 names with OUTPUT_NONE and OUTPUT_END) and
// the "all" blocks against set_output_list_all.
func TestCatalogueIsNetperfs(t *testing.T) {
	names := FieldNames()
	if len(names) != 175 || names[0] != "OUTPUT_NONE" || names[174] != "OUTPUT_END" || names[173] != "COMMAND_LINE" {
		t.Fatalf("catalogue has %d names, from %s to %s", len(names), names[0], names[len(names)-1])
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("duplicate name %s", n)
		}
		seen[n] = true
	}
	for _, n := range []string{"STDDEV_LATENCY", "RT_LATENCY", "BURST_SIZE", "LOCAL_BYTES_PER_SEND", "REMOTE_BYTES_PER_RECV",
		"LOCAL_CONG_CONTROL", "REMOTE_CONG_CONTROL", "LOCAL_TRANSPORT_RETRANS", "REMOTE_TRANSPORT_RETRANS",
		"LOCAL_CPU_CONFID", "REMOTE_CPU_CONFID", "LSS_SIZE_REQ", "RSR_SIZE_REQ", "UUID", "RESULT_BRAND"} {
		if !seen[n] {
			t.Errorf("catalogue lacks %s", n)
		}
	}
	for _, n := range []string{"TRANSACTIONS", "REMOTE_TRANSPORT_CONG_CONTROL"} {
		if seen[n] {
			t.Errorf("catalogue has %s, which netperf does not", n)
		}
	}
	all := AllSelection()
	want := [][2]string{{"SOCKET_TYPE", "RESPONSE_SIZE"}, {"LOCAL_CPU_UTIL", "TRANSPORT_MSS"}, {"LOCAL_SEND_THROUGHPUT", "REMOTE_CORK"}, {"LOCAL_SYSNAME", "COMMAND_LINE"}}
	total := 0
	for i, b := range all {
		if catalogue()[b[0]].name != want[i][0] || catalogue()[b[len(b)-1]].name != want[i][1] {
			t.Errorf("block %d spans %s..%s, want %s..%s", i, catalogue()[b[0]].name, catalogue()[b[len(b)-1]].name, want[i][0], want[i][1])
		}
		total += len(b)
	}
	if total != 173 {
		t.Errorf("all selects %d fields, want 173", total)
	}
	var b strings.Builder
	ListNames(&b, CSV)
	if !strings.HasPrefix(b.String(), "OUTPUT_NONE,SOCKET_TYPE,PROTOCOL,DIRECTION,") || !strings.HasSuffix(b.String(), ",COMMAND_LINE,OUTPUT_END\n") {
		t.Errorf("-o ? listing: %q", b.String())
	}
}

// FuzzParseSelection: any -o/-O/-k argument either fails cleanly or gives
// a selection every printer can print.
func FuzzParseSelection(f *testing.F) {
	for _, s := range []string{"all", "THROUGHPUT", "throughput,elapsed_time", "A;B", "THROUGHPUT;;ELAPSED_TIME", ",", "OUTPUT_NONE OUTPUT_END", "?"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if _, known := byName()[strings.ToUpper(spec)]; !strings.ContainsAny(spec, ",;") && !known && !strings.EqualFold(spec, "all") {
			return // would be read as a file name
		}
		sel, err := ParseSelection(spec)
		if err != nil {
			return
		}
		if len(sel) == 0 || len(sel) > maxBlocks {
			t.Fatalf("%q: %d blocks", spec, len(sel))
		}
		r := withCPU(base(netperf.TCPRR), 50, 10)
		for _, st := range []Style{CSV, Columns, KeyValue} {
			var b strings.Builder
			Selected(&b, r, st, sel)
		}
	})
}

package netperf

import (
	"bytes"
	"math"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/internal/netperf"
	"sluice/internal/netperf/output"
	"sluice/internal/testutil/netservertest"
)

func TestParseNetperf(t *testing.T) {
	o, err := ParseNetperf(strings.Fields("-H 10.0.0.2 -p12866 -l -500 -t tcp_rr -cC -f m -P 0 -v 2 -i 10,3 -I 95,2 -B br -L 10.0.0.1 -4 -T 1,3 -Z pw -- -r 64,128 -s 64k -S 1M -D -P 5001,5002 -o"))
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if o.Host != "10.0.0.2" || c.Host != "10.0.0.2" || c.Port != 12866 || c.Transactions != 500 || c.Test != netperf.TCPRR {
		t.Errorf("got %+v", c)
	}
	if !c.LocalCPU || !c.RemoteCPU || o.Units != 'm' || !o.NoHeaders || o.Verbosity != 2 || o.Brand != "br" {
		t.Errorf("got %+v", o)
	}
	if c.ConfMax != 10 || c.ConfMin != 3 || c.ConfLevel != 95 || c.ConfWidth != 2 {
		t.Errorf("confidence %d,%d %d,%v", c.ConfMax, c.ConfMin, c.ConfLevel, c.ConfWidth)
	}
	if c.LocalAddr != "10.0.0.1" || c.Family != 4 || !c.BindRemoteCPU || c.RemoteCPUAffinity != 3 || c.Passphrase != "pw" {
		t.Errorf("got %+v", c)
	}
	if c.ReqSize != 64 || c.RespSize != 128 || c.LocalSockBuf != 65536 || c.RemoteSockBuf != 1<<20 || !c.NoDelay {
		t.Errorf("test options %+v", c)
	}
	if c.LocalDataPort != 5001 || c.RemoteDataPort != 5002 || o.Style != output.CSV || len(o.Selectors) != 26 {
		t.Errorf("ports %d,%d style %v selectors %v", c.LocalDataPort, c.RemoteDataPort, o.Style, o.Selectors)
	}
	o, err = ParseNetperf([]string{"-l1", "--", "-O", "THROUGHPUT,ELAPSED_TIME", "-m", "1024"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.Duration != time.Second || o.Config.SendSize != 1024 || len(o.Selectors) != 2 || o.Style != output.Columns {
		t.Errorf("got %+v", o)
	}
	for _, bad := range [][]string{{"-l"}, {"-q"}, {"-l", "x"}, {"-p", "70000"}, {"-f", "q"}, {"--", "-k", "NOPE"}, {"-l", "0"}, {"stray"}, {"-t", "SCTP_RR"}} {
		if _, err := ParseNetperf(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseNetserver(t *testing.T) {
	o, err := ParseNetserver([]string{"-p", "12000", "-L", "127.0.0.1", "-D", "-4", "-f"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 12000 || o.Addr != "127.0.0.1" || !o.Foreground || o.Family != 4 {
		t.Errorf("got %+v", o)
	}
	for _, bad := range [][]string{{"-p"}, {"-x"}, {"-p", "0"}, {"extra"}} {
		if _, err := ParseNetserver(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// "Listens only where told": -L 127.0.0.1 binds that address only.
	o.Port = 0
	s, err := o.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a := s.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("listening on %v", a)
	}
	o6 := &ServerOptions{Family: 6, Addr: "::1"}
	if s6, err := o6.Listen(); err == nil {
		if a := s6.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv6loopback) {
			t.Errorf("listening on %v", a)
		}
		s6.Close()
	}
}

var numRE = regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?(e[+-][0-9]+)?`)
var spaceRE = regexp.MustCompile(` +`)

// shape reduces output to its layout: numbers become N, runs of blanks one.
func shape(s string) string {
	s = strings.ReplaceAll(s, "10^6bits", "UNITS")
	return spaceRE.ReplaceAllString(numRE.ReplaceAllString(s, "N"), " ")
}

func captured(t *testing.T) map[string]string {
	raw, err := os.ReadFile("/work/shared/netperf-wire/output-examples.raw.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var cmd string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "$ netperf -H 127.0.0.1 -l 1 ") {
			cmd = strings.TrimSpace(strings.TrimPrefix(line, "$ netperf -H 127.0.0.1 -l 1 "))
			continue
		}
		if line != "" {
			out[cmd] += strings.TrimSuffix(line, "⏎") + "\n"
		}
	}
	return out
}

// TestEndToEndOutputs runs the Go netperf against the Go netserver for all
// six tests in several output styles and checks the output has the shape
// of the C tool's captured output.
func TestEndToEndOutputs(t *testing.T) {
	port := strconv.Itoa(netservertest.Loopback(t))
	want := captured(t)
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		full := append([]string{"-H", "127.0.0.1", "-p", port}, args...)
		if rc := NetperfMain(full, &out, &errb); rc != 0 {
			t.Fatalf("netperf %v: exit %d: %s", full, rc, errb.String())
		}
		return out.String()
	}
	tests := []string{"TCP_STREAM", "TCP_MAERTS", "TCP_RR", "TCP_CRR", "UDP_STREAM", "UDP_RR"}
	variants := []string{"", "-c -C", "-v 0", "-P 0", "-v 2"}
	for i, test := range tests {
		// One variant per test keeps the run short; each style is covered
		// once across the six tests.
		v := variants[i%len(variants)]
		if test == "UDP_RR" {
			v = "-c -C"
		}
		cmd := strings.TrimSpace("-t " + test + " " + v)
		args := append([]string{"-l", "1"}, strings.Fields(cmd)...)
		if test == "TCP_RR" || test == "UDP_RR" || test == "TCP_CRR" {
			args = append([]string{"-l", "-2000"}, strings.Fields(cmd)...)
		}
		got := run(args...)
		if shape(got) != shape(want[cmd]) {
			t.Errorf("%s: layout differs\ngot:\n%s\nwant:\n%s", cmd, got, want[cmd])
		}
	}
	// Selector styles and confidence intervals.
	got := run("-l", "-3000", "-t", "TCP_RR", "-c", "-C", "-i", "3,3", "--", "-k")
	for _, key := range []string{"LSS_SIZE_END=", "THROUGHPUT_UNITS=Trans/s", "LOCAL_CPU_METHOD=S", "REMOTE_SD=", "SD_UNITS=usec/Tran"} {
		if !strings.Contains(got, key) {
			t.Errorf("-k output lacks %q:\n%s", key, got)
		}
	}
	if !strings.Contains(got, " : +/-2.500% @ 99% conf. ") {
		t.Errorf("confidence banner missing:\n%s", got)
	}
	got = run("-l", "-1000", "-t", "TCP_RR", "-P", "0", "--", "-o")
	if f := strings.Split(strings.TrimSpace(got), ","); len(f) != 9 || f[8] != "Trans/s" {
		t.Errorf("-P 0 -o: got %q", got)
	}
	got = run("-l", "1", "-t", "TCP_STREAM", "--", "-O", "THROUGHPUT,THROUGHPUT_UNITS")
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[1], "Throughput Throughput") {
		t.Errorf("-O: got %q", got)
	}
}

// An oversized message size used to reach the client's data loop and make
// its buffer allocation panic; it is now a command-line error.
func TestParseNetperfSizeRange(t *testing.T) {
	for _, s := range []string{"4611686018427387903", "2048m", "3g", "-3g", "9223372036854775807k"} {
		if _, err := ParseNetperf([]string{"--", "-m", s}); err == nil {
			t.Errorf("-m %s accepted", s)
		}
	}
	o, err := ParseNetperf([]string{"--", "-m", "2147483647", "-M", "1g"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.SendSize != math.MaxInt32 || o.Config.RecvSize != 1<<30 {
		t.Errorf("sizes %d,%d", o.Config.SendSize, o.Config.RecvSize)
	}
}

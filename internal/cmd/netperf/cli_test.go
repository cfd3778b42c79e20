package netperf

import (
	"bytes"
	"errors"
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

func TestParse(t *testing.T) {
	o, err := Parse(strings.Fields("-H 10.0.0.2 -p12866 -l -500 -t tcp_rr -cC -f m -P 0 -v 2 -i 10,3 -I 95,2 -B br -L 10.0.0.1 -4 -T 1,3 -Z pw -- -r 64,128 -s 64K -S 1M -D -P 5001,5002 -o"))
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
	if c.ConfMax != 10 || c.ConfMin != 3 || c.ConfLevel != 95 || c.ConfWidth != 2 || !o.ConfActive {
		t.Errorf("confidence %d,%d %d,%v", c.ConfMax, c.ConfMin, c.ConfLevel, c.ConfWidth)
	}
	if c.LocalAddr != "10.0.0.1" || c.Family != 4 || !c.BindRemoteCPU || c.RemoteCPUAffinity != 3 || c.Passphrase != "pw" || !o.CPUBind {
		t.Errorf("got %+v", c)
	}
	if c.ReqSize != 64 || c.RespSize != 128 || c.LocalSendBuf != 65536 || c.LocalRecvBuf != 65536 || c.RemoteSendBuf != 1<<20 || !c.NoDelay {
		t.Errorf("test options %+v", c)
	}
	if c.LocalDataPort != 5001 || c.RemoteDataPort != 5002 || o.Legacy || o.Style != output.CSV || len(o.Selection.Names()) != 26 {
		t.Errorf("ports %d,%d style %v selection %v", c.LocalDataPort, c.RemoteDataPort, o.Style, o.Selection.Names())
	}
}

// TestParseSides checks the options that set one side or the other as
// netperf's break_args and break_args_explicit do.
func TestParseSides(t *testing.T) {
	for _, tc := range []struct {
		args  string
		check func(o *Options) bool
	}{
		{"-- -m 1K", func(o *Options) bool { return o.Config.LocalSendSize == 1024 && o.Config.RemoteSendSize == 0 }},
		{"-- -m ,1K", func(o *Options) bool { return o.Config.LocalSendSize == 0 && o.Config.RemoteSendSize == 1024 }},
		{"-- -m 2k,3M", func(o *Options) bool { return o.Config.LocalSendSize == 2000 && o.Config.RemoteSendSize == 3<<20 }},
		{"-- -M 32K", func(o *Options) bool { return o.Config.RemoteRecvSize == 32768 && o.Config.LocalRecvSize == 0 }},
		{"-- -M ,32K", func(o *Options) bool { return o.Config.RemoteRecvSize == 0 && o.Config.LocalRecvSize == 32768 }},
		{"-- -s 64K", func(o *Options) bool { return o.Config.LocalSendBuf == 65536 && o.Config.LocalRecvBuf == 65536 }},
		{"-- -s ,64K", func(o *Options) bool {
			return o.Config.LocalSendBuf == 0 && o.Config.LocalRecvBuf == 65536 && o.LSRReq == 65536 && o.LSSReq == -1
		}},
		{"-- -S 8K,", func(o *Options) bool { return o.Config.RemoteSendBuf == 8192 && o.Config.RemoteRecvBuf == 0 }},
		{"-t TCP_RR -- -r 32", func(o *Options) bool { return o.Config.ReqSize == 32 && o.Config.RespSize == 32 }},
		{"-t TCP_RR -- -r ,32", func(o *Options) bool { return o.Config.ReqSize == 0 && o.Config.RespSize == 32 }},
		{"-p 1234", func(o *Options) bool { return o.Config.Port == 1234 }},
		{"-i 0,0", func(o *Options) bool {
			return o.Config.ConfMax == 3 && o.Config.ConfMin == 3 && o.Config.ConfLevel == 99 && o.Config.ConfWidth == 5
		}},
		{"-i 50,40", func(o *Options) bool { return o.Config.ConfMax == 30 && o.Config.ConfMin == 30 }},
		{"-i 2,7", func(o *Options) bool { return o.Config.ConfMax == 7 && o.Config.ConfMin == 7 }},
		{"-I 99,2.5", func(o *Options) bool {
			return o.Config.ConfMax == 10 && o.Config.ConfMin == 3 && o.Config.ConfWidth == 2.5
		}},
		// break_args: one value sets both, so the width is 95% too.
		{"-I 95", func(o *Options) bool { return o.Config.ConfLevel == 95 && o.Config.ConfWidth == 95 }},
		{"-T 1", func(o *Options) bool { return o.Config.BindLocalCPU && o.Config.BindRemoteCPU && o.RemoteCPUBind == 1 }},
		{"-T ,1", func(o *Options) bool { return !o.Config.BindLocalCPU && o.Config.BindRemoteCPU }},
		{"-D 0.5", func(o *Options) bool { return o.Config.DemoInterval == 500*time.Millisecond && !o.Config.DemoAlways }},
		{"-D -2,10K", func(o *Options) bool {
			return o.Config.DemoInterval == 2*time.Second && o.Config.DemoAlways && o.Config.DemoUnits == 10240
		}},
		{"-c 1000 -l 3", func(o *Options) bool { return o.Config.LocalCPU && o.Config.Duration == 3*time.Second }},
		{"-cC 99 -l 3", func(o *Options) bool {
			return o.Config.LocalCPU && o.Config.RemoteCPU && o.Config.Duration == 3*time.Second
		}},
		{"-t TCP_STREAM -f x", func(o *Options) bool { return o.Units == 'm' }},
		{"-t UDP_RR -f x", func(o *Options) bool { return o.Units == 'x' }},
		{"-t UDP_RR", func(o *Options) bool { return o.Units == 'x' }},
		{"-t TCP_CRR -f K", func(o *Options) bool { return o.Units == 'K' }},
		{"-6", func(o *Options) bool { return o.Host == "::1" }},
		{"-t UDP_STREAM -- -R 1", func(o *Options) bool { return o.Config.AllowRouting }},
		{"-- -k all", func(o *Options) bool { return o.Style == output.KeyValue && len(o.Selection) == 4 && o.Config.Latency }},
		{"-- -O THROUGHPUT;ELAPSED_TIME", func(o *Options) bool { return o.Style == output.Columns && len(o.Selection) == 2 }},
		{"-- -o ?", func(o *Options) bool { return o.ListNames && o.Style == output.CSV }},
		{"-- -H 10.1.1.1,4 -L 10.1.1.2 -u abc", func(o *Options) bool {
			return o.Config.DataHost == "10.1.1.1" && o.DestFamily == afInet && o.Config.LocalAddr == "10.1.1.2" && o.UUID == "abc"
		}},
	} {
		o, err := Parse(strings.Fields(tc.args))
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		if !tc.check(o) {
			t.Errorf("%s: got %+v", tc.args, o.Config)
		}
	}
}

// TestParseRefuses: bad input is a clear error, with netperf's status
// where netperf has one.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		args string
		code int    // from an exitError, 0 for a plain error (status 1)
		text string // in the message
	}{
		{"-l abc", 0, `"abc" is not a number`},
		{"-l 0", 0, "test length of 0"},
		{"-- -m -5", 0, "non-negative"},
		{"-- -m 3G", 0, "out of range"},
		{"-- -r 1x", 0, "not a non-negative number"},
		{"-f q", 0, "units"},
		{"-I 80,5", 255, "Only 95% and 99% confidence level is supported"},
		{"-q", 1, "invalid option -- 'q'"},
		{"-l", 1, "option requires an argument -- 'l'"},
		{"-h", 1, "Global options:"},
		{"-V", 0, "Netperf version 2.7.1"},
		{"-- -h", 1, "OMNI and Migrated BSD Sockets Test Options:"},
		{"-- -Q", 1, "invalid option -- 'Q'"},
		{"-- -q", 1, "option requires an argument -- 'q'"},
		{"-t SCTP_RR", 1, "The test you requested (SCTP_RR) is unknown"},
		{"-N", 0, "not supported"},
		{"-p 70000", 0, "not a port number"},
		{"stray", 0, "unexpected argument"},
		{"-- -k NOPE,THROUGHPUT", 0, "unknown output selector"},
		{"-- -k /nonexistent/file", 0, "could not open output selection file"},
	} {
		_, err := Parse(strings.Fields(tc.args))
		if err == nil {
			t.Errorf("%s: accepted", tc.args)
			continue
		}
		var ex *exitError
		if errors.As(err, &ex) != (tc.code != 0 || strings.HasPrefix(tc.args, "-V")) {
			t.Errorf("%s: got %T %v", tc.args, err, err)
		}
		if ex != nil && ex.code != tc.code {
			t.Errorf("%s: status %d, want %d", tc.args, ex.code, tc.code)
		}
		if !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %q lacks %q", tc.args, err.Error(), tc.text)
		}
	}
}

var numRE = regexp.MustCompile(`-?(nan|inf|[0-9]+(\.[0-9]+)?(e[+-][0-9]+)?)`)
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
// six tests and checks the output has the shape of the C tool's captured
// output (which a default build, without " : demo", made).
func TestEndToEndOutputs(t *testing.T) {
	port := strconv.Itoa(netservertest.Loopback(t))
	want := captured(t)
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		full := append([]string{"-H", "127.0.0.1", "-p", port}, args...)
		if rc := Main(full, nil, &out, &errb); rc != 0 {
			t.Fatalf("netperf %v: exit %d: %s", full, rc, errb.String())
		}
		return strings.Replace(out.String(), " : demo", "", 1)
	}
	tests := []string{"TCP_STREAM", "TCP_MAERTS", "TCP_RR", "TCP_CRR", "UDP_STREAM", "UDP_RR"}
	variants := []string{"", "-c -C", "-v 0", "-P 0", "-v 2"}
	for i, test := range tests {
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
}

package netperf

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/internal/testutil/netperfc"
	"sluice/internal/testutil/netservertest"
)

// run is one netperf invocation's outcome.
type run struct {
	stdout, stderr string
	code           int
}

var (
	progRE    = regexp.MustCompile(`(?m)^\S*netperf: `)
	cmdlineRE = regexp.MustCompile(`"\S*netperf [^"]*"`)
	uuidRE    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	congRE    = regexp.MustCompile(`(?m)^REMOTE_CONG_CONTROL=.*$`)
	interimRE = regexp.MustCompile(`(?m)^(Interim result: .*|[0-9. ]+,[^,]+/s,[0-9.]+,[0-9.]+|NETPERF_(INTERIM_RESULT|UNITS|INTERVAL|ENDING)\[\d+\]=.*)\n`)
	warningRE = regexp.MustCompile(`(?m)^!!!.*\n(\n)?`)
	// C's SIGALRM catcher prints this on stdout when the test's timer
	// fires again after the test ended (a race on a loaded machine).
	catcherRE  = regexp.MustCompile(`(?m)^catcher: timer popped with times_up != 0\n`)
	kvRE       = regexp.MustCompile(`(?m)^([A-Z_0-9]+)=(.*)$`)
	collapseRE = regexp.MustCompile(` +`)
	trailRE    = regexp.MustCompile(` +\n`)
	leadRE     = regexp.MustCompile(`(?m)^ +`)
)

// normalize reduces output to what must agree between the C and the Go
// netperf: layout and text, not measured numbers, program paths, UUIDs,
// the confidence warning (whether a noisy run met its interval), or the
// junk a C netserver leaves in REMOTE_CONG_CONTROL (quirk Q1), C's timer
// race message. Interim
// results are taken out and returned apart, reduced to their shapes.
func normalize(s string) (string, map[string]bool) {
	s = progRE.ReplaceAllString(s, "netperf: ")
	s = cmdlineRE.ReplaceAllString(s, `"CMD"`)
	s = uuidRE.ReplaceAllString(s, "UUID")
	s = congRE.ReplaceAllString(s, "REMOTE_CONG_CONTROL=X")
	s = warningRE.ReplaceAllString(s, "")
	s = catcherRE.ReplaceAllString(s, "")
	interims := map[string]bool{}
	for _, m := range interimRE.FindAllString(s, -1) {
		interims[shape(m)] = true
	}
	s = interimRE.ReplaceAllString(s, "")
	// Leading and trailing blanks depend on the width of the first and
	// last number (-v 0 right-aligns a CPU figure that may reach 100).
	s = trailRE.ReplaceAllString(collapseRE.ReplaceAllString(shape(s), " "), "\n")
	return leadRE.ReplaceAllString(s, ""), interims
}

func keyvals(s string) map[string]string {
	kv := map[string]string{}
	for _, m := range kvRE.FindAllStringSubmatch(s, -1) {
		kv[m[1]] = m[2]
	}
	return kv
}

// TestMatchesCNetperf runs the same command lines through the C netperf
// 2.7.1 (against the C netserver) and through this one (against the Go
// netserver) and requires the same output, modulo measured numbers, and
// the same exit status. It covers the surface issue 15 lists: demo mode,
// -k/-O/-o all and "?", -C without -c, the comma forms of -m/-M and where
// TCP_MAERTS applies them, -f x, -I 80,5, -i 0,0, -V, -h and test -h,
// unknown options, the banner's " : nodelay", " : cpu bind" and " : demo".
func TestMatchesCNetperf(t *testing.T) {
	cnp, cns := netperfc.CTools(t)
	cport := strconv.Itoa(netperfc.CNetserver(t, cns))
	gport := strconv.Itoa(netservertest.Loopback(t))

	cRun := func(args []string) run {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, cnp, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("C netperf %v: %v", args, err)
		}
		return run{out.String(), errb.String(), code}
	}
	goRun := func(args []string) run {
		var out, errb bytes.Buffer
		code := Main(args, nil, &out, &errb)
		return run{out.String(), errb.String(), code}
	}

	cases := []struct {
		name string
		args string
		// exact lists -k keys whose values must be equal, not just
		// shaped alike.
		exact []string
		// demo: both must print interim results.
		demo bool
	}{
		{name: "-C without -c: % U local", args: "-l 1 -t TCP_STREAM -C"},
		{name: "-C without -c, UDP: % US", args: "-l 1 -t UDP_STREAM -C -- -m 1K"},
		{name: "-c without -C, UDP: % SS", args: "-l 1 -t UDP_STREAM -c -- -m 1K"},
		{name: "RR -C", args: "-l -300 -t TCP_RR -C"},
		{name: "CRR -c", args: "-l -300 -t TCP_CRR -c"},
		{name: "MAERTS -c -v 2", args: "-l 1 -t TCP_MAERTS -c -v 2"},
		{name: "-f x on a stream test", args: "-l 1 -t TCP_STREAM -f x"},
		{name: "-f K on RR with CPU", args: "-l -300 -t TCP_RR -f K -c -C"},
		{name: "-f g on UDP_RR", args: "-l -300 -t UDP_RR -f g"},
		{name: "-f x -v 2 on TCP_RR", args: "-l -300 -t TCP_RR -f x -v 2"},
		{name: "-v 3 prints no table", args: "-l -300 -t TCP_RR -v 3"},
		{name: "-i 0,0 runs three iterations", args: "-l -300 -t TCP_RR -i 0,0 -- -k CONFIDENCE_ITERATION,CONFIDENCE_LEVEL,CONFIDENCE_INTERVAL",
			exact: []string{"CONFIDENCE_ITERATION", "CONFIDENCE_LEVEL", "CONFIDENCE_INTERVAL"}},
		{name: "-I 80,5 is refused", args: "-I 80,5 -l 1"},
		{name: "-m/-M comma forms, TCP_STREAM", args: "-l 1 -t TCP_STREAM -- -m 1K,2K -M 3K,4K -k LOCAL_SEND_SIZE,REMOTE_SEND_SIZE,REMOTE_RECV_SIZE,LOCAL_RECV_SIZE",
			exact: []string{"LOCAL_SEND_SIZE", "REMOTE_SEND_SIZE", "REMOTE_RECV_SIZE", "LOCAL_RECV_SIZE"}},
		{name: "-m/-M, TCP_MAERTS", args: "-l 1 -t TCP_MAERTS -- -m 1K -M 3K -k LOCAL_SEND_SIZE,REMOTE_SEND_SIZE,REMOTE_RECV_SIZE,LOCAL_RECV_SIZE",
			exact: []string{"LOCAL_SEND_SIZE", "REMOTE_SEND_SIZE", "REMOTE_RECV_SIZE", "LOCAL_RECV_SIZE"}},
		{name: "-m ,8K -M ,32K on TCP_MAERTS", args: "-l 1 -t TCP_MAERTS -- -m ,8K -M ,32K -k LOCAL_SEND_SIZE,REMOTE_SEND_SIZE,REMOTE_RECV_SIZE,LOCAL_RECV_SIZE",
			exact: []string{"LOCAL_SEND_SIZE", "REMOTE_SEND_SIZE", "REMOTE_RECV_SIZE", "LOCAL_RECV_SIZE"}},
		{name: "-m ,8K classic TCP_MAERTS", args: "-l 1 -t TCP_MAERTS -- -m ,8K"},
		{name: "-s/-S requested sizes", args: "-l -300 -t TCP_RR -- -s 32K,64K -S ,128K -k LSS_SIZE_REQ,LSR_SIZE_REQ,RSS_SIZE_REQ,RSR_SIZE_REQ",
			exact: []string{"LSS_SIZE_REQ", "LSR_SIZE_REQ", "RSS_SIZE_REQ", "RSR_SIZE_REQ"}},
		{name: "demo mode, classic", args: "-D 0.3 -l 1 -t TCP_STREAM", demo: true},
		{name: "demo mode, RR -o", args: "-D 0.3 -l 1 -t TCP_RR -- -o", demo: true},
		{name: "demo mode, RR -k", args: "-D 0.3 -l 1 -t TCP_RR -- -k THROUGHPUT", demo: true},
		{name: "-k all TCP_STREAM", args: "-l 1 -t TCP_STREAM -- -k all"},
		{name: "-k all UDP_RR", args: "-l 1 -t UDP_RR -- -k all"},
		{name: "-k all TCP_CRR", args: "-l -300 -t TCP_CRR -- -k all"},
		{name: "-O all TCP_RR", args: "-l -300 -t TCP_RR -- -O all"},
		{name: "-o all TCP_MAERTS", args: "-l 1 -t TCP_MAERTS -- -o all"},
		{name: "-k all -c -C -i", args: "-l -300 -t TCP_RR -c -C -i 3,3 -I 99,50 -- -k all"},
		{name: "-o with an empty field", args: "-l -300 -t TCP_RR -- -o THROUGHPUT,RESULT_BRAND,ELAPSED_TIME"},
		{name: "-O blocks and an empty field", args: "-l -300 -t TCP_RR -- -O THROUGHPUT,RESULT_BRAND;ELAPSED_TIME,LSS_SIZE"},
		{name: "-o ?", args: "-- -o ?"},
		{name: "-O ?", args: "-- -O ?"},
		{name: "-k ?", args: "-- -k ?"},
		{name: "-V", args: "-V"},
		{name: "-h", args: "-h"},
		{name: "unknown global option", args: "-q"},
		{name: "missing argument", args: "-l"},
		{name: "test -h", args: "-t TCP_STREAM -- -h"},
		{name: "unknown test", args: "-t FOO"},
		{name: "brand, -P 0, -v 0", args: "-l -300 -t TCP_RR -P 0 -B brand -v 0 -c"},
		{name: "banner: nodelay, cpu bind", args: "-l -300 -t TCP_RR -T 0,0 -- -D"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := strings.Fields(tc.args)
			c := cRun(append([]string{"-H", "127.0.0.1", "-p", cport}, args...))
			g := goRun(append([]string{"-H", "127.0.0.1", "-p", gport}, args...))
			if c.code != g.code {
				t.Errorf("exit status: C %d, Go %d", c.code, g.code)
			}
			cout, cint := normalize(c.stdout)
			gout, gint := normalize(g.stdout)
			if cout != gout {
				t.Errorf("stdout differs\nC:\n%s\nGo:\n%s", c.stdout, g.stdout)
			}
			if ce, ge := collapseRE.ReplaceAllString(progRE.ReplaceAllString(c.stderr, "netperf: "), " "),
				collapseRE.ReplaceAllString(g.stderr, " "); ce != ge {
				t.Errorf("stderr differs\nC:\n%s\nGo:\n%s", c.stderr, g.stderr)
			}
			if tc.demo {
				if len(cint) == 0 || len(gint) == 0 {
					t.Errorf("interim results: C printed %d kinds, Go %d", len(cint), len(gint))
				}
				for k := range gint {
					if !cint[k] {
						t.Errorf("Go interim result %q has no C counterpart in %v", k, cint)
					}
				}
			}
			ckv, gkv := keyvals(c.stdout), keyvals(g.stdout)
			for _, k := range tc.exact {
				if ckv[k] != gkv[k] {
					t.Errorf("%s: C %q, Go %q", k, ckv[k], gkv[k])
				}
			}
		})
	}
	t.Run("no netserver", func(t *testing.T) {
		t.Parallel()
		closed := strconv.Itoa(netperfc.FreePort(t))
		args := []string{"-H", "127.0.0.1", "-p", closed, "-l", "1"}
		c, g := cRun(args), goRun(args)
		if c.code != g.code || c.stdout != g.stdout {
			t.Errorf("C: %d %q; Go: %d %q", c.code, c.stdout, g.code, g.stdout)
		}
	})
}

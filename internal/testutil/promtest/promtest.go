// Package promtest runs a real Prometheus server (Debian's prometheus
// package, installed by .ci/run) for a test: on loopback, with a
// temporary configuration and storage, scraping the targets the test
// names, and queries it through its HTTP API.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/internal/testutil"
)

// Doer runs fn somewhere, typically on a thread inside a test's network
// namespace, so that the processes and sockets it makes are there. nil
// runs fn where the test is.
type Doer func(fn func() error) error

// Server is a running Prometheus.
type Server struct {
	URL    string // http://127.0.0.1:PORT
	client *http.Client
	log    *os.File
}

// Start starts Prometheus scraping targets (host:port, path /metrics)
// every 500 ms, and waits until it answers. It is stopped when the test
// ends. A missing prometheus binary skips the test, or fails it under CI.
func Start(t testing.TB, do Doer, targets ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testutil.SkipOrFail(t, "prometheus not installed (apt-get install prometheus): %v", err)
	}
	if do == nil {
		do = func(fn func() error) error { return fn() }
	}
	dir := t.TempDir()
	var quoted []string
	for _, tg := range targets {
		quoted = append(quoted, strconv.Quote(tg))
	}
	// a scrape reads the pinned maps and the programs' statistics: on a
	// loaded 2-core CI machine one took over 400 ms at times, and a
	// test saw only failed scrapes (up 0) for 30 s; Prometheus's own
	// default timeout is 10 s
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"+
		"scrape_configs:\n  - job_name: sluice\n    static_configs:\n      - targets: [%s]\n", strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// a free port where Prometheus will run (the race with another
	// process taking it in between is the test's namespace's alone)
	var port int
	if err := do(func() error {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		return ln.Close()
	}); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port),
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := do(cmd.Start); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), log: logf}
	s.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		// the dial runs through do so the socket is in the namespace
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := do(func() (err error) {
				c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := s.client.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 60 s (%v):\n%s", err, s.Log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return s
}

// Log returns what Prometheus printed.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log.Name())
	return string(b)
}

// Sample is one series of an instant query's result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant PromQL query.
func (s *Server) Query(expr string) ([]Sample, error) {
	resp, err := s.client.Get(s.URL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %s: %v: %s", expr, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %s, want vector", expr, r.Data.ResultType)
	}
	var out []Sample
	for _, x := range r.Data.Result {
		vs, _ := x.Value[1].(string)
		v, err := strconv.ParseFloat(vs, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v", expr, x.Value[1])
		}
		out = append(out, Sample{Labels: x.Metric, Value: v})
	}
	return out, nil
}

// WaitFor polls the query until ok accepts its result, and returns that
// result; it fails the test after timeout with the last result.
func (s *Server) WaitFor(t testing.TB, expr string, timeout time.Duration, ok func([]Sample) bool) []Sample {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res, err := s.Query(expr)
		if err == nil && ok(res) {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s: after %v got %v (error %v)\nprometheus log:\n%s", expr, timeout, res, err, s.Log())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// One accepts a result of exactly one series whose value is want.
func One(want float64) func([]Sample) bool {
	return func(r []Sample) bool { return len(r) == 1 && r[0].Value == want }
}

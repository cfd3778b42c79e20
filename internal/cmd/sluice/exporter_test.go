package sluice

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"sluice/internal/ipfctl"
)

// fakeStatus is a filter with n rules (every third one keep state) and a
// small IPQoS configuration.
func fakeStatus(n int) *ipfctl.Status {
	f := &ipfctl.FilterStatus{
		Enabled: true, ActiveSet: 1, Interfaces: []string{"eth0", "eth1"}, AllInterfaces: true, Unfiltered: []string{"veth9"},
		Ahead: []ipfctl.AheadProgram{{Interface: "eth0", Hook: "ingress", Name: "lb_xmit", ID: 41}},
		In:    ipfctl.DirCounters{Packets: 100, Pass: 90, Block: 7, Nomatch: 3, Frag: 2, Logged: 5, LogFail: 1},
		Out:   ipfctl.DirCounters{Packets: 50, Pass: 50},
		State: ipfctl.StateCounters{Active: 3, Max: 4013, Added: map[string]uint64{"tcp": 4, "udp": 1},
			Hits: 40, Misses: 9, Expired: 2, Closed: 1, MaxRefused: 6, OutOfWin: 1, SrcsFull: 13, DCAFull: 14},
		Frag:     ipfctl.FragCounters{Entries: 2, Max: 4096},
		DCABlock: 11, PPSBlock: 12,
		Drops:    map[string]uint64{"filter-rule": 7, "keep-limit": 11},
		Replies:  ipfctl.ReplyCounters{RST: 1, ICMP: 2},
		Programs: []ipfctl.ProgramRun{{Hook: "ingress", Programs: 1, RunCount: 1000, RunTime: 50 * time.Microsecond}, {Hook: "egress"}},
	}
	for i := 0; i < n; i++ {
		r := ipfctl.RuleCounters{Direction: "in", Number: i + 1, Text: fmt.Sprintf("pass in proto tcp from any to any port = %d", i),
			Packets: uint64(i), Bytes: uint64(100 * i)}
		if i%3 == 0 {
			r.KeepState, r.States = true, 1
		}
		if i%2 == 1 {
			r.Direction, r.Group = "out", "100"
		}
		f.Rules = append(f.Rules, r)
	}
	return &ipfctl.Status{Filter: f, QoS: &ipfctl.QoSStatus{State: "enabled, filtering", StateNo: 3, Adapters: []ipfctl.QoSAdapter{{
		Name: "eth0", Policies: []ipfctl.QoSPolicy{{Name: "voice", Packets: 8, Bytes: 800, Dropped: 1,
			Filters: []ipfctl.QoSFilter{{Name: "sip", Packets: 8, Bytes: 800}}}}}}}}
}

func gather(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// value returns the value of the one series of name with the labels.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		t.Fatalf("no metric %s", name)
	}
	var found []float64
next:
	for _, m := range mf.GetMetric() {
		l := labelsOf(m)
		for k, v := range labels {
			if l[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			found = append(found, m.Counter.GetValue())
		case m.Gauge != nil:
			found = append(found, m.Gauge.GetValue())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, labels, len(found))
	}
	return found[0]
}

func TestExporterValues(t *testing.T) {
	reg := NewExporterRegistry(func() (*ipfctl.Status, error) { return fakeStatus(6), nil }, ExporterOptions{MaxRules: 100, RuleText: true})
	mfs := gather(t, reg)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sluice_filter_loaded", nil, 1},
		{"sluice_filter_enabled", nil, 1},
		{"sluice_filter_active_set", nil, 1},
		{"sluice_filter_attached", map[string]string{"interface": "eth1"}, 1},
		{"sluice_filter_all_interfaces", nil, 1},
		{"sluice_filter_unfiltered", map[string]string{"interface": "veth9"}, 1},
		{"sluice_filter_programs_ahead", map[string]string{"interface": "eth0", "hook": "ingress", "program": "lb_xmit (41)"}, 1},
		{"sluice_filter_rules", nil, 6},
		{"sluice_rule_packets_total", map[string]string{"direction": "in", "group": "main", "number": "5", "list": "filter"}, 4},
		{"sluice_rule_bytes_total", map[string]string{"direction": "out", "group": "100", "number": "6"}, 500},
		{"sluice_rule_packets_total", map[string]string{"rule": "pass in proto tcp from any to any port = 2"}, 2},
		{"sluice_rule_states", map[string]string{"number": "4"}, 1},
		{"sluice_rules_summed", nil, 0},
		{"sluice_packets_total", map[string]string{"direction": "in"}, 100},
		{"sluice_verdicts_total", map[string]string{"direction": "in", "verdict": "block"}, 7},
		{"sluice_verdicts_total", map[string]string{"direction": "in", "verdict": "nomatch"}, 3},
		{"sluice_verdicts_total", map[string]string{"direction": "out", "verdict": "pass"}, 50},
		{"sluice_fragments_total", map[string]string{"direction": "in"}, 2},
		{"sluice_log_records_total", map[string]string{"direction": "in"}, 5},
		{"sluice_log_drops_total", map[string]string{"direction": "in"}, 1},
		{"sluice_state_entries", nil, 3},
		{"sluice_state_limit", nil, 4013},
		{"sluice_state_inserts_total", map[string]string{"proto": "tcp"}, 4},
		{"sluice_state_inserts_total", map[string]string{"proto": "icmp"}, 0},
		{"sluice_state_hits_total", nil, 40},
		{"sluice_state_misses_total", nil, 9},
		{"sluice_state_expiries_total", nil, 2},
		{"sluice_state_closed_total", nil, 1},
		{"sluice_state_insert_failures_total", nil, 6},
		{"sluice_state_out_of_window_total", nil, 1},
		{"sluice_state_srcs_full_total", nil, 13},
		{"sluice_dca_full_total", nil, 14},
		{"sluice_fragment_entries", nil, 2},
		{"sluice_fragment_limit", nil, 4096},
		{"sluice_dca_refused_total", nil, 11},
		{"sluice_pps_refused_total", nil, 12},
		{"sluice_drops_total", map[string]string{"reason": "keep-limit"}, 11},
		{"sluice_replies_total", map[string]string{"kind": "icmp"}, 2},
		{"sluice_bpf_run_count_total", map[string]string{"hook": "ingress"}, 1000},
		{"sluice_bpf_run_seconds_total", map[string]string{"hook": "ingress"}, 50e-6},
		{"sluice_ipqos_state", nil, 3},
		{"sluice_ipqos_policy_packets_total", map[string]string{"adapter": "eth0", "policy": "voice"}, 8},
		{"sluice_ipqos_policy_dropped_packets_total", map[string]string{"adapter": "eth0", "policy": "voice"}, 1},
		{"sluice_ipqos_filter_bytes_total", map[string]string{"adapter": "eth0", "policy": "voice", "filter": "sip"}, 800},
		{"sluice_exporter_read_errors_total", nil, 0},
	} {
		if got := value(t, mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// only keep-state rules have a states series
	if n := len(mfs["sluice_rule_states"].GetMetric()); n != 2 {
		t.Errorf("sluice_rule_states: %d series, want 2", n)
	}
}

// TestExporterCardinality loads rule sets of growing size and checks that
// the per-rule series never pass the bound, that the summing series carry
// the rest exactly, and that nothing is lost in the totals.
func TestExporterCardinality(t *testing.T) {
	const bound = 10
	for _, n := range []int{0, 1, bound, bound + 1, 5000} {
		st := fakeStatus(n)
		reg := NewExporterRegistry(func() (*ipfctl.Status, error) { return st, nil }, ExporterOptions{MaxRules: bound})
		mfs := gather(t, reg)
		var total, want float64
		series := 0
		for _, m := range mfs["sluice_rule_packets_total"].GetMetric() {
			total += m.GetCounter().GetValue()
			if labelsOf(m)["group"] != overflowGroup {
				series++
			}
		}
		for _, r := range st.Filter.Rules {
			want += float64(r.Packets)
		}
		if series > bound {
			t.Errorf("%d rules: %d per-rule series, bound %d", n, series, bound)
		}
		if total != want {
			t.Errorf("%d rules: packets sum %v, want %v", n, total, want)
		}
		// 2 directions (in, out) × 1 list at most for the overflow
		if all := len(mfs["sluice_rule_packets_total"].GetMetric()); all > bound+4 {
			t.Errorf("%d rules: %d series", n, all)
		}
		wantSummed := 0
		if n > bound {
			wantSummed = n - bound
		}
		if got := value(t, mfs, "sluice_rules_summed", nil); got != float64(wantSummed) {
			t.Errorf("%d rules: sluice_rules_summed %v, want %d", n, got, wantSummed)
		}
	}
}

// TestExporterRuleTextOptIn: by default no label of the scrape carries a
// rule's text (any local user may scrape; ipfstat, which shows the rules,
// needs root), and the rules are told apart by direction, list, group and
// number as ipfstat -n numbers them; --rule-text adds the text. Before the
// flag existed every rule's text was a label.
func TestExporterRuleTextOptIn(t *testing.T) {
	st := fakeStatus(12)
	for _, c := range []struct {
		args []string
		text bool
	}{{nil, false}, {[]string{"--rule-text"}, true}} {
		var errb bytes.Buffer
		cfg, rc := parseExporterArgs(c.args, &errb)
		if rc >= 0 {
			t.Fatalf("%q: exit %d: %s", c.args, rc, errb.String())
		}
		cfg.MaxRules = 10 // and two summed series, which never had text
		mfs := gather(t, NewExporterRegistry(func() (*ipfctl.Status, error) { return st, nil }, cfg.ExporterOptions))
		texts := 0
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					for _, r := range st.Filter.Rules {
						if l.GetValue() == r.Text {
							texts++
							if !c.text {
								t.Errorf("%q: %s{%s=%q}: a rule's text", c.args, mf.GetName(), l.GetName(), l.GetValue())
							}
						}
					}
				}
			}
		}
		// packets and bytes of the 10 rules exported one by one, and
		// states of the 4 of them that keep state
		if c.text && texts != 10+10+4 {
			t.Errorf("%q: %d series with a rule's text, want 24", c.args, texts)
		}
		if got := value(t, mfs, "sluice_rule_bytes_total", map[string]string{"direction": "out", "list": "filter", "group": "100", "number": "6"}); got != 500 {
			t.Errorf("%q: out rule @100:6 bytes %v, want 500", c.args, got)
		}
	}
}

func TestExporterNothingLoaded(t *testing.T) {
	reg := NewExporterRegistry(func() (*ipfctl.Status, error) { return &ipfctl.Status{}, nil }, ExporterOptions{MaxRules: 10})
	mfs := gather(t, reg)
	if v := value(t, mfs, "sluice_filter_loaded", nil); v != 0 {
		t.Errorf("sluice_filter_loaded = %v", v)
	}
	if v := value(t, mfs, "sluice_ipqos_state", nil); v != 0 {
		t.Errorf("sluice_ipqos_state = %v", v)
	}
	if mfs["sluice_rule_packets_total"] != nil {
		t.Error("rule series without a filter")
	}
}

// TestExporterReadError: a failing read makes the scrape say so (HTTP
// 500 with the error, as promhttp does for an invalid metric) and counts
// the error; the next good read recovers.
func TestExporterReadError(t *testing.T) {
	fail := true
	reg := NewExporterRegistry(func() (*ipfctl.Status, error) {
		if fail {
			return nil, errors.New("pins gone")
		}
		return fakeStatus(1), nil
	}, ExporterOptions{MaxRules: 10})
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "pins gone") {
		t.Fatalf("gather error %v, want pins gone", err)
	}
	fail = false
	mfs := gather(t, reg)
	if v := value(t, mfs, "sluice_exporter_read_errors_total", nil); v != 1 {
		t.Errorf("read errors %v, want 1", v)
	}
}

func TestRuleLabel(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	got := ruleLabel(long)
	if len(got) > maxRuleText || !strings.HasSuffix(got, "...") {
		t.Errorf("len %d, %q", len(got), got[len(got)-10:])
	}
	if !strings.HasPrefix(long, strings.TrimSuffix(got, "...")) {
		t.Error("cut inside a rune")
	}
	if got := ruleLabel("pass in all\xff"); got != "pass in all?" {
		t.Errorf("invalid UTF-8: %q", got)
	}
}

// TestExporterLint runs client_golang's metric linter over a full scrape.
func TestExporterLint(t *testing.T) {
	reg := NewExporterRegistry(func() (*ipfctl.Status, error) { return fakeStatus(3), nil }, ExporterOptions{MaxRules: 10, RuleText: true})
	probs, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		if strings.HasPrefix(p.Metric, "sluice_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// TestExporterHTTP serves the registry as the command does and reads the
// text exposition back.
func TestExporterHTTP(t *testing.T) {
	reg := NewExporterRegistry(func() (*ipfctl.Status, error) { return fakeStatus(2), nil }, ExporterOptions{MaxRules: 10})
	srv := httptest.NewServer(exporterHandler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`sluice_verdicts_total{direction="in",verdict="block"} 7`)) {
		t.Errorf("status %d, body:\n%s", resp.StatusCode, body)
	}
	resp, err = http.Get(srv.URL + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("/nope: %d", resp.StatusCode)
	}
}

func TestExporterUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", "nohostport"},
		{"--max-rules", "-1"},
		{"stray"},
		{"--bogus"},
	} {
		var out, errb bytes.Buffer
		if rc := cmdExporter(args, &out, &errb); rc != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, rc, errb.String())
		}
	}
}

// TestGrafanaDashboard: docs/grafana/sluice.json is valid JSON, every
// panel has queries, and every metric the queries name is one the
// exporter produces. (The package test evaluates each query in a real
// Prometheus.)
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../../docs/grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("title %q uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	known := map[string]bool{}
	for _, n := range MetricNames() {
		known[n] = true
	}
	used := map[string]bool{}
	name := regexp.MustCompile(`\bsluice_[a-z0-9_]+`)
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			ms := name.FindAllString(tg.Expr, -1)
			if len(ms) == 0 {
				t.Errorf("panel %q: query %q names no sluice metric", p.Title, tg.Expr)
			}
			for _, m := range ms {
				used[m] = true
				if !known[m] {
					t.Errorf("panel %q: metric %s is not exported", p.Title, m)
				}
			}
		}
	}
	// the main families are on the dashboard
	for _, m := range []string{"sluice_verdicts_total", "sluice_rule_packets_total", "sluice_state_entries", "sluice_state_insert_failures_total",
		"sluice_fragment_entries", "sluice_log_drops_total", "sluice_dca_refused_total", "sluice_pps_refused_total",
		"sluice_ipqos_policy_bytes_total", "sluice_ipqos_filter_packets_total", "sluice_bpf_run_seconds_total"} {
		if !used[m] {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
}

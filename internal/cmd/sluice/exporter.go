package sluice

// sluice exporter: the Prometheus exporter of the kernel datapaths. It
// reads the pinned maps on every scrape (ipfctl.ReadStatus) and keeps no
// state of its own, so it can be restarted, or crash, at any time without
// any effect on filtering: the datapath needs no daemon.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"sluice/internal/ipfctl"
)

// DefaultExporterListen is where `sluice exporter` listens unless --listen
// says otherwise: loopback only. Even without the rule texts (see
// --rule-text) the counters say which rules see traffic.
const DefaultExporterListen = "127.0.0.1:9811"

// DefaultMaxRules bounds the per-rule series (see ruleCollector).
const DefaultMaxRules = 1000

// maxRuleText bounds the rule label's length in bytes; longer rule texts
// are cut and end in "...".
const maxRuleText = 200

// overflowGroup is the group label of the one series per direction and
// list kind that sums the rules past --max-rules.
const overflowGroup = "(other rules)"

const exporterUsage = `usage: sluice exporter [--listen ADDR] [--pindir DIR] [--qos-pindir DIR]
                      [--max-rules N] [--rule-text] [--bpf-stats]
`

// exporterConfig is what the command line asked of `sluice exporter`.
type exporterConfig struct {
	listen, pindir, qosdir string
	bpfStats               bool
	ExporterOptions
}

// parseExporterArgs reads the command line; rc >= 0 means exit with it.
func parseExporterArgs(args []string, stderr io.Writer) (cfg exporterConfig, rc int) {
	fs := flag.NewFlagSet("sluice exporter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, exporterUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.listen, "listen", DefaultExporterListen, "address to serve /metrics on (host:port; port 0 picks one)")
	fs.StringVar(&cfg.pindir, "pindir", ipfctl.PinDir(), "the filter's pin directory ($SLUICE_BPF_DIR, else /sys/fs/bpf/sluice)")
	fs.StringVar(&cfg.qosdir, "qos-pindir", ipfctl.QoSPinDir(), "IPQoS's pin directory ($SLUICE_QOS_DIR; empty: IPQoS's own default, /sys/fs/bpf/sluice-qos)")
	fs.IntVar(&cfg.MaxRules, "max-rules", DefaultMaxRules, "rules exported one by one; the rest are summed in one series per list")
	fs.BoolVar(&cfg.RuleText, "rule-text", false, "label each rule's series with its text (every local user can read the metrics; ipfstat needs root)")
	fs.BoolVar(&cfg.bpfStats, "bpf-stats", false, "enable the kernel's BPF run-time statistics while running (costs some ns per packet)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, 0
		}
		return cfg, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice exporter: unexpected argument %q\n%s", fs.Arg(0), exporterUsage)
		return cfg, 2
	}
	if cfg.MaxRules < 0 {
		fmt.Fprintf(stderr, "sluice exporter: bad --max-rules %d\n", cfg.MaxRules)
		return cfg, 2
	}
	host, _, err := net.SplitHostPort(cfg.listen)
	if err != nil {
		fmt.Fprintf(stderr, "sluice exporter: bad --listen %q: %v\n", cfg.listen, err)
		return cfg, 2
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		what := "the rule counters"
		if cfg.RuleText {
			what = "the rule texts"
		}
		fmt.Fprintf(stderr, "sluice exporter: warning: %s is not a loopback address; the metrics include %s\n", cfg.listen, what)
	}
	return cfg, -1
}

func cmdExporter(args []string, stdout, stderr io.Writer) int {
	cfg, rc := parseExporterArgs(args, stderr)
	if rc >= 0 {
		return rc
	}
	if cfg.bpfStats {
		c, err := enableBPFStats()
		if err != nil {
			fmt.Fprintf(stderr, "sluice exporter: --bpf-stats: %v\n", err)
			return 1
		}
		defer c.Close()
	}
	reg := NewExporterRegistry(func() (*ipfctl.Status, error) { return ipfctl.ReadStatus(cfg.pindir, cfg.qosdir) }, cfg.ExporterOptions)
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		fmt.Fprintf(stderr, "sluice exporter: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: exporterHandler(reg), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "sluice exporter: listening on http://%s/metrics\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "sluice exporter: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}

// exporterHandler serves reg on /metrics. A failed read of the datapath
// fails the scrape (HTTP 500 with the error), so Prometheus's `up` shows
// it rather than a scrape of partial numbers.
func exporterHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "sluice exporter: metrics at /metrics")
	})
	return mux
}

// ExporterOptions are the exporter's choices about what it shows.
type ExporterOptions struct {
	// MaxRules bounds the per-rule series (see collector).
	MaxRules int
	// RuleText adds the rule label, the rule's text, to the per-rule
	// series. Off by default: the metrics are open to every local user
	// (Prometheus scrapes plain HTTP), and a host firewall's rule set maps
	// what the host lets in, which ipfstat shows to root only. Without it
	// a rule is known by direction, list, group and number, as ipfstat -n
	// numbers them.
	RuleText bool
}

// NewExporterRegistry returns a registry with Sluice's collector over read
// (called once per scrape) and the exporter process's own Go and process
// metrics.
func NewExporterRegistry(read func() (*ipfctl.Status, error), o ExporterOptions) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(read, o),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metric describes one of the exporter's metrics.
type metric struct {
	name, help string
	labels     []string
	counter    bool
}

// The exporter's metrics. The Grafana dashboard's test checks that every
// name it queries is here.
var (
	mUp          = metric{"sluice_filter_loaded", "1 when the filter datapath is pinned (loaded), else 0.", nil, false}
	mEnabled     = metric{"sluice_filter_enabled", "1 when filtering is on (ipf -E), 0 when off.", nil, false}
	mActiveSet   = metric{"sluice_filter_active_set", "The active rule set (0 or 1, as ipf -V shows it).", nil, false}
	mAttached    = metric{"sluice_filter_attached", "1 for each interface the filter is attached to.", []string{"interface"}, false}
	mAllIfaces   = metric{"sluice_filter_all_interfaces", "1 when the filter belongs on every non-loopback interface (a rule applies on every interface), 0 when only on those the rules name.", nil, false}
	mUnfiltered  = metric{"sluice_filter_unfiltered", "1 for each non-loopback interface that is up without the filter although it belongs there (until ipf -y).", []string{"interface"}, false}
	mAhead       = metric{"sluice_filter_programs_ahead", "1 for each other program that runs before the filter on one of its hooks: the packets it passes or redirects are not filtered.", []string{"interface", "hook", "program"}, false}
	mRules       = metric{"sluice_filter_rules", "Rules in the active set.", nil, false}
	mRulePkts    = metric{"sluice_rule_packets_total", "Packets that matched the rule (ipfstat -ih hits).", ruleLabels, true}
	mRuleBytes   = metric{"sluice_rule_bytes_total", "Bytes of the packets that matched the rule.", ruleLabels, true}
	mRuleStates  = metric{"sluice_rule_states", "Live state entries created by the (keep state) rule.", ruleLabels, false}
	mRulesOver   = metric{"sluice_rules_summed", "Rules past --max-rules, whose counters are summed in the \"" + overflowGroup + "\" series.", nil, false}
	mPackets     = metric{"sluice_packets_total", "Packets seen by the filter.", []string{"direction"}, true}
	mVerdicts    = metric{"sluice_verdicts_total", "Packets by verdict: pass, block, nomatch (no rule matched), accounted (count rules), short, bad.", []string{"direction", "verdict"}, true}
	mFragments   = metric{"sluice_fragments_total", "IP fragments seen.", []string{"direction"}, true}
	mLogged      = metric{"sluice_log_records_total", "Records written to the log ring.", []string{"direction"}, true}
	mLogDrops    = metric{"sluice_log_drops_total", "Records lost because the log ring was full (no ipmon reading it, or too slow).", []string{"direction"}, true}
	mStateActive = metric{"sluice_state_entries", "Live entries in the state table.", nil, false}
	mStateMax    = metric{"sluice_state_limit", "The state table's limit (state_max).", nil, false}
	mStateAdd    = metric{"sluice_state_inserts_total", "State entries created, by protocol.", []string{"proto"}, true}
	mStateHits   = metric{"sluice_state_hits_total", "Packets matched by a state entry.", nil, true}
	mStateMiss   = metric{"sluice_state_misses_total", "State table lookups that found nothing.", nil, true}
	mStateExp    = metric{"sluice_state_expiries_total", "State entries that timed out.", nil, true}
	mStateClosed = metric{"sluice_state_closed_total", "State entries removed when their TCP connection closed.", nil, true}
	mStateFail   = metric{"sluice_state_insert_failures_total", "State entries not created because the table or a rule's limit was full.", nil, true}
	mStateOOW    = metric{"sluice_state_out_of_window_total", "TCP packets outside the state entry's window.", nil, true}
	mStateSrcs   = metric{"sluice_state_srcs_full_total", "State entries of max-srcs rules not created because the kernel's source table was full.", nil, true}
	mFragEntries = metric{"sluice_fragment_entries", "Live entries in the fragment cache.", nil, false}
	mFragMax     = metric{"sluice_fragment_limit", "The fragment cache's capacity.", nil, false}
	mDCA         = metric{"sluice_dca_refused_total", "Packets refused by a keep limit rule (HP DCA connection limits).", nil, true}
	mDCAFull     = metric{"sluice_dca_full_total", "Connections refused by a keep limit rule because its connection table was full.", nil, true}
	mPPS         = metric{"sluice_pps_refused_total", "Packets refused by a pps rate limit.", nil, true}
	mDrops       = metric{"sluice_drops_total", "Blocked packets by reason (ipmon's reason names).", []string{"reason"}, true}
	mReplies     = metric{"sluice_replies_total", "Generated replies (return-rst, return-icmp).", []string{"kind"}, true}
	mReplyFail   = metric{"sluice_reply_failures_total", "Generated replies that could not be sent.", nil, true}
	mRouted      = metric{"sluice_routed_total", "Packets sent by to/fastroute (routed) or copied by dup-to (duplicated), and failures.", []string{"action"}, true}
	mRunCount    = metric{"sluice_bpf_run_count_total", "Runs of the attached filter programs (counted only while BPF statistics are enabled).", []string{"hook"}, true}
	mRunTime     = metric{"sluice_bpf_run_seconds_total", "In-kernel run time of the attached filter programs (only while BPF statistics are enabled).", []string{"hook"}, true}
	mStatsOn     = metric{"sluice_bpf_stats_enabled", "1 when the kernel collects BPF run-time statistics.", nil, false}
	mQoSState    = metric{"sluice_ipqos_state", "IPQoS state as ipqosadmin -state's exit code: 0 disabled, 2 enabled not filtering, 3 filtering.", nil, false}
	mQoSPolPkts  = metric{"sluice_ipqos_policy_packets_total", "Packets marked by the IPQoS policy.", []string{"adapter", "policy"}, true}
	mQoSPolBytes = metric{"sluice_ipqos_policy_bytes_total", "Bytes marked by the IPQoS policy.", []string{"adapter", "policy"}, true}
	mQoSPolDrop  = metric{"sluice_ipqos_policy_dropped_packets_total", "Packets dropped by the policy's res/max shaping.", []string{"adapter", "policy"}, true}
	mQoSFltPkts  = metric{"sluice_ipqos_filter_packets_total", "Packets matched by the IPQoS filter.", []string{"adapter", "policy", "filter"}, true}
	mQoSFltBytes = metric{"sluice_ipqos_filter_bytes_total", "Bytes matched by the IPQoS filter.", []string{"adapter", "policy", "filter"}, true}
	mReadErrors  = metric{"sluice_exporter_read_errors_total", "Scrapes whose reading of the datapath failed.", nil, true}
)

// ruleLabels are the per-rule metrics' labels; the last, rule (the rule's
// text), only with ExporterOptions.RuleText.
var ruleLabels = []string{"direction", "list", "group", "number", "rule"}

var allMetrics = []*metric{
	&mUp, &mEnabled, &mActiveSet, &mAttached, &mAllIfaces, &mUnfiltered, &mAhead, &mRules, &mRulePkts, &mRuleBytes, &mRuleStates, &mRulesOver,
	&mPackets, &mVerdicts, &mFragments, &mLogged, &mLogDrops,
	&mStateActive, &mStateMax, &mStateAdd, &mStateHits, &mStateMiss, &mStateExp, &mStateClosed, &mStateFail, &mStateOOW, &mStateSrcs,
	&mFragEntries, &mFragMax, &mDCA, &mDCAFull, &mPPS, &mDrops, &mReplies, &mReplyFail, &mRouted,
	&mRunCount, &mRunTime, &mStatsOn,
	&mQoSState, &mQoSPolPkts, &mQoSPolBytes, &mQoSPolDrop, &mQoSFltPkts, &mQoSFltBytes,
	&mReadErrors,
}

// MetricNames returns the names of the metrics the exporter's own
// collector can produce (not the Go and process metrics).
func MetricNames() []string {
	out := make([]string, len(allMetrics))
	for i, m := range allMetrics {
		out[i] = m.name
	}
	return out
}

// collector reads the datapaths on each scrape.
//
// Cardinality: every metric but the per-rule and IPQoS ones has a fixed,
// small label set (directions, verdicts, protocols, reasons, hooks). The
// per-rule metrics have at most maxRules series each plus one summing
// series per (direction, list) for the rest, whatever the rule set's size;
// IPQoS series are bounded by the configuration (adapters × policies ×
// filters), whose size the IPQoS datapath caps.
type collector struct {
	read     func() (*ipfctl.Status, error)
	maxRules int
	ruleText bool
	descs    map[*metric]*prometheus.Desc
	mu       sync.Mutex // guards readErrors
	errors   uint64
}

func newCollector(read func() (*ipfctl.Status, error), o ExporterOptions) *collector {
	c := &collector{read: read, maxRules: o.MaxRules, ruleText: o.RuleText, descs: map[*metric]*prometheus.Desc{}}
	for _, m := range allMetrics {
		labels := m.labels
		if !c.ruleText && slices.Equal(labels, ruleLabels) {
			labels = labels[:len(labels)-1]
		}
		c.descs[m] = prometheus.NewDesc(m.name, m.help, labels, nil)
	}
	return c
}

// ruleSeries returns a per-rule series' label values: ruleLabels, without
// the text unless --rule-text asked for it.
func (c *collector) ruleSeries(dir, list, group, number, text string) []string {
	if !c.ruleText {
		return []string{dir, list, group, number}
	}
	return []string{dir, list, group, number, text}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range allMetrics {
		ch <- c.descs[m]
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	emit := func(m *metric, v float64, labels ...string) {
		t := prometheus.GaugeValue
		if m.counter {
			t = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[m], t, v, labels...)
	}
	st, err := c.read()
	c.mu.Lock()
	if err != nil {
		c.errors++
	}
	nerr := c.errors
	c.mu.Unlock()
	emit(&mReadErrors, float64(nerr))
	emit(&mStatsOn, b2f(bpfStatsEnabled()))
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.descs[&mUp], fmt.Errorf("reading the datapath: %w", err))
		return
	}
	emit(&mUp, b2f(st.Filter != nil))
	if f := st.Filter; f != nil {
		c.collectFilter(f, emit)
	}
	qs := 0.0
	if q := st.QoS; q != nil {
		qs = float64(q.StateNo)
		for _, a := range q.Adapters {
			for _, p := range a.Policies {
				emit(&mQoSPolPkts, float64(p.Packets), a.Name, p.Name)
				emit(&mQoSPolBytes, float64(p.Bytes), a.Name, p.Name)
				emit(&mQoSPolDrop, float64(p.Dropped), a.Name, p.Name)
				for _, fl := range p.Filters {
					emit(&mQoSFltPkts, float64(fl.Packets), a.Name, p.Name, fl.Name)
					emit(&mQoSFltBytes, float64(fl.Bytes), a.Name, p.Name, fl.Name)
				}
			}
		}
	}
	emit(&mQoSState, qs)
}

func (c *collector) collectFilter(f *ipfctl.FilterStatus, emit func(*metric, float64, ...string)) {
	emit(&mEnabled, b2f(f.Enabled))
	emit(&mActiveSet, float64(f.ActiveSet))
	for _, ifc := range f.Interfaces {
		emit(&mAttached, 1, ifc)
	}
	emit(&mAllIfaces, b2f(f.AllInterfaces))
	for _, ifc := range f.Unfiltered {
		emit(&mUnfiltered, 1, ifc)
	}
	for _, a := range f.Ahead {
		emit(&mAhead, 1, a.Interface, a.Hook, fmt.Sprintf("%s (%d)", a.Name, a.ID))
	}
	emit(&mRules, float64(len(f.Rules)))
	type overKey struct{ dir, list string }
	type overVal struct{ pkts, bytes, states uint64 }
	over := map[overKey]*overVal{}
	var overKeys []overKey
	summed := 0
	for i, r := range f.Rules {
		list := "filter"
		if r.Accounting {
			list = "accounting"
		}
		if i >= c.maxRules {
			k := overKey{r.Direction, list}
			v := over[k]
			if v == nil {
				v = &overVal{}
				over[k] = v
				overKeys = append(overKeys, k)
			}
			v.pkts += r.Packets
			v.bytes += r.Bytes
			v.states += uint64(r.States)
			summed++
			continue
		}
		group := r.Group
		if group == "" {
			group = "main"
		}
		l := c.ruleSeries(r.Direction, list, group, strconv.Itoa(r.Number), ruleLabel(r.Text))
		emit(&mRulePkts, float64(r.Packets), l...)
		emit(&mRuleBytes, float64(r.Bytes), l...)
		if r.KeepState {
			emit(&mRuleStates, float64(r.States), l...)
		}
	}
	for _, k := range overKeys {
		v := over[k]
		l := c.ruleSeries(k.dir, k.list, overflowGroup, "", "")
		emit(&mRulePkts, float64(v.pkts), l...)
		emit(&mRuleBytes, float64(v.bytes), l...)
		emit(&mRuleStates, float64(v.states), l...)
	}
	emit(&mRulesOver, float64(summed))
	for _, d := range []struct {
		name string
		c    *ipfctl.DirCounters
	}{{"in", &f.In}, {"out", &f.Out}} {
		emit(&mPackets, float64(d.c.Packets), d.name)
		for _, v := range []struct {
			verdict string
			n       uint64
		}{{"pass", d.c.Pass}, {"block", d.c.Block}, {"nomatch", d.c.Nomatch}, {"accounted", d.c.Accounted}, {"short", d.c.Short}, {"bad", d.c.Bad}} {
			emit(&mVerdicts, float64(v.n), d.name, v.verdict)
		}
		emit(&mFragments, float64(d.c.Frag), d.name)
		emit(&mLogged, float64(d.c.Logged), d.name)
		emit(&mLogDrops, float64(d.c.LogFail), d.name)
	}
	s := &f.State
	emit(&mStateActive, float64(s.Active))
	emit(&mStateMax, float64(s.Max))
	for _, p := range []string{"tcp", "udp", "icmp", "other"} {
		emit(&mStateAdd, float64(s.Added[p]), p)
	}
	emit(&mStateHits, float64(s.Hits))
	emit(&mStateMiss, float64(s.Misses))
	emit(&mStateExp, float64(s.Expired))
	emit(&mStateClosed, float64(s.Closed))
	emit(&mStateFail, float64(s.MaxRefused))
	emit(&mStateOOW, float64(s.OutOfWin))
	emit(&mStateSrcs, float64(s.SrcsFull))
	emit(&mFragEntries, float64(f.Frag.Entries))
	emit(&mFragMax, float64(f.Frag.Max))
	emit(&mDCA, float64(f.DCABlock))
	emit(&mDCAFull, float64(f.State.DCAFull))
	emit(&mPPS, float64(f.PPSBlock))
	for reason, n := range f.Drops {
		emit(&mDrops, float64(n), reason)
	}
	emit(&mReplies, float64(f.Replies.RST), "rst")
	emit(&mReplies, float64(f.Replies.ICMP), "icmp")
	emit(&mReplyFail, float64(f.Replies.Failed))
	emit(&mRouted, float64(f.Route.Routed), "routed")
	emit(&mRouted, float64(f.Route.Duplicated), "duplicated")
	emit(&mRouted, float64(f.Route.Failed), "failed")
	for _, p := range f.Programs {
		emit(&mRunCount, float64(p.RunCount), p.Hook)
		emit(&mRunTime, p.RunTime.Seconds(), p.Hook)
	}
}

// ruleLabel makes a rule text a label value: valid UTF-8, at most
// maxRuleText bytes.
func ruleLabel(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= maxRuleText {
		return s
	}
	cut := maxRuleText - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// bpfStatsEnabled reports whether the kernel counts BPF run time: the
// sysctl, or (not visible from here) another process holding
// BPF_ENABLE_STATS, which is why --bpf-stats reports 1 while it holds one.
func bpfStatsEnabled() bool {
	if heldStats.Load() {
		return true
	}
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// heldStats is set while this process holds BPF_ENABLE_STATS.
var heldStats atomic.Bool

// enableBPFStats turns on the kernel's BPF run-time statistics until the
// returned closer is closed (the fd way, not the sysctl, so another
// process measuring at the same time is not disturbed when we stop).
func enableBPFStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return nil, err
	}
	heldStats.Store(true)
	return closerFunc(func() error { heldStats.Store(false); return c.Close() }), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

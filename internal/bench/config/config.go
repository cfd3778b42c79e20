// Package config holds the configurations `sluice bench` compares: the
// bare system ("none"), Sluice's eBPF IPFilter and IPQoS datapaths with the
// rule sets of HP's white papers, and the equivalent nftables rule sets as
// the Linux peer. A configuration is applied to the system under test
// before a batch of tests and removed after it.
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

// Applier puts one configuration in place on a host and takes it away.
// Apply is called once, Remove once after a successful Apply (also when the
// run is cancelled). Apply must enter the host's namespace itself (with
// host.Do or an fd of host.NetNS) and must undo any partial work when it
// fails.
type Applier interface {
	Apply(ctx context.Context, host *topo.Host) error
	Remove() error
}

// ErrUnavailable marks a configuration whose datapath is not built into
// this binary; the run skips it and the report says so.
var ErrUnavailable = errors.New("datapath not available")

// Family groups configurations in the report.
type Family string

// Families of configurations.
const (
	Baseline Family = "baseline"
	Sluice   Family = "sluice"
	NFTables Family = "nftables"
	// Reference is the trivial eBPF program: the floor of what any
	// program attached to the link costs (issue 12).
	Reference Family = "reference"
)

// Config is one named configuration.
type Config struct {
	Name        string
	Family      Family
	Description string
	// Suite says which tests the configuration takes part in: "ipf"
	// (the IPFilter paper's set), "qos" (the IPQoS send-size sweep) or
	// "" (all; the baseline).
	Suite string
	// Rules is the rule text the configuration loads, for the record
	// (ipf.conf or ipqos.conf syntax for Sluice, nft syntax for nftables,
	// with @LINK@ standing for the SUT's interface); empty for none.
	Rules string
	// Filter is, for a configuration of the NAT suite that loads
	// Sluice's IPFilter beside the NAT rules (Rules), its ipf.conf.
	Filter string
	// New makes an Applier for one use; nil means nothing to apply.
	New func() (Applier, error)
	// Unavailable, if set, reports that New would fail with
	// ErrUnavailable, without calling a loader.
	Unavailable func() bool
	// OptIn: the configuration runs only when named (not in "all", a
	// family or a prefix): it loads for seconds and takes gigabytes
	// while it does (the million-rule blocklists).
	OptIn bool
	// Generate, if set, makes the whole rule text, of which Rules is
	// then a summary (a million rules are too big to keep around).
	Generate func() string
}

// RuleText returns the configuration's whole rule text.
func (c *Config) RuleText() string {
	if c.Generate != nil {
		return c.Generate()
	}
	return c.Rules
}

// Available reports whether the configuration's datapath is built in
// (cheaply: no rule set is loaded).
func (c *Config) Available() bool { return c.Unavailable == nil || !c.Unavailable() }

// Suites of tests.
const (
	SuiteIPF = "ipf"
	SuiteQoS = "qos"
)

// Runs reports whether the configuration takes part in a test of suite.
func (c *Config) Runs(suite string) bool { return c.Suite == "" || c.Suite == suite }

// IPFLoader loads an ipf.conf rule set into Sluice's eBPF IPFilter
// datapath. It is called before each apply with the configuration's rule
// text; it should parse and compile here, so a bad rule set is reported
// as the configuration's skip reason, and return an Applier whose Apply
// attaches the datapath to host.Link (ifindex host.Index) in both
// directions (the rule sets have "in" and "out" rules). Names and
// indexes are those of host.NetNS, so attach from inside it (host.Do).
// Pins, if any, must go in a directory of the Applier's own (the
// process may run several test beds at once, and the tests do), and
// Remove must detach and unpin everything. The lead plugs internal/bpf in
// here (cmd/sluice's datapaths).
type IPFLoader func(rules string) (Applier, error)

// QoSLoader loads an ipqos.conf configuration into Sluice's IPQoS marking
// datapath, with the same contract as IPFLoader. The configuration names
// the SUT's interface as its adapter (already substituted for @LINK@);
// marking is on egress. The lead plugs internal/bpf/qosmark in here.
type QoSLoader func(conf string) (Applier, error)

// Datapaths are the Sluice datapaths available to the bench; a nil field
// makes its configurations fail with ErrUnavailable, which the run
// records as "skipped: datapath not available". The nftables
// configurations (NFT) show how an Applier enters the SUT's namespace.
type Datapaths struct {
	IPF IPFLoader
	QoS QoSLoader
	// Floor attaches the trivial TCX program (return TCX_NEXT) to the
	// SUT's link in both directions: the floor of the in-kernel cost.
	Floor func() (Applier, error)
	// NAT loads an ipnat.conf into Sluice's kernel NAT on the gateway
	// of the gateway topology; see SuiteNAT.
	NAT NATLoader
	// GWNAT loads a filter, then NAT beside it through ipnat (the
	// commands' layout), with NAT's established path inside the
	// filter's programs (inline, ipnat's default) or not (nat_inline=0).
	GWNAT func(filter, nat string, inline bool) (Applier, error)
	// IPFStage is IPF with the programs cut after the filter's STAGE
	// stage (bpf.Datapath.BenchStopAt): the opt-in sluice-stateful-at-N
	// configurations, a live bisect of the established packet.
	IPFStage func(rules string, stage uint32) (Applier, error)
	// IPFRunCut is IPF with the constant lists' run probe cut at point
	// cut (bpf.Datapath.BenchRunCut): the opt-in
	// sluice-nomatch-10000-cut-N configurations, a live bisect of the
	// blocklist's probe.
	IPFRunCut func(rules string, cut uint32) (Applier, error)
	// FloorKind attaches a variant of the trivial program (FloorKinds)
	// as Floor attaches it: the opt-in tcx-floor-KIND configurations.
	FloorKind func(kind string) (Applier, error)
	// Stats reads the in-kernel cost of attached programs.
	Stats StatsFunc
}

// StatsFunc turns the kernel's BPF run-time statistics on (until the
// closer is closed) and returns a probe reading the cumulative
// run_time_ns and run_cnt of every eBPF program attached to the host's
// link. The kernel counts only while statistics are on, and another
// holder (another helper, bpftool) may have them on as well: the closer
// drops only this holder's reference.
type StatsFunc func(h *topo.Host) (probe func() ([]result.ProgStat, error), closer io.Closer, err error)

// EstStages are the established path's STAGE points (c/lib/est.h) in the
// order an established packet passes them: parse, key, statistics' block,
// lookup, clock, entry checks, stores, counter stripe; 0 the whole
// program. Not 38 (after the TCP window check, before its stores): cut
// there the window never moves, so the flow's later segments fall out of
// it and the pipeline blocks them (TCP_RR stalls at ~190 trans/s).
// 40-44 split the lookup (lk14, est.h's est_probe): after 31, one line of
// a plain array found by a hash of the key (40), four such lines (43),
// the table's lookup of a key it does not hold (41); after 32, the
// lookup twice (42), the lookup and the element's value lines (44).
var EstStages = []uint32{35, 36, 31, 40, 43, 41, 32, 42, 44, 33, 37, 39, 34, 0}

// RunCuts are the run probe's cut points (lib/fast.h bench_runcut) of the
// opt-in sluice-nomatch-10000-cut-N configurations; 0 the whole program.
var RunCuts = []uint32{1, 2, 3, 4, 5, 0}

// AttachStages are the attached program's (no rules: the idle path)
// STAGE points (c/filter.c) in the order a clean packet passes them:
// entry, past the k_mode tests, the parse (clean_family), the statistics'
// block, the idle path whole with the pipeline removed from the image.
// The whole program is sluice-attach.
var AttachStages = []uint32{1, 21, 22, 23, 29}

// FloorKinds are the opt-in variants of the trivial program (at14), each
// beside tcx-floor: "code-N" runs N straight-line instructions before it
// returns (the cost of executing code that no data follows), "compact"
// does the attached program's work written by hand in a few instructions
// (the headers' tests and one counter in a block chosen by CPU).
var FloorKinds = []string{"code-64", "code-256", "code-1024", "compact"}

// Non-matching rule counts (in all, both directions: NoMatchSplit) of the
// "rule-scan" configurations.
var NoMatchCounts = []int{100, 1000, 10000}

// Blocklist is the rule count of the opt-in blocklist configurations
// (sluice-nomatch-1000000, nft-nomatch-set-1000000): issue 12's "1 000
// 000 rules (a real blocklist written as rules)".
const Blocklist = 1000000

// Registry is the set of known configurations.
type Registry struct {
	byName map[string]*Config
	order  []string
	dp     Datapaths
}

// floor is a trivial-program configuration of a suite: the in-kernel
// cost every ns/packet row of that suite is read against (the suite's
// topology decides which interfaces it goes on).
func (r *Registry) floor(name string, suite, desc string) *Config {
	return &Config{Name: name, Family: Reference, Suite: suite, Description: desc,
		Rules:       "SEC(\"tcx\") int floor(struct __sk_buff *skb) { return TCX_NEXT; }",
		Unavailable: func() bool { return r.dp.Floor == nil },
		New: func() (Applier, error) {
			if r.dp.Floor == nil {
				return nil, ErrUnavailable
			}
			return r.dp.Floor()
		}}
}

// Builtin returns the built-in configurations.
func Builtin(dp Datapaths) *Registry {
	r := &Registry{byName: map[string]*Config{}, dp: dp}
	r.add(&Config{Name: "none", Family: Baseline, Description: "no filter, no marking"})

	r.add(r.floor("tcx-floor", SuiteIPF, "a trivial TCX program (return TCX_NEXT) on ingress and egress: the floor of the in-kernel cost, for the ns/packet rows"))
	r.add(r.ipf("sluice-attach", "Sluice IPFilter datapath attached, no rules", ""))
	r.add(r.ipf("sluice-stateless", "HP's stateless set: pass in|out proto tcp|udp|icmp from any to any", IPFStateless()))
	r.add(r.ipf("sluice-stateful", "HP's set with keep state (state_max 65536)", IPFStateful()))
	for _, n := range NoMatchCounts {
		r.add(r.ipf(fmt.Sprintf("sluice-nomatch-%d", n),
			fmt.Sprintf("%d non-matching stateless rules (half in, half out), then the stateless set", n), IPFNoMatch(n)))
	}
	big := r.ipf(fmt.Sprintf("sluice-nomatch-%d", Blocklist),
		fmt.Sprintf("opt-in: a blocklist of %d non-matching stateless rules, one address each (half in, half out), then the stateless set; loads for seconds", Blocklist),
		IPFNoMatchSummary(Blocklist))
	big.OptIn, big.Generate = true, func() string { return IPFNoMatch(Blocklist) }
	r.add(big)
	// opt-in: HP's stateful set cut at the established path's STAGE
	// points (c/lib/est.h), in the order a hit passes them; N 0 is the
	// whole program through the same loader
	for _, n := range EstStages {
		r.cut(fmt.Sprintf("sluice-stateful-at-%d", n),
			fmt.Sprintf("opt-in: HP's stateful set, its programs ending after the established path's STAGE %d (0: whole); a live bisect, packets past the cut pass unfiltered", n), IPFStateful(),
			func() func(string, uint32) (Applier, error) { return r.dp.IPFStage }, n)
	}
	// opt-in: the 10 000-rule blocklist with its run probe cut
	// (lib/fast.h bench_runcut): 1 none, 2 run_bits' outer lookup, 3
	// and its inner one, 4 run_bits whole, 5 run_flat's lookup; 0 the
	// whole program through the same loader
	for _, n := range RunCuts {
		r.cut(fmt.Sprintf("sluice-nomatch-10000-cut-%d", n),
			fmt.Sprintf("opt-in: 10 000 non-matching rules then the stateless set, the run probe cut at point %d (lib/fast.h bench_runcut; 0: whole); a live bisect, a cut program may pass what a run blocks", n), IPFNoMatch(10000),
			func() func(string, uint32) (Applier, error) { return r.dp.IPFRunCut }, n)
	}
	// opt-in: the attached program (no rules) cut at the idle path's
	// STAGE points (c/filter.c); at14's live bisect of its cost
	for _, n := range AttachStages {
		r.cut(fmt.Sprintf("sluice-attach-at-%d", n),
			fmt.Sprintf("opt-in: Sluice attached, no rules, its programs ending after the idle path's STAGE %d; a live bisect, packets past the cut pass uncounted", n), "",
			func() func(string, uint32) (Applier, error) { return r.dp.IPFStage }, n)
	}
	for _, k := range FloorKinds {
		c := r.floor("tcx-floor-"+k, SuiteIPF, fmt.Sprintf("opt-in: the trivial TCX program's variant %q (at14: what code and a counter cost live)", k))
		c.OptIn = true
		c.Unavailable = func() bool { return r.dp.FloorKind == nil }
		c.New = func() (Applier, error) {
			if r.dp.FloorKind == nil {
				return nil, ErrUnavailable
			}
			return r.dp.FloorKind(k)
		}
		r.add(c)
	}
	r.add(r.qos("sluice-qos", "IPQoS: one filter, one policy marking every TCP packet DSCP 10", QoSMarkTCP(DSCPMark)))
	r.add(r.qos("sluice-qos-any", "IPQoS: one filter matching every IPv4 packet (UDP and fragments too), marked DSCP 10", QoSMarkAny(DSCPMark)))
	r.add(r.qos("sluice-qos-max", "IPQoS: the marking policy capped at max 50% of the adapter's declared speed (the link profile's line rate)", QoSMax(DSCPMark, 50)))
	r.add(r.qos("sluice-qos-nomatch", "IPQoS: one filter that matches no packet of the tests (dstaddr 198.18.0.1)", QoSNoMatch(DSCPMark)))

	r.add(r.nft("nft-attach", "nftables table with input/output base chains, no rules", NFTSpec{}))
	r.add(r.nft("nft-stateless", "nftables: accept tcp, udp, icmp in and out", NFTSpec{Stateless: true}))
	r.add(r.nft("nft-stateful", "nftables: ct state established,related accept; new tcp/udp/icmp accept", NFTSpec{Stateful: true}))
	for _, n := range NoMatchCounts {
		r.add(r.nft(fmt.Sprintf("nft-nomatch-%d", n),
			fmt.Sprintf("nftables: %d non-matching rules (half input, half output), then the stateless set", n), NFTSpec{NoMatch: n, Stateless: true}))
	}
	nbig := r.nft(fmt.Sprintf("nft-nomatch-set-%d", Blocklist),
		fmt.Sprintf("opt-in: nftables' blocklist: %d non-matching addresses in two sets (half input, half output), one lookup rule each, then the stateless set", Blocklist),
		NFTSpec{Blocklist: Blocklist, Stateless: true})
	nbig.OptIn = true
	r.add(nbig)
	r.add(r.nft("nft-dscp", "nftables: set DSCP 10 on every outgoing TCP packet", NFTSpec{Mark: true, DSCP: DSCPMark}))
	r.add(r.nft("nft-dscp-any", "nftables: set DSCP 10 on every outgoing IPv4 packet", NFTSpec{Mark: true, MarkAny: true, DSCP: DSCPMark}))
	r.add(r.nft("nft-dscp-nomatch", "nftables: set DSCP 10 on outgoing packets to 198.18.0.1 (none in the tests)", NFTSpec{Mark: true, MarkNoMatch: true, DSCP: DSCPMark}))
	r.addNAT()
	return r
}

// DSCPMark is the DSCP the marking configurations write (AF11).
const DSCPMark = 10

func (r *Registry) add(c *Config) {
	r.byName[c.Name] = c
	r.order = append(r.order, c.Name)
}

// cut adds the opt-in configuration name: rules loaded by the loader
// loader returns (nil: unavailable) with cut n, one point of a live
// bisect.
func (r *Registry) cut(name, desc, rules string, loader func() func(string, uint32) (Applier, error), n uint32) {
	c := r.ipf(name, desc, rules)
	c.OptIn = true
	c.Unavailable = func() bool { return loader() == nil }
	c.New = func() (Applier, error) {
		load := loader()
		if load == nil {
			return nil, ErrUnavailable
		}
		return load(c.RuleText(), n)
	}
	r.add(c)
}

func (r *Registry) ipf(name, desc, rules string) *Config {
	c := &Config{Name: name, Family: Sluice, Suite: SuiteIPF, Description: desc, Rules: rules, Unavailable: func() bool { return r.dp.IPF == nil }}
	c.New = func() (Applier, error) {
		if r.dp.IPF == nil {
			return nil, ErrUnavailable
		}
		return r.dp.IPF(c.RuleText())
	}
	return c
}

func (r *Registry) qos(name, desc, conf string) *Config {
	return &Config{Name: name, Family: Sluice, Suite: SuiteQoS, Description: desc, Rules: conf, Unavailable: func() bool { return r.dp.QoS == nil }, New: func() (Applier, error) {
		if r.dp.QoS == nil {
			return nil, ErrUnavailable
		}
		return &linkSubst{conf: conf, load: r.dp.QoS}, nil
	}}
}

func (r *Registry) nft(name, desc string, spec NFTSpec) *Config {
	suite := SuiteIPF
	if spec.Mark {
		suite = SuiteQoS
	}
	return &Config{Name: name, Family: NFTables, Suite: suite, Description: desc, Rules: spec.String(), New: func() (Applier, error) {
		return NewNFT(spec), nil
	}}
}

// Names lists the configurations in their canonical order.
func (r *Registry) Names() []string { return append([]string(nil), r.order...) }

// Get returns a configuration by name.
func (r *Registry) Get(name string) (*Config, bool) {
	c, ok := r.byName[name]
	return c, ok
}

// Select resolves a comma-separated list of names. Besides names it
// accepts "all", a family ("sluice", "nftables"), a glob-free prefix
// ending in "*" ("nft-*"), and user files "ipf=PATH" and "ipqos=PATH"
// (named after the file); the opt-in configurations only by name.
// "none" is always put first, because every difference is computed
// against it.
func (r *Registry) Select(list string) ([]*Config, error) {
	var out []*Config
	seen := map[string]bool{}
	push := func(c *Config) {
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case item == "all":
			for _, n := range r.order {
				if !r.byName[n].OptIn {
					push(r.byName[n])
				}
			}
		case item == string(Sluice) || item == string(NFTables) || item == string(Reference):
			for _, n := range r.order {
				if c := r.byName[n]; string(c.Family) == item && !c.OptIn {
					push(c)
				}
			}
		case strings.HasSuffix(item, "*"):
			p := strings.TrimSuffix(item, "*")
			n0 := len(out)
			for _, n := range r.order {
				if strings.HasPrefix(n, p) && !r.byName[n].OptIn {
					push(r.byName[n])
				}
			}
			if len(out) == n0 {
				return nil, fmt.Errorf("config: %q matches no configuration", item)
			}
		case strings.HasPrefix(item, "ipf=") || strings.HasPrefix(item, "ipqos="):
			c, err := r.FromFile(item)
			if err != nil {
				return nil, err
			}
			push(c)
		default:
			c, ok := r.byName[item]
			if !ok {
				return nil, fmt.Errorf("config: unknown configuration %q (known: %s)", item, strings.Join(r.order, ", "))
			}
			push(c)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("config: no configuration selected")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name == "none" && out[j].Name != "none" })
	if out[0].Name != "none" {
		out = append([]*Config{r.byName["none"]}, out...)
	}
	return out, nil
}

// FromFile makes a configuration from "ipf=PATH" (an ipf.conf rule set) or
// "ipqos=PATH" (an ipqos.conf; @LINK@ in it stands for the SUT's
// interface).
func (r *Registry) FromFile(spec string) (*Config, error) {
	kind, path, _ := strings.Cut(spec, "=")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	text := string(data)
	base := path
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	switch kind {
	case "ipf":
		c := r.ipf("ipf:"+base, "user rule set "+path, text)
		return c, nil
	case "ipqos":
		return r.qos("ipqos:"+base, "user IPQoS configuration "+path, text), nil
	}
	return nil, fmt.Errorf("config: bad file spec %q (want ipf=PATH or ipqos=PATH)", spec)
}

// SubstQoS fills in an ipqos.conf for a host: @LINK@ becomes its
// interface and @SPEED@ the line rate of the link profile it is applied
// for (the `speed` extension, so res and max percentages resolve against
// the shaped rate); on an unshaped link, lines naming @SPEED@ are
// dropped and the interface's own speed applies.
func SubstQoS(conf string, h *topo.Host) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(conf, "\n") {
		if strings.Contains(line, "@SPEED@") {
			if h.Speed == 0 {
				continue
			}
			line = strings.ReplaceAll(line, "@SPEED@", fmt.Sprint(h.Speed))
		}
		b.WriteString(strings.ReplaceAll(line, "@LINK@", h.Link))
	}
	return b.String()
}

// linkSubst fills in the SUT's interface name before handing an
// ipqos.conf to the loader: the adapter block must name it and it is only
// known once the test bed exists.
type linkSubst struct {
	conf string
	load QoSLoader
	a    Applier
}

func (l *linkSubst) Apply(ctx context.Context, h *topo.Host) error {
	a, err := l.load(SubstQoS(l.conf, h))
	if err != nil {
		return err
	}
	if err := a.Apply(ctx, h); err != nil {
		return err
	}
	l.a = a
	return nil
}

func (l *linkSubst) Remove() error {
	if l.a == nil {
		return nil
	}
	err := l.a.Remove()
	l.a = nil
	return err
}

package run

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

// Test names (netperf's).
const (
	TCPStream = "TCP_STREAM"
	TCPMaerts = "TCP_MAERTS"
	TCPRR     = "TCP_RR"
	TCPCRR    = "TCP_CRR"
	UDPStream = "UDP_STREAM"
	UDPRR     = "UDP_RR"
)

// SweepSizes are the IPQoS white paper's TCP_STREAM send sizes (32 …
// 2920 bytes; 1460 and 2920 are one and two Ethernet MSS).
var SweepSizes = []int{32, 64, 128, 256, 512, 1024, 1460, 2920}

// PaperSweep is the send-size sweep of the IPQoS white paper's raw data
// tables (pp. 5–6): SweepSizes without 1460, which HP did not run.
var PaperSweep = []int{32, 64, 128, 256, 512, 1024, 2920}

// FragSize is the UDP_STREAM message size of the IPQoS fragment test:
// larger than a 1500-byte MTU, so every datagram leaves the SUT as IP
// fragments and the marker sees non-first fragments (no L4 header).
const FragSize = 4000

// QuickSweep is the subset of SweepSizes that --quick runs.
var QuickSweep = []int{32, 512, 2920}

func sizeName(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	return fmt.Sprint(n)
}

// NewTest makes a test of the matrix with its ID: the netperf test
// name, the sizes ("64K" for the IPFilter paper's messages, "m=N" for the
// IPQoS sweep, "req/resp" for RR tests) and the direction relative to the
// SUT, e.g. "TCP_STREAM 64K inbound".
func NewTest(name, suite, client string, send, req, resp int) result.Test {
	t := result.Test{Name: name, Suite: suite, Client: client, SendSize: send, ReqSize: req, RespSize: resp}
	var size string
	switch {
	case !t.Stream():
		size = fmt.Sprintf("%d/%d", req, resp)
	case suite == config.SuiteQoS:
		size = fmt.Sprintf("m=%d", send)
	default:
		size = sizeName(send)
	}
	t.ID = name + " " + size + " " + t.Direction()
	return t
}

// At returns t run over a link shaped to profile p; its ID gains
// "@PROFILE" (nothing for the unshaped veth, so IDs of unshaped runs
// stay those of earlier results).
func At(t result.Test, p topo.Profile) result.Test {
	base := strings.TrimSuffix(t.ID, " @"+t.Link)
	t.Link = ""
	if p.Shaped() {
		t.Link = p.Name
		base += " @" + p.Name
	}
	t.ID = base
	return t
}

// AtAll returns ts at each of the profiles, profile by profile.
func AtAll(ts []result.Test, ps []topo.Profile) []result.Test {
	var out []result.Test
	for _, p := range ps {
		for _, t := range ts {
			out = append(out, At(t, p))
		}
	}
	return out
}

// PaperIPFSizes returns the IPFilter white paper's stream message sizes
// for a link speed: 64 KB on 10GigE (tables 1–2), 8 KB and 1 KB on 1GigE
// (tables 5–8; also used at 100BaseT, which the paper did not measure);
// all three on the unshaped veth.
func PaperIPFSizes(p topo.Profile) []int {
	switch {
	case p.BitsPerSec >= 10_000_000_000:
		return []int{64 << 10}
	case p.Shaped():
		return []int{8 << 10, 1 << 10}
	}
	return []int{64 << 10, 8 << 10, 1 << 10}
}

// IPFPaperTests returns the IPFilter white paper's tests at a link
// profile, exactly as HP ran them: TCP_STREAM inbound and TCP_MAERTS
// outbound at the speed's message sizes, and TCP_CRR 1/1 (tables 3–4,
// 9–10). No TCP_RR: the paper has none.
func IPFPaperTests(p topo.Profile) []result.Test {
	var ts []result.Test
	for _, name := range []string{TCPStream, TCPMaerts} {
		for _, m := range PaperIPFSizes(p) {
			ts = append(ts, NewTest(name, config.SuiteIPF, result.Peer, m, 0, 0))
		}
	}
	ts = append(ts, NewTest(TCPCRR, config.SuiteIPF, result.Peer, 0, 1, 1))
	return AtAll(ts, []topo.Profile{p})
}

// IPFTestsAt returns the IPFilter set at a profile: IPFTests on the
// unshaped veth, the speed's paper sizes plus TCP_RR and TCP_CRR on a
// shaped link.
func IPFTestsAt(p topo.Profile) []result.Test {
	if !p.Shaped() {
		return IPFTests()
	}
	var ts []result.Test
	for _, name := range []string{TCPStream, TCPMaerts} {
		for _, m := range PaperIPFSizes(p) {
			ts = append(ts, NewTest(name, config.SuiteIPF, result.Peer, m, 0, 0))
		}
	}
	for _, name := range []string{TCPRR, TCPCRR} {
		ts = append(ts, NewTest(name, config.SuiteIPF, result.Peer, 0, 1, 1))
	}
	return AtAll(ts, []topo.Profile{p})
}

// QoSExtraTests returns the further tests the IPQoS white paper declares
// (p. 7, "Future Tests"), all outbound from the SUT where the marker
// works: UDP streams (1 KB), request/response with marking (TCP_RR and
// UDP_RR 1/1: latency-bound, where a per-packet cost shows in the
// transaction rate), and fragments (UDP_STREAM of FragSize bytes). The
// fourth, filters that do not match, is a configuration
// (sluice-qos-nomatch, nft-dscp-nomatch), not a test.
func QoSExtraTests() []result.Test {
	return []result.Test{
		NewTest(UDPStream, config.SuiteQoS, result.SUT, 1<<10, 0, 0),
		NewTest(UDPStream, config.SuiteQoS, result.SUT, FragSize, 0, 0),
		NewTest(TCPRR, config.SuiteQoS, result.SUT, 0, 1, 1),
		NewTest(UDPRR, config.SuiteQoS, result.SUT, 0, 1, 1),
	}
}

// IPFTests returns the IPFilter white paper's set, with the paper's roles:
// the filter sits on the SUT and every netperf client runs on the peer
// against a netserver on the SUT. TCP_STREAM at 64 KB, 8 KB and 1 KB
// messages sends data in to the SUT, TCP_MAERTS at the same sizes makes
// the SUT send it out, and TCP_RR and TCP_CRR 1/1 bring the connections
// (hence the SYNs that keep state must track) in to the SUT.
func IPFTests() []result.Test {
	var ts []result.Test
	for _, name := range []string{TCPStream, TCPMaerts} {
		for _, m := range []int{64 << 10, 8 << 10, 1 << 10} {
			ts = append(ts, NewTest(name, config.SuiteIPF, result.Peer, m, 0, 0))
		}
	}
	for _, name := range []string{TCPRR, TCPCRR} {
		ts = append(ts, NewTest(name, config.SuiteIPF, result.Peer, 0, 1, 1))
	}
	return ts
}

// QoSTests returns the IPQoS white paper's TCP_STREAM send-size sweep.
// IPQoS marks what the SUT sends, so the client runs on the SUT and the
// data flows out to a netserver on the peer.
func QoSTests(sizes []int) []result.Test {
	var ts []result.Test
	for _, m := range sizes {
		ts = append(ts, NewTest(TCPStream, config.SuiteQoS, result.SUT, m, 0, 0))
	}
	return ts
}

// FromSUT rewrites tests for a peer that can only run netserver (remote
// mode): every client moves to the SUT. Streams keep their direction by
// swapping TCP_STREAM and TCP_MAERTS; request/response tests cannot, and
// become outbound (connections leave the SUT), which their IDs then say.
func FromSUT(ts []result.Test) []result.Test {
	out := make([]result.Test, 0, len(ts))
	for _, t := range ts {
		if t.ClientHost() == result.SUT {
			out = append(out, t)
			continue
		}
		name := t.Name
		switch name {
		case TCPStream:
			name = TCPMaerts
		case TCPMaerts:
			name = TCPStream
		}
		nt := At(NewTest(name, t.Suite, result.SUT, t.SendSize, t.ReqSize, t.RespSize), profileOf(t))
		if t.Stream() {
			// The SUT still receives (or sends) the data: the test is
			// the same one, measured from the other end, and keeps its
			// name; Netperf says which netperf test ran.
			nt.ID = t.ID
			nt.Netperf = name
			nt.Name = t.Name
			nt.Client = result.SUT
		}
		out = append(out, nt)
	}
	return out
}

func profileOf(t result.Test) topo.Profile {
	p, _ := topo.ProfileByName(t.Link)
	return p
}

// NATTests returns the gateway suite: netperf from the client namespace
// through the SUT (the gateway) to the server, TCP_STREAM and
// TCP_MAERTS 64 KB, TCP_RR and TCP_CRR 1/1 (CRR makes a NAT session per
// transaction).
func NATTests() []result.Test {
	var ts []result.Test
	for _, name := range []string{TCPStream, TCPMaerts} {
		ts = append(ts, NewTest(name, config.SuiteNAT, result.Client, 64<<10, 0, 0))
	}
	for _, name := range []string{TCPRR, TCPCRR} {
		ts = append(ts, NewTest(name, config.SuiteNAT, result.Client, 0, 1, 1))
	}
	return ts
}

// AllTests is every test --tests can select: the IPFilter set at every
// link profile, the IPQoS sweep and further tests (the sweep at every
// profile), and the NAT suite.
func AllTests() []result.Test {
	var ts []result.Test
	for _, p := range topo.Profiles {
		ts = append(ts, IPFTestsAt(p)...)
	}
	for _, p := range topo.Profiles {
		ts = append(ts, AtAll(QoSTests(SweepSizes), []topo.Profile{p})...)
	}
	ts = append(ts, QoSExtraTests()...)
	return append(ts, NATTests()...)
}

// Preset is a named plan shape.
type Preset struct {
	Name     string
	Configs  string // for config.Registry.Select
	Tests    []result.Test
	Reps     int
	Duration time.Duration
	Warmup   time.Duration
}

// Quick is the default preset, about five minutes with the Sluice
// datapaths present (half that without): the papers' four
// configurations (none, attached without rules, stateless, stateful) for
// Sluice and nftables, and the marking ones, on the unshaped veth.
func Quick() Preset {
	return Preset{
		Name:     "quick",
		Configs:  "none,sluice-attach,sluice-stateless,sluice-stateful,sluice-qos,nft-attach,nft-stateless,nft-stateful,nft-dscp",
		Tests:    append(IPFTests(), QoSTests(QuickSweep)...),
		Reps:     3,
		Duration: time.Second,
		Warmup:   time.Second, // netperf runs whole seconds
	}
}

// PaperProfiles are the link speeds of the papers: the IPFilter paper's
// 10GigE and 1GigE, and the IPQoS paper's 100BaseT and 1GigE.
var (
	PaperIPFProfiles = []topo.Profile{topo.TenGigE, topo.GigE}
	PaperQoSProfiles = []topo.Profile{topo.Eth100, topo.GigE}
)

// Presets are the names of the presets.
var Presets = []string{"quick", "full", "paper"}

// PresetAt returns a preset with its tests at the given link profiles
// (nil: the preset's own — the unshaped veth for quick and full, the
// papers' speeds for paper): the IPFilter set at each profile's message
// sizes and the IPQoS sweep at each profile; full adds the IPQoS further
// tests and the NAT suite on the unshaped link.
func PresetAt(name string, ps []topo.Profile) (Preset, error) {
	var pr Preset
	switch name {
	case "quick":
		pr = Quick()
	case "full":
		pr = Full()
	case "paper":
		pr = Paper()
	default:
		return Preset{}, fmt.Errorf("run: unknown preset %q (want %s)", name, strings.Join(Presets, ", "))
	}
	if len(ps) == 0 {
		return pr, nil
	}
	var ts []result.Test
	for _, p := range ps {
		if name == "paper" {
			ts = append(ts, IPFPaperTests(p)...)
		} else {
			ts = append(ts, IPFTestsAt(p)...)
		}
	}
	sizes := map[string][]int{"quick": QuickSweep, "full": SweepSizes, "paper": PaperSweep}[name]
	ts = append(ts, AtAll(QoSTests(sizes), ps)...)
	if name == "full" {
		ts = append(append(ts, QoSExtraTests()...), NATTests()...)
	}
	pr.Tests = ts
	return pr, nil
}

// Paper is HP's matrix with HP's parameters, shaped to the papers' link
// speeds: the IPFilter paper's tests (IPFPaperTests) at 10GigE and 1GigE
// on its four configurations for Sluice and nftables plus the trivial
// TCX program (the floor of the in-kernel cost), and the IPQoS paper's
// send-size sweep (PaperSweep) at 100BaseT and 1GigE on none, sluice-qos
// and nft-dscp. HP ran its IPQoS tests for 60 s (the raw tables'
// elapsed time, 60.01 s); the IPFilter paper does not say. On this
// 2-core machine that would take over five hours, so the preset trades
// length for repetitions, which is what gives the confidence intervals:
// 4 interleaved repetitions of 10 s (netperf's default length) after a
// 2 s warm-up per apply, 106 tests a repetition, about 80 minutes
// (bench.Estimate). Longer runs are a matter of --duration and --reps.
func Paper() Preset {
	var ts []result.Test
	for _, p := range PaperIPFProfiles {
		ts = append(ts, IPFPaperTests(p)...)
	}
	ts = append(ts, AtAll(QoSTests(PaperSweep), PaperQoSProfiles)...)
	return Preset{
		Name:     "paper",
		Configs:  "none,tcx-floor,sluice-attach,sluice-stateless,sluice-stateful,nft-attach,nft-stateless,nft-stateful,sluice-qos,nft-dscp",
		Tests:    ts,
		Reps:     4,
		Duration: 10 * time.Second,
		Warmup:   2 * time.Second,
	}
}

// Full is every configuration and test, sized to finish in about 25
// minutes on a 2-core machine (bench.Estimate): the IPFilter set on every
// filter configuration (none, sluice-*, nft-* but the marking ones), the
// IPQoS sweep over all eight send sizes on none, sluice-qos and nft-dscp,
// four interleaved repetitions of 2 s each after a 1 s warm-up per apply.
// That is 128 tests a repetition; longer runs are a matter of --reps and
// --duration.
func Full() Preset {
	return Preset{
		Name:     "full",
		Configs:  "all",
		Tests:    append(append(append(IPFTests(), QoSTests(SweepSizes)...), QoSExtraTests()...), NATTests()...),
		Reps:     4,
		Duration: 2 * time.Second,
		Warmup:   time.Second,
	}
}

// SelectTests filters tests by a comma-separated list of IDs (with or
// without the direction: "TCP_STREAM 64K" is "TCP_STREAM 64K inbound"),
// test names ("TCP_RR" selects every TCP_RR test), directions
// ("inbound", "outbound") or suites ("ipf", "qos").
func SelectTests(all []result.Test, list string) ([]result.Test, error) {
	if strings.TrimSpace(list) == "" || list == "all" {
		return all, nil
	}
	var out []result.Test
	seen := map[string]bool{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		n0 := len(out)
		for _, t := range all {
			if selects(t, item) && !seen[t.ID] {
				seen[t.ID] = true
				out = append(out, t)
			}
		}
		if len(out) == n0 && !slices.ContainsFunc(all, func(t result.Test) bool { return selects(t, item) }) {
			var ids []string
			for _, t := range all {
				ids = append(ids, t.ID)
			}
			return nil, fmt.Errorf("run: unknown test %q (known: %s, or a test name, or ipf/qos)", item, strings.Join(ids, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("run: no test selected by %q", list)
	}
	return out, nil
}

func selects(t result.Test, item string) bool {
	id := t.ID
	if t.Link != "" {
		if strings.EqualFold(item, "@"+t.Link) {
			return true
		}
		id = strings.TrimSuffix(id, " @"+t.Link)
	}
	return strings.EqualFold(t.ID, item) || strings.EqualFold(id, item) || strings.EqualFold(strings.TrimSuffix(id, " "+t.Direction()), item) ||
		strings.EqualFold(t.Name, item) || t.Suite == item || t.Direction() == item
}

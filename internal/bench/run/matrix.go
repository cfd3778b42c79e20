package run

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
)

// Test names (netperf's).
const (
	TCPStream = "TCP_STREAM"
	TCPMaerts = "TCP_MAERTS"
	TCPRR     = "TCP_RR"
	TCPCRR    = "TCP_CRR"
)

// SweepSizes are the IPQoS white paper's TCP_STREAM send sizes (32 …
// 2920 bytes; 1460 and 2920 are one and two Ethernet MSS).
var SweepSizes = []int{32, 64, 128, 256, 512, 1024, 1460, 2920}

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
		out = append(out, NewTest(name, t.Suite, result.SUT, t.SendSize, t.ReqSize, t.RespSize))
	}
	return out
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

// Quick is the default preset, about four minutes with the Sluice
// datapaths present (half that without).
func Quick() Preset {
	return Preset{
		Name:     "quick",
		Configs:  "none,sluice-stateless,sluice-stateful,sluice-qos,nft-stateless,nft-stateful,nft-dscp",
		Tests:    append(IPFTests(), QoSTests(QuickSweep)...),
		Reps:     3,
		Duration: time.Second,
		Warmup:   time.Second, // netperf runs whole seconds
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
		Tests:    append(IPFTests(), QoSTests(SweepSizes)...),
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
	return strings.EqualFold(t.ID, item) || strings.EqualFold(strings.TrimSuffix(t.ID, " "+t.Direction()), item) ||
		strings.EqualFold(t.Name, item) || t.Suite == item || t.Direction() == item
}

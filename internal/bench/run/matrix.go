package run

import (
	"fmt"
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

// IPFTests returns the IPFilter white paper's set: TCP_STREAM and
// TCP_MAERTS at 64 KB, 8 KB and 1 KB messages, TCP_RR and TCP_CRR 1/1.
func IPFTests() []result.Test {
	var ts []result.Test
	for _, name := range []string{TCPStream, TCPMaerts} {
		for _, m := range []int{64 << 10, 8 << 10, 1 << 10} {
			ts = append(ts, result.Test{ID: name + " " + sizeName(m), Name: name, Suite: config.SuiteIPF, SendSize: m})
		}
	}
	for _, name := range []string{TCPRR, TCPCRR} {
		ts = append(ts, result.Test{ID: name + " 1/1", Name: name, Suite: config.SuiteIPF, ReqSize: 1, RespSize: 1})
	}
	return ts
}

// QoSTests returns the IPQoS white paper's TCP_STREAM send-size sweep.
func QoSTests(sizes []int) []result.Test {
	var ts []result.Test
	for _, m := range sizes {
		ts = append(ts, result.Test{ID: fmt.Sprintf("%s m=%d", TCPStream, m), Name: TCPStream, Suite: config.SuiteQoS, SendSize: m})
	}
	return ts
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

// Quick is the default preset, about three minutes with the Sluice
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

// Full is every configuration and test, long enough to compare with the
// papers (several hours).
func Full() Preset {
	return Preset{
		Name:     "full",
		Configs:  "all",
		Tests:    append(IPFTests(), QoSTests(SweepSizes)...),
		Reps:     5,
		Duration: 10 * time.Second,
		Warmup:   2 * time.Second,
	}
}

// SelectTests filters tests by a comma-separated list of IDs, test names
// ("TCP_RR" selects every TCP_RR test) or suites ("ipf", "qos").
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
			if (strings.EqualFold(t.ID, item) || strings.EqualFold(t.Name, item) || t.Suite == item) && !seen[t.ID] {
				seen[t.ID] = true
				out = append(out, t)
			}
		}
		if len(out) == n0 && !matchesAny(all, item) {
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

func matchesAny(all []result.Test, item string) bool {
	for _, t := range all {
		if strings.EqualFold(t.ID, item) || strings.EqualFold(t.Name, item) || t.Suite == item {
			return true
		}
	}
	return false
}

package ipfctl

import (
	"strings"
	"testing"

	natbpf "sluice/internal/bpf/nat"
)

// TestFormatNATStatsNoTimer: sessions the kernel refused for want of a
// timer are shown by ipnat -sv (and only there: -s keeps IPFilter's lines).
func TestFormatNATStatsNoTimer(t *testing.T) {
	st := natbpf.Stats{NoTimer: 17, TableMax: 30000}
	const line = "17\tsessions refused, no timer\n"
	if got := FormatNATStats(st, true); !strings.Contains(got, line) || !strings.Contains(got, "30000\ttable max\n") {
		t.Errorf("ipnat -sv does not show the refused sessions:\n%s", got)
	}
	if got := FormatNATStats(st, false); strings.Contains(got, "no timer") || strings.Contains(got, "table max\n") {
		t.Errorf("ipnat -s shows Sluice's own lines:\n%s", got)
	}
}

package ipfctl

import (
	"strings"
	"testing"

	natbpf "sluice/internal/bpf/nat"
)

// TestFormatNATStatsNoTimer: sessions made without a timer of their own
// and what the sweeper did with them are shown by ipnat -sv (and only
// there: -s keeps IPFilter's lines).
func TestFormatNATStatsNoTimer(t *testing.T) {
	st := natbpf.Stats{NoTimer: 17, SweepArmed: 11, SweepEnded: 5, TableMax: 30000}
	got := FormatNATStats(st, true)
	for _, line := range []string{"17\tsessions made without a timer\n", "11\ttimers set by the sweeper\n",
		"5\tsessions ended by the sweeper\n", "30000\ttable max\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("ipnat -sv does not show %q:\n%s", line, got)
		}
	}
	if got := FormatNATStats(st, false); strings.Contains(got, "timer") || strings.Contains(got, "table max\n") {
		t.Errorf("ipnat -s shows Sluice's own lines:\n%s", got)
	}
}

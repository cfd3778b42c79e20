package ipfstat

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sluice/internal/ipfctl"
)

func TestWriteTop(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	states := []ipfctl.State{
		{Proto: 17, Src: a, Dst: b, SrcPort: 53, DstPort: 1024, TTL: 90 * time.Second,
			Pkts: [4]uint64{1, 0, 1, 0}, Bytes: [4]uint64{60, 0, 80, 0}},
		{Proto: 6, Src: b, Dst: a, SrcPort: 1025, DstPort: 22, TCPState: [2]uint8{4, 4}, TTL: 5 * time.Hour,
			Pkts: [4]uint64{10, 0, 9, 0}, Bytes: [4]uint64{1000, 0, 900, 0}},
		{Proto: 6, Src: a, Dst: b, SrcPort: 1, DstPort: 2, TCPState: [2]uint8{11, 11}},
	}
	for _, c := range []struct {
		closed bool
		want   []string
	}{
		{false, []string{
			"10.0.0.2,1025         10.0.0.1,22           4/4   tcp        19       1900  5:00:00",
			"10.0.0.1,53           10.0.0.2,1024         0/0   udp         2        140     1:30",
		}},
		{true, []string{
			"10.0.0.2,1025         10.0.0.1,22           4/4   tcp        19       1900  5:00:00",
			"10.0.0.1,53           10.0.0.2,1024         0/0   udp         2        140     1:30",
			"10.0.0.1,1            10.0.0.2,2            B/B   tcp         0          0     0:00",
		}},
	} {
		var w bytes.Buffer
		writeTop(&w, "host1", states, c.closed)
		lines := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
		if lines[0] != "host1 - IP Filter: v5.1.2 (Sluice) - state top" {
			t.Errorf("header %q", lines[0])
		}
		if got := lines[4:]; strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("closed=%v: got\n%s\nwant\n%s", c.closed, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}

package engine

import (
	"testing"

	"sluice/internal/rules/ipf"
	"sluice/internal/state"
)

type countLogger struct{ n int }

func (c *countLogger) LogPacket(*LogRecord) error { c.n++; return nil }

// TestLogLimit covers HP's `log limit [freq N]`: at most N records (1
// without freq) per one-second window per rule; the verdict is untouched.
func TestLogLimit(t *testing.T) {
	tests := []struct {
		rule string
		want []int // records after each of 4 packets, then 1 more after a second
	}{
		{"pass in log limit freq 2 quick proto udp all", []int{1, 2, 2, 2, 3}},
		{"pass in log limit quick proto udp all", []int{1, 1, 1, 1, 2}},
		{"pass in log quick proto udp all", []int{1, 2, 3, 4, 5}},
		{"log limit freq 3 in proto udp all", []int{1, 2, 3, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			clk := &state.ManualClock{}
			rs, err := ipf.Parse("t", []byte(tt.rule+"\n"), ipf.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			e := New(Config{Clock: clk})
			e.Sets().Store(0, mustCompile(t, rs))
			lg := &countLogger{}
			e.SetLogger(lg)
			var p Packet
			pkt := mkUDP("1.1.1.1", "2.2.2.2", 1, 2)
			for i, w := range tt.want {
				if i == 4 {
					clk.Advance(2)
				}
				check(e, &p, pkt, false, "a")
				if lg.n != w {
					t.Fatalf("after packet %d: got %d records, want %d", i+1, lg.n, w)
				}
			}
		})
	}
}

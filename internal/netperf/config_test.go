package netperf

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestTestLengthOnWire(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		n    int64
		want int32
	}{
		{2 * time.Second, 0, 2},
		{400 * time.Millisecond, 0, 1},
		{1500 * time.Millisecond, 0, 2},
		{time.Second, 500, -500},
	} {
		cfg := Config{Test: TCPRR, Duration: c.d, Transactions: c.n}
		p := resolve(&cfg, kinds[TCPRR], 16384, 131072)
		if got := buildRequest(&cfg, p, 4, [4]uint32{}, 0, 0).TestLength; got != c.want {
			t.Errorf("duration %v -N %d: test_length %d, want %d", c.d, c.n, got, c.want)
		}
	}
}

// Sizes the wire cannot carry are refused before any connection is made
// (they used to reach make() in the data loop and panic).
func TestRunRejectsOversizedMessages(t *testing.T) {
	_, err := Run(context.Background(), Config{Test: TCPStream, Host: "127.0.0.1", Port: 1, SendSize: 1 << 62})
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("got %v, want an out-of-range error", err)
	}
}

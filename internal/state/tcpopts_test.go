package state

import "testing"

// TestParseTCPOptionsLengths pins ipf_tcpoptions' length rules, checked
// against IPFilter's ipftest (semantics case syn-option-bad-length): each
// option it reads must have exactly its length, and an option running
// past the options ends the walk without making the segment bad.
func TestParseTCPOptionsLengths(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  []byte
		ok    bool
		scale uint8
		flags uint8
		mss   uint16
	}{
		{"none", nil, true, 0, 0, 0},
		{"usual", []byte{2, 4, 5, 0xb4, 4, 2, 1, 3, 3, 7}, true, 7, wscaleSeen | wscaleFirst | sackPermit, 1460},
		{"wscale capped", []byte{3, 3, 15, 0}, true, 14, wscaleSeen | wscaleFirst, 0},
		{"wscale len 4", []byte{3, 4, 7, 0}, false, 0, 0, 0},
		{"sack-permitted len 3", []byte{4, 3, 0, 1}, false, 0, 0, 0},
		{"mss len 3", []byte{2, 3, 5, 1}, false, 0, 0, 0},
		{"mss len 5", []byte{2, 5, 5, 0xb4, 0, 0, 0, 0}, false, 0, 0, 0},
		{"past the options", []byte{1, 1, 3, 3}, true, 0, 0, 0},
		{"length under 2", []byte{3, 1, 7, 0}, true, 0, 0, 0},
		{"after EOL", []byte{0, 3, 4, 7}, true, 0, 0, 0},
		{"bad then good", []byte{4, 3, 0, 3, 3, 2}, false, 2, wscaleSeen | wscaleFirst, 0},
	} {
		var td TCPSide
		if ok := parseTCPOptions(c.opts, &td); ok != c.ok || td.WinScale != c.scale || td.WinFlags != c.flags || td.MaxSeg != c.mss {
			t.Errorf("%s: ok %v scale %d flags %#x mss %d, want %v %d %#x %d", c.name, ok, td.WinScale, td.WinFlags, td.MaxSeg,
				c.ok, c.scale, c.flags, c.mss)
		}
	}
}

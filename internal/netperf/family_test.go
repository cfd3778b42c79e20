package netperf

import "testing"

func TestParseFamily(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"6", 6}, {"inet6", 6}, {"AF_INET6", 6}, {"4", 4}, {"inet", 4},
		{"unspec", 0}, {"", 0},
		// only the first ten characters count, as in netperf
		{"xxxxxxxxxx6", 0}, {"xxxxxxxxx6", 6},
	} {
		if got := ParseFamily(c.in); got != c.want {
			t.Errorf("ParseFamily(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

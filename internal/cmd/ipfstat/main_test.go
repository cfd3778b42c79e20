package ipfstat

import (
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	f, err := parseFlags([]string{"-hiv", "-tCT5", "-sT", "2", "--"})
	if err != nil {
		t.Fatal(err)
	}
	if !f.hits || !f.in || !f.verbose || !f.top || !f.closed || !f.state || f.topSecs != 2 || f.out {
		t.Errorf("got %+v", f)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-q"}, "illegal option -- q"},
		{[]string{"-t", "-T"}, "option requires an argument -- T"},
		{[]string{"-T0"}, "-T 0: expected a number of seconds"},
		{[]string{"-s", "extra"}, `unexpected argument "extra"`},
	} {
		if _, err := parseFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

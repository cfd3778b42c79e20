package ipftest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestTuning: -T says and does what IPFilter's ipftest does (each want
// below is its output, ../shared/ipf-diff/bin): a word it cannot do is
// reported with IPFilter's error number and ends the argument, ipftest
// goes on and exits 0. The values after the argument are shown by a
// second -T naming them; an old Sluice exited 1 on state_lock, an alias
// or a bad value, and set frag_size and min_ttl above 1.
func TestTuning(t *testing.T) {
	const show = "state_max,frag_ttl,frag_size,min_ttl,state_lock"
	line := func(n string, min, max, cur uint64) string {
		return fmt.Sprintf("%s\tmin %d\tmax %d\tcurrent %d\n", n, min, max, cur)
	}
	vals := func(stateMax, fragTTL, minTTL, lock uint64) string {
		return line("state_max", 1, 2147483647, stateMax) + line("frag_ttl", 1, 2147483647, fragTTL) +
			line("frag_size", 1, 2147483647, 257) + line("min_ttl", 0, 1, minTTL) + line("state_lock", 0, 1, lock)
	}
	const (
		e77get = "77:ioctl(SIOCIPFGET) could not find tunable\n"
		e77    = "77:ioctl(SIOCIPFSET) could not find tunable\n"
		e78    = "78:ioctl(SIOCIPFSET) tunable can only be changed when ipfilter disabled\n"
		e79    = "79:ioctl(SIOCIPFSET) new tunable value outside accepted range\n"
	)
	for _, c := range []struct {
		arg, stderr, values string
	}{
		{"frag_size=100", e78, vals(4013, 120, 4, 0)},
		{"frag_ttl=5,frag_size=3,state_max=7", e78, vals(4013, 5, 4, 0)},
		{"min_ttl=2", e79, vals(4013, 120, 4, 0)},
		{"min_ttl=0", "", vals(4013, 120, 0, 0)},
		{"state_lock=1", "", vals(4013, 120, 4, 1)},
		{"state_lock=2", e79, vals(4013, 120, 4, 0)},
		{"active=0", "", vals(4013, 120, 4, 0)},
		{"active=1", e79, vals(4013, 120, 4, 0)},
		{"foo", e77get, vals(4013, 120, 4, 0)},
		{"fr_statemax=7", e77, vals(4013, 120, 4, 0)},
		{"fr_defnatage=5", e77, vals(4013, 120, 4, 0)},
		{"frag_ttl=abc", "invalid value 'frag_ttl'\n", vals(4013, 120, 4, 0)},
		{"frag_ttl=", "invalid value 'frag_ttl'\n", vals(4013, 120, 4, 0)},
		{"frag_ttl=0x10", e79, vals(4013, 120, 4, 0)},
		{"frag_ttl=010", "", vals(4013, 10, 4, 0)},
		{"state_max=-0", e79, vals(4013, 120, 4, 0)},
		{"state_max= 9x", "", vals(9, 120, 4, 0)},
		{",state_max=7,,frag_ttl=+3", "", vals(7, 3, 4, 0)},
		{"frag_ttl=18446744073709551616", e79, vals(4013, 120, 4, 0)},
		{"frag_ttl=-18446744073709551615", "", vals(4013, 1, 4, 0)},
		{"state_max=2147483648", e79, vals(4013, 120, 4, 0)},
	} {
		var out, errb bytes.Buffer
		rc := Main(Env{Args: []string{"-R", "-b", "-T", c.arg, "-T", show, "-r", "/dev/null", "-i", "/dev/null"},
			Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
		if rc != 0 || errb.String() != c.stderr || out.String() != c.values {
			t.Errorf("-T %s: exit %d, stderr %q, stdout:\n%s\nwant exit 0, stderr %q, stdout:\n%s", c.arg, rc, errb.String(), out.String(), c.stderr, c.values)
		}
	}
}

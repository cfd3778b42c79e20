package ippool

import (
	"bytes"
	"strings"
	"testing"

	"sluice/internal/testutil/kittest"
)

// The "ip" family of the IPFilter conformance kit is copied into
// testdata/kit (IPFILTER.LICENCE there); SLUICE_IPF_KIT may point at a
// complete kit instead, which also runs the tests kept back from this copy.

func ipArgs(name string) []string { return []string{"-f", "regress/" + name, "-nRv"} }

// TestConformanceIP runs the kit's ip_test cases in process:
// "ippool -f regress/T -nRv" from the family folder, stdout compared
// byte for byte. Cases in testdata/must_pass.txt must pass; others are
// reported as known failures.
func TestConformanceIP(t *testing.T) {
	kittest.RunInProcess(t, "ip", ipArgs, Main)
}

// TestBinary builds cmd/ippool and runs the kit's ip_test command line
// through it, as the reference runner does.
func TestBinary(t *testing.T) {
	kittest.RunBinary(t, "sluice/cmd/ippool", "ip", ipArgs, "ip1", "ip3")
}

func TestTableCommandArgs(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"-a", "-n", "-m", "100", "-i", "1.2.3.0/24"}, 0},
		{[]string{"-a", "-n", "-m", "100", "-i", "1.2.3.4/40"}, 1},
		{[]string{"-a", "-n", "-i", "1.2.3.4"}, 1},
		{[]string{"-r", "-n", "-m", "x", "-i", "fe80::1/64", "-o", "nat"}, 0},
		{[]string{"-A", "-n", "-m", "x", "-t", "hash", "-S", "7"}, 0},
		{[]string{"-A", "-n", "-m", "x", "-t", "list"}, 1},
		{[]string{"-l", "-n", "-o", "bogus"}, 1},
		{[]string{"-F", "-n"}, 0},
		{[]string{"-l"}, 1}, // needs the device
		{[]string{"-q"}, 2}, // usage error
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		// no kernel device: whatever this host has loaded stays out of it
		c := &Command{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
		if got := c.Run(tc.args); got != tc.want {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, got, tc.want, errb.String())
		}
	}
}

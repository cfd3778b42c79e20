package ipnat

import (
	"bytes"
	"strings"
	"testing"

	"sluice/internal/testutil/kittest"
)

// The "in" family of the IPFilter conformance kit is copied into
// testdata/kit (IPFILTER.LICENCE there); SLUICE_IPF_KIT may point at a
// complete kit instead.

func inArgs(name string) []string { return []string{"-Rnvf", "regress/" + name} }

// TestConformanceIN runs the kit's in_test cases in process:
// "ipnat -Rnvf regress/T" from the family folder, stdout compared byte
// for byte. Cases listed in testdata/must_pass.txt must pass; others are
// reported by name as known failures.
func TestConformanceIN(t *testing.T) {
	kittest.RunInProcess(t, "in", inArgs, Main)
}

// TestBinary builds cmd/ipnat and runs the kit's in_test command line
// through it, as the reference runner does.
func TestBinary(t *testing.T) {
	kittest.RunBinary(t, "sluice/cmd/ipnat", "in", inArgs, "in1", "in2", "in1_6")
}

func TestMainFlags(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		code  int
		out   string
	}{
		{[]string{"-nvf", "-"}, "map le0 10.0.0.0/8 -> 1.2.3.4\n", 0, "map le0 10.0.0.0/8 -> 1.2.3.4/32\n"},
		{[]string{"-nf", "-"}, "map le0 10.0.0.0/8 -> 1.2.3.4\n", 0, ""},
		{[]string{"-nvf", "-"}, "map le0 10.0.0.0/8 ->\n", 1, ""},
		{[]string{"-CFn"}, "", 0, "0 entries flushed from NAT table\n0 entries flushed from NAT list\n"},
		{[]string{"-l"}, "", 1, ""},
		{[]string{"-f", "-"}, "map le0 10.0.0.0/8 -> 1.2.3.4\n", 1, ""}, // no device to load into
		{[]string{"-Q"}, "", 2, ""},                                     // usage error
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		// no kernel device: what works offline, and what fails without one
		c := &Command{Stdin: strings.NewReader(tc.stdin), Stdout: &out, Stderr: &errb}
		code := c.Run(tc.args)
		if code != tc.code || out.String() != tc.out {
			t.Errorf("%v: got exit %d output %q, want %d %q (stderr %q)", tc.args, code, out.String(), tc.code, tc.out, errb.String())
		}
	}
}

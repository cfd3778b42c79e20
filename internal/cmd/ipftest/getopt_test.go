package ipftest

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"sluice/internal/getopt"
)

// TestGetopt checks ipftest's optstring on the command lines of the
// conformance kit.
func TestGetopt(t *testing.T) {
	flag := func(c byte) getopt.Opt { return getopt.Opt{Flag: c} }
	arg := func(c byte, a string) getopt.Opt { return getopt.Opt{Flag: c, Arg: a, HasArg: true} }
	tests := []struct {
		args []string
		want []getopt.Opt
		rest []string
		err  bool
	}{
		{[]string{"-Rbr", "-", "-i", "x"}, []getopt.Opt{flag('R'), flag('b'), arg('r', "-"), arg('i', "x")}, []string{}, false},
		{[]string{"-T", "a=1", "-xF", "hex", "-DRbN", "-"},
			[]getopt.Opt{arg('T', "a=1"), flag('x'), arg('F', "hex"), flag('D'), flag('R'), flag('b'), arg('N', "-")}, []string{}, false},
		{[]string{"-6br-", "extra"}, []getopt.Opt{flag('6'), flag('b'), arg('r', "-")}, []string{"extra"}, false},
		{[]string{"-q"}, nil, nil, true},
		{[]string{"-r"}, nil, nil, true},
		{[]string{"--", "-b"}, nil, []string{"-b"}, false},
	}
	for _, tc := range tests {
		got, rest, err := getopt.Parse(tc.args, optstring)
		if (err != nil) != tc.err {
			t.Errorf("%v: err %v, want error %v", tc.args, err, tc.err)
			continue
		}
		if tc.err {
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%v: opts (-want +got):\n%s", tc.args, d)
		}
		if d := cmp.Diff(tc.rest, rest); d != "" && !(len(tc.rest) == 0 && len(rest) == 0) {
			t.Errorf("%v: rest (-want +got):\n%s", tc.args, d)
		}
	}
}

func TestNoRules(t *testing.T) {
	if _, rc := ipftestRun([]string{"-i", "/dev/null"}, ""); rc == 0 {
		t.Error("ipftest without -r/-N/-P exited 0, want failure")
	}
	if _, rc := ipftestRun([]string{"-6", "-r", "/dev/null", "-i", "/dev/null"}, ""); rc != 0 {
		t.Error("ipftest -6 capability check failed")
	}
}

func TestVerdictLines(t *testing.T) {
	got, rc := ipftestRunFiles(t, "block in proto tcp all\n", "in tcp 1.1.1.1,1025 2.2.2.2,22 S\nout udp 1.1.1.1,1 2.2.2.2,2\n", "-r")
	if rc != 0 {
		t.Fatalf("exit %d", rc)
	}
	want := "block < anon0 ip #0 40(20) 6 1.1.1.1,1025 > 2.2.2.2,22 S\n--------------\n" +
		"nomatch > anon0 ip #0 28(20) 17 1.1.1.1,1 > 2.2.2.2,2\n--------------\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// ipftestRunFiles writes rules and packets to temporary files and runs
// ipftest FLAG rules -i packets.
func ipftestRunFiles(t *testing.T, rules, packets, flag string) (string, int) {
	t.Helper()
	dir := t.TempDir()
	rf, pf := dir+"/rules", dir+"/packets"
	if err := os.WriteFile(rf, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pf, []byte(packets), 0o644); err != nil {
		t.Fatal(err)
	}
	return ipftestRun([]string{flag, rf, "-i", pf}, "")
}

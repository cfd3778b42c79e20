package ipfstat

import (
	"bytes"
	"errors"
	"io/fs"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"sluice/internal/ipfctl"
	"sluice/internal/rules/ipf"
)

// fakeReader is a datapath with canned contents: the listing code is
// tested without a kernel (the live tests in internal/ipfctl run the
// built ipfstat against a real one).
type fakeReader struct {
	rules  [2][]ipfctl.RuleInfo
	stats  ipfctl.Stats
	states []ipfctl.State
	cov    ipfctl.Coverage
	closed bool
}

func (f *fakeReader) Rules(s ipfctl.Set) ([]ipfctl.RuleInfo, error) { return f.rules[s], nil }
func (f *fakeReader) Stats() (ipfctl.Stats, error)                  { return f.stats, nil }
func (f *fakeReader) States() ([]ipfctl.State, error)               { return f.states, nil }
func (f *fakeReader) StateMax() uint64                              { return 4013 }
func (f *fakeReader) LogFlags() ipfctl.LogFlags                     { return ipfctl.LogBlock }
func (f *fakeReader) ActiveSetNumber() int                          { return 0 }
func (f *fakeReader) Ticks() uint64                                 { return 1234 }
func (f *fakeReader) Close() error                                  { f.closed = true; return nil }
func (f *fakeReader) Coverage() (ipfctl.Coverage, error)            { return f.cov, nil }

func sample() *fakeReader {
	f := &fakeReader{}
	f.rules[ipfctl.SetActive] = []ipfctl.RuleInfo{
		{Dir: ipf.DirIn, Number: 1, Text: "block in all", Hits: 2},
		{Dir: ipf.DirIn, Number: 2, Text: "pass in quick proto tcp from any to any port = 22 flags S/SA keep state", Hits: 1},
		{Dir: ipf.DirIn, Acct: true, Number: 1, Text: "count in proto tcp from any to any", Hits: 2, Bytes: 80},
		{Dir: ipf.DirIn, Number: 3, Text: "pass in proto udp from any to any head 10", IsHead: true, HeadFor: "10"},
		{Dir: ipf.DirIn, Group: "10", Number: 1, Text: "block in inet proto udp from 10.0.0.0/8 to any group 10"},
	}
	f.stats.In.Block, f.stats.In.Pass, f.stats.In.Acct = 1, 1, 2
	f.stats.StateAdded[0] = 1
	f.stats.SrcFull, f.stats.DCAFull = 5, 6
	f.states = []ipfctl.State{{Proto: 6, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 1025, DstPort: 22, TCPState: [2]uint8{2, 0}, Pass: 0x202}}
	return f
}

func TestListings(t *testing.T) {
	out := func(args ...string) (string, string) {
		t.Helper()
		var o, e bytes.Buffer
		f := sample()
		if rc := run(args, &o, &e, func() (ipfctl.Reader, error) { return f, nil }); rc != 0 {
			t.Fatalf("ipfstat %v: exit %d: %s", args, rc, e.String())
		}
		if !f.closed {
			t.Errorf("ipfstat %v left the datapath open", args)
		}
		return o.String(), e.String()
	}
	got, _ := out("-hin")
	want := "2 @1 block in all\n1 @2 pass in quick proto tcp from any to any port = 22 flags S/SA keep state\n0 @3 pass in proto udp from any to any head 10\n# Group 10\n0 @1 block in inet proto udp from 10.0.0.0/8 to any group 10\n"
	if got != want {
		t.Errorf("ipfstat -hin:\ngot:\n%s\nwant:\n%s", got, want)
	}
	if _, e := out("-o"); e != "# empty list for ipfilter(out)\n" {
		t.Errorf("ipfstat -o stderr: got %q", e)
	}
	if _, e := out("-Ii"); e != "# empty list for inactive ipfilter(in)\n" {
		t.Errorf("ipfstat -Ii stderr: got %q", e)
	}
	if got, _ = out("-ai"); !strings.HasPrefix(got, "2 80 count in proto tcp from any to any\n") {
		t.Errorf("ipfstat -ai: got %q", got)
	}
	got, _ = out()
	for _, want := range []string{" input packets:\t\tblocked 1 passed 1 nomatch 0 counted 2 short 0\n",
		"IPF Ticks:\t1234\n", "Packet log flags set: (0x1)\n\tpackets blocked by filter\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("ipfstat: no %q in\n%s", want, got)
		}
	}
	// the refusals of full kernel tables, after IPFilter's lines (which
	// stay as they are)
	if got, _ = out("-s"); !strings.Contains(got, "\t0 closed\n\t5 max-srcs table full\n\t6 keep limit table full\nState logging") {
		t.Errorf("ipfstat -s: got\n%s", got)
	}
	if got, _ = out("-s"); !strings.Contains(got, "IP states added:\n\t1 TCP\n") {
		t.Errorf("ipfstat -s: got\n%s", got)
	}
	if got, _ = out("-sl"); !strings.HasPrefix(got, "10.0.0.1 -> 10.0.0.2 pass 0x202 pr 6 state 2/0") || !strings.Contains(got, "1025 -> 22") {
		t.Errorf("ipfstat -sl: got\n%s", got)
	}
	if got, _ = out("-g"); !strings.Contains(got, "ipf groups (set 0):\n10\n") {
		t.Errorf("ipfstat -g: got\n%s", got)
	}
}

// TestCoverage: ipfstat's statistics end with the interfaces the filter
// is on, and every listing warns on stderr about interfaces that are up
// without the filter in all-interfaces mode (and only then).
func TestCoverage(t *testing.T) {
	for _, c := range []struct {
		name    string
		cov     ipfctl.Coverage
		line    string
		warning string
	}{
		{"named", ipfctl.Coverage{Attached: []string{"eth1"}}, "Interfaces: eth1 (those the rules name)\n", ""},
		{"all", ipfctl.Coverage{All: true, Attached: []string{"eth0", "eth1"}}, "Interfaces: eth0 eth1 (every non-loopback interface)\n", ""},
		{"unfiltered", ipfctl.Coverage{All: true, Attached: []string{"eth0"}, Unfiltered: []string{"veth7", "vlan5"}},
			"Interfaces: eth0 (every non-loopback interface)\nUnfiltered: veth7 vlan5 (up, not attached: run ipf -y)\n",
			"ipfstat: warning: veth7, vlan5 are up and not filtered although the rules apply on every interface: ipf -y attaches the filter\n"},
		{"none", ipfctl.Coverage{All: true}, "Interfaces: none (every non-loopback interface)\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, args := range [][]string{nil, {"-io"}, {"-s"}} {
				var o, e bytes.Buffer
				f := sample()
				f.cov = c.cov
				if rc := run(args, &o, &e, func() (ipfctl.Reader, error) { return f, nil }); rc != 0 {
					t.Fatalf("ipfstat %v: exit %d: %s", args, rc, e.String())
				}
				warn := e.String()
				if args != nil {
					// the listings' own notes (empty lists) aside
					warn = strings.Join(slices.DeleteFunc(strings.SplitAfter(warn, "\n"), func(l string) bool { return strings.HasPrefix(l, "# ") }), "")
				}
				if warn != c.warning {
					t.Errorf("ipfstat %v stderr: got %q, want %q", args, warn, c.warning)
				}
				if args == nil && !strings.HasSuffix(o.String(), "\tpackets blocked by filter\n"+c.line) {
					t.Errorf("ipfstat: output does not end with %q:\n%s", c.line, o.String())
				}
				if args != nil && strings.Contains(o.String(), "Interfaces:") {
					t.Errorf("ipfstat %v lists the interfaces:\n%s", args, o.String())
				}
			}
		})
	}
}

// TestOpenErrors: a datapath that is not there, or not readable for lack
// of privileges, is an error that says so (exit 1), not an empty listing.
func TestOpenErrors(t *testing.T) {
	for _, err := range []error{
		errors.New("/sys/fs/bpf/sluice: filter datapath not loaded"),
		&ipfctl.PermissionError{Err: &fs.PathError{Op: "stat", Path: "/sys/fs/bpf/sluice/config", Err: fs.ErrPermission}},
	} {
		var o, e bytes.Buffer
		rc := run([]string{"-s"}, &o, &e, func() (ipfctl.Reader, error) { return nil, err })
		if rc != 1 || !strings.Contains(e.String(), err.Error()) || o.Len() != 0 {
			t.Errorf("%v: exit %d stdout %q stderr %q", err, rc, o.String(), e.String())
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}} {
		var o, e bytes.Buffer
		if rc := run(args, &o, &e, nil); rc != 0 || !strings.HasPrefix(o.String(), "usage: ipfstat") {
			t.Errorf("%v: exit %d, stdout %q", args, rc, o.String())
		}
	}
	var o, e bytes.Buffer
	if rc := run([]string{"-q"}, &o, &e, nil); rc != 2 || !strings.Contains(e.String(), "usage: ipfstat") {
		t.Errorf("-q: exit %d, stderr %q", rc, e.String())
	}
}

// TestRunLine: with BPF statistics on, ipfstat ends its statistics with
// the datapath's mean in-kernel time per packet; with them off, no line.
func TestRunLine(t *testing.T) {
	defer func(f func() []ipfctl.ProgramRun) { programRuns = f }(programRuns)
	for _, c := range []struct {
		runs []ipfctl.ProgramRun
		want string
	}{
		{[]ipfctl.ProgramRun{{Hook: "ingress", Programs: 1, RunCount: 200, RunTime: 17 * time.Microsecond},
			{Hook: "egress", Programs: 1, RunCount: 100, RunTime: 9500 * time.Nanosecond}},
			"Datapath run time: ingress 85 ns/packet (200 runs), egress 95 ns/packet (100 runs)\n"},
		{[]ipfctl.ProgramRun{{Hook: "ingress", Programs: 1}, {Hook: "egress", Programs: 1}}, ""},
	} {
		programRuns = func() []ipfctl.ProgramRun { return c.runs }
		var o, e bytes.Buffer
		f := sample()
		f.cov = ipfctl.Coverage{Attached: []string{"eth1"}}
		if rc := run(nil, &o, &e, func() (ipfctl.Reader, error) { return f, nil }); rc != 0 {
			t.Fatalf("ipfstat: exit %d: %s", rc, e.String())
		}
		if want := "Interfaces: eth1 (those the rules name)\n" + c.want; !strings.HasSuffix(o.String(), want) {
			t.Errorf("ipfstat: output does not end with %q:\n%s", want, o.String())
		}
	}
}

package ipfctl

import (
	"testing"

	"sluice/internal/rules/ipf"
)

// TestEverywhere: which rule sets put the datapath in all-interfaces
// mode (Kernel.load): any rule that applies on every interface, even in
// a group or beside rules that name interfaces.
func TestEverywhere(t *testing.T) {
	for _, c := range []struct {
		rules string
		want  bool
	}{
		{"", false},
		{"pass in on eth0 all\nblock out on eth1 all\n", false},
		{"pass in on eth0,eth1 all\n", false},
		{"block in all\n", true},
		{"pass in on eth0 all\nblock in all\n", true},
		{"pass in on * all\n", true},
		{"pass in on eth0 all head 1\nblock in proto tcp all group 1\n", true},
		{"count in on eth0 all\n", false},
	} {
		rs, err := ipf.Parse("t.conf", []byte(c.rules), ipf.ParseOptions{NoResolve: true})
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		if got := everywhere(rs); got != c.want {
			t.Errorf("everywhere(%q) = %v, want %v", c.rules, got, c.want)
		}
	}
}

func TestCoverageText(t *testing.T) {
	for _, c := range []struct {
		cov            Coverage
		lines, warning string
	}{
		{Coverage{}, "Interfaces: none (those the rules name)\n", ""},
		{Coverage{Attached: []string{"eth0"}}, "Interfaces: eth0 (those the rules name)\n", ""},
		{Coverage{All: true, Attached: []string{"eth0", "eth1"}}, "Interfaces: eth0 eth1 (every non-loopback interface)\n", ""},
		{Coverage{All: true, Attached: []string{"eth0"}, Unfiltered: []string{"vlan7"}},
			"Interfaces: eth0 (every non-loopback interface)\nUnfiltered: vlan7 (up, not attached: run ipf -y)\n",
			"vlan7 is up and not filtered although the rules apply on every interface: ipf -y attaches the filter"},
		{Coverage{Attached: []string{"eth0"}, Ahead: []AheadProgram{{"eth0", "ingress", "lb", 7}, {"eth0", "egress", "mon", 9}}},
			"Interfaces: eth0 (those the rules name)\nAhead of the filter: eth0 ingress: lb (program 7)\nAhead of the filter: eth0 egress: mon (program 9)\n",
			"other programs run before the filter (eth0 ingress: lb (program 7); eth0 egress: mon (program 9)): the packets they pass or " +
				"redirect are not filtered; detach them, or attach them after the filter (bpftool net show lists them)"},
		{Coverage{All: true, Attached: []string{"eth0"}, Unfiltered: []string{"vlan7"}, Ahead: []AheadProgram{{"eth0", "ingress", "lb", 7}}},
			"Interfaces: eth0 (every non-loopback interface)\nUnfiltered: vlan7 (up, not attached: run ipf -y)\nAhead of the filter: eth0 ingress: lb (program 7)\n",
			"vlan7 is up and not filtered although the rules apply on every interface: ipf -y attaches the filter; " +
				"other programs run before the filter (eth0 ingress: lb (program 7)): the packets they pass or " +
				"redirect are not filtered; detach them, or attach them after the filter (bpftool net show lists them)"},
	} {
		if got := c.cov.Lines(); got != c.lines {
			t.Errorf("%+v: Lines %q, want %q", c.cov, got, c.lines)
		}
		if got := c.cov.Warning(); got != c.warning {
			t.Errorf("%+v: Warning %q, want %q", c.cov, got, c.warning)
		}
	}
}

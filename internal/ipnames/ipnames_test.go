package ipnames

import "testing"

func TestProtocols(t *testing.T) {
	for _, tc := range []struct {
		name string
		num  uint8
		ok   bool
	}{
		{"tcp", 6, true}, {"TCP", 6, true}, {"ipv6-icmp", 58, true}, {"IPv6-ICMP", 58, true},
		{"OSPFIGP", 89, true}, {"ospf", 89, true},
		// getprotobyname matches names and aliases exactly
		{"icmpv6", 0, false}, {"icmp6", 0, false}, {"ospfigp", 0, false}, {"Tcp", 0, false},
	} {
		n, ok := ProtoByName(tc.name)
		if n != tc.num || ok != tc.ok {
			t.Errorf("ProtoByName(%q) = %d, %v; want %d, %v", tc.name, n, ok, tc.num, tc.ok)
		}
	}
	for p, want := range map[uint8]string{0: "ip", 6: "tcp", 58: "ipv6-icmp", 89: "ospf", 255: ""} {
		if got := ProtoName(p); got != want {
			t.Errorf("ProtoName(%d) = %q, want %q", p, got, want)
		}
	}
}

func TestServices(t *testing.T) {
	for _, tc := range []struct {
		name, proto string
		port        uint16
		ok          bool
	}{
		{"ssh", "tcp", 22, true}, {"www", "tcp", 80, true}, {"domain", "udp", 53, true},
		{"shell", "tcp", 514, true}, {"syslog", "udp", 514, true}, {"shell", "udp", 0, false},
		{"http", "udp", 0, false}, {"domain", "", 53, true}, {"nosuch", "", 0, false},
	} {
		p, ok := ServiceByName(tc.name, tc.proto)
		if p != tc.port || ok != tc.ok {
			t.Errorf("ServiceByName(%q, %q) = %d, %v; want %d, %v", tc.name, tc.proto, p, ok, tc.port, tc.ok)
		}
	}
	if got := ServiceName(514, "tcp"); got != "shell" {
		t.Errorf("ServiceName(514, tcp) = %q, want shell", got)
	}
	if got := ServiceName(514, "udp"); got != "syslog" {
		t.Errorf("ServiceName(514, udp) = %q, want syslog", got)
	}
}

func TestICMP(t *testing.T) {
	if v, ok := LookupICMPType(RuleICMPTypes, "echo", true); !ok || v != 128 {
		t.Errorf("echo (v6) = %d, %v", v, ok)
	}
	if _, ok := LookupICMPType(RuleICMPTypes, "toobig", false); ok {
		t.Error("toobig has no IPv4 type")
	}
	// the rule table is sorted: the first name of a value is printed
	if got := ICMPTypeName(RuleICMPTypes, 139, true); got != "fqdnquery" {
		t.Errorf("ICMPTypeName(139, v6) = %q, want fqdnquery", got)
	}
	if v, ok := LookupICMPType(TextICMPTypes, "neighsol", true); !ok || v != 135 {
		t.Errorf("neighsol = %d, %v", v, ok)
	}
	if c, ok := LookupICMPCode("cutoff-preced"); !ok || c != 15 {
		t.Errorf("cutoff-preced = %d, %v", c, ok)
	}
}

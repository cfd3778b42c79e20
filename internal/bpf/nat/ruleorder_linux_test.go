//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"strings"
	"testing"

	pt "sluice/internal/packet/packettest"
)

// TestPrivilegedDifferentialRuleOrder runs the rule sets of the ipftest
// cases nat-rule-order, nat-rule-order-rdr and nat6-rule-order (whose
// expected outputs are IPFilter's) through the engine and the kernel
// (randomRun): the kernel must try the rules in IPFilter's hash table
// order too, a /24 before a /28 of the same network, and a rule whose
// address shares the packet's bucket under a longer mask before the
// rules of shorter masks.
func TestPrivilegedDifferentialRuleOrder(t *testing.T) {
	h := newHarness(t)
	tcp := func(src, dst string, sp, dp uint16) []byte {
		b := pt.TCP{SrcPort: sp, DstPort: dp, Seq: 1, Flags: 0x02, Win: 8192}.Bytes()
		if strings.Contains(src, ":") {
			return pt.V6{Src: src, Dst: dst, Next: 6, HopLimit: 64, Payload: b, L4Proto: 6}.Bytes()
		}
		return pt.V4{Src: src, Dst: dst, Proto: 6, TTL: 64, Payload: b}.Bytes()
	}
	out := func(src string, sp uint16) randPkt {
		return randPkt{out: true, iface: "nic0", b: tcp(src, "9.9.9.9", sp, 80)}
	}
	in := func(dst string, sp uint16) randPkt {
		return randPkt{iface: "nic0", b: tcp("9.9.9.9", dst, sp, 80)}
	}
	out6 := func(src string, sp uint16) randPkt {
		return randPkt{out: true, iface: "nic0", b: tcp(src, "2001:9::9", sp, 80)}
	}
	in6 := func(dst string, sp uint16) randPkt {
		return randPkt{iface: "nic0", b: tcp("2001:9::9", dst, sp, 80)}
	}
	for _, c := range []struct {
		name  string
		rules string
		pkts  []randPkt
		want  int // packets the engine translates
	}{
		{"map", `map nic0 10.0.0.0/8 -> 3.3.3.3/32
map nic0 10.1.2.0/24 -> 1.1.1.1/32
map nic0 10.1.2.0/28 -> 2.2.2.2/32
map nic0 10.1.38.0/24 -> 4.4.4.4/32
map nic0 10.1.37.0/24 -> 5.5.5.5/32
map nic0 from 10.9.0.0/16 to any -> 6.6.6.6/32
map nic0 from 10.9.0.0/24 to any -> 7.7.7.7/32
`, []randPkt{out("10.1.2.1", 1001), out("10.1.2.15", 1002), out("10.1.2.17", 1003), out("10.1.38.1", 1004),
			out("10.1.37.1", 1005), out("10.9.0.1", 1006), out("10.9.0.200", 1007), out("10.9.1.1", 1008),
			out("10.2.0.1", 1009), out("11.0.0.1", 1010)}, 9},
		{"rdr", `rdr nic0 10.0.0.0/8 port 80 -> 3.3.3.3 port 8080 tcp
rdr nic0 10.1.2.0/24 port 80 -> 1.1.1.1 port 8080 tcp
rdr nic0 10.1.2.0/28 port 80 -> 2.2.2.2 port 8080 tcp
rdr nic0 10.1.38.0/24 port 80 -> 4.4.4.4 port 8080 tcp
rdr nic0 10.1.37.0/24 port 80 -> 5.5.5.5 port 8080 tcp
bimap nic0 192.168.5.0/24 -> 10.5.0.0/24
rdr nic0 10.5.0.0/26 port 80 -> 6.6.6.6 port 8080 tcp
`, []randPkt{in("10.1.2.1", 1001), in("10.1.2.15", 1002), in("10.1.2.17", 1003), in("10.1.38.1", 1004),
			in("10.1.37.1", 1005), in("10.5.0.1", 1006), in("10.5.0.65", 1007), in("10.2.0.1", 1008)}, 8},
		{"v6", `map nic0 2001:db8::/32 -> 2001:1::1/128
map nic0 2001:db8:1:2::/64 -> 2001:2::1/128
map nic0 2001:db8:1:2::/80 -> 2001:3::1/128
map nic0 2001:db8:3e::/48 -> 2001:4::1/128
rdr nic0 2001:db8::/32 port 80 -> 2001:5::1 port 8080 tcp
rdr nic0 2001:db8:3e::/48 port 80 -> 2001:6::1 port 8080 tcp
rdr nic0 2001:db8:7::/48 port 80 -> 2001:7::1 port 8080 tcp
`, []randPkt{out6("2001:db8:1:2::1", 1001), out6("2001:db8:1:2:1::1", 1002), out6("2001:db8:3e::1", 1003),
			out6("2001:db8:5::1", 1004), in6("2001:db8:3e::1", 1005), in6("2001:db8:7::1", 1006)}, 6},
	} {
		t.Run(c.name, func(t *testing.T) { expectTranslated(t, h, c.rules, c.pkts, c.want) })
	}
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"testing"

	pt "sluice/internal/packet/packettest"
)

// TestPrivilegedDifferentialEdges runs packets the kernel NAT once treated
// otherwise than the engine through both (randomRun: the same packets
// out, drops, sessions and host maps) and requires the packets the engine
// translates to be exactly those expected, so that no case passes by
// being left alone on both sides:
//   - IPv6 fragments after the first follow the first fragment's session
//     (by the fragment header's id), outbound and for the replies;
//   - IPv4 and IPv6 fragments that overlap their datagram's first
//     fragment follow no session (IPFilter's fragment cache refuses them);
//   - an ICMP error too short to quote an IP header is translated as a
//     plain packet (IPv4 and IPv6);
//   - an IPv6 extension header cut short by the end of the datagram
//     leaves a packet without L4 header whose addresses are translated;
//     a cut fragment header leaves it alone.
func TestPrivilegedDifferentialEdges(t *testing.T) {
	h := newHarness(t)
	v6 := func(src, dst string, next uint8, payload []byte) []byte {
		return pt.V6{Src: src, Dst: dst, Next: next, HopLimit: 64, Payload: payload}.Bytes()
	}
	v4 := func(src, dst string, proto uint8, payload []byte) []byte {
		return pt.V4{Src: src, Dst: dst, Proto: proto, TTL: 64, Payload: payload}.Bytes()
	}
	data := make([]byte, 16)
	for i := range data {
		data[i] = byte(i)
	}
	for _, c := range []struct {
		name  string
		rules string
		pkts  []randPkt
		want  int // packets the engine translates
	}{
		{"v6 fragments", "map nic0 fd00::/16 -> 2001:db8::1/128 portmap udp 5000:5010 sequential\n", []randPkt{
			// a datagram in three fragments, the first with the header
			{out: true, iface: "nic0", b: v6("fd00::5", "2001:db8:9::9", 44, pt.Cat(pt.Frag(17, 0, true, 77), pt.UDP(1000, 53, data, false)))},
			{out: true, iface: "nic0", b: v6("fd00::5", "2001:db8:9::9", 44, pt.Cat(pt.Frag(17, 24, true, 77), data))},
			{out: true, iface: "nic0", b: v6("fd00::5", "2001:db8:9::9", 44, pt.Cat(pt.Frag(17, 40, false, 77), data[:8]))},
			// a body of another datagram: no session to follow
			{out: true, iface: "nic0", b: v6("fd00::5", "2001:db8:9::9", 44, pt.Cat(pt.Frag(17, 24, false, 78), data))},
			// the reply in two fragments, to the mapped port
			{out: false, iface: "nic0", b: v6("2001:db8:9::9", "2001:db8::1", 44, pt.Cat(pt.Frag(17, 0, true, 99), pt.UDP(53, 5000, data, false)))},
			{out: false, iface: "nic0", b: v6("2001:db8:9::9", "2001:db8::1", 44, pt.Cat(pt.Frag(17, 24, false, 99), data))},
		}, 5},
		{"v4 fragments overlapping the first", "map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap udp 5000:5010 sequential\n", []randPkt{
			// the first fragment holds 24 bytes (UDP header and 16)
			{out: true, iface: "nic0", b: pt.V4{Src: "10.0.0.5", Dst: "2.2.2.2", Proto: 17, TTL: 64, ID: 7, FlagsOff: 0x2000,
				Payload: pt.UDP(1000, 53, data, false)}.Bytes()},
			// one starting at 16 overlaps it: left alone
			{out: true, iface: "nic0", b: pt.V4{Src: "10.0.0.5", Dst: "2.2.2.2", Proto: 17, TTL: 64, ID: 7, FlagsOff: 0x2000 | 2,
				Payload: data}.Bytes()},
			// one starting at 24 follows it
			{out: true, iface: "nic0", b: pt.V4{Src: "10.0.0.5", Dst: "2.2.2.2", Proto: 17, TTL: 64, ID: 7, FlagsOff: 3,
				Payload: data}.Bytes()},
		}, 2},
		{"v6 fragments overlapping the first", "map nic0 fd00::/16 -> 2001:db8::1/128 portmap udp 5000:5010 sequential\n", []randPkt{
			{out: true, iface: "nic0", b: v6("fd00::5", "2001:db8:9::9", 44, pt.Cat(pt.Frag(17, 0, true, 77), pt.UDP(1000, 53, data, false)))},
			{out: true, iface: "nic0", b: v6("fd00::5", "2001:db8:9::9", 44, pt.Cat(pt.Frag(17, 16, true, 77), data))},
			{out: true, iface: "nic0", b: v6("fd00::5", "2001:db8:9::9", 44, pt.Cat(pt.Frag(17, 24, false, 77), data))},
		}, 2},
		{"short ICMP errors", "map nic0 10.0.0.0/24 -> 1.1.1.1/32\nmap nic0 fd00::/16 -> 2001:db8::1/128\n", []randPkt{
			// 8 bytes quoted: less than an IPv4 header
			{out: true, iface: "nic0", b: v4("10.0.0.5", "2.2.2.2", 1, pt.ICMP(3, 3, 0, data[:8]))},
			{out: false, iface: "nic0", b: v4("2.2.2.2", "1.1.1.1", 1, pt.ICMP(3, 3, 0, data[:8]))},
			// 16 bytes: less than an IPv6 header
			{out: true, iface: "nic0", b: pt.V6{Src: "fd00::5", Dst: "2001:db8:9::9", Next: 58, HopLimit: 64,
				Payload: pt.ICMP(1, 4, 0, data), L4Proto: 58}.Bytes()},
		}, 3},
		{"v6 cut extension headers", "map nic0 fd00::/16 -> 2001:db8::1/128\n", []randPkt{
			// a destination options header of 4 bytes
			{out: true, iface: "nic0", b: v6("fd00::5", "2001:db8:9::9", 60, data[:4])},
			// one that says 16 bytes and has 8, before UDP
			{out: true, iface: "nic0", b: v6("fd00::6", "2001:db8:9::9", 60, pt.Ext(17, 1))},
			// a routing header that says 24 bytes, of which 12 are
			// there: the next header (TCP) is past the end
			{out: true, iface: "nic0", b: v6("fd00::7", "2001:db8:9::9", 43, pt.Cat(pt.Routing(6, 2, 0, 0)[:8], data[:4]))},
			// a fragment header of 4 bytes: left alone
			{out: true, iface: "nic0", b: v6("fd00::8", "2001:db8:9::9", 44, data[:4])},
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr int
			if err := h.do(func() error {
				var err error
				_, tr, err = randomRun(h, c.rules, c.pkts)
				return err
			}); err != nil {
				t.Fatalf("rules:\n%s%v", c.rules, err)
			}
			if tr != c.want {
				t.Errorf("the engine translated %d packets, want %d", tr, c.want)
			}
		})
	}
}

package nat

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// icmp6Err wraps inner (an IPv6 packet) in an ICMPv6 error from src to
// dst with valid checksums.
func icmp6Err(src, dst netip.Addr, typ, code uint8, inner []byte) []byte {
	b := make([]byte, 40+8+len(inner))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(8+len(inner)))
	b[6], b[7] = 58, 64
	copy(b[8:], src.AsSlice())
	copy(b[24:], dst.AsSlice())
	b[40], b[41] = typ, code
	copy(b[48:], inner)
	fixL4(b)
	return b
}

// TestICMPv6Error follows ipf_nat6_icmperror: an ICMPv6 error about a
// translated packet gets its outer address and the embedded packet's
// addresses and ports put back to what the other side originally
// sent, with every checksum still valid, whether the error comes from
// the peer or from a router on the way.
func TestICMPv6Error(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name string
		rule string
		// first is the packet that makes the session, and whether it
		// goes out.
		first    []byte
		firstOut bool
		// wire is that packet as translated; the error quotes it.
		from      netip.Addr
		errOut    bool
		wantOuter netip.Addr // outer address the error must end up with
		wantInner []byte     // embedded packet after translation
	}{
		{
			name:     "map portmap, error from the server",
			rule:     "map le0 inet6 10::/16 -> 3::3/128 portmap tcp 5000:6000",
			first:    build(6, a("10::1"), a("2::2"), 1000, 80, 0),
			firstOut: true, from: a("2::2"),
			wantOuter: a("10::1"),
			wantInner: build(6, a("10::1"), a("2::2"), 1000, 80, 0),
		},
		{
			name:     "map portmap, error from a router",
			rule:     "map le0 inet6 10::/16 -> 3::3/128 portmap tcp 5000:6000",
			first:    build(6, a("10::1"), a("2::2"), 1000, 80, 0),
			firstOut: true, from: a("7::7"),
			wantOuter: a("10::1"),
			wantInner: build(6, a("10::1"), a("2::2"), 1000, 80, 0),
		},
		{
			name:   "rdr, error from the redirected server",
			rule:   "rdr le0 inet6 4::4/128 port 80 -> 10::5 port 8080 tcp",
			first:  build(6, a("9::9"), a("4::4"), 2000, 80, 0),
			from:   a("10::5"),
			errOut: true, wantOuter: a("4::4"),
			wantInner: build(6, a("9::9"), a("4::4"), 2000, 80, 0),
		},
		{
			name:     "map udp without ports",
			rule:     "map le0 inet6 10::/16 -> 3::3/128",
			first:    build(17, a("10::1"), a("2::2"), 5353, 53, 4),
			firstOut: true, from: a("2::2"),
			wantOuter: a("10::1"),
			wantInner: build(17, a("10::1"), a("2::2"), 5353, 53, 4),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := mustNAT(t, tc.rule)
			wire := bytes.Clone(tc.first)
			var res Result
			if tc.firstOut {
				res = n.Out(wire, "le0", "")
			} else {
				res = n.In(wire, "le0")
			}
			if res != Translated {
				t.Fatalf("first packet: %v", res)
			}
			// The error goes back to whoever sent the translated packet.
			to := netip.AddrFrom16([16]byte(wire[8:24]))
			e := icmp6Err(tc.from, to, 1, 4, wire)
			if tc.errOut {
				res = n.Out(e, "le0", "")
			} else {
				res = n.In(e, "le0")
			}
			if res != Translated {
				t.Fatalf("error: %v", res)
			}
			checksumsValid(t, e)
			outer := netip.AddrFrom16([16]byte(e[24:40]))
			if tc.errOut {
				outer = netip.AddrFrom16([16]byte(e[8:24]))
			}
			if outer != tc.wantOuter {
				t.Errorf("outer address %v, want %v", outer, tc.wantOuter)
			}
			if got := e[48:]; !bytes.Equal(got, tc.wantInner) {
				t.Errorf("embedded packet\n got %x\nwant %x", got, tc.wantInner)
			}
		})
	}
}

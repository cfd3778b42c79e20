package engine

import (
	"encoding/binary"
	"testing"

	"sluice/internal/packet"
)

// encap wraps inner in an IPv4 header of protocol proto, with an optional
// header (GRE) between them.
func encap(proto uint8, hdr, inner []byte) []byte {
	b := make([]byte, 20+len(hdr)+len(inner))
	b[0], b[8], b[9] = 0x45, 63, proto
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	copy(b[12:], []byte{1, 1, 1, 1})
	copy(b[16:], []byte{2, 2, 2, 2})
	binary.BigEndian.PutUint16(b[10:], ^packet.Checksum(b[:20], 0))
	copy(b[20:], hdr)
	copy(b[20+len(hdr):], inner)
	return b
}

// TestDecapsulate: a decapsulate rule does not set the verdict; its head
// group is scanned against the inner packet (IPFilter 5.x ipf_decaps).
func TestDecapsulate(t *testing.T) {
	rules := "decapsulate in proto 4 all head 10\n" +
		"decapsulate in proto gre all head 10\n" +
		"block in proto udp from 10.0.0.1 to any port = 53 group 10\n" +
		"pass in proto tcp from 10.0.0.1 to any group 10\n"
	inUDP := mkUDP("10.0.0.1", "10.0.0.2", 1000, 53)
	inUDP2 := mkUDP("10.0.0.9", "10.0.0.2", 1000, 53)
	inTCP := mkTCP("10.0.0.1", "10.0.0.2", 1000, 80, 0x02, 1, 0)
	gre := []byte{0, 0, 0x08, 0}
	greKey := []byte{0x20, 0, 0x08, 0, 0, 0, 0, 7}
	tests := []struct {
		name string
		pkt  []byte
		want Verdict
	}{
		{"ipip inner udp blocked", encap(4, nil, inUDP), VerdictBlock},
		{"ipip inner tcp passed", encap(4, nil, inTCP), VerdictPass},
		{"ipip inner unmatched: verdict stays", encap(4, nil, inUDP2), VerdictNoMatch},
		{"gre inner udp", encap(47, gre, inUDP), VerdictBlock},
		{"gre with key", encap(47, greKey, inTCP), VerdictPass},
		{"gre not carrying ip", encap(47, []byte{0, 0, 0x88, 0x0b}, inUDP), VerdictNoMatch},
		{"plain udp is not decapsulated", inUDP, VerdictNoMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, rules)
			var p Packet
			if got := check(e, &p, tt.pkt, false, "a").Verdict; got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// The decapsulating rule's own flags never decide: with a quick
	// block after it, the outer packet is still judged by that rule.
	e := newEngine(t, "decapsulate in proto 4 all head 10\nblock in quick proto 4 all\npass in all group 10\n")
	var p Packet
	if got := check(e, &p, encap(4, nil, inUDP), false, "a").Verdict; got != VerdictBlock {
		t.Errorf("later quick block: got %v, want block", got)
	}
}

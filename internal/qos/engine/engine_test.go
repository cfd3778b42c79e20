package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"sluice/internal/rules/ipqos"

	"sluice/internal/qos"
)

func mustCompile(t testing.TB, src string) *qos.Ruleset {
	t.Helper()
	cfg, err := ipqos.Parse("test.conf", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := qos.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// pkt builds an IPv4 or IPv6 packet with a TCP/UDP header (or a bare
// payload for other protocols) and valid checksums.
func pkt(src, dst string, proto uint8, sport, dport uint16, tc uint8) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	l4 := make([]byte, 20)
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if proto == 6 {
		l4[12] = 5 << 4
	}
	if s.Is4() {
		h := make([]byte, 20, 40)
		h[0], h[1] = 0x45, tc
		binary.BigEndian.PutUint16(h[2:], 40)
		h[8], h[9] = 64, proto
		s4, d4 := s.As4(), d.As4()
		copy(h[12:], s4[:])
		copy(h[16:], d4[:])
		binary.BigEndian.PutUint16(h[10:], IPv4HeaderChecksum(h))
		return append(h, l4...)
	}
	h := make([]byte, 40, 60)
	h[0], h[1] = 0x60|tc>>4, tc<<4|0x0a // flow label bits must survive
	binary.BigEndian.PutUint16(h[4:], 20)
	h[6], h[7] = proto, 64
	s16, d16 := s.As16(), d.As16()
	copy(h[8:], s16[:])
	copy(h[24:], d16[:])
	return append(h, l4...)
}

const conf = `
filter ftp_f {
    srcportlo 20
    srcporthi 21
    priority 1
}
filter web {
    http
    addr 10.1.0.0/16
    priority 2
}
filter any_udp {
    udp
}
filter v6 {
    dstaddrlo 2001:db8::1
    dstaddrhi 2001:db8::ff
    dscplo 8
}
filter ef_only {
    dscp 46
    priority 0
}
policy ftp_p {
    uses ftp_f
    dscp 10
}
policy web_p {
    uses web
    dscp 34
    vpr 5
}
policy bulk {
    uses any_udp
    uses v6
    dscp 8
    max 10m
}
policy keep_ef {
    uses ef_only
}
adapter eth0 {
    uses ftp_p
    uses web_p
    uses bulk
    uses keep_ef
}
`

func TestProcess(t *testing.T) {
	rs := mustCompile(t, conf)
	for _, tc := range []struct {
		name        string
		pkt         []byte
		action      Action
		policy      string
		filter      string
		newTC       uint8
		priorityMin uint16
	}{
		{"ftp data", pkt("192.168.0.1", "192.168.0.2", 6, 20, 3000, 0), Marked, "ftp_p", "ftp_f", 10 << 2, 0},
		{"ecn kept", pkt("192.168.0.1", "192.168.0.2", 6, 21, 3000, 0x03), Marked, "ftp_p", "ftp_f", 10<<2 | 3, 0},
		{"web to server", pkt("192.168.0.1", "10.1.2.3", 6, 5000, 80, 0), Marked, "web_p", "web", 34 << 2, qos.FirstClass + 1},
		{"web from server", pkt("10.1.2.3", "192.168.0.1", 6, 80, 5000, 0), Marked, "web_p", "web", 34 << 2, qos.FirstClass + 1},
		{"web wrong side", pkt("10.1.2.3", "192.168.0.1", 6, 5000, 80, 0), Unmatched, "", "", 0, 0},
		{"ftp beats web", pkt("10.1.2.3", "192.168.0.1", 6, 20, 80, 0), Marked, "ftp_p", "ftp_f", 10 << 2, 0},
		{"ef wins, no rewrite", pkt("10.1.2.3", "192.168.0.1", 6, 20, 80, 46<<2), Matched, "keep_ef", "ef_only", 46 << 2, 0},
		{"udp", pkt("1.2.3.4", "5.6.7.8", 17, 1, 2, 0), Marked, "bulk", "any_udp", 8 << 2, qos.FirstClass + 2},
		{"udp already 8", pkt("1.2.3.4", "5.6.7.8", 17, 1, 2, 8<<2), Matched, "bulk", "any_udp", 8 << 2, qos.FirstClass + 2},
		{"v6 range", pkt("2001:db8::9999", "2001:db8::20", 6, 1, 2, 9<<2|1), Marked, "bulk", "v6", 8<<2 | 1, qos.FirstClass + 2},
		{"v6 dscp below", pkt("2001:db8::9999", "2001:db8::20", 6, 1, 2, 7<<2), Unmatched, "", "", 7 << 2, 0},
		{"v6 out of range", pkt("2001:db8::9999", "2001:db8::100", 6, 1, 2, 9<<2), Unmatched, "", "", 9 << 2, 0},
		{"icmp", pkt("1.2.3.4", "5.6.7.8", 1, 0, 0, 0), Unmatched, "", "", 0, 0},
		{"not ip", []byte{0x12, 0x34}, Unmatched, "", "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine(rs)
			orig := append([]byte(nil), tc.pkt...)
			r := e.Process(0, tc.pkt, nil)
			if r.Action != tc.action {
				t.Fatalf("action: got %v, want %v", r.Action, tc.action)
			}
			if tc.action == Unmatched {
				if !bytes.Equal(orig, tc.pkt) {
					t.Errorf("unmatched packet changed:\n got %x\nwant %x", tc.pkt, orig)
				}
				return
			}
			a := rs.Adapters[0]
			if got := a.Policies[r.Policy].Name; got != tc.policy {
				t.Errorf("policy: got %s, want %s", got, tc.policy)
			}
			if got := a.Filters[r.Filter].Name; got != tc.filter {
				t.Errorf("filter: got %s, want %s", got, tc.filter)
			}
			if got, _ := TrafficClass(tc.pkt); got != tc.newTC || r.NewTC != tc.newTC {
				t.Errorf("traffic class: got %#x (result %#x), want %#x", got, r.NewTC, tc.newTC)
			}
			checkHeader(t, orig, tc.pkt)
			if want := uint32(0); tc.priorityMin == 0 && r.Priority != want {
				t.Errorf("priority: got %#x, want %#x", r.Priority, want)
			} else if tc.priorityMin != 0 && r.Priority != qos.HTBMajor<<16|uint32(tc.priorityMin) {
				t.Errorf("priority: got %#x, want 1:%x", r.Priority, tc.priorityMin)
			}
			st := e.Stats()[0]
			for _, p := range st.Policies {
				want := uint64(0)
				if p.Name == tc.policy {
					want = 1
				}
				if p.Packets != want || p.Bytes != want*uint64(len(tc.pkt)) {
					t.Errorf("policy %s counters: got %d pkts %d bytes, want %d pkts", p.Name, p.Packets, p.Bytes, want)
				}
			}
		})
	}
}

// checkHeader verifies a marked packet against the original: only the
// DSCP bits (and the IPv4 checksum) may differ, and the IPv4 checksum must
// equal a from-scratch recomputation.
func checkHeader(t *testing.T, orig, marked []byte) {
	t.Helper()
	if len(orig) != len(marked) {
		t.Fatalf("length changed")
	}
	diff := 0
	for i := range orig {
		if orig[i] != marked[i] {
			diff++
			var allowed bool
			if orig[0]>>4 == 4 {
				allowed = i == 1 || i == 10 || i == 11
			} else {
				allowed = i == 0 || i == 1
			}
			if !allowed {
				t.Errorf("byte %d changed: %#x -> %#x", i, orig[i], marked[i])
			}
		}
	}
	otc, _ := TrafficClass(orig)
	ntc, _ := TrafficClass(marked)
	if otc&3 != ntc&3 {
		t.Errorf("ECN bits changed: %#x -> %#x", otc, ntc)
	}
	if marked[0]>>4 == 6 && marked[1]&0x0f != orig[1]&0x0f {
		t.Errorf("flow label changed")
	}
	if marked[0]>>4 == 4 {
		got := binary.BigEndian.Uint16(marked[10:])
		if want := IPv4HeaderChecksum(marked); got != want {
			t.Errorf("IPv4 checksum: got %#04x, want %#04x (recomputed)", got, want)
		}
		if Checksum(marked[:20]) != 0 {
			t.Errorf("IPv4 header does not verify")
		}
	}
}

func TestChecksumUpdateExhaustiveTOS(t *testing.T) {
	// Every TOS transition on headers with several checksum starting
	// points, including ones that land on the 0x0000/0xffff edge.
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 20; n++ {
		h := pkt("10.0.0.1", "10.0.0.2", 6, 1, 2, 0)[:20]
		binary.BigEndian.PutUint16(h[4:], uint16(r.Uint32()))
		binary.BigEndian.PutUint32(h[12:], r.Uint32())
		binary.BigEndian.PutUint32(h[16:], r.Uint32())
		for tos := 0; tos < 256; tos++ {
			h[1] = uint8(tos)
			binary.BigEndian.PutUint16(h[10:], IPv4HeaderChecksum(h))
			for d := uint8(0); d < 64; d++ {
				m := append([]byte(nil), h...)
				SetDSCP(m, d)
				if got, want := binary.BigEndian.Uint16(m[10:]), IPv4HeaderChecksum(m); got != want {
					t.Fatalf("tos %#x -> dscp %d: checksum got %#04x, want %#04x", tos, d, got, want)
				}
				if m[1] != d<<2|uint8(tos)&3 {
					t.Fatalf("tos %#x -> dscp %d: got tos %#x", tos, d, m[1])
				}
			}
		}
	}
}

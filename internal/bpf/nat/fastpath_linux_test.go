//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"sluice/internal/packet/packettest"
)

// TestPrivilegedFastPath runs one sequence of packets through the
// programs as loaded in use and through programs with the fast path
// off, and requires the same verdicts and the same bytes out for every
// packet, the fast path taken for exactly the packets it is meant for
// (established TCP and UDP: IPv4 without options or fragments, IPv6
// without extension headers; an MSS-clamped session's SYNs excepted),
// and the same session listing, per-session packet counts and translated
// counters, also after the sessions are flushed (the fast entries' counts
// are kept when they go).
func TestPrivilegedFastPath(t *testing.T) {
	fast, slow := newHarnessStage(t, 0), newHarnessStage(t, stOff)
	const rules = "map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp/udp auto mssclamp 1200\n" +
		"rdr nic0 1.1.1.1/32 port 8080 -> 10.0.0.9 port 80 tcp\n" +
		"map nic0 fd00::/64 -> 2001:db8::1/128 portmap tcp/udp 20000:20010\n"
	for _, h := range []*harness{fast, slow} {
		if err := h.do(func() error { _, err := h.load(rules); return err }); err != nil {
			t.Fatal(err)
		}
	}
	mss := []byte{2, 4, 0x05, 0xb4} // MSS 1460
	tcp := func(src, dst string, sp, dp uint16, flags uint8, opts []byte, ipopts []byte, fragoff uint16) []byte {
		return packettest.V4{Src: src, Dst: dst, Proto: 6, TTL: 64, ID: 7, FlagsOff: fragoff, Options: ipopts,
			Payload: packettest.TCP{SrcPort: sp, DstPort: dp, Seq: 100, Ack: 200, Flags: flags, Win: 8192,
				Options: opts, Data: []byte("payload")}.Bytes()}.Bytes()
	}
	udp := func(src, dst string, sp, dp uint16, noSum bool) []byte {
		return packettest.V4{Src: src, Dst: dst, Proto: 17, TTL: 64,
			Payload: packettest.UDP(sp, dp, []byte("datagram"), noSum)}.Bytes()
	}
	tcp6 := func(src, dst string, sp, dp uint16, flags uint8, ext []byte) []byte {
		next := uint8(6)
		if ext != nil {
			next = 60
		}
		return packettest.V6{Src: src, Dst: dst, Next: next, HopLimit: 64, L4Off: len(ext), L4Proto: 6,
			Payload: packettest.Cat(ext, packettest.TCP{SrcPort: sp, DstPort: dp, Seq: 100, Ack: 200, Flags: flags, Win: 8192,
				Data: []byte("payload")}.Bytes())}.Bytes()
	}
	udp6 := func(src, dst string, sp, dp uint16, data string) []byte {
		return packettest.V6{Src: src, Dst: dst, Next: 17, HopLimit: 64, L4Proto: 17,
			Payload: packettest.UDP(sp, dp, []byte(data), false)}.Bytes()
	}
	// the ports the map gives (ipftest's sequence: the same in both)
	var mapped, mappedUDP, mapped6, mappedUDP6 uint16
	steps := []struct {
		name     string
		out      bool
		pkt      func() []byte
		wantFast bool
	}{
		{"syn", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1000, 80, 0x02, mss, nil, 0) }, false},
		{"syn-ack (clamped)", false, func() []byte { return tcp("2.2.2.2", "1.1.1.1", 80, mapped, 0x12, mss, nil, 0) }, false},
		{"ack", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1000, 80, 0x10, nil, nil, 0) }, true},
		{"data", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1000, 80, 0x18, nil, nil, 0) }, true},
		{"reply", false, func() []byte { return tcp("2.2.2.2", "1.1.1.1", 80, mapped, 0x18, nil, nil, 0) }, true},
		{"syn again (clamped)", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1000, 80, 0x02, mss, nil, 0) }, false},
		{"ip options", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1000, 80, 0x10, nil, []byte{1, 1, 1, 0}, 0) }, false},
		{"first fragment", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1000, 80, 0x10, nil, nil, 0x2000) }, false},
		{"fin", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1000, 80, 0x11, nil, nil, 0) }, true},
		{"udp", true, func() []byte { return udp("10.0.0.2", "2.2.2.2", 5000, 53, false) }, false},
		{"udp again", true, func() []byte { return udp("10.0.0.2", "2.2.2.2", 5000, 53, false) }, true},
		{"udp reply", false, func() []byte { return udp("2.2.2.2", "1.1.1.1", 53, mappedUDP, false) }, true},
		{"udp no checksum", true, func() []byte { return udp("10.0.0.2", "2.2.2.2", 5000, 53, true) }, true},
		{"rdr syn", false, func() []byte { return tcp("3.3.3.3", "1.1.1.1", 5555, 8080, 0x02, nil, nil, 0) }, false},
		{"rdr ack", false, func() []byte { return tcp("3.3.3.3", "1.1.1.1", 5555, 8080, 0x10, nil, nil, 0) }, true},
		{"rdr reply", true, func() []byte { return tcp("10.0.0.9", "3.3.3.3", 80, 5555, 0x18, nil, nil, 0) }, true},
		{"icmp echo", true, func() []byte {
			return packettest.V4{Src: "10.0.0.3", Dst: "2.2.2.2", Proto: 1, TTL: 64, Payload: packettest.ICMP(8, 0, 0x12340001, nil)}.Bytes()
		}, false},
		{"no session", false, func() []byte { return tcp("4.4.4.4", "1.1.1.1", 80, 999, 0x10, nil, nil, 0) }, false},
		{"v6 syn", true, func() []byte { return tcp6("fd00::1", "2001:db8:9::9", 1000, 80, 0x02, nil) }, false},
		{"v6 ack", true, func() []byte { return tcp6("fd00::1", "2001:db8:9::9", 1000, 80, 0x10, nil) }, true},
		{"v6 reply", false, func() []byte { return tcp6("2001:db8:9::9", "2001:db8::1", 80, mapped6, 0x18, nil) }, true},
		{"v6 extension header", true, func() []byte { return tcp6("fd00::1", "2001:db8:9::9", 1000, 80, 0x10, packettest.Ext(6, 0)) }, false},
		{"v6 udp", true, func() []byte { return udp6("fd00::2", "2001:db8:9::9", 5000, 53, "datagram") }, false},
		{"v6 udp again", true, func() []byte { return udp6("fd00::2", "2001:db8:9::9", 5000, 53, "d") }, true},
		{"v6 udp reply", false, func() []byte { return udp6("2001:db8:9::9", "2001:db8::1", 53, mappedUDP6, "reply") }, true},
		{"v6 fin", true, func() []byte { return tcp6("fd00::1", "2001:db8:9::9", 1000, 80, 0x11, nil) }, true},
	}
	fastCount := func() uint64 {
		st, err := fast.d.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st.Side[0].Fast + st.Side[1].Fast
	}
	for _, s := range steps {
		pkt := s.pkt()
		before := fastCount()
		vs, outs := runPair(t, s.name, s.out, pkt, [2]*harness{fast, slow})
		if vs[0] != vs[1] || !bytes.Equal(outs[0], outs[1]) {
			t.Errorf("%s: fast path %d %x, without %d %x", s.name, vs[0], outs[0], vs[1], outs[1])
		}
		if got := fastCount() - before; got != map[bool]uint64{true: 1}[s.wantFast] {
			t.Errorf("%s: %d packets by the fast path, want %v", s.name, got, s.wantFast)
		}
		switch s.name {
		case "syn":
			mapped = binary.BigEndian.Uint16(outs[0][20:])
		case "udp":
			mappedUDP = binary.BigEndian.Uint16(outs[0][20:])
		case "v6 syn":
			mapped6 = binary.BigEndian.Uint16(outs[0][40:])
		case "v6 udp":
			mappedUDP6 = binary.BigEndian.Uint16(outs[0][40:])
		}
	}
	compare := func(when string) {
		t.Helper()
		sessions, st := readPair(t, [2]*harness{fast, slow})
		var lists, pkts [2]string
		for i, ss := range sessions {
			lists[i] = sessionList(ss)
			for _, s := range ss {
				pkts[i] += fmt.Sprintf("%d/%d %d/%d flags %x/%x\n", s.Pkts[0], s.Pkts[1], s.Bytes[0], s.Bytes[1], s.TCPFlags[0], s.TCPFlags[1])
			}
		}
		if lists[0] != lists[1] || pkts[0] != pkts[1] {
			t.Errorf("%s: sessions with the fast path:\n%s%s\nwithout:\n%s%s", when, lists[0], pkts[0], lists[1], pkts[1])
		}
		for side := range 2 {
			if a, b := st[0].Side[side].Translated, st[1].Side[side].Translated; a != b {
				t.Errorf("%s: side %d: %d translated with the fast path, %d without", when, side, a, b)
			}
		}
	}
	compare("established")
	for _, h := range []*harness{fast, slow} {
		if _, err := h.d.FlushSessions(); err != nil {
			t.Fatal(err)
		}
	}
	compare("flushed")
	var fk natNatFkey
	var fv natNatFast4
	if fast.d.objs.Fast4.Iterate().Next(&fk, &fv) {
		t.Errorf("a fast entry outlived its session: %+v", fk)
	}
	var k6 natNatKey
	var f6 natNatFast6
	if fast.d.objs.Fast6.Iterate().Next(&k6, &f6) {
		t.Errorf("an IPv6 fast entry outlived its session: %+v", k6)
	}
}

// TestPrivilegedMissShortcut runs packets through the programs as loaded
// in use and through programs without the fast path's miss shortcut
// (fast_miss: a TCP/UDP packet no session knows, whose direction has no
// rule, is left alone without the whole way), and requires the same
// verdicts and bytes, the same sessions and the same counters. The rules
// are all map rules, so inbound packets no session knows take the
// shortcut, and a proxy's session (which has no fast entry) must still be
// found by its replies.
func TestPrivilegedMissShortcut(t *testing.T) {
	short, whole := newHarnessStage(t, 0), newHarnessStage(t, stNoShort)
	const rules = "map nic0 10.0.0.0/24 -> 1.1.1.1/32 proxy port ftp ftp/tcp\n" +
		"map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp/udp auto\n" +
		"map nic0 fd00::/64 -> 2001:db8::1/128 portmap tcp/udp 20000:20010\n"
	for _, h := range []*harness{short, whole} {
		if err := h.do(func() error { _, err := h.load(rules); return err }); err != nil {
			t.Fatal(err)
		}
	}
	tcp := func(src, dst string, sp, dp uint16, flags uint8) []byte {
		return packettest.V4{Src: src, Dst: dst, Proto: 6, TTL: 64,
			Payload: packettest.TCP{SrcPort: sp, DstPort: dp, Seq: 100, Ack: 200, Flags: flags, Win: 8192}.Bytes()}.Bytes()
	}
	udp := func(src, dst string, sp, dp uint16) []byte {
		return packettest.V4{Src: src, Dst: dst, Proto: 17, TTL: 64, Payload: packettest.UDP(sp, dp, []byte("datagram"), false)}.Bytes()
	}
	tcp6 := func(src, dst string, sp, dp uint16, flags uint8) []byte {
		return packettest.V6{Src: src, Dst: dst, Next: 6, HopLimit: 64, L4Proto: 6,
			Payload: packettest.TCP{SrcPort: sp, DstPort: dp, Seq: 100, Ack: 200, Flags: flags, Win: 8192}.Bytes()}.Bytes()
	}
	var mapped, mappedFTP uint16
	steps := []struct {
		name string
		out  bool
		pkt  func() []byte
	}{
		{"in, no session", false, func() []byte { return tcp("4.4.4.4", "1.1.1.1", 80, 999, 0x10) }},
		{"in udp, no session", false, func() []byte { return udp("4.4.4.4", "1.1.1.1", 53, 999) }},
		{"in v6, no session", false, func() []byte { return tcp6("2001:db8:9::9", "2001:db8::1", 80, 999, 0x10) }},
		{"syn", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1000, 80, 0x02) }},
		{"reply", false, func() []byte { return tcp("2.2.2.2", "1.1.1.1", 80, mapped, 0x12) }},
		{"ftp syn", true, func() []byte { return tcp("10.0.0.1", "2.2.2.2", 1001, 21, 0x02) }},
		{"ftp reply (no fast entry)", false, func() []byte { return tcp("2.2.2.2", "1.1.1.1", 21, mappedFTP, 0x12) }},
		{"in, another host to the mapped port", false, func() []byte { return tcp("5.5.5.5", "1.1.1.1", 80, mapped, 0x10) }},
	}
	for _, s := range steps {
		pkt := s.pkt()
		vs, outs := runPair(t, s.name, s.out, pkt, [2]*harness{short, whole})
		if vs[0] != vs[1] || !bytes.Equal(outs[0], outs[1]) {
			t.Errorf("%s: with the shortcut %d %x, without %d %x", s.name, vs[0], outs[0], vs[1], outs[1])
		}
		// the session table is looked at by the shortcut only once an
		// entry without a fast twin exists: the ftp proxy's
		if nt := short.d.cfg(cfgNoTwin); (nt != 0) != (s.name == "ftp syn" || s.name == "ftp reply (no fast entry)" ||
			s.name == "in, another host to the mapped port") {
			t.Errorf("%s: no-twin note %d", s.name, nt)
		}
		switch s.name {
		case "syn":
			mapped = binary.BigEndian.Uint16(outs[0][20:])
		case "ftp syn":
			mappedFTP = binary.BigEndian.Uint16(outs[0][20:])
		case "ftp reply (no fast entry)":
			if bytes.Equal(outs[0], pkt) {
				t.Errorf("%s: left alone", s.name)
			}
		}
	}
	sessions, st := readPair(t, [2]*harness{short, whole})
	lists := [2]string{sessionList(sessions[0]), sessionList(sessions[1])}
	if lists[0] != lists[1] {
		t.Errorf("sessions with the shortcut:\n%s\nwithout:\n%s", lists[0], lists[1])
	}
	for side := range 2 {
		a, b := st[0].Side[side], st[1].Side[side]
		a.Fast, b.Fast = 0, 0
		if a != b {
			t.Errorf("side %d counters with the shortcut %+v, without %+v", side, a, b)
		}
	}
	if st[0].Side[dirIn].Miss < 4 || st[0].Side[dirIn].Ignored < 4 {
		t.Errorf("inbound misses %d, ignored %d: want at least 4 each", st[0].Side[dirIn].Miss, st[0].Side[dirIn].Ignored)
	}
}

// runPair sends one packet through a program and the baseline it is
// compared with (each in its own harness) and returns both verdicts and
// packets.
func runPair(t *testing.T, name string, out bool, pkt []byte, hs [2]*harness) (vs [2]int32, outs [2][]byte) {
	t.Helper()
	for i, h := range hs {
		if err := h.do(func() error {
			var err error
			vs[i], outs[i], err = h.run(out, "nic0", append([]byte(nil), pkt...))
			return err
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return vs, outs
}

// readPair reads the sessions and statistics of both harnesses of a
// comparison.
func readPair(t *testing.T, hs [2]*harness) (sessions [2][]Session, st [2]Stats) {
	t.Helper()
	for i, h := range hs {
		var err error
		if sessions[i], err = h.d.Sessions(); err != nil {
			t.Fatal(err)
		}
		if st[i], err = h.d.Stats(); err != nil {
			t.Fatal(err)
		}
	}
	return sessions, st
}

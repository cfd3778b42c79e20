package ipftext

import (
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	"sluice/internal/packet"
)

func readAll(t *testing.T, r Reader) ([]Record, []error) {
	t.Helper()
	var recs []Record
	var errs []error
	for {
		buf := make([]byte, 4096)
		rec, err := r.Next(buf)
		if err == io.EOF {
			return recs, errs
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Next: %v", err)
			}
			errs = append(errs, err)
			continue
		}
		recs = append(recs, rec)
	}
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

func TestTextReaderTCP(t *testing.T) {
	r := NewTextReader(strings.NewReader("# comment\n\nin on nic0=10.0.0.1 tcp 1.1.1.1,1025 2.2.2.2,smtp SA seq=5 ack=7\n"))
	recs, errs := readAll(t, r)
	if len(errs) != 0 || len(recs) != 1 {
		t.Fatalf("got %d records, errors %v", len(recs), errs)
	}
	rec := recs[0]
	if rec.Out || rec.Iface != "nic0" || rec.IfaceAddr != netip.MustParseAddr("10.0.0.1") || rec.Line != 3 {
		t.Errorf("record: %+v", rec)
	}
	// IPv4 TTL 63, id 0, ip_len 40; TCP doff 5, flags SA, window 4096.
	want := "45000028000000003f06" + "xxxx" + "01010101020202020401001900000005000000075012" + "1000" + "xxxx" + "0000"
	got := hexOf(rec.Packet)
	if len(got) != len(want) || got[:20] != want[:20] || got[24:68] != want[24:68] || got[68:72] != "1000" || got[76:] != "0000" {
		t.Errorf("packet:\n got %s\nwant %s", got, want)
	}
	var in packet.Info
	if err := in.Parse(rec.Packet, packet.ParseOptions{VerifyChecksums: true}); err != nil || in.Flags&packet.FlagBad != 0 {
		t.Errorf("built packet does not verify: %v flags %#x", err, uint32(in.Flags))
	}
}

func TestTextReaderForms(t *testing.T) {
	input := strings.Join([]string{
		"out udp 1.1.1.1,53 2.2.2.2,1024",
		"in icmp 1.1.1.1 2.1.1.1 unreach,3",
		"in icmp 1.1.1.1 2.1.1.1 echo",
		"in 41 any 2.2.2.2",
		"in 1.1.1.1 2.2.2.2 opt lsrr,ssrr",
		"in tcp 1.1.1.1,1 2.2.2.2,2 U",
		"nic nic0 nic1",
		"xyz tcp 1.1.1.1,1 2.2.2.2,2",
		"in tcp 1.1.1.1 2.2.2.2,2",
		"in6 on nic1 tcp 2001:db8::1,1 2001:db8::2,80 S",
		"out6 icmpv6 ::1 ::2 echo",
		"in6 ::1 ::2",
		"in localhost test.host.dots",
	}, "\n") + "\n"
	r := NewTextReader(strings.NewReader(input))
	r.EchoID = 0x4242
	recs, errs := readAll(t, r)
	if len(errs) != 2 {
		t.Errorf("want 2 syntax errors (bad direction, missing port), got %v", errs)
	}
	if len(recs) != 11 {
		t.Fatalf("got %d records, want 11", len(recs))
	}
	check := func(k int, wantHex string) {
		t.Helper()
		if got := hexOf(recs[k].Packet); got != wantHex {
			t.Errorf("record %d:\n got %s\nwant %s", k, got, wantHex)
		}
	}
	// UDP: ip_len 28, the UDP length field stays 0 as in ipftest.
	if !recs[0].Out || len(recs[0].Packet) != 28 || recs[0].Packet[9] != 17 || hexOf(recs[0].Packet[20:26]) != "003504000000" {
		t.Errorf("udp record: out=%v % x", recs[0].Out, recs[0].Packet)
	}
	// ICMP: ip_len 48 (20 + 28), type 3 code 3.
	if len(recs[1].Packet) != 48 || recs[1].Packet[20] != 3 || recs[1].Packet[21] != 3 {
		t.Errorf("icmp record: % x", recs[1].Packet)
	}
	if recs[2].Packet[20] != 8 || recs[2].Packet[24] != 0x42 || recs[2].Packet[25] != 0x42 {
		t.Errorf("echo record: % x", recs[2].Packet)
	}
	check(3, "45000014000000003f29"+hexOf(recs[3].Packet[10:12])+"0000000002020202")
	// Options: lsrr(7)+NOP, ssrr(7)+NOP, NOP NOP NOP EOL: 20 bytes.
	if got := hexOf(recs[4].Packet[:40]); got[:4] != "4a00" || got[40:] != "8307040000000001"+"8907040000000001"+"010101"+"00" {
		t.Errorf("options record: %s", got)
	}
	var in packet.Info
	if err := in.Parse(recs[4].Packet, packet.ParseOptions{VerifyChecksums: true}); err != nil ||
		in.OptMask != packet.OptLSRR|packet.OptSSRR {
		t.Errorf("options parse: %v optmask %#x", err, in.OptMask)
	}
	if recs[5].Packet[33] != packet.TCPFlagUrg || recs[5].Packet[39] != 1 {
		t.Errorf("URG sets urp=1: % x", recs[5].Packet[20:])
	}
	if got := recs[6].NICs; len(got) != 2 || got[0] != "nic0" || recs[6].Packet != nil {
		t.Errorf("nic record: %+v", recs[6])
	}
	v6 := recs[7].Packet
	if len(v6) != 60 || v6[0] != 0x60 || v6[6] != 6 || v6[7] != 0 || recs[7].Iface != "nic1" {
		t.Errorf("v6 tcp record: % x", v6)
	}
	if err := in.Parse(v6, packet.ParseOptions{VerifyChecksums: true}); err != nil || in.Flags&packet.FlagBad != 0 {
		t.Errorf("v6 tcp checksum: %v %#x", err, uint32(in.Flags))
	}
	if p := recs[8].Packet; len(p) != 128 || p[6] != 58 || p[40] != 128 || !recs[8].Out {
		t.Errorf("icmpv6 record: len %d", len(p))
	}
	if p := recs[9].Packet; len(p) != 41 || p[6] != 41 || p[5] != 1 {
		t.Errorf("v6 default record: % x", p)
	}
	if got := hexOf(recs[10].Packet[12:20]); got != "7f000001fedcba98" {
		t.Errorf("host names: %s", got)
	}
}

func TestHexReader(t *testing.T) {
	input := "# leading comment\n" +
		"[out,nic0=192.168.1.188  ] 4500 0014\n" +
		"0000 0000 3f00 0000 0a00 0001 0a00 0002\n" +
		"\n" +
		"[]4500 0014 0000 0000 3f00 0000 0a00 0001 0a00 0002\n" +
		"\n" +
		"[in,e1]x4500 0014 0000 0000 3f00 0000 0a00 0001 0a00 0002 # trailing\n" +
		"\n" +
		"[nic3]+mbcast 45 00 00 14 0 0 0 0 3f 00 00 00 0a 00 00 01 0a 00 00 02\n" +
		"\n" +
		"[in,nic0]+mcast 4500 0014 0000 0000 3f00 0000 0a00 0001 0a00 000\n" +
		"2\n" +
		"\n" +
		"4500 0014 0000 0000 3f00 0000 0a00 0001 0a00 0002\n"
	recs, _ := readAll(t, NewHexReader(strings.NewReader(input)))
	if len(recs) != 5 {
		t.Fatalf("got %d records, want 5 (the last packet has no terminating blank line)", len(recs))
	}
	if !recs[0].Out || recs[0].Iface != "nic0" || recs[0].IfaceAddr != netip.MustParseAddr("192.168.1.188") ||
		hexOf(recs[0].Packet) != "4500001400000000"+"3f0000000a0000010a000002" {
		t.Errorf("record 0: %+v %s", recs[0], hexOf(recs[0].Packet))
	}
	if recs[1].Iface != "" || len(recs[1].Packet) != 20 || recs[1].Packet[0] != 0x45 {
		t.Errorf("record 1 ([] keeps the first digit): %s", hexOf(recs[1].Packet))
	}
	// "[in,e1]x": the character after ']' is always skipped.
	if recs[2].Out || recs[2].Iface != "e1" || len(recs[2].Packet) != 20 {
		t.Errorf("record 2: %+v", recs[2])
	}
	// "+mbcast" is read and marks nothing (IPFilter's ipftest sets no
	// flag the filter sees for it).
	if recs[3].Iface != "nic3" || recs[3].LinkFlags != 0 ||
		hexOf(recs[3].Packet[:8]) != "4500001400000000" {
		t.Errorf("record 3: flags %#x %s", uint32(recs[3].LinkFlags), hexOf(recs[3].Packet))
	}
	// A lone digit at the end of a line is dropped (readhex does not
	// advance past a half byte), and so is the "2" on the next line.
	if got := hexOf(recs[4].Packet); got != "45000014000000003f0000000a0000010a0000" {
		t.Errorf("record 4: %s flags %#x", got, uint32(recs[4].LinkFlags))
	}
	if recs[4].LinkFlags != packet.FlagMulticast|packet.FlagMBCast {
		t.Errorf("record 4 link flags %#x", uint32(recs[4].LinkFlags))
	}
	// An empty line with no data ends the input, as ipftest's read loop does.
	recs, _ = readAll(t, NewHexReader(strings.NewReader("4500\n\n\n4500\n\n")))
	if len(recs) != 1 {
		t.Errorf("double blank line: got %d records, want 1", len(recs))
	}
	if _, err := NewHexReader(strings.NewReader("4500 0014\n\n")).Next(make([]byte, 3)); !errors.Is(err, ErrBufferTooSmall) {
		t.Errorf("small buffer: got %v", err)
	}
}

func TestAppendSummary(t *testing.T) {
	r := NewTextReader(strings.NewReader("out on nic0 tcp 10.1.1.2,1025 10.1.1.1,25 FSRPAUEC\nin udp 1.2.3.4,5 6.7.8.9,10\nin6 tcp 9:9:9::9,10011 3:0:3::3:3,80\n"))
	recs, _ := readAll(t, r)
	got := []string{
		string(AppendSummary(nil, true, "nic0", recs[0].Packet)),
		string(AppendSummary(nil, false, "anon0", recs[1].Packet)),
		string(AppendSummary(nil, false, "nic0", recs[2].Packet)),
	}
	want := []string{
		"> nic0 ip #0 40(20) 6 10.1.1.2,1025 > 10.1.1.1,25 FSRPAUEC",
		"< anon0 ip #0 28(20) 17 1.2.3.4,5 > 6.7.8.9,10",
		"< nic0 ip6/0 20 0 6 9:9:9:0:0:0:0:9,10011 > 3:0:3:0:0:0:3:3,80",
	}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("line %d:\n got %q\nwant %q", k, got[k], want[k])
		}
	}
	frag := append([]byte(nil), recs[1].Packet...)
	frag[6], frag[7] = 0x20, 0x03 // MF, offset 3 (24 bytes)
	if got, want := string(AppendSummary(nil, false, "e0", frag)), "< e0 ip #0 28(20) 17 @65560 1.2.3.4 > 6.7.8.9"; got != want {
		t.Errorf("fragment:\n got %q\nwant %q", got, want)
	}
	if got, want := string(AppendHex(nil, []byte{0x45, 0, 0, 0x14, 0xab})), "4500 0014 ab \n\n"; got != want {
		t.Errorf("hex: got %q, want %q", got, want)
	}
}

func TestInetAddr(t *testing.T) {
	for in, want := range map[string]string{
		"1.2.3.4": "1.2.3.4", "10.1": "10.0.0.1", "127.1.2": "127.1.0.2", "0x7f.1": "127.0.0.1",
		"010.0.0.1": "8.0.0.1", "4294967295": "255.255.255.255", "1.2.3.4 ": "1.2.3.4",
	} {
		a, ok := InetAddr(in)
		if !ok || a.String() != want {
			t.Errorf("InetAddr(%q) = %v, %v; want %s", in, a, ok, want)
		}
	}
	for _, bad := range []string{"", "1.2.3.4.5", "256.1.1.1", "1..2", "a.b.c.d", "1.2.3.4x"} {
		if a, ok := InetAddr(bad); ok {
			t.Errorf("InetAddr(%q) = %v, want failure", bad, a)
		}
	}
}

func FuzzHexReader(f *testing.F) {
	f.Add("[out,nic0=1.2.3.4]+mcast 4500 0014\n0000\n\n")
	f.Add("[]\n45\n\n[in,x]+bcast+mbcast 1 2 3\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := NewHexReader(strings.NewReader(s))
		buf := make([]byte, 64)
		for k := 0; k < 100; k++ {
			rec, err := r.Next(buf)
			if err != nil {
				return
			}
			if len(rec.Packet) == 0 || len(rec.Packet) > len(buf) {
				t.Fatalf("bad packet length %d", len(rec.Packet))
			}
		}
	})
}

func FuzzTextReader(f *testing.F) {
	f.Add("in on nic0 tcp 1.1.1.1,1 2.2.2.2,ftp SAFU seq=1 ack=2 opt lsrr=1.2.3.4,sec-class=secret,ts,rr,nop\n")
	f.Add("out6 icmpv6 ::1 ::2 echo,3\nnic a b\nin 7 1.2.3.4 5.6.7.8\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := NewTextReader(strings.NewReader(s))
		buf := make([]byte, 256)
		for k := 0; k < 100; k++ {
			rec, err := r.Next(buf)
			if err == io.EOF || errors.Is(err, ErrBufferTooSmall) {
				return
			}
			if err != nil {
				continue
			}
			if rec.Packet == nil {
				continue
			}
			var in packet.Info
			// A built packet always has a valid IP header; only a missing
			// transport header (e.g. "in 1 a b": ICMP without one) may fail.
			err = in.Parse(rec.Packet, packet.ParseOptions{VerifyChecksums: true})
			if err != nil && !errors.Is(err, packet.ErrPullup) && rec.Packet[0]>>4 == 4 {
				t.Fatalf("built IPv4 packet does not parse: %v (% x)", err, rec.Packet)
			}
		}
	})
}

// TCP and UDP endpoints need a port, in both address families; the
// message names the protocol and the side.
func TestTextReaderMissingPort(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"in tcp 1.1.1.1 2.2.2.2,80\n", "tcp with no source port"},
		{"in udp 1.1.1.1,53 2.2.2.2\n", "udp with no destination port"},
		{"in6 tcp 1::1 2::2,80\n", "tcp with no source port"},
		{"in6 udp 1::1,53 2::2\n", "udp with no destination port"},
	} {
		_, err := NewTextReader(strings.NewReader(c.in)).Next(make([]byte, 256))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got error %v, want %q", c.in, err, c.want)
		}
	}
	// A TCP source carries the window and data offset ipftest sets.
	rec, err := NewTextReader(strings.NewReader("in tcp 1.1.1.1,1 2.2.2.2,2\n")).Next(make([]byte, 256))
	if err != nil {
		t.Fatal(err)
	}
	if tcp := rec.Packet[20:]; tcp[12] != 5<<4 || tcp[14] != 0x10 || tcp[15] != 0 || tcp[1] != 1 || tcp[3] != 2 {
		t.Errorf("tcp header %x: want ports 1, 2, offset 5, window 4096", tcp[:20])
	}
}

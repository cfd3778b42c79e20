package ipflog_test

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"sluice/internal/ipflog"
	"sluice/internal/packet"
	pt "sluice/internal/packet/packettest"
)

func entry(t *testing.T, pkt []byte, flags uint32) *ipflog.Entry {
	t.Helper()
	in := new(packet.Info)
	if err := in.Parse(pkt, packet.ParseOptions{}); err != nil {
		t.Fatal(err)
	}
	return &ipflog.Entry{Time: time.Unix(0, 0), Iface: "nic0", Rule: 2, Group: "100", Flags: flags,
		Level: ipflog.NoLevel, Info: in, Packet: pkt}
}

func udpPkt(data string) []byte {
	return pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoUDP, Payload: pt.UDP(1, 53, []byte(data), false)}.Bytes()
}

func records(t *testing.T, lg *ipflog.Log) []ipflog.Record {
	t.Helper()
	var b bytes.Buffer
	if _, err := lg.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	rd := ipflog.NewReader(&b)
	var out []ipflog.Record
	for {
		r, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		r.Data = append([]byte(nil), r.Data...)
		out = append(out, r)
	}
}

func TestRoundTrip(t *testing.T) {
	r := ipflog.Record{Type: ipflog.TypeIPF, Seq: 7, Count: 3, Time: time.Unix(1700000000, 123456000),
		Iface: "eth0", Group: "grp", Rule: 4, Flags: ipflog.FRPass | ipflog.FRLog, LFlags: uint32(packet.FlagTCPUDP),
		Out: true, LogTag: 9, NatTag: "nt", Level: 4, Reason: 2, Family: 4, HLen: 3, BodyLen: 2,
		Data: []byte{1, 2, 3, 4, 5}}
	b := r.AppendBinary(nil)
	if len(b)%8 != 0 || len(b) != r.EncodedLen() {
		t.Fatalf("encoded length %d", len(b))
	}
	got, n, err := ipflog.Decode(b)
	if err != nil || n != len(b) {
		t.Fatalf("Decode: %v, n %d", err, n)
	}
	if d := cmp.Diff(r, got, cmpopts.EquateComparable(netip.Addr{})); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	for _, bad := range [][]byte{b[:10], append([]byte{0}, b[1:]...)} {
		if _, _, err := ipflog.Decode(bad); err == nil {
			t.Errorf("Decode accepted corrupt record % x", bad[:8])
		}
	}
}

func TestAppendLengthsAndSuppression(t *testing.T) {
	lg := ipflog.NewDefault()
	p1 := udpPkt("0123456789")
	lg.Append(entry(t, p1, ipflog.FRPass|ipflog.FRLog))
	lg.Append(entry(t, p1, ipflog.FRPass|ipflog.FRLog))                  // merged
	lg.Append(entry(t, p1, ipflog.FRPass|ipflog.FRLog|ipflog.FRLogBody)) // differs: body
	lg.Append(entry(t, udpPkt("x"), ipflog.FRPass|ipflog.FRLog))
	rs := records(t, lg)
	if len(rs) != 3 {
		t.Fatalf("got %d records, want 3", len(rs))
	}
	type short struct {
		Seq, Count    uint32
		HLen, BodyLen int
	}
	var got []short
	for _, r := range rs {
		got = append(got, short{r.Seq, r.Count, r.HLen, r.BodyLen})
	}
	want := []short{{1, 2, 28, 0}, {3, 1, 28, 10}, {4, 1, 28, 0}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
	if !bytes.Equal(rs[1].Data, p1) {
		t.Errorf("log body data % x, want % x", rs[1].Data, p1)
	}

	off := ipflog.New(ipflog.Config{})
	off.Append(entry(t, p1, ipflog.FRPass))
	off.Append(entry(t, p1, ipflog.FRPass))
	if n := len(records(t, off)); n != 2 {
		t.Errorf("suppression off: got %d records, want 2", n)
	}
}

func TestAppendBodyLimitAndDrop(t *testing.T) {
	big := udpPkt(string(make([]byte, 400)))
	lg := ipflog.New(ipflog.Config{Size: 300})
	if !lg.Append(entry(t, big, ipflog.FRPass|ipflog.FRLogBody)) {
		t.Fatal("first record did not fit")
	}
	if lg.Append(entry(t, big, ipflog.FRBlock|ipflog.FRLogBody)) {
		t.Error("second record fitted a full log")
	}
	if lg.Dropped() != 1 {
		t.Errorf("dropped %d, want 1", lg.Dropped())
	}
	rs := records(t, lg)
	if len(rs) != 1 || rs[0].BodyLen != 128 {
		t.Errorf("body length %d, want 128", rs[0].BodyLen)
	}
}

func TestAppendNoAllocs(t *testing.T) {
	lg := ipflog.New(ipflog.Config{Size: 1 << 20})
	e := entry(t, udpPkt("abc"), ipflog.FRPass|ipflog.FRLog)
	lg.Append(e)
	var sink bytes.Buffer
	n := testing.AllocsPerRun(200, func() {
		e.Rule++ // defeat suppression
		lg.Append(e)
		if lg.Len() > 1<<19 {
			lg.Flush()
		}
	})
	_, _ = lg.WriteTo(&sink)
	if n != 0 {
		t.Errorf("Append allocates %v times", n)
	}
}

func TestPrinterFormats(t *testing.T) {
	embeddedUDP := pt.V4{Src: "2.2.2.2", Dst: "9.9.9.9", Proto: packet.ProtoUDP, Payload: pt.UDP(1024, 53, nil, true)}.Bytes()
	icmpErr := pt.V4{Src: "3.3.3.3", Dst: "2.2.2.2", Proto: packet.ProtoICMP, Payload: pt.ICMP(3, 3, 0, embeddedUDP)}.Bytes()
	frag := pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoUDP, ID: 77, FlagsOff: packet.IPv4FlagMoreFragments | 3,
		Payload: make([]byte, 16)}.Bytes()
	shortTCP := pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoTCP, Payload: make([]byte, 10)}.Bytes()
	v6 := pt.V6{Src: "2001:db8::1", Dst: "2001:db8::2", Next: packet.ProtoICMPv6, Payload: pt.ICMP(128, 0, 0, nil),
		L4Proto: packet.ProtoICMPv6}.Bytes()
	tcp := pt.V4{Src: "1.1.1.1", Dst: "2.2.2.2", Proto: packet.ProtoTCP,
		Payload: pt.TCP{SrcPort: 1, DstPort: 2, Seq: 10, Ack: 20, Win: 30, Flags: packet.TCPFlagAck | packet.TCPFlagPsh}.Bytes()}.Bytes()
	cases := []struct {
		name  string
		pkt   []byte
		flags uint32
		opts  ipflog.FormatOptions
		mod   func(*ipflog.Entry)
		want  string
	}{
		{"icmp error", icmpErr, ipflog.FRBlock, ipflog.FormatOptions{}, nil,
			"01/01/1970 00:00:00.000000 nic0 @100:3 b 3.3.3.3 -> 2.2.2.2 PR icmp len 20 56 icmp unreach/port for 2.2.2.2,1024 - 9.9.9.9,53 PR udp len 20 28 IN\n"},
		{"fragment", frag, ipflog.FRPass | ipflog.FRKeepFrag, ipflog.FormatOptions{}, nil,
			"01/01/1970 00:00:00.000000 nic0 @100:3 p 1.1.1.1 -> 2.2.2.2 PR udp len 20 (36) (frag 77:16@24+) K-F IN\n"},
		{"short tcp", shortTCP, ipflog.FRBlock, ipflog.FormatOptions{}, nil,
			"01/01/1970 00:00:00.000000 nic0 @100:3 Sb 1.1.1.1 -> 2.2.2.2 PR tcp len 20 30 IN\n"},
		{"icmpv6", v6, ipflog.FRLog, ipflog.FormatOptions{}, func(e *ipflog.Entry) { e.Out = true; e.LogTag = 5 },
			"01/01/1970 00:00:00.000000 nic0 @100:3 L 2001:db8::1 -> 2001:db8::2 PR icmpv6 len 40 48 icmpv6 echo/0 OUT log-tag 5\n"},
		{"verbose syslog", tcp, ipflog.FRPass, ipflog.FormatOptions{Verbose: true, Syslog: true},
			func(e *ipflog.Entry) { e.Group, e.Rule, e.Reason = "", -1, 14 },
			"00:00:00.000000 nic0 @0:-1 p 1.1.1.1,1 -> 2.2.2.2,2 PR tcp len 20 40 -AP 10 20 30 IN reason:bad-frag\n"},
		{"nomatch", tcp, ipflog.FFLogNoMatch | ipflog.FRNoMatch, ipflog.FormatOptions{Resolve: true},
			func(e *ipflog.Entry) { e.GroupUnset, e.Rule = true, -1 },
			"01/01/1970 00:00:00.000000 nic0 @-1:-1 n 1.1.1.1,1 -> 2.2.2.2,2 PR tcp len 20 40 -AP IN\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lg := ipflog.NewDefault()
			e := entry(t, c.pkt, c.flags)
			if c.mod != nil {
				c.mod(e)
			}
			lg.Append(e)
			rs := records(t, lg)
			c.opts.Location = time.UTC
			p := &ipflog.Printer{Opts: c.opts}
			got := string(p.Append(nil, &rs[0]))
			want := "missed 1 ipf log entries: 0 1\n" + c.want
			if got != want {
				t.Errorf("\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestHexDump(t *testing.T) {
	got := string(ipflog.AppendHexDump(nil, []byte("0123456789abcdefXY")))
	want := "30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66        0123456789abcdef\n" +
		"58 59                                                  XY\n"
	if got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
	// ipmon leaves the last line of a multiple of 16 bytes unterminated.
	got = string(ipflog.AppendHexDump(nil, []byte("0123456789abcdef")))
	if want := "30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66        0123456789abcdef"; got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
}

func FuzzDecode(f *testing.F) {
	r := ipflog.Record{Count: 1, Iface: "x", Data: []byte{0x45, 0, 0, 20}, HLen: 4}
	f.Add(r.AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, n, err := ipflog.Decode(b)
		if err != nil {
			return
		}
		if n > len(b) || n%8 != 0 {
			t.Fatalf("size %d of %d", n, len(b))
		}
		var p ipflog.Printer
		p.Opts.Location = time.UTC
		p.Opts.HexHeader, p.Opts.HexPacket = true, true
		// Append counts sequence numbers: one printer for each decode
		p2 := ipflog.Printer{Opts: p.Opts}
		// must not panic on any decodable record
		line := p.Append(nil, &rec)
		// Decode → encode → decode is a fixed point: ipmon prints what
		// the datapath logged, whatever padding or junk the first
		// encoding carried.
		enc := rec.AppendBinary(nil)
		rec2, n2, err := ipflog.Decode(enc)
		if err != nil || n2 != len(enc) {
			t.Fatalf("re-encoded record: size %d of %d, %v", n2, len(enc), err)
		}
		if enc2 := rec2.AppendBinary(nil); !bytes.Equal(enc2, enc) {
			t.Fatalf("encoding not stable:\n% x\n% x", enc, enc2)
		}
		// (a time of year 1 is the zero time, which encodes as 1970)
		if line2 := p2.Append(nil, &rec2); !rec.Time.IsZero() && !bytes.Equal(line2, line) {
			t.Fatalf("printed differently after a round trip:\n%s\n%s", line, line2)
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	lg := ipflog.New(ipflog.Config{Size: 1 << 22, Suppress: true})
	pkt := udpPkt("0123456789abcdef")
	in := new(packet.Info)
	if err := in.Parse(pkt, packet.ParseOptions{}); err != nil {
		b.Fatal(err)
	}
	e := &ipflog.Entry{Iface: "nic0", Rule: 1, Flags: ipflog.FRPass | ipflog.FRLog, Level: ipflog.NoLevel, Info: in, Packet: pkt}
	b.ReportAllocs()
	for b.Loop() {
		e.Rule ^= 1
		lg.Append(e)
		if lg.Len() > 1<<21 {
			lg.Flush()
		}
	}
}

func BenchmarkPrint(b *testing.B) {
	r := ipflog.Record{Count: 1, Seq: 1, Iface: "nic0", Rule: 0, Flags: ipflog.FRPass, Time: time.Unix(0, 0),
		Data: udpPkt("x"), HLen: 28, BodyLen: 1, Family: 4}
	p := &ipflog.Printer{Opts: ipflog.FormatOptions{Location: time.UTC}}
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		p.Opts.Verbose = false
		dst = p.Append(dst[:0], &r)
	}
}

func TestLogRead(t *testing.T) {
	lg := ipflog.NewDefault()
	lg.Append(entry(t, udpPkt("a"), ipflog.FRPass))
	lg.Append(entry(t, udpPkt("bb"), ipflog.FRPass))
	if _, err := lg.Read(make([]byte, 10)); err != io.ErrShortBuffer {
		t.Errorf("tiny buffer: got %v, want io.ErrShortBuffer", err)
	}
	one := make([]byte, 150) // room for one record (104 bytes) only
	n, err := lg.Read(one)
	if err != nil || n == 0 {
		t.Fatalf("Read: %d, %v", n, err)
	}
	r, _, err := ipflog.Decode(one[:n])
	if err != nil || r.Seq != 1 {
		t.Fatalf("first record: seq %d, %v", r.Seq, err)
	}
	// The second record is still buffered and still merges a duplicate.
	lg.Append(entry(t, udpPkt("bb"), ipflog.FRPass))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	buf := make([]byte, 4096)
	n, err = lg.WaitRead(ctx, buf)
	if err != nil {
		t.Fatal(err)
	}
	r, size, err := ipflog.Decode(buf[:n])
	if err != nil || size != n || r.Seq != 2 || r.Count != 2 {
		t.Errorf("second record: seq %d count %d size %d/%d err %v", r.Seq, r.Count, size, n, err)
	}
	if n, err := lg.Read(buf); n != 0 || err != nil {
		t.Errorf("empty log: %d, %v", n, err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := lg.WaitRead(ctx2, buf); err != context.DeadlineExceeded {
		t.Errorf("WaitRead on empty log: %v", err)
	}
}

func TestStateAndNATRecords(t *testing.T) {
	a := netip.MustParseAddr
	st := ipflog.New(ipflog.Config{})
	nl := ipflog.New(ipflog.Config{})
	t0 := time.Unix(0, 0)
	st.AppendState(t0, &ipflog.StateLog{Event: ipflog.StateNew, Proto: 6, Src: a("1.1.1.1"), Dst: a("2.2.2.2"),
		SrcPort: 1025, DstPort: 25, Tag: 3})
	st.AppendState(t0, &ipflog.StateLog{Event: ipflog.StateExpire, Proto: 6, TCPState: [2]uint8{5, 4},
		Src: a("1.1.1.1"), Dst: a("2.2.2.2"), SrcPort: 1025, DstPort: 25, Pkts: [4]uint64{1, 2, 3, 4}, Bytes: [4]uint64{5, 6, 7, 8}})
	st.AppendState(t0, &ipflog.StateLog{Event: ipflog.StateFlush, Proto: 58, ICMPType: 128, Src: a("2001:db8::1"), Dst: a("2001:db8::2")})
	nl.AppendNAT(t0, &ipflog.NATLog{Action: ipflog.NATNew, Kind: ipflog.NATMap, Rule: 0, Proto: 6,
		OSrc: a("10.1.1.1"), OSrcPort: 1025, NSrc: a("192.168.1.1"), NSrcPort: 40000, ODst: a("8.8.8.8"), ODstPort: 53})
	nl.AppendNAT(t0, &ipflog.NATLog{Action: ipflog.NATExpire, Kind: ipflog.NATRewriteRdr, Rule: 4, Proto: 17,
		OSrc: a("1.1.1.1"), OSrcPort: 1, ODst: a("2.2.2.2"), ODstPort: 2, NSrc: a("3.3.3.3"), NSrcPort: 3,
		NDst: a("4.4.4.4"), NDstPort: 4, Pkts: [2]uint64{9, 10}, Bytes: [2]uint64{11, 12}})
	p := &ipflog.Printer{Opts: ipflog.FormatOptions{Location: time.UTC}}
	var got []byte
	for _, lg := range []*ipflog.Log{st, nl} {
		for _, r := range records(t, lg) {
			got = p.Append(got, &r)
		}
	}
	want := "missed 1 state log entries: 0 1\n" +
		"01/01/1970 00:00:00.000000 STATE:NEW 1.1.1.1,1025 -> 2.2.2.2,25 PR tcp tag 3\n" +
		"01/01/1970 00:00:00.000000 STATE:CLOSE 1.1.1.1,1025 -> 2.2.2.2,25 PR tcp Forward: Pkts in 1 Bytes in 5 Pkts out 2 Bytes out 6 Backward: Pkts in 3 Bytes in 7 Pkts out 4 Bytes out 8\n" +
		"01/01/1970 00:00:00.000000 STATE:FLUSH 2001:db8::1 -> 2001:db8::2 PR icmpv6 128 Forward: Pkts in 0 Bytes in 0 Pkts out 0 Bytes out 0 Backward: Pkts in 0 Bytes in 0 Pkts out 0 Bytes out 0\n" +
		"missed 1 NAT log entries: 0 1\n" +
		"01/01/1970 00:00:00.000000 @1 NAT:NEW-MAP 10.1.1.1,1025 <- -> 192.168.1.1,40000 [8.8.8.8,53] tcp\n" +
		"01/01/1970 00:00:00.000000 @5 NAT:EXPIRE-RWR_RDR 1.1.1.1,1 2.2.2.2,2 <- -> 3.3.3.3,3 4.4.4.4,4 udp Pkts 9/10 Bytes 11/12\n"
	if string(got) != want {
		t.Errorf("\n got:\n%s\nwant:\n%s", got, want)
	}
}

package enginehook

import (
	"encoding/binary"
	"io"
	"net/netip"
	"strings"
	"testing"

	"sluice/internal/engine"
	"sluice/internal/nat"
	"sluice/internal/packet"
	"sluice/internal/packet/packettest"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ipnat"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// tcpPkt builds an IPv4/TCP segment with payload in a buffer with room
// to grow (proxies rewrite commands in place).
func tcpPkt(src, dst string, sport, dport uint16, flags uint8, seq, ack uint32, payload string) []byte {
	tcp := packettest.TCP{SrcPort: sport, DstPort: dport, Seq: seq, Ack: ack, Flags: flags, Win: 8192, Data: []byte(payload)}
	b := packettest.V4{Src: src, Dst: dst, Proto: 6, Payload: tcp.Bytes()}.Bytes()
	return append(make([]byte, 0, len(b)+128), b...)
}

// rig is an engine with NAT and proxy state, as ipftest wires them.
type rig struct {
	e *engine.Engine
	n *nat.NAT
	p engine.Packet
}

func newRig(t testing.TB, ipfRules, natRules string) *rig {
	t.Helper()
	rs, err := ipf.Parse("ipf", []byte(ipfRules), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := ruleset.Compile(rs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ipnat.Parse("nat", natRules, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{}
	r.e = engine.New(engine.Config{Clock: &state.ManualClock{}})
	r.e.Sets().Store(0, set)
	r.n, err = nat.New(f, nat.Config{AddState: StateAdder(r.e)})
	if err != nil {
		t.Fatal(err)
	}
	r.e.SetNAT(Hook{NAT: r.n})
	t.Cleanup(r.e.Close)
	return r
}

// send runs data through the engine on le0 and returns the verdict and
// the packet as it leaves.
func (r *rig) send(data []byte, out bool) (engine.Verdict, []byte) {
	r.p.Load(data, "le0", out, 0)
	res := r.e.Check(&r.p)
	return res.Verdict, r.p.Data
}

func tcpFields(b []byte) (src, dst netip.Addr, sport, dport uint16, seq, ack uint32, payload string) {
	h := packet.IPv4(b)
	t := b[h.HeaderLength():h.TotalLength()]
	return h.SourceAddress(), h.DestinationAddress(), binary.BigEndian.Uint16(t), binary.BigEndian.Uint16(t[2:]),
		binary.BigEndian.Uint32(t[4:]), binary.BigEndian.Uint32(t[8:]), string(t[int(t[12]>>4)*4:])
}

func checksumsOK(t *testing.T, b []byte) {
	t.Helper()
	var info packet.Info
	if err := info.Parse(b, packet.ParseOptions{VerifyChecksums: true}); err != nil || info.Flags&packet.FlagBad != 0 {
		t.Errorf("packet %x: checksums not valid (err %v, flags %#x)", b, err, info.Flags)
	}
}

// An established NAT session through the engine (state hit, NAT both
// ways) must not allocate.
func TestEstablishedNATAllocs(t *testing.T) {
	r := newRig(t, "pass out quick on le0 proto tcp all flags S keep state\nblock in all\n",
		"map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp 20000:30000 sequential\n")
	if v, _ := r.send(tcpPkt("10.1.1.1", "203.0.113.5", 1234, 80, packet.TCPFlagSyn, 100, 0, ""), true); v != engine.VerdictPass {
		t.Fatalf("SYN: got %v, want pass", v)
	}
	if v, _ := r.send(tcpPkt("203.0.113.5", "198.51.100.1", 80, 20000, packet.TCPFlagSyn|packet.TCPFlagAck, 500, 101, ""), false); v != engine.VerdictPass {
		t.Fatalf("SYN-ACK: got %v, want pass", v)
	}
	outPkt := tcpPkt("10.1.1.1", "203.0.113.5", 1234, 80, packet.TCPFlagAck, 101, 501, "")
	inPkt := tcpPkt("203.0.113.5", "198.51.100.1", 80, 20000, packet.TCPFlagAck, 501, 101, "")
	p, q := make([]byte, len(outPkt), cap(outPkt)), make([]byte, len(inPkt), cap(inPkt))
	allocs := testing.AllocsPerRun(500, func() {
		copy(p, outPkt)
		copy(q, inPkt)
		if v, b := r.send(p, true); v != engine.VerdictPass || packet.IPv4(b).SourceAddress() != netip.MustParseAddr("198.51.100.1") {
			t.Fatalf("out: got %v %x", v, b)
		}
		if v, b := r.send(q, false); v != engine.VerdictPass || packet.IPv4(b).DestinationAddress() != netip.MustParseAddr("10.1.1.1") {
			t.Fatalf("in: got %v %x", v, b)
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocs per established packet pair through engine+NAT, want 0", allocs)
	}
}

func BenchmarkEngineNATEstablished(b *testing.B) {
	r := newRig(b, "pass out quick on le0 proto tcp all flags S keep state\nblock in all\n",
		"map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp 20000:30000 sequential\n")
	r.send(tcpPkt("10.1.1.1", "203.0.113.5", 1234, 80, packet.TCPFlagSyn, 100, 0, ""), true)
	r.send(tcpPkt("203.0.113.5", "198.51.100.1", 80, 20000, packet.TCPFlagSyn|packet.TCPFlagAck, 500, 101, ""), false)
	outPkt := tcpPkt("10.1.1.1", "203.0.113.5", 1234, 80, packet.TCPFlagAck, 101, 501, "")
	p := make([]byte, len(outPkt), cap(outPkt))
	b.ReportAllocs()
	b.SetBytes(int64(len(outPkt)))
	for b.Loop() {
		copy(p, outPkt)
		r.send(p, true)
	}
}

// FTP active mode through a map: the PORT command gets the mapped
// address, later sequence/ack numbers are shifted by the length change,
// and the server's data connection (any source port) is translated and
// passed by the state entry the proxy made.
func TestFTPPortThroughEngine(t *testing.T) {
	r := newRig(t, "pass out quick on le0 proto tcp from any to any port = 21 flags S keep state\nblock in all\nblock out all\n",
		"map le0 192.168.1.0/24 -> 1.1.1.1/32 proxy port ftp ftp/tcp\n")
	const cli, srv, pub = "192.168.1.3", "150.203.224.2", "1.1.1.1"
	steps := []struct {
		name           string
		pkt            []byte
		out            bool
		want           engine.Verdict
		seq, ack       uint32
		payload, hosts string
	}{
		{"SYN", tcpPkt(cli, srv, 32818, 21, packet.TCPFlagSyn, 1000, 0, ""), true, engine.VerdictPass, 1000, 0, "", pub + ">" + srv},
		{"SYN-ACK", tcpPkt(srv, pub, 21, 32818, packet.TCPFlagSyn|packet.TCPFlagAck, 5000, 1001, ""), false, engine.VerdictPass, 5000, 1001, "", srv + ">" + cli},
		{"banner", tcpPkt(srv, pub, 21, 32818, packet.TCPFlagAck, 5001, 1001, "220 ready\r\n"), false, engine.VerdictPass, 5001, 1001, "220 ready\r\n", srv + ">" + cli},
		{"USER", tcpPkt(cli, srv, 32818, 21, packet.TCPFlagAck, 1001, 5012, "USER ftp\r\n"), true, engine.VerdictPass, 1001, 5012, "USER ftp\r\n", pub + ">" + srv},
		{"230", tcpPkt(srv, pub, 21, 32818, packet.TCPFlagAck, 5012, 1011, "230 ok\r\n"), false, engine.VerdictPass, 5012, 1011, "230 ok\r\n", srv + ">" + cli},
		// 25 bytes become 21: "PORT 1,1,1,1,128,51\r\n".
		{"PORT", tcpPkt(cli, srv, 32818, 21, packet.TCPFlagAck, 1011, 5020, "PORT 192,168,1,3,128,51\r\n"), true, engine.VerdictPass, 1011, 5020, "PORT 1,1,1,1,128,51\r\n", pub + ">" + srv},
		// The server acks the 21 bytes it got; the client must see 25.
		{"200", tcpPkt(srv, pub, 21, 32818, packet.TCPFlagAck, 5020, 1032, "200 ok\r\n"), false, engine.VerdictPass, 5020, 1036, "200 ok\r\n", srv + ">" + cli},
		{"NLST", tcpPkt(cli, srv, 32818, 21, packet.TCPFlagAck, 1036, 5028, "NLST\r\n"), true, engine.VerdictPass, 1032, 5028, "NLST\r\n", pub + ">" + srv},
		{"data SYN", tcpPkt(srv, pub, 20, 32819, packet.TCPFlagSyn, 9000, 0, ""), false, engine.VerdictPass, 9000, 0, "", srv + ">" + cli},
		{"data SYN-ACK", tcpPkt(cli, srv, 32819, 20, packet.TCPFlagSyn|packet.TCPFlagAck, 7000, 9001, ""), true, engine.VerdictPass, 7000, 9001, "", pub + ">" + srv},
		{"other port blocked", tcpPkt(srv, pub, 20, 32820, packet.TCPFlagSyn, 9000, 0, ""), false, engine.VerdictBlock, 0, 0, "", ""},
	}
	for _, s := range steps {
		v, b := r.send(s.pkt, s.out)
		if v != s.want {
			t.Fatalf("%s: verdict %v, want %v", s.name, v, s.want)
		}
		if s.hosts == "" {
			continue
		}
		src, dst, _, _, seq, ack, pl := tcpFields(b)
		if got := src.String() + ">" + dst.String(); got != s.hosts {
			t.Errorf("%s: addresses %s, want %s", s.name, got, s.hosts)
		}
		if seq != s.seq || ack != s.ack || pl != s.payload {
			t.Errorf("%s: seq %d ack %d payload %q, want %d %d %q", s.name, seq, ack, pl, s.seq, s.ack, s.payload)
		}
		checksumsOK(t, b)
	}
}

// rsh: the client's first data names its stderr port; the server's
// connection back to it (from any port) is translated and admitted.
func TestRcmdThroughEngine(t *testing.T) {
	r := newRig(t, "pass out quick on le0 proto tcp from any to any port = shell flags S keep state\nblock in all\nblock out all\n",
		"map le0 192.168.113.0/24 -> 10.1.1.1/32 proxy port shell rcmd/tcp\n")
	r.send(tcpPkt("192.168.113.3", "10.1.1.4", 1009, 514, packet.TCPFlagSyn, 100, 0, ""), true)
	r.send(tcpPkt("10.1.1.4", "10.1.1.1", 514, 1009, packet.TCPFlagSyn|packet.TCPFlagAck, 500, 101, ""), false)
	back := tcpPkt("10.1.1.4", "10.1.1.1", 1023, 1008, packet.TCPFlagSyn, 900, 0, "")
	if v, _ := r.send(append([]byte(nil), back...), false); v != engine.VerdictBlock {
		t.Fatalf("stderr connection before the port was named: got %v, want block", v)
	}
	if v, _ := r.send(tcpPkt("192.168.113.3", "10.1.1.4", 1009, 514, packet.TCPFlagAck, 101, 501, "1008\x00"), true); v != engine.VerdictPass {
		t.Fatalf("port message: got %v, want pass", v)
	}
	v, b := r.send(back, false)
	if v != engine.VerdictPass {
		t.Fatalf("stderr connection: got %v, want pass", v)
	}
	if _, dst, _, dport, _, _, _ := tcpFields(b); dst != netip.MustParseAddr("192.168.113.3") || dport != 1008 {
		t.Errorf("stderr connection to %v:%d, want 192.168.113.3:1008", dst, dport)
	}
}

// BenchmarkEngineNATEstablishedMTU is BenchmarkEngineNATEstablished with
// a full-size segment, where a second checksum pass after NAT would show.
func BenchmarkEngineNATEstablishedMTU(b *testing.B) {
	r := newRig(b, "pass out quick on le0 proto tcp all flags S keep state\nblock in all\n",
		"map le0 10.0.0.0/8 -> 198.51.100.1/32 portmap tcp 20000:30000 sequential\n")
	r.send(tcpPkt("10.1.1.1", "203.0.113.5", 1234, 80, packet.TCPFlagSyn, 100, 0, ""), true)
	r.send(tcpPkt("203.0.113.5", "198.51.100.1", 80, 20000, packet.TCPFlagSyn|packet.TCPFlagAck, 500, 101, ""), false)
	outPkt := tcpPkt("10.1.1.1", "203.0.113.5", 1234, 80, packet.TCPFlagAck, 101, 501, strings.Repeat("x", 1460))
	p := make([]byte, len(outPkt), cap(outPkt))
	b.ReportAllocs()
	b.SetBytes(int64(len(outPkt)))
	for b.Loop() {
		copy(p, outPkt)
		r.send(p, true)
	}
}

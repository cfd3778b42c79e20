package netperf

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"sluice/internal/netperf/internal/pcaptest"
	"sluice/internal/netperf/proto"
)

func captureMsgs(t *testing.T, name string) []pcaptest.Message {
	t.Helper()
	msgs, err := pcaptest.ReadMessages(filepath.Join(pcaptest.Dir, name+".pcap"), 22865, proto.MsgSize)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestRequestEncodesToCapture builds the request for the captured command
// lines and requires byte equality with what the C netperf sent.
func TestRequestEncodesToCapture(t *testing.T) {
	lo := proto.IPWords(netip.MustParseAddr("127.0.0.1"))
	cases := []struct {
		name        string
		cfg         Config
		lss, lsr    int
		netperfPort int
		dataPorts   []int // per iteration
	}{
		{"tcp_stream", Config{Test: TCPStream, Duration: 2 * time.Second, LocalCPU: true, RemoteCPU: true}, 16384, 131072, 0, []int{0}},
		{"tcp_maerts", Config{Test: TCPMaerts, Duration: 2 * time.Second}, 16384, 131072, 0, []int{0}},
		{"tcp_rr", Config{Test: TCPRR, Duration: 2 * time.Second}, 16384, 131072, 0, []int{0}},
		{"tcp_crr", Config{Test: TCPCRR, Duration: 2 * time.Second}, 16384, 131072, 0xb380, []int{0}},
		{"udp_stream", Config{Test: UDPStream, Duration: 2 * time.Second, SendSize: 1024}, 212992, 212992, 0x91f6, []int{0}},
		{"udp_rr", Config{Test: UDPRR, Duration: 2 * time.Second, LocalCPU: true, RemoteCPU: true}, 212992, 212992, 0xc5ce, []int{0}},
		{"tcp_rr_conf3", Config{Test: TCPRR, Duration: time.Second, ConfMax: 3, ConfMin: 3}, 16384, 131072, 0, []int{0, 0xabc5, 0xabc5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var reqs [][]byte
			for _, m := range captureMsgs(t, c.name) {
				if m.FromClient {
					reqs = append(reqs, m.Data)
				}
			}
			if len(reqs) != len(c.dataPorts) {
				t.Fatalf("got %d captured requests, want %d", len(reqs), len(c.dataPorts))
			}
			k, err := lookupTest(c.cfg.Test)
			if err != nil {
				t.Fatal(err)
			}
			p := resolve(&c.cfg, k, c.lss, c.lsr)
			for it, dp := range c.dataPorts {
				req := buildRequest(&c.cfg, p, proto.FamilyINET, lo, dp, c.netperfPort)
				var m proto.Msg
				req.Encode(&m)
				if !bytes.Equal(m[:], reqs[it]) {
					for off := range m {
						if m[off] != reqs[it][off] {
							t.Fatalf("iteration %d: first difference at offset %#x: got %02x, want %02x", it, off, m[off], reqs[it][off])
						}
					}
				}
			}
		})
	}
}

// TestClientToleratesQ1 feeds the captured responses and results (with the
// C server's junk) to the client's result computation.
func TestClientToleratesQ1(t *testing.T) {
	msgs := captureMsgs(t, "tcp_rr")
	var rsp proto.Response
	var res proto.Results
	m0, _ := proto.FromBytes(msgs[1].Data)
	rsp.Decode(m0)
	m1, _ := proto.FromBytes(msgs[2].Data)
	res.Decode(m1)
	cfg := Config{Test: TCPRR, Duration: 2 * time.Second}
	c := &client{cfg: &cfg, kind: kinds[TCPRR]}
	p := resolve(&cfg, c.kind, 16384, 131072)
	st := loopStats{trans: 233718, elapsed: 2 * time.Second}
	r := c.compute(p, &rsp, &res, &st, nil, nil)
	if r.RemoteCPU != -1 || r.RemoteSD != -1 {
		t.Errorf("read junk CPU fields: remote cpu %v sd %v", r.RemoteCPU, r.RemoteSD)
	}
	if r.RemoteTrans != 233718 || r.RSS != 16384 || r.RSR != 131072 || r.RSSEnd != 3939840 {
		t.Errorf("got trans %d rss %d rsr %d rss_end %d", r.RemoteTrans, r.RSS, r.RSR, r.RSSEnd)
	}
	if r.TransPerSec != 116859 {
		t.Errorf("got %v trans/s, want 116859", r.TransPerSec)
	}
	// With -C the CPU fields are read.
	msgs = captureMsgs(t, "tcp_stream")
	m0, _ = proto.FromBytes(msgs[1].Data)
	rsp.Decode(m0)
	m1, _ = proto.FromBytes(msgs[2].Data)
	res.Decode(m1)
	cfg = Config{Test: TCPStream, Duration: 2 * time.Second, RemoteCPU: true}
	c = &client{cfg: &cfg, kind: kinds[TCPStream]}
	p = resolve(&cfg, c.kind, 16384, 131072)
	st = loopStats{bytesTx: 7454867456, elapsed: 2001110 * time.Microsecond}
	r = c.compute(p, &rsp, &res, &st, nil, nil)
	if r.RemoteCPU < 99.24 || r.RemoteCPU > 99.26 || r.RemoteSD < 0.5 || r.RemoteSD > 0.6 {
		t.Errorf("got remote cpu %v sd %v", r.RemoteCPU, r.RemoteSD)
	}
}

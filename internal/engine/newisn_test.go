package engine

import (
	"encoding/binary"
	"testing"

	"sluice/internal/packet"
)

// TestNewISN: keep state (newisn) replaces the ISN of outbound SYNs and
// keeps translating: outbound seqs go up by the increment, inbound acks
// come down by it, checksums stay valid, and the state's window tracking
// runs in the original sequence space (so the flow keeps matching).
func TestNewISN(t *testing.T) {
	type step struct {
		out              bool
		pkt              []byte
		wantSeq, wantAck uint32
		want             Verdict
	}
	cli, srv := "10.0.0.1", "2.2.2.2"
	cases := []struct {
		name  string
		rules string
		steps []step
	}{
		{"client side rewritten", "pass out quick proto tcp all flags S keep state (newisn)\nblock in all\n", []step{
			{true, mkTCP(cli, srv, 1025, 80, 0x02, 100, 0), 5000, 0, VerdictPass},
			{false, mkTCP(srv, cli, 80, 1025, 0x12, 700, 5001), 700, 101, VerdictPass},
			{true, mkTCP(cli, srv, 1025, 80, 0x10, 101, 701), 5001, 701, VerdictPass},
			{false, mkTCP(srv, cli, 80, 1025, 0x10, 701, 5001), 701, 101, VerdictPass},
		}},
		{"server side rewritten", "pass in quick proto tcp all flags S keep state (newisn)\nblock out all\n", []step{
			{false, mkTCP(srv, cli, 2000, 22, 0x02, 300, 0), 300, 0, VerdictPass},
			{true, mkTCP(cli, srv, 22, 2000, 0x12, 900, 301), 5000, 301, VerdictPass},
			{false, mkTCP(srv, cli, 2000, 22, 0x10, 301, 5001), 301, 901, VerdictPass},
			{true, mkTCP(cli, srv, 22, 2000, 0x10, 901, 301), 5001, 301, VerdictPass},
		}},
		{"without newisn nothing changes", "pass out quick proto tcp all flags S keep state\nblock in all\n", []step{
			{true, mkTCP(cli, srv, 1025, 80, 0x02, 100, 0), 100, 0, VerdictPass},
			{false, mkTCP(srv, cli, 80, 1025, 0x12, 700, 101), 700, 101, VerdictPass},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, c.rules)
			e.States.SetISNSource(func() uint32 { return 5000 })
			var p Packet
			for i, s := range c.steps {
				res := check(e, &p, s.pkt, s.out, "nic0")
				if res.Verdict != s.want {
					t.Fatalf("step %d: got %v, want %v", i, res.Verdict, s.want)
				}
				tcp := p.Data[p.Info.L4Off:]
				seq, ack := binary.BigEndian.Uint32(tcp[4:]), binary.BigEndian.Uint32(tcp[8:])
				if seq != s.wantSeq || ack != s.wantAck {
					t.Errorf("step %d: got seq %d ack %d, want %d %d", i, seq, ack, s.wantSeq, s.wantAck)
				}
				p.Reparse()
				if p.ParseErr != nil || p.Info.Flags&packet.FlagBad != 0 {
					t.Errorf("step %d: rewritten packet fails its checksum (%v)", i, p.ParseErr)
				}
			}
		})
	}
}

package bpf

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"sluice/internal/engine"
)

// synOpts are a Linux client's SYN options (MSS, SACK permitted,
// timestamps, NOP, window scale): a SYN with options is not "clean"
// (tcp_clean), as no real SYN is.
var synOpts = []byte{2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7}

// tcpSum4 sets the TCP checksum of an IPv4 frame testPkt.build made
// (it leaves it 0: the kernel's programs do not check it, the engine
// does, as ipftest).
func tcpSum4(frame []byte) []byte {
	ip := frame[14:]
	hl := int(ip[0]&0x0f) * 4
	l4 := ip[hl:]
	l4[16], l4[17] = 0, 0
	s := uint32(csum(ip[12:20], 0)) + uint32(ip[9]) + uint32(len(l4))
	binary.BigEndian.PutUint16(l4[16:], ^csum(l4, s))
	return frame
}

// crrSegment is one segment of a TCP_CRR transaction as the system under
// test sees it (netserver on it, the client on the peer).
type crrSegment struct {
	name string
	out  bool
	pkt  func(i int) testPkt
}

// crrConnection returns the segments of TCP_CRR's i-th connection in the
// order they cross the SUT: the handshake, a byte each way, the client's
// close and the server's.
func crrConnection() []crrSegment {
	cli := func(i int) testPkt {
		p := tcp4(fmt.Sprintf("10.1.%d.%d", i/250%250, 1+i%250), "10.0.0.2", uint16(20000+i%40000), 5001, synF)
		p.seq = 100
		return p
	}
	seg := func(i int, out bool, flags uint8, seq, ack uint32, payload int) testPkt {
		p := cli(i)
		if out {
			p = p.reply(flags)
		}
		p.flags, p.seq, p.ack, p.payload = flags, seq, ack, payload
		return p
	}
	return []crrSegment{
		{"SYN in", false, func(i int) testPkt { p := cli(i); p.tcpOptions = synOpts; return p }},
		{"SYN-ACK out", true, func(i int) testPkt {
			p := seg(i, true, synF|ackF, 9000, 101, 0)
			p.tcpOptions = synOpts
			return p
		}},
		{"ACK in", false, func(i int) testPkt { return seg(i, false, ackF, 101, 9001, 0) }},
		{"request in", false, func(i int) testPkt { return seg(i, false, ackF|0x08, 101, 9001, 1) }},
		{"response out", true, func(i int) testPkt { return seg(i, true, ackF|0x08, 9001, 102, 1) }},
		{"FIN in", false, func(i int) testPkt { return seg(i, false, finF|ackF, 102, 9002, 0) }},
		{"FIN out", true, func(i int) testPkt { return seg(i, true, finF|ackF, 9002, 103, 0) }},
		{"last ACK in", false, func(i int) testPkt { return seg(i, false, ackF, 103, 9003, 0) }},
	}
}

// BenchmarkNewState measures what TCP_CRR's connections cost HP's
// stateful set, segment by segment: each connection a new 4-tuple whose
// segments run one a BPF_PROG_TEST_RUN, in the order they cross the
// system under test, through the programs made for the set (established
// path on, and off), beside the trivial program. Live, sluice-stateful's
// ingress under TCP_CRR reads ~6× the trivial program where TCP_RR's
// established packets read ~2.7×; this says which segments make that.
// The table is flushed between batches (outside the figures). Rounds log
// each segment's median, one packet a run; compare within a run only.
func BenchmarkNewState(b *testing.B) {
	h := benchHarness(b)
	trivial := trivialProg(b)
	defer trivial.Close()
	s := hpStatefulSpec(b, h)
	segs := crrConnection()
	const batch = 1024
	frames := make([][][]byte, batch)
	for i := range frames {
		for _, sg := range segs {
			frames[i] = append(frames[i], tcpSum4(sg.pkt(i).build()))
		}
	}
	// one batch of connections through pp: each segment's median
	batchRun := func(pp progPair, triv bool) []time.Duration {
		if _, err := h.d.FlushStates(nil); err != nil {
			b.Fatal(err)
		}
		ds := make([][]time.Duration, len(segs))
		for i := range frames {
			for j, sg := range segs {
				p := pp.in
				if sg.out {
					p = pp.out
				}
				if triv {
					p = trivial
				}
				v, d, err := p.Benchmark(frames[i][j], 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				if v == 2 { // TC_ACT_SHOT
					b.Fatalf("connection %d: HP's stateful set dropped its %s", i, sg.name)
				}
				ds[j] = append(ds[j], d)
			}
		}
		out := make([]time.Duration, len(segs))
		for j := range ds {
			out[j] = time.Duration(median(ds[j]))
		}
		return out
	}
	kinds := []string{"trivial", "est", "pipeline"}
	pps := map[string]progPair{"est": progsWithEst(b, h.d, s, true), "pipeline": progsWithEst(b, h.d, s, false)}
	const rounds = 3
	res := map[string][][]time.Duration{}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for r := 0; r < rounds; r++ {
			for _, k := range kinds {
				res[k] = append(res[k], batchRun(pps[k], k == "trivial"))
			}
		}
	}
	b.StopTimer()
	if _, err := h.d.FlushStates(nil); err != nil {
		b.Fatal(err)
	}
	for j, sg := range segs {
		line := fmt.Sprintf("%-13s", sg.name)
		for _, k := range kinds {
			var v []time.Duration
			for _, round := range res[k] {
				v = append(v, round[j])
			}
			line += fmt.Sprintf(" %s %v", k, v)
		}
		b.Log(line)
	}
	// the SYN's pipeline cut at its STAGE points (filter.c: 2 the
	// config's words, 3 the scratch area, 4 the parse, 5 the packet's
	// counts, 6 the clock, 7 accounting, 8 the state lookup (a miss), 9
	// the index, 10 the scan; then the entry's making (lib/state.h's
	// CSTAGE; no 30, 31: stack): 32 the
	// guards, the counts' lookups and limits, 33 the
	// entry cleared, 34 its key, 35 its fill (tcp_init, the state
	// machine), 36 the counts raised, 37 the put (a new flow's: no
	// identical-entry lookup before it); 11 the whole scan and making, 12
	// the verdict's counts, 13 logging; 0 whole), each a batch of new
	// flows. A seed entry, made by the whole program after each flush,
	// keeps the table's count above zero as the full run's entries do
	// (the pipeline then looks state up) for the stops that make none.
	seed := tcpSum4(crrConnection()[0].pkt(batch + 1).build())
	for _, n := range []uint32{2, 3, 4, 5, 6, 7, 8, 9, 10, 32, 33, 34, 35, 36, 37, 11, 12, 13, 0} {
		p, err := stageVariant(h.d, "sluice_ingress", n, s)
		if err != nil {
			b.Fatal(err)
		}
		var ds []time.Duration
		for r := 0; r < rounds; r++ {
			if _, err := h.d.FlushStates(nil); err != nil {
				b.Fatal(err)
			}
			if _, _, err := pps["pipeline"].in.Benchmark(seed, 1, nil); err != nil {
				b.Fatal(err)
			}
			var one []time.Duration
			for i := range frames {
				_, d, err := p.Benchmark(frames[i][0], 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				one = append(one, d)
			}
			ds = append(ds, time.Duration(median(one)))
		}
		p.Close()
		b.Logf("SYN in, stop_at %-2d %v", n, ds)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		b.Fatal(err)
	}
	// stop 36 raised the counts for entries it never made
	for _, k := range []uint32{0, 1} {
		if err := h.d.objs.StateCount.Put(k, int64(0)); err != nil {
			b.Fatal(err)
		}
	}
	for _, k := range kinds[1:] {
		var all []time.Duration
		for _, round := range res[k] {
			all = append(all, round...)
		}
		b.ReportMetric(median(all), k+"-ns/segment")
	}
}

// TestPrivilegedCRRConnection checks the benchmark's connection: every
// segment gets the Go engine's verdict and state hit (all pass, all but
// the SYN by the entry), and the kernel holds the engine's entries: one a
// connection, in the TCP states the engine's has.
func TestPrivilegedCRRConnection(t *testing.T) {
	h := newHarness(t)
	h.load(hpStatefulRules)
	eng, clock := engineClock(t, hpStatefulRules)
	for i := 0; i < 3; i++ {
		for _, sg := range crrConnection() {
			frame := tcpSum4(sg.pkt(i).build())
			var p engine.Packet
			p.Load(append([]byte(nil), frame[14:]...), "eth0", sg.out, 0)
			want := eng.Check(&p)
			ret, _ := h.run(sg.out, frame)
			if got := verdictName(ret); got != "pass" || !want.Verdict.Passed() {
				t.Fatalf("connection %d, %s: kernel %s, engine %s (%v); want both pass", i, sg.name, got, want.Verdict, want.Reason)
			}
		}
	}
	if n := h.d.stateCount(); n != 3 {
		t.Errorf("%d entries after three connections, want 3", n)
	}
	if d := engineEntries(t, h.d, eng, clock); d != "" {
		t.Errorf("kernel and engine tables differ:\n%s", d)
	}
}

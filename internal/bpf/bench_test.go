package bpf

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// benchRun measures the program on one frame with BPF_PROG_TEST_RUN's own
// repeat loop, so the figure is the in-kernel cost per packet.
func benchRun(b *testing.B, h *harness, out bool, frame []byte) {
	b.Helper()
	prog := h.d.objs.SluiceIngress
	if out {
		prog = h.d.objs.SluiceEgress
	}
	b.ReportAllocs()
	b.ResetTimer()
	const repeat = 1000
	var total time.Duration
	for i := 0; i < b.N; i++ {
		_, d, err := prog.Benchmark(frame, repeat, nil)
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/packet")
}

func benchHarness(b *testing.B) *harness {
	shared.once.Do(func() { shared.d, shared.err = Load(Options{NoPin: true}) })
	if shared.err != nil {
		b.Skipf("Load: %v", shared.err)
	}
	return &harness{d: shared.d}
}

const sixRules = `block in all
pass in quick proto tcp from 10.0.0.0/8 to any port = 22 flags S/SA
pass in quick proto tcp from any to 192.168.1.0/24 port = 80
pass in quick proto udp from any to any port = 53
block in quick proto icmp all icmp-type echo
pass in proto tcp from any to any port 1024:65535
`

func BenchmarkStateless6Rules(b *testing.B) {
	h := benchHarness(b)
	if err := h.d.LoadRules(compileText(b, sixRules), Active); err != nil {
		b.Fatal(err)
	}
	// matches the last rule: the whole list is scanned
	benchRun(b, h, false, tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build())
}

// sixExprRules are sixRules as exp rules (the last one a 4-clause,
// multi-value expression that matches).
const sixExprRules = `block in all
pass in quick exp { "ip.src = 10.0.0.0/8; tcp.dport = 22; tcp.flags = S/SA;" }
pass in quick exp { "ip.dst = 192.168.1.0/24; tcp.dport = 80;" }
pass in quick exp { "udp.dport = 53;" }
block in quick exp { "ip.p = 1;" }
pass in exp { "ip.p = 6; ip.src = 10.0.0.0/8, 172.16.0.0/12; tcp.dport = 443, 8080; tcp.flags != S/SA;" }
`

func BenchmarkStatelessExpr6Rules(b *testing.B) {
	h := benchHarness(b)
	if err := h.d.LoadRules(compileText(b, sixExprRules), Active); err != nil {
		b.Fatal(err)
	}
	benchRun(b, h, false, tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build())
}

func BenchmarkStatefulEstablished(b *testing.B) {
	h := benchHarness(b)
	if err := h.d.LoadRules(compileText(b, "block in all\nblock out all\npass out quick proto tcp all flags S/SA keep state\n"), Active); err != nil {
		b.Fatal(err)
	}
	if _, err := h.d.FlushStates(nil); err != nil {
		b.Fatal(err)
	}
	syn := tcp4("10.0.0.1", "10.0.0.2", 40000, 80, synF)
	syn.seq = 100
	synack := syn.reply(synF | ackF)
	synack.seq, synack.ack = 9000, 101
	ack := syn
	ack.flags, ack.seq, ack.ack = ackF, 101, 9001
	for _, s := range []struct {
		out bool
		p   testPkt
	}{{true, syn}, {false, synack}, {true, ack}} {
		if v, _, err := h.d.Run(s.out, s.p.build()); err != nil || v != VerdictPass {
			b.Fatalf("handshake: %v %v", v, err)
		}
	}
	// the same in-window ACK again and again: a state hit every time
	data := synack
	data.flags, data.seq, data.ack = ackF, 9001, 101
	benchRun(b, h, false, data.build())
}

// bigRules is a 10 000-rule set of host/port rules, the kind an index helps.
func bigRules(n int) string {
	var sb strings.Builder
	sb.WriteString("block in all\n")
	for i := 0; i < n-1; i++ {
		fmt.Fprintf(&sb, "pass in quick proto tcp from any to 10.%d.%d.%d port = %d\n", i/65536%256, i/256%256, i%256, 1000+i%5000)
	}
	return sb.String()
}

func benchBig(b *testing.B, index bool) {
	h := benchHarness(b)
	im := compileText(b, bigRules(10000))
	if !index {
		im.dst, im.ports = nil, nil
	}
	if err := h.d.LoadRules(im, Active); err != nil {
		b.Fatal(err)
	}
	// no rule but the first matches: a linear scan visits all 10 000
	v, _, err := h.d.Run(false, tcp4("172.16.0.1", "10.0.200.1", 40000, 999, ackF).build())
	if err != nil || v != VerdictBlock {
		b.Fatalf("got %v %v, want block", v, err)
	}
	benchRun(b, h, false, tcp4("172.16.0.1", "10.0.200.1", 40000, 999, ackF).build())
}

func Benchmark10000RulesIndexed(b *testing.B) { benchBig(b, true) }
func Benchmark10000RulesLinear(b *testing.B)  { benchBig(b, false) }

// TestIndexMatchesLinear runs random packets through random rule sets with
// and without the index: the index must never change a verdict.
func TestIndexMatchesLinear(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewSource(1))
	addrs := []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.3", "192.168.0.0/24", "any", "!10.2.0.0/16", "10.1.2.0/255.255.0.255"}
	var sb strings.Builder
	for i := 0; i < 600; i++ {
		act := []string{"pass", "block"}[rng.Intn(2)]
		q := []string{"", " quick"}[rng.Intn(4)/3]
		port := ""
		switch rng.Intn(4) {
		case 0:
			port = fmt.Sprintf(" port = %d", 20+rng.Intn(8))
		case 1:
			port = fmt.Sprintf(" port > %d", 20+rng.Intn(8))
		}
		fmt.Fprintf(&sb, "%s in%s proto tcp from %s to %s%s\n", act, q, addrs[rng.Intn(len(addrs))], addrs[rng.Intn(len(addrs))], port)
	}
	idx := compileText(t, sb.String())
	if idx.dst == nil {
		t.Fatal("600 rules: no index built")
	}
	lin := compileText(t, sb.String())
	lin.dst, lin.ports = nil, nil
	hosts := []string{"10.1.2.3", "10.1.9.9", "10.2.0.1", "192.168.0.7", "8.8.8.8", "10.200.2.3"}
	pkts := make([]testPkt, 300)
	for i := range pkts {
		pkts[i] = tcp4(hosts[rng.Intn(len(hosts))], hosts[rng.Intn(len(hosts))], 1000, uint16(18+rng.Intn(12)), ackF)
	}
	var got [2][]Verdict
	for j, im := range []*Image{idx, lin} {
		if err := h.d.LoadRules(im, Active); err != nil {
			t.Fatal(err)
		}
		for _, p := range pkts {
			v, _, err := h.d.Run(false, p.build())
			if err != nil {
				t.Fatal(err)
			}
			got[j] = append(got[j], v)
		}
	}
	for i, p := range pkts {
		if got[0][i] != got[1][i] {
			t.Errorf("%s -> %s:%d: indexed %v, linear %v", p.src, p.dst, p.dport, got[0][i], got[1][i])
		}
	}
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"sluice/internal/packet/packettest"
	"sluice/internal/rules/ipnat"
)

// The benchmarks run the programs with BPF_PROG_TEST_RUN and report the
// kernel's own time per run as kernel-ns/op (the syscall-bound ns/op
// beside it is not the datapath's). A NAT program rewrites its packet, so
// for the established path the flows are set up in pairs that turn the
// packet back into the other's input (a map and a rdr or rewrite with
// mirror-image translations): the kernel's repeat mode then runs session
// hits back to back, each with a full rewrite. A trivial program measured
// the same way is the floor. Run:
//
//	go test -run '^$' -bench . -benchmem ./internal/bpf/nat

func benchRun(b *testing.B, prog *ebpf.Program, frame func(i int) []byte) {
	b.Helper()
	var kernel time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, d, err := prog.Benchmark(frame(i), 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		kernel += d
	}
	b.ReportMetric(float64(kernel.Nanoseconds())/float64(b.N), "kernel-ns/op")
}

// benchHarness loads rules whose interface is the loopback device, as a
// test run without a context sees every packet.
func benchHarness(b *testing.B, rules string) *harness {
	b.Helper()
	h := newHarness(b)
	benchLoad(b, h, rules)
	return h
}

// benchLoad loads rules (sessions stay).
func benchLoad(b *testing.B, h *harness, rules string) {
	b.Helper()
	f, err := ipnat.Parse("bench.nat", rules, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	im, err := Compile(f.Rules, CompileOptions{Ifindex: func(string) (int, bool) { return 1, true }})
	if err != nil {
		b.Fatal(err)
	}
	if err := h.d.LoadRules(im); err != nil {
		b.Fatal(err)
	}
}

func tcpSeg(src, dst string, sport, dport uint16, flags uint8) []byte {
	return ethFrame(packettest.V4{Src: src, Dst: dst, Proto: 6,
		Payload: packettest.TCP{SrcPort: sport, DstPort: dport, Seq: 1, Ack: 1, Flags: flags, Win: 8192, Data: make([]byte, 64)}.Bytes()}.Bytes())
}

const benchRules = "map lo 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp/udp auto\n"

// repeatRun runs prog over frame b.N times back to back in the kernel.
func repeatRun(b *testing.B, prog *ebpf.Program, frame []byte) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	_, d, err := prog.Benchmark(frame, b.N, b.ResetTimer)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(d.Nanoseconds()), "kernel-ns/op")
}

// mirror sets up a masquerade session for 10.0.0.1:40000 -> 2.2.2.2:80
// and returns the port it maps to.
func mirror(b *testing.B, h *harness) uint16 {
	b.Helper()
	_, out, err := h.d.Run(true, tcpSeg("10.0.0.1", "2.2.2.2", 40000, 80, 0x02), 0)
	if err != nil {
		b.Fatal(err)
	}
	return binary.BigEndian.Uint16(out[14+20:])
}

// BenchmarkEstablishedOut: TCP segments of known flows, outbound: the
// session lookup and the rewrite of address, port and checksums.
func BenchmarkEstablishedOut(b *testing.B) {
	h := benchHarness(b, benchRules)
	p := mirror(b, h)
	benchLoad(b, h, benchRules+"rewrite out on lo proto tcp from 1.1.1.1/32 to 2.2.2.2/32 -> src 10.0.0.1,40000 dst 2.2.2.2;\n")
	_ = p
	repeatRun(b, h.d.objs.NatEgress, tcpSeg("10.0.0.1", "2.2.2.2", 40000, 80, 0x10))
}

// BenchmarkEstablishedIn: the replies of known flows, inbound.
func BenchmarkEstablishedIn(b *testing.B) {
	h := benchHarness(b, benchRules)
	p := mirror(b, h)
	benchLoad(b, h, benchRules+fmt.Sprintf("rdr lo 10.0.0.1/32 port 40000 -> 1.1.1.1 port %d tcp\n", p))
	repeatRun(b, h.d.objs.NatIngress, tcpSeg("2.2.2.2", "1.1.1.1", 80, p, 0x10))
}

// BenchmarkMiss: inbound traffic no session and no rule wants (what NAT
// costs the packets it does not translate).
func BenchmarkMiss(b *testing.B) {
	h := benchHarness(b, benchRules)
	repeatRun(b, h.d.objs.NatIngress, tcpSeg("2.2.2.2", "1.1.1.5", 80, 40000, 0x10))
}

// BenchmarkNewSession: the first packet of new flows (the rule walk, the
// port allocation, two inserts and a timer); the table is flushed now and
// then so it never fills.
func BenchmarkNewSession(b *testing.B) {
	h := benchHarness(b, benchRules)
	benchRun(b, h.d.objs.NatEgress, func(i int) []byte {
		if i%20000 == 19999 {
			b.StopTimer()
			if _, err := h.d.FlushSessions(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		return tcpSeg("10.0.0.1", "2.2.2.2", uint16(1024+i%20000), 80, 0x02)
	})
}

// BenchmarkTrivial is the floor: a program that only returns.
func BenchmarkTrivial(b *testing.B) {
	h := newHarness(b)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	_ = h
	repeatRun(b, prog, tcpSeg("10.0.0.1", "2.2.2.2", 40000, 80, 0x10))
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
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

// establishedOut sets up the egress mirror flows on h and returns the
// frame to run: TCP segments of known flows, outbound (the session lookup
// and the rewrite of addresses, ports and checksums).
func establishedOut(b *testing.B, h *harness) []byte {
	b.Helper()
	mirror(b, h)
	benchLoad(b, h, benchRules+"rewrite out on lo proto tcp from 1.1.1.1/32 to 2.2.2.2/32 -> src 10.0.0.1,40000 dst 2.2.2.2;\n")
	return tcpSeg("10.0.0.1", "2.2.2.2", 40000, 80, 0x10)
}

// BenchmarkEstablishedOut: established IPv4 TCP, outbound.
func BenchmarkEstablishedOut(b *testing.B) {
	h := benchHarness(b, benchRules)
	repeatRun(b, h.d.objs.NatEgress, establishedOut(b, h))
}

// BenchmarkEstablishedIn: the replies of known flows, inbound.
func BenchmarkEstablishedIn(b *testing.B) {
	h := benchHarness(b, benchRules)
	p := mirror(b, h)
	benchLoad(b, h, benchRules+fmt.Sprintf("rdr lo 10.0.0.1/32 port 40000 -> 1.1.1.1 port %d tcp\n", p))
	repeatRun(b, h.d.objs.NatIngress, tcpSeg("2.2.2.2", "1.1.1.1", 80, p, 0x10))
}

// BenchmarkFastPath measures the IPv4 fast path stage by stage on the
// established outbound flow of BenchmarkEstablishedOut, with programs
// loaded to stop after each stage (nat_stage): the differences between
// consecutive stages are what each costs. "whole" is the fast path as in
// use; "nofast" is the same packets with the fast path off (the session
// table and the general code, as before the fast path existed).
func BenchmarkFastPath(b *testing.B) {
	for _, st := range []struct {
		name  string
		stage uint32
	}{{"entry", stEntry}, {"parse", stParse}, {"lookup", stLookup}, {"rewrite", stRewrite}, {"whole", 0},
		{"whole-noslot", stNoDM}, {"nofast", stOff}} {
		b.Run(st.name, func(b *testing.B) {
			h := newHarnessStage(b, st.stage)
			benchLoad(b, h, benchRules)
			frame := establishedOut(b, h)
			if st.stage != 0 && st.stage != stOff {
				// the stages up to lookup find the entries the whole
				// path made (the session is set up by the run before)
				if _, _, err := h.d.Run(true, frame, 0); err != nil {
					b.Fatal(err)
				}
			}
			repeatRun(b, h.d.objs.NatEgress, frame)
		})
	}
}

// BenchmarkMiss: inbound traffic no session and no rule wants (what NAT
// costs the packets it does not translate), as loaded in use ("shortcut":
// the fast path leaves it alone, fast_miss) and without the shortcut
// ("whole": the tail call, the second parse, the session lookup and the
// rule walk), in one run.
func BenchmarkMiss(b *testing.B) {
	for _, st := range []struct {
		name  string
		stage uint32
	}{{"shortcut", 0}, {"whole", stNoShort}} {
		b.Run(st.name, func(b *testing.B) {
			h := newHarnessStage(b, st.stage)
			benchLoad(b, h, benchRules)
			repeatRun(b, h.d.objs.NatIngress, tcpSeg("2.2.2.2", "1.1.1.5", 80, 40000, 0x10))
		})
	}
}

// BenchmarkNewSession: the first packet of new flows (the rule walk, the
// port allocation, two inserts and a timer); the table is flushed now and
// then so it never fills.
func BenchmarkNewSession(b *testing.B) {
	newSessions(b, benchHarness(b, benchRules), 20000)
}

// BenchmarkNewSessionSteps is BenchmarkNewSession taken apart, each
// variant in a datapath of its own: "whole" as in use; "noarm" without
// the session's timer (bpf_timer_init, which allocates, and
// bpf_timer_start); "notwin" without the two fast twins (two inserts in
// fast4); "noinsert" with the rule walk, the port allocation (its host
// map entry made and dropped) and the clash check only, nothing entered
// (the packet is then dropped as a failed session); "prealloc" and
// "ondemand" as "whole" with the hash tables of sessions (sessions,
// fast4, fast6, hostmaps) preallocated at load or allocated entry by
// entry, whichever c/nat.c does not declare. Differences between them
// are what each step costs.
func BenchmarkNewSessionSteps(b *testing.B) {
	for _, st := range []struct {
		name  string
		stage uint32
		alloc allocMode
	}{{"whole", 0, allocAsBuilt}, {"noarm", stNoArm, allocAsBuilt}, {"notwin", stNoTwin, allocAsBuilt},
		{"noinsert", stNoInsert, allocAsBuilt}, {"prealloc", 0, allocPrealloc}, {"ondemand", 0, allocOnDemand}} {
		b.Run(st.name, func(b *testing.B) {
			h := newHarnessAlloc(b, st.stage, st.alloc)
			benchLoad(b, h, benchRules)
			newSessions(b, h, 20000)
		})
	}
	// the whole way again with 64 flows between flushes: the tables'
	// lines stay in the caches
	b.Run("warm", func(b *testing.B) {
		h := newHarness(b)
		benchLoad(b, h, benchRules)
		newSessions(b, h, 64)
	})
}

// newSessions runs the first packets of new flows through h's egress
// program, n flows before each flush of the table (so that it never
// fills): with n large the tables' lines a new session touches are
// mostly cold, as on a busy host; with n small they stay in the caches.
func newSessions(b *testing.B, h *harness, n int) {
	b.Helper()
	if _, err := h.d.FlushSessions(); err != nil {
		b.Fatal(err)
	}
	benchRun(b, h.d.objs.NatEgress, func(i int) []byte {
		if i%n == n-1 {
			b.StopTimer()
			if _, err := h.d.FlushSessions(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		return tcpSeg("10.0.0.1", "2.2.2.2", uint16(1024+i%n), 80, 0x02)
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

// evict touches a buffer larger than the caches between runs, so that
// a run finds its data and code as a packet on a busy host does.
var evictBuf = make([]byte, 8<<20)

func evict() {
	for i := 0; i < len(evictBuf); i += 64 {
		evictBuf[i]++
	}
}

// onceRun runs prog over frame once per iteration (one packet a
// BPF_PROG_TEST_RUN), the caches evicted before each run if evicting, and
// reports the kernel's median time per run (the mean is at the mercy of
// the other work on the host). Without eviction the run
// still finds what the system call and Go between two runs left: on this
// VM each page a run reaches first costs it (docs/datapath-cost.md, at1).
func onceRun(b *testing.B, prog *ebpf.Program, frame []byte, evicting bool) {
	b.Helper()
	runs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if evicting {
			b.StopTimer()
			evict()
			b.StartTimer()
		}
		_, d, err := prog.Benchmark(frame, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, d)
	}
	slices.Sort(runs)
	b.ReportMetric(float64(runs[len(runs)/2].Nanoseconds()), "kernel-ns/op")
}

// BenchmarkCold: the established outbound flow and the floor with cold
// caches (see evict): the trivial program, the fast path, the fast path
// off.
func BenchmarkCold(b *testing.B) { stagesOnce(b, true) }

// BenchmarkSingle is BenchmarkCold without the eviction: one packet a
// run, what a packet pays for the pages it reaches first (at1's single
// mode), stage by stage.
func BenchmarkSingle(b *testing.B) { stagesOnce(b, false) }

func stagesOnce(b *testing.B, evicting bool) {
	b.Run("trivial", func(b *testing.B) {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
		if err != nil {
			b.Fatal(err)
		}
		defer prog.Close()
		onceRun(b, prog, tcpSeg("10.0.0.1", "2.2.2.2", 40000, 80, 0x10), evicting)
	})
	for _, st := range []struct {
		name  string
		stage uint32
	}{{"entry", stEntry}, {"parse", stParse}, {"lookup", stLookup}, {"rewrite", stRewrite}, {"whole", 0},
		{"whole-noslot", stNoDM}, {"nofast", stOff}} {
		b.Run(st.name, func(b *testing.B) {
			h := newHarnessStage(b, st.stage)
			benchLoad(b, h, benchRules)
			frame := establishedOut(b, h)
			if st.stage != 0 && st.stage != stOff {
				if _, _, err := h.d.Run(true, frame, 0); err != nil {
					b.Fatal(err)
				}
			}
			onceRun(b, h.d.objs.NatEgress, frame, evicting)
		})
	}
}

func tcpSeg6(src, dst string, sport, dport uint16, flags uint8) []byte {
	return ethFrame(packettest.V6{Src: src, Dst: dst, Next: 6, HopLimit: 64, L4Proto: 6,
		Payload: packettest.TCP{SrcPort: sport, DstPort: dport, Seq: 1, Ack: 1, Flags: flags, Win: 8192, Data: make([]byte, 64)}.Bytes()}.Bytes())
}

// BenchmarkFastPath6 is BenchmarkEstablishedOut for IPv6 (mirror flows
// made by a map and a rewrite): "whole" with the fast path as in use,
// "nofast" with it off.
func BenchmarkFastPath6(b *testing.B) {
	const rules6 = "map lo fd00::/64 -> 2001:db8::1/128 portmap tcp/udp 20000:20010\n"
	for _, st := range []struct {
		name  string
		stage uint32
	}{{"whole", 0}, {"nofast", stOff}} {
		stage := st.stage
		b.Run(st.name, func(b *testing.B) {
			h := newHarnessStage(b, stage)
			benchLoad(b, h, rules6)
			if _, _, err := h.d.Run(true, tcpSeg6("fd00::1", "2001:db8:9::9", 40000, 80, 0x02), 0); err != nil {
				b.Fatal(err)
			}
			benchLoad(b, h, rules6+"rewrite out on lo proto tcp from 2001:db8::1/128 to 2001:db8:9::9/128 -> src fd00::1,40000 dst 2001:db8:9::9;\n")
			frame := tcpSeg6("fd00::1", "2001:db8:9::9", 40000, 80, 0x10)
			if _, _, err := h.d.Run(true, frame, 0); err != nil {
				b.Fatal(err)
			}
			repeatRun(b, h.d.objs.NatEgress, frame)
			st, err := h.d.Stats()
			if err != nil {
				b.Fatal(err)
			}
			if f := st.Side[dirOut].Fast; (f == 0) != (stage == stOff) {
				b.Fatalf("%d packets by the fast path", f)
			}
		})
	}
}

// BenchmarkChained measures what running the egress program by a tail
// call from another program costs over running it as a program of its
// own (the one-program route of docs/datapath-cost.md "NAT, session 9"):
// "own" is the established outbound flow of BenchmarkEstablishedOut,
// "chained" the same packets through a program that only tail-calls it.
// Each in the repeat loop ("warm") and one packet a run ("single").
func BenchmarkChained(b *testing.B) {
	h := newHarness(b)
	benchLoad(b, h, benchRules)
	frame := establishedOut(b, h)
	arr, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ProgramArray, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer arr.Close()
	if err := arr.Update(uint32(0), h.d.objs.NatEgress, ebpf.UpdateAny); err != nil {
		b.Fatal(err)
	}
	chain, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "chain_egress", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMapPtr(asm.R2, arr.FD()),
			asm.Mov.Imm(asm.R3, 0),
			asm.FnTailCall.Call(),
			asm.Mov.Imm(asm.R0, 2),
			asm.Return(),
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer chain.Close()
	// the chained program must have run NAT (its own verdict is 2)
	if ret, _, err := chain.Benchmark(frame, 1, nil); err != nil || ret != uint32(0xffffffff) {
		b.Fatalf("the chained program returned %d (%v), want NAT's -1", int32(ret), err)
	}
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"own", h.d.objs.NatEgress}, {"chained", chain}} {
		b.Run(p.name+"/warm", func(b *testing.B) { repeatRun(b, p.prog, frame) })
		b.Run(p.name+"/single", func(b *testing.B) { onceRun(b, p.prog, frame, false) })
	}
}

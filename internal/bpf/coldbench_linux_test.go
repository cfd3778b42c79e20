package bpf

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Why a packet costs several times more live (the kernel's BPF statistics
// under netperf) than in BPF_PROG_TEST_RUN's repeat loop: the loop runs
// one packet a thousand times with everything in the L1 cache, without
// the clock reads the statistics add, and on one CPU. BenchmarkModes takes
// these apart, each against the trivial program in the same run:
//
//   - warm: the repeat loop (the least ns/packet of the runs);
//   - single: one packet per run, caches warm: the run's own clock reads,
//     as the statistics add them to every live packet;
//   - cold: one packet per run after the caches were evicted, as a packet
//     finds them after the network stack and netperf ran;
//   - pingpong: an established flow's two directions alternately, one
//     packet per run, both on one CPU;
//   - crosscpu: the same with each direction on a CPU of its own, as a
//     request/response test between two namespaces runs them: every
//     packet finds the flow's entry last written by the other CPU.
//   - contended: both directions at once, each on its own CPU in the
//     repeat loop: what the lines both directions write cost, without
//     the scheduler's noise of the one-packet modes.
//
// single, cold, pingpong and crosscpu report the median run.

var evictBuf = make([]byte, 16<<20)

// evict touches a buffer larger than the caches, so that the next run
// finds its data and code as a packet on a busy host does.
func evict() {
	for i := 0; i < len(evictBuf); i += 64 {
		evictBuf[i]++
	}
}

func median(runs []time.Duration) float64 {
	slices.Sort(runs)
	return float64(runs[len(runs)/2].Nanoseconds())
}

// onCPU locks the calling goroutine to its thread and the thread to cpu;
// the returned function undoes it.
func onCPU(cpu int) (func(), error) {
	runtime.LockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}, nil
}

func singleRuns(b *testing.B, prog *ebpf.Program, frame []byte, cold bool) {
	b.Helper()
	runs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if cold {
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
	b.ReportMetric(median(runs), "median-ns/packet")
}

// pingPong runs in and out alternately, one packet per run, on CPUs
// cpus[0] and cpus[1], and reports the median of each direction.
func pingPong(b *testing.B, in, out *ebpf.Program, inFrame, outFrame []byte, cpus [2]int) {
	b.Helper()
	n := max(b.N, 1)
	runs := [2][]time.Duration{make([]time.Duration, 0, n), make([]time.Duration, 0, n)}
	turn := [2]chan bool{make(chan bool, 1), make(chan bool, 1)}
	done := make(chan error, 2)
	progs, frames := [2]*ebpf.Program{in, out}, [2][]byte{inFrame, outFrame}
	b.ResetTimer()
	for side := 0; side < 2; side++ {
		go func() {
			undo, err := onCPU(cpus[side])
			if err != nil {
				<-turn[side]
				turn[1-side] <- false
				done <- err
				return
			}
			defer undo()
			for i := 0; i < n; i++ {
				if !<-turn[side] {
					break
				}
				_, d, err := progs[side].Benchmark(frames[side], 1, nil)
				if err != nil {
					turn[1-side] <- false
					done <- err
					return
				}
				runs[side] = append(runs[side], d)
				turn[1-side] <- true
			}
			done <- nil
		}()
	}
	turn[0] <- true
	reportSides(b, done, &runs)
}

// contended runs in on cpus[0] and out on cpus[1] at the same time, each
// in the repeat loop (repeat packets a run), and reports each side's
// median ns/packet: every packet finds the lines the other side writes
// just written, as often as the two CPUs can make it (the least run would
// be one the other side did not overlap). The difference from the
// trivial program is what the lines both directions write cost.
func contended(b *testing.B, in, out *ebpf.Program, inFrame, outFrame []byte, cpus [2]int, repeat int) {
	b.Helper()
	n := max(b.N, 1)
	runs := [2][]time.Duration{make([]time.Duration, 0, n), make([]time.Duration, 0, n)}
	start := make(chan struct{})
	done := make(chan error, 2)
	progs, frames := [2]*ebpf.Program{in, out}, [2][]byte{inFrame, outFrame}
	b.ResetTimer()
	for side := 0; side < 2; side++ {
		go func() {
			undo, err := onCPU(cpus[side])
			if err != nil {
				done <- err
				return
			}
			defer undo()
			<-start
			for i := 0; i < n; i++ {
				_, d, err := progs[side].Benchmark(frames[side], repeat, nil)
				if err != nil {
					done <- err
					return
				}
				runs[side] = append(runs[side], d)
			}
			done <- nil
		}()
	}
	close(start)
	reportSides(b, done, &runs)
}

// BenchmarkModes: see the comment at the top of this file.
func BenchmarkModes(b *testing.B) {
	trivial, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		b.Skipf("loading a program: %v", err)
	}
	defer trivial.Close()
	h := benchHarness(b)
	plain := tcp4("172.16.0.1", "172.16.0.2", 40000, 8080, ackF).build()
	for _, mode := range []string{"warm", "single", "cold"} {
		for _, sc := range []string{"trivial", "attached", "attached-generic", "stateless", "stateless-pipeline", "established"} {
			b.Run(mode+"/"+sc, func(b *testing.B) {
				frame := plain
				switch sc {
				case "attached", "attached-generic":
					if err := h.d.LoadRules(&Image{}, Active); err != nil {
						b.Fatal(err)
					}
					if _, err := h.d.FlushStates(nil); err != nil {
						b.Fatal(err)
					}
				case "stateless", "stateless-pipeline":
					// HP's stateless set (every packet scans it)
					if err := h.d.LoadRules(compileText(b, hpStatelessRules), Active); err != nil {
						b.Fatal(err)
					}
					if _, err := h.d.FlushStates(nil); err != nil {
						b.Fatal(err)
					}
				case "established":
					frame, _ = establishedFrames(b, h)
				}
				// the program the set is specialised for (LoadRules made it),
				// or for attached-generic the one that reads everything
				// from config, as before the specialisation
				prog := h.d.objs.SluiceIngress
				switch sc {
				case "trivial":
					prog = trivial
				case "attached-generic":
					pp, err := h.d.variant(genericSpec)
					if err != nil {
						b.Fatal(err)
					}
					prog = pp.in
				case "stateless-pipeline":
					// the set's program without its constant lists
					// (lib/fast.h): the whole pipeline, as before dp10
					pp, err := h.d.variant(currentSpec(b, h.d).withoutFast())
					if err != nil {
						b.Fatal(err)
					}
					prog = pp.in
				}
				if mode == "warm" {
					b.ReportAllocs()
					b.ResetTimer()
					reportRuns(b, prog, frame, 1000)
					return
				}
				singleRuns(b, prog, frame, mode == "cold")
			})
		}
	}
	if runtime.NumCPU() < 2 {
		return
	}
	for _, mode := range []struct {
		name string
		cpus [2]int
	}{{"pingpong", [2]int{0, 0}}, {"crosscpu", [2]int{0, 1}}} {
		b.Run(mode.name+"/trivial", func(b *testing.B) {
			pingPong(b, trivial, trivial, plain, plain, mode.cpus)
		})
		b.Run(mode.name+"/established", func(b *testing.B) {
			in, out := establishedFrames(b, h)
			pingPong(b, h.d.objs.SluiceIngress, h.d.objs.SluiceEgress, in, out, mode.cpus)
		})
	}
	b.Run("contended/trivial", func(b *testing.B) {
		contended(b, trivial, trivial, plain, plain, [2]int{0, 1}, 100)
	})
	b.Run("contended/established", func(b *testing.B) {
		in, out := establishedFrames(b, h)
		contended(b, h.d.objs.SluiceIngress, h.d.objs.SluiceEgress, in, out, [2]int{0, 1}, 100)
	})
}

// reportSides waits for the two sides of a two-CPU mode and reports each
// side's median ns/packet (runs by pointer: the sides append to it until
// they are done).
func reportSides(b *testing.B, done <-chan error, runs *[2][]time.Duration) {
	b.Helper()
	for range 2 {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(median(runs[0]), "in-median-ns/packet")
	b.ReportMetric(median(runs[1]), "out-median-ns/packet")
}

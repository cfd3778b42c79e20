package netperf

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"sluice/internal/netperf/internal/syscount"
	"sluice/internal/netperf/proto"
	"sluice/internal/testutil"

	"golang.org/x/sys/unix"
)

// rawChildEnv marks the child process of TestRawReceiversLetTheRuntimeThrough.
const rawChildEnv = "SLUICE_NETPERF_RAW_CHILD"

// nanosleepEvent counts the runtime monitor's sleeps: sysmon's usleep is
// the only nanosleep a Go process makes while its goroutines run.
const nanosleepEvent = "syscalls:sys_enter_nanosleep"

// TestStreamMonitorWakeups guards the stream loops against the Go
// runtime's monitor (sysmon). A receive or send made as an ordinary
// system call that blocks for longer than the monitor's 10 ms (a peer
// that pauses, or is kept off its CPU on a loaded machine) has its
// processor taken away, and after each such take the monitor polls every
// 20 µs for a millisecond or more: a dozen wake-ups or more each time. C
// netperf makes none; raw calls (rawConn) leave the
// monitor at its 10 ms sleep. The peer here writes 16 KB, or reads up to
// 256 KB, every 18 ms (inside the calls' timeout); the count covers a second of it,
// and the loops are netserver's TCP_STREAM receive and TCP_MAERTS send
// loops. The bound is on the monitor's sleeps per second of the loop (a
// count, not a time): raw calls make 75–90 a second on this 2-CPU
// machine at load 10–20, the ordinary calls they replaced 775–1 320
// (receiver, seven runs) and 570–580 (sender, two runs).
func TestStreamMonitorWakeups(t *testing.T) {
	if err := syscount.Available(nanosleepEvent); err != nil {
		testutil.SkipOrFail(t, "no perf to count with (CI installs linux-perf): %v", err)
	}
	// An idle processor for the peer and the timers, whatever the
	// machine; the loop holds one while it blocks.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	for _, tc := range []struct {
		name string
		dir  int32
	}{
		{"receiver", proto.DirServerRecvs},
		{"sender", proto.DirServerSends},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfd, sfd := rawPair(t)
			srv := &serverTest{req: &proto.Request{Direction: tc.dir}, recvBuf: make([]byte, 16<<10), sendBuf: make([]byte, 16<<10)}
			srv.ph.fds.add(sfd, false)
			t.Cleanup(srv.ph.fds.abort) // whatever happens, the loop ends
			loop := srv.tcpRecv
			if tc.dir == proto.DirServerSends {
				loop = srv.tcpSend
			}

			c, err := syscount.AttachEvents(os.Getpid(), t.TempDir(), nanosleepEvent)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The peer runs for warm+length+warm; the count covers the
			// middle, leaving out setting up (starting perf,
			// connecting), after which the monitor polls fast for a
			// while whatever the loop does.
			const warm, length, pause = 200 * time.Millisecond, time.Second, 18 * time.Millisecond
			peerDone := make(chan int64, 1)
			go func() {
				msg := make([]byte, 16<<10)
				if tc.dir == proto.DirServerSends {
					// Room for several sends a pause, so each one
					// blocks for less than a pause.
					msg = make([]byte, 256<<10)
				}
				var bytes int64
				for start := time.Now(); time.Since(start) < warm+length+warm; {
					var n int
					var e unix.Errno
					if tc.dir == proto.DirServerSends {
						n, e = sysRead(cfd, msg)
					} else {
						n, e = sysWrite(cfd, msg)
					}
					if e != 0 {
						t.Errorf("peer: %v", e)
						break
					}
					bytes += int64(n)
					time.Sleep(pause)
				}
				srv.ph.stop.Store(true)
				srv.ph.fds.interruptFd(sfd) // the end of the test
				peerDone <- bytes
			}()
			loopErr := make(chan error, 1)
			go func() { loopErr <- loop(sfd) }()
			time.Sleep(warm)
			if n := rawLoops.Load(); n != 1 {
				t.Errorf("%d loops making raw calls, want 1", n)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			time.Sleep(length)
			counts, cerr := c.Stop()
			elapsed := time.Since(start)
			peerBytes := <-peerDone
			if err := <-loopErr; err != nil && err != errTimedOut {
				t.Fatalf("loop: %v", err)
			}
			if cerr != nil {
				t.Fatal(cerr)
			}
			if peerBytes == 0 {
				t.Fatal("nothing went through")
			}
			sleeps := counts[nanosleepEvent]
			perSec := float64(sleeps) / elapsed.Seconds()
			t.Logf("peer moved %d bytes; %d receives, %d sends, %d yields; counted %v: %d monitor sleeps (%.0f/s), %d system calls, %d context switches",
				peerBytes, srv.recvCalls, srv.sendCalls, srv.y.yields, elapsed.Round(time.Millisecond), sleeps, perSec, counts.Syscalls(), counts.Switches())
			// At most 100 a second at the monitor's longest sleep; room
			// for a few resets by anything else in the process, well
			// below the dozens per pause of a call the monitor watches.
			if perSec > 300 {
				t.Errorf("%.0f monitor sleeps a second in the loop (%d in %v), want at most 300", perSec, sleeps, elapsed.Round(time.Millisecond))
			}
		})
	}
}

// TestRawReceiversLetTheRuntimeThrough: raw receives hold their
// processors while they block. With three processors and three silent
// peers, two loops get raw calls (GOMAXPROCS-1) and the third ordinary
// ones, so two processors are held. The test's timers must still fire
// (the stop flag, then the shutdown that ends the loops), a garbage
// collection must still stop the world (the receive timeout and the
// runtime's preemption signal, EINTR, bring each raw loop back to a
// yield), and the slots must all be free again afterwards.
// A stop-the-world that never completes stops every goroutine, the
// test's own timers too, so the scenario runs in a child process (this
// test binary again) that the parent kills if it hangs; the limits only
// catch a hang.
func TestRawReceiversLetTheRuntimeThrough(t *testing.T) {
	if os.Getenv(rawChildEnv) == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRawReceiversLetTheRuntimeThrough$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), rawChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("the child hung (killed after 60 s):\n%s", out)
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestRawReceiversLetTheRuntimeThrough") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	if n := rawLoops.Load(); n != 0 {
		t.Fatalf("%d raw loops before the test", n)
	}
	const loops = 3
	srvs := make([]*serverTest, loops)
	done := make(chan error, loops)
	for i := range srvs {
		_, sfd := rawPair(t) // the client end stays silent
		s := &serverTest{req: &proto.Request{Direction: proto.DirServerRecvs}, recvBuf: make([]byte, 16<<10)}
		s.ph.fds.add(sfd, false)
		t.Cleanup(s.ph.fds.abort)
		srvs[i] = s
		go func() { done <- s.tcpRecv(sfd) }()
	}
	time.Sleep(50 * time.Millisecond) // the loops blocked in their receives
	if n := rawLoops.Load(); n != 2 {
		t.Errorf("%d loops making raw calls with GOMAXPROCS 3, want 2", n)
	}

	fired := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(fired) })
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("a timer did not fire while raw receives held two processors of three")
	}

	gc := make(chan struct{})
	go func() { runtime.GC(); close(gc) }()
	select {
	case <-gc:
	case <-time.After(10 * time.Second):
		t.Fatal("a garbage collection did not get through blocked raw receives")
	}

	// The test's end: the stop flag, then the shutdown of the sockets.
	for _, s := range srvs {
		s.ph.startTimer(10*time.Millisecond, 20*time.Millisecond)
	}
	for range loops {
		select {
		case err := <-done:
			if err != errTimedOut {
				t.Errorf("receive loop ended with %v, want %v", err, errTimedOut)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the test timer did not end a blocked raw receive")
		}
	}
	if n := rawLoops.Load(); n != 0 {
		t.Errorf("%d raw slots still taken after the loops ended", n)
	}
	for _, s := range srvs {
		s.ph.stopTimer()
		if s.bytesRx != 0 {
			t.Errorf("received %d bytes from a silent peer", s.bytesRx)
		}
	}
}

package netperf

import (
	"context"
	"os"
	"testing"
	"time"

	"sluice/internal/netperf/internal/syscount"
	"sluice/internal/testutil"
)

// TestSyscallsPerMessage holds the data loops to what C netperf does per
// message: one send or receive system call for each send or receive the
// tests count (the kernel's count, perf stat on this process, where
// client and server both run), and little else. The allowance beyond
// that covers setting a test up (control messages, sockets: a few hundred
// calls) and the Go runtime's background (its monitor's sleeps, the
// yields' wake-ups: a few hundred a second, up to a few thousand on a
// loaded machine, where the monitor polls every 20 µs for a while after
// taking a processor from a call blocked 10 ms); a loop that polled, retried
// on EAGAIN or went through the netpoller would make two or more calls a
// message and fail. The counts are work, not time: the test holds on a
// busy machine. It needs perf (linux-perf), which the parity script needs
// too.
func TestSyscallsPerMessage(t *testing.T) {
	if err := syscount.Available(); err != nil {
		testutil.SkipOrFail(t, "no perf to count with (CI installs linux-perf): %v", err)
	}
	_, port := startServer(t)
	for _, tc := range []struct {
		test     string
		sendSize int
	}{
		{UDPStream, 1024},
		{UDPRR, 0},
		{TCPRR, 0},
		{TCPStream, 1024},
	} {
		t.Run(tc.test, func(t *testing.T) {
			c, err := syscount.Attach(os.Getpid(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r, err := Run(context.Background(), Config{Test: tc.test, Host: "127.0.0.1", Port: port, Duration: 500 * time.Millisecond, SendSize: tc.sendSize})
			elapsed := time.Since(start)
			counts, cerr := c.Stop()
			if err != nil {
				t.Fatal(err)
			}
			if cerr != nil {
				t.Fatal(cerr)
			}
			calls := r.LocalSendCalls + r.LocalRecvCalls + r.RemoteSendCalls + r.RemoteRecvCalls
			got := counts.Syscalls()
			background := 1000 + int64(elapsed.Seconds()*3000)
			allowed := calls + calls/50 + background
			t.Logf("%d system calls for %d counted sends and receives (%.4f each) in %v; %d context switches",
				got, calls, float64(got)/float64(max(calls, 1)), elapsed.Round(time.Millisecond), counts.Switches())
			if calls < 3*background {
				// A second call per message would hide in the allowance.
				t.Skipf("only %d sends and receives in %v: too few to judge on a machine this busy", calls, elapsed)
			}
			if got < calls {
				t.Errorf("%d system calls for %d sends and receives: the loops count calls they did not make", got, calls)
			}
			if got > allowed {
				t.Errorf("%d system calls for %d sends and receives (%.3f each), want at most %d", got, calls, float64(got)/float64(calls), allowed)
			}
		})
	}
}

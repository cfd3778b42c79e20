package netperf

import (
	"errors"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"sluice/internal/netperf/proto"
)

// errAborted ends a data loop whose sockets were shut down from outside:
// the control connection was lost, the context cancelled or the server
// closed.
var errAborted = errors.New("test aborted")

// errTimedOut ends a data loop whose time was up while a call was blocked.
var errTimedOut = errors.New("test length reached")

// phase is the state one side's data loop shares with the goroutines that
// may end it: the test timer sets stop, then interrupts calls still
// blocked; an abort shuts the sockets down at once.
type phase struct {
	fds         fdSet
	stop        atomic.Bool // the test length (or the safety bound) is reached
	timer, late *time.Timer
}

// startTimer sets stop after d, as netperf's SIGALRM sets times_up, and
// grace later shuts the sockets down if a call is still blocked, as
// SIGALRM interrupts it. The loops check stop once per iteration; the
// grace lets a transaction in flight at the end complete normally.
func (p *phase) startTimer(d, grace time.Duration) {
	p.timer = time.AfterFunc(d, func() { p.stop.Store(true) })
	p.late = time.AfterFunc(d+grace, func() {
		p.stop.Store(true)
		p.fds.interrupt()
	})
}

// extend moves the interruption d from now: for netperf's closing
// handshake, which may wait for the peer to drain its buffers.
func (p *phase) extend(d time.Duration) {
	if p.late != nil {
		p.late.Reset(d)
	}
}

func (p *phase) stopTimer() {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.late != nil {
		p.late.Stop()
	}
}

// ended says why a call failed or met the end of its stream: errAborted
// after an abort, errTimedOut once the test's time is up (the timer's
// interruption), nil otherwise (a real error or end of stream).
func (p *phase) ended() error {
	if p.fds.aborted.Load() {
		return errAborted
	}
	if p.stop.Load() {
		return errTimedOut
	}
	return nil
}

// ctlWatch reads the control connection while the data phase runs, so a
// peer that goes away ends the test at once instead of at its timer. What
// it reads (the peer's next message, arriving early) is kept for the
// caller.
type ctlWatch struct {
	conn net.Conn
	done chan struct{}
	buf  [proto.MsgSize]byte
	n    int
	err  error
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// watchCtl starts watching conn; lost runs if it fails or reaches EOF.
func watchCtl(conn net.Conn, lost func()) *ctlWatch {
	w := &ctlWatch{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.n, w.err = conn.Read(w.buf[:])
		if w.err != nil && !isTimeout(w.err) {
			lost()
		}
	}()
	return w
}

// stop ends the watch. It returns the bytes read and, if the connection
// failed, the error.
func (w *ctlWatch) stop() ([]byte, error) {
	_ = w.conn.SetReadDeadline(time.Unix(1, 0))
	<-w.done
	_ = w.conn.SetReadDeadline(time.Time{})
	if w.err != nil && !isTimeout(w.err) {
		return w.buf[:w.n], w.err
	}
	return w.buf[:w.n], nil
}

// yielder keeps the Go scheduler from treating a data loop as one
// long-running goroutine. A goroutine that has not been rescheduled for
// 10 ms has its processor taken away by the runtime's monitor even while
// it sits in a system call, which then polls every 20 µs for a while: on
// a loop that lives in blocking system calls that costs more than all of
// its own user time. Yielding every few milliseconds keeps the monitor
// asleep; each yield wakes an idle thread (a futex wake, the thread's
// spin and its futex wait again, and two context switches when the
// process is bound to one CPU), so not much more often than that. The
// clock is read every 16 calls while calls are quick, and on every call
// once they are slow (a loaded machine, a slow peer): 16 calls of a
// millisecond each would let the monitor in.
type yielder struct {
	n, every         uint32
	yields           uint64 // how many times it yielded
	checked, yielded time.Time
	// period is how often to yield: yieldEvery when zero, yieldEveryRaw
	// for a loop that blocks in raw system calls (see rawConn).
	period time.Duration
}

func (y *yielder) tick() {
	// Small enough to be inlined into the loops: most calls end here.
	y.n++
	if y.n >= y.every {
		y.check()
	}
}

func (y *yielder) check() {
	y.n = 0
	period := y.period
	if period == 0 {
		period = yieldEvery
	}
	now := time.Now()
	if now.Sub(y.checked) > period/8 {
		y.every = 1
	} else {
		y.every = 16
	}
	y.checked = now
	if now.Sub(y.yielded) >= period {
		y.yielded = now
		y.yields++
		runtime.Gosched()
	}
}

// yieldEvery is well inside the runtime's 10 ms forcePreemptNS: the
// monitor preempts a processor whose schedule tick it has seen unchanged
// for 10 ms, and the stride lets 16 calls pass between looks at the
// clock. 8 ms was tried (perf stat, Go netserver): it halved the yields'
// futex calls (about 125 a second fewer per data loop) but a TCP_STREAM
// receiver, whose calls block for uneven times, then overran 10 ms often
// enough that the monitor's own sleeps rose by more (1 790 → 2 420 per
// 3 s run, five runs each): more system calls in all.
const yieldEvery = 4 * time.Millisecond

// yieldEveryRaw is the yield period of a loop that blocks in raw system
// calls (rawConn): its processor is never in a system call the
// monitor could take it from, so an overrun of the monitor's 10 ms costs
// one preemption signal (the monitor's tgkill, an interrupted receive
// made again) rather than a retaken processor and a millisecond of 20 µs
// polling. Yielding just inside 10 ms halves the yields' wake-ups of
// yieldEvery and leaves room for a thread kept off its CPU for a while.
const yieldEveryRaw = 8 * time.Millisecond

// SpareProc makes sure the Go scheduler has at least two processors
// (GOMAXPROCS ≥ 2); netperf and netserver call it at start. With a single
// one (a process bound to one CPU by taskset or netperf -T, a one-CPU
// cpuset or container), the runtime's monitor takes the processor away
// from every system call that outlasts two of its ticks (20 µs at first),
// because no other processor is idle to run other goroutines, and then
// keeps polling every 20 µs: in a pinned TCP_RR the Go netserver's
// monitor thread used more CPU than its data loop. A second processor
// stays idle; that it exists lets the monitor leave a blocked call alone
// for 10 ms. A GOMAXPROCS of two or more is left as it is.
func SpareProc() {
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}

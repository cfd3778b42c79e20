package bpf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"sluice/internal/packet"
	"sluice/internal/state"
)

// The soak test (issue 10 item 7): TCP_CRR through keep state at the
// default state_max, a long-lived connection, and a bounded SYN flood
// from random sources, between two namespaces with the filter on the
// server's veth. It checks that new connections are never locked out for
// longer than the entries filling the table live, that the long-lived
// connection never stalls, that the state count equals the table, and
// that the table (and so its memory) stays within state_max.
//
// SLUICE_SOAK sets the run's length (for example 10m, by hand). Without
// it the test runs about 45 s with the timeouts of the flood's entries
// shortened (tcp_syn_sent 10 s) so that the recovery fits; with it the
// IPFilter defaults stand, and the flood's entries hold the table for
// tcp_syn_sent (240 s) as IPFilter's would.
func TestPrivilegedSoak(t *testing.T) {
	total := 45 * time.Second
	long := false
	if s := os.Getenv("SLUICE_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SLUICE_SOAK: %v", err)
		}
		total, long = d, true
	}
	tp := newTopo(t)
	d := tp.attach(t)
	var im *Image
	inNS(t, tp.b, func() {
		im = compileText(t, "block in all\nblock out all\n"+
			"pass in quick proto tcp from any to any flags S/SA keep state\n")
	})
	if err := d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	// what fills the table lives this long: the flood's SYN_SENT entries
	// tcp_syn_sent, CRR's closed connections (CLOSING/LAST_ACK) tcp_last_ack
	synSent := time.Duration(state.TCPTimeoutDefault("tcp_syn_sent")) * tick
	lastAck := time.Duration(state.TCPTimeoutDefault("tcp_last_ack")) * tick
	if !long {
		synSent, lastAck = 10*time.Second, 10*time.Second
		for _, name := range []string{"tcp_syn_sent", "tcp_last_ack"} {
			if err := d.SetTunable(name, uint64(10*time.Second/tick)); err != nil {
				t.Fatal(err)
			}
		}
	}
	lifetime := max(synSent, lastAck)
	stateMax := int64(d.StateMax())

	// servers in b: CRR (server closes first, as netperf's) and a
	// long-lived echo
	crrLn := listen(t, tp.b, "10.99.0.2:8080")
	go func() {
		for {
			c, err := crrLn.Accept()
			if err != nil {
				return
			}
			go func() {
				c.SetDeadline(time.Now().Add(5 * time.Second))
				b := make([]byte, 1)
				if _, err := io.ReadFull(c, b); err == nil {
					c.Write(b)
				}
				c.Close()
			}()
		}
	}()
	echoLn := listen(t, tp.b, "10.99.0.2:8081")
	go func() {
		c, err := echoLn.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
	}()

	var (
		crrOK, crrFail atomic.Int64
		stop           = make(chan struct{})
		wg             sync.WaitGroup
		echoMax        atomic.Int64 // ns
		echoErr        atomic.Value
	)
	// the long-lived connection: one exchange every 50 ms
	var echo net.Conn
	var err error
	inNS(t, tp.a, func() { echo, err = net.DialTimeout("tcp", "10.99.0.2:8081", 3*time.Second) })
	if err != nil {
		t.Fatalf("long-lived connection: %v", err)
	}
	defer echo.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		b := make([]byte, 8)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			t0 := time.Now()
			echo.SetDeadline(t0.Add(3 * time.Second))
			if _, err := echo.Write(b); err != nil {
				echoErr.Store(err.Error())
				return
			}
			if _, err := io.ReadFull(echo, b); err != nil {
				echoErr.Store(err.Error())
				return
			}
			if el := int64(time.Since(t0)); el > echoMax.Load() {
				echoMax.Store(el)
			}
		}
	}()
	// CRR workers, each on a thread in a's namespace
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go inNS(t, tp.a, func() {
			defer wg.Done()
			dialer := &net.Dialer{Timeout: 3 * time.Second}
			b := make([]byte, 1)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := dialer.Dial("tcp", "10.99.0.2:8080")
				if err != nil {
					crrFail.Add(1)
					continue
				}
				c.SetDeadline(time.Now().Add(3 * time.Second))
				_, err = c.Write(b)
				if err == nil {
					_, err = io.ReadFull(c, b)
				}
				if err == nil {
					_, err = c.Read(b) // the server's close
					if err == io.EOF {
						err = nil
					}
				}
				c.Close()
				if err != nil {
					crrFail.Add(1)
				} else {
					crrOK.Add(1)
				}
			}
		})
	}

	// samples every second: CRR rate, count and table, memory
	type sample struct {
		at           time.Duration
		ok, fail     int64
		count, table int64
		memlock      int64
	}
	var samples []sample
	start := time.Now()
	floodAt, floodDone := total/3, time.Duration(0)
	var peakCount, peakMem int64
	for el := time.Duration(0); el < total; el = time.Since(start) {
		time.Sleep(time.Second)
		if floodDone == 0 && time.Since(start) >= floodAt {
			n := floodSYNs(t, tp, int(3*stateMax))
			floodDone = time.Since(start)
			t.Logf("flood: %d SYNs from random sources in %v", n, floodDone-floodAt)
		}
		c, n, ok := sampleCount(d)
		s := sample{at: time.Since(start), ok: crrOK.Load(), fail: crrFail.Load(), count: c, table: n, memlock: memlock(d)}
		samples = append(samples, s)
		peakCount, peakMem = max(peakCount, c), max(peakMem, s.memlock)
		if !ok {
			t.Errorf("%v: state count %d, table %d", s.at.Round(time.Second), c, n)
		}
	}
	if os.Getenv("SLUICE_SOAK_DEBUG") != "" {
		sts, _ := d.States()
		hist := map[[2]uint8]int{}
		for _, x := range sts {
			hist[x.TCPState]++
		}
		t.Logf("TCP states: %v", hist)
	}
	close(stop)
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	checkCount(t, d, "at the end, traffic stopped")
	// every removal gives its entry back: emptied, the table counts zero
	if _, err := d.FlushStates(nil); err != nil {
		t.Fatal(err)
	}
	checkCount(t, d, "at the end, after ipf -FS")
	st, _ := d.Stats()

	// the report
	var rep strings.Builder
	fmt.Fprintf(&rep, "soak %v, state_max %d, tcp_syn_sent %v, tcp_last_ack %v\n", total, stateMax, synSent, lastAck)
	fmt.Fprintf(&rep, "%6s %8s %8s %8s %8s %10s\n", "t", "CRR/s", "fail/s", "count", "table", "memlock")
	var prev sample
	for _, s := range samples {
		dt := (s.at - prev.at).Seconds()
		fmt.Fprintf(&rep, "%6s %8.0f %8.0f %8d %8d %10d\n", s.at.Round(time.Second), float64(s.ok-prev.ok)/dt,
			float64(s.fail-prev.fail)/dt, s.count, s.table, s.memlock)
		prev = s
	}
	fmt.Fprintf(&rep, "CRR transactions %d, failed %d; long-lived exchanges max %v; peak entries %d, peak memlock %d bytes\n",
		crrOK.Load(), crrFail.Load(), time.Duration(echoMax.Load()).Round(time.Millisecond), peakCount, peakMem)
	fmt.Fprintf(&rep, "state adds refused (state_max) %d, lost %d, swept %d, flushed %d, sweeper runs %d\n",
		st.StateMaxRefused, st.In.StateLost, st.Swept, st.Flushed, st.SweepRuns)
	t.Log("\n" + rep.String())
	if p := os.Getenv("SLUICE_SOAK_REPORT"); p != "" {
		os.WriteFile(p, []byte(rep.String()), 0o644)
	}

	// the checks
	if e := echoErr.Load(); e != nil {
		t.Errorf("long-lived connection failed: %v", e)
	}
	// A stall is a lost flow, not slowness: the limit is far above a
	// loaded CI machine's scheduling delays (1.09 s was seen under load 11).
	if m := time.Duration(echoMax.Load()); m > 5*time.Second {
		t.Errorf("long-lived connection stalled for %v", m)
	}
	if peakCount > stateMax+64 {
		t.Errorf("peak state count %d, state_max %d", peakCount, stateMax)
	}
	// no lockout: while the table is full new connections wait for its
	// entries to expire (IPFilter refuses them meanwhile), but no longer:
	// every window as long as the filling entries live (plus a few
	// seconds for SYN retransmissions) sees transactions complete
	window := lifetime + 5*time.Second
	for i := range samples {
		j := i
		for j < len(samples) && samples[j].at-samples[i].at < window {
			j++
		}
		if j == len(samples) {
			break
		}
		if samples[j].ok == samples[i].ok {
			t.Errorf("no CRR transaction completed from %v to %v: locked out longer than the table's entries live (%v)",
				samples[i].at.Round(time.Second), samples[j].at.Round(time.Second), lifetime)
			break
		}
	}
	if samples[len(samples)-1].ok == 0 {
		t.Error("no CRR transaction completed at all")
	}
	// bounded memory: the table's memory follows its entries
	if peakMem > 0 && peakMem > (stateMax+64)*2048 {
		t.Errorf("peak memlock %d bytes for at most %d entries", peakMem, stateMax)
	}
}

func listen(t *testing.T, ns netns.NsHandle, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	inNS(t, ns, func() { ln, err = net.Listen("tcp", addr) })
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func netipFrom4(b [4]byte) netip.Addr { return netip.AddrFrom4(b) }

// sampleCount reads the state count and walks the table while traffic
// and the sweeper change it: a walk is no snapshot (a sweep that removes
// a burst of expired entries meanwhile shows in part), so a walk counts
// when the table it saw lies between the counts read before and after it
// (give or take the entries a few packets make); three walks that do not
// are a disagreement.
func sampleCount(d *Datapath) (count, table int64, ok bool) {
	for try := 0; try < 3; try++ {
		c0, _ := d.StateCount()
		n, _ := d.StateEntries()
		c1, _ := d.StateCount()
		count, table = c1, int64(n)
		if table >= min(c0, c1)-64 && table <= max(c0, c1)+64 {
			return count, table, true
		}
	}
	return count, table, false
}

// floodSYNs sends n TCP SYNs to 10.99.0.2:8082 (no listener) from random
// sources in 10.200.0.0/16 out of namespace a, with a raw socket.
func floodSYNs(t *testing.T, tp *topo, n int) int {
	t.Helper()
	sent := 0
	inNS(t, tp.a, func() {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			t.Errorf("raw socket: %v", err)
			return
		}
		defer unix.Close(fd)
		r := rand.New(rand.NewPCG(7, 7))
		dst := &unix.SockaddrInet4{Addr: [4]byte{10, 99, 0, 2}}
		for i := 0; i < n; i++ {
			src := [4]byte{10, 200, byte(r.IntN(256)), byte(r.IntN(256))}
			if unix.Sendto(fd, synPacket(src, dst.Addr, uint16(1024+r.IntN(60000)), 8082, r.Uint32()), 0, dst) == nil {
				sent++
			}
			if i%500 == 499 {
				time.Sleep(50 * time.Millisecond) // bounded: about 10 000 SYNs/s
			}
		}
	})
	return sent
}

// synPacket is an IPv4 TCP SYN with correct checksums.
func synPacket(src, dst [4]byte, sp, dp uint16, seq uint32) []byte {
	b := make([]byte, 40)
	b[0], b[8], b[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(b[2:], 40)
	copy(b[12:], src[:])
	copy(b[16:], dst[:])
	binary.BigEndian.PutUint16(b[10:], ^packet.Checksum(b[:20], 0))
	tcp := b[20:]
	binary.BigEndian.PutUint16(tcp[0:], sp)
	binary.BigEndian.PutUint16(tcp[2:], dp)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12], tcp[13] = 5<<4, 0x02
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	s := packet.PseudoHeaderChecksum(6, netipFrom4(src), netipFrom4(dst), 20)
	binary.BigEndian.PutUint16(tcp[16:], ^packet.Checksum(tcp, s))
	return b
}

// memlock is what the kernel accounts for the state table (fdinfo), -1 if
// it cannot tell.
func memlock(d *Datapath) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", d.objs.States.FD()))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "memlock:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return -1
}

package run

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

// Builtin is a small traffic generator with netperf's four TCP tests and
// netperf's units, run inside the test bed's namespaces. It stands in
// until the netperf library (internal/netperf) offers Run and NewServer;
// the results name it, so reports never pass it off as netperf. Both ends
// share one machine, so local and remote CPU are the same system-wide
// figure.
type Builtin struct {
	tb   *topo.Topo
	ln   net.Listener
	addr string

	mu    sync.Mutex // guards conns
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewBuiltin starts the server end in the peer namespace.
func NewBuiltin(tb *topo.Topo) (*Builtin, error) {
	b := &Builtin{tb: tb, conns: map[net.Conn]struct{}{}}
	peer := tb.Host(topo.Peer)
	err := tb.Do(topo.Peer, func() (err error) {
		b.ln, err = net.Listen("tcp", netip.AddrPortFrom(peer.Addr, 0).String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("builtin generator: %w", err)
	}
	b.addr = b.ln.Addr().String()
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// Name implements Generator.
func (b *Builtin) Name() string { return "builtin (stand-in for netperf)" }

// Close stops the server and waits for its goroutines.
func (b *Builtin) Close() error {
	err := b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

// Control header: mode, two sizes, a duration in ms (big-endian).
const hdrLen = 13

const (
	modeSink   = 'S' // server reads to EOF (TCP_STREAM)
	modeSource = 'M' // server sends for the duration (TCP_MAERTS)
	modeRR     = 'R' // server answers requests until EOF (TCP_RR)
	modeCRR    = 'C' // server answers one request and closes (TCP_CRR)
)

func (b *Builtin) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			serve(c)
			c.Close()
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
		}()
	}
}

func serve(c net.Conn) {
	var h [hdrLen]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return
	}
	s1 := int(binary.BigEndian.Uint32(h[1:]))
	s2 := int(binary.BigEndian.Uint32(h[5:]))
	d := time.Duration(binary.BigEndian.Uint32(h[9:])) * time.Millisecond
	if s1 <= 0 || s1 > 1<<20 || s2 < 0 || s2 > 1<<20 {
		return
	}
	switch h[0] {
	case modeSink:
		buf := make([]byte, max(s1, 64<<10))
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	case modeSource:
		buf := make([]byte, s1)
		end := time.Now().Add(d)
		_ = c.SetWriteDeadline(end)
		for time.Now().Before(end) {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	case modeRR, modeCRR:
		req, resp := make([]byte, s1), make([]byte, max(s2, 1))
		for {
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			if _, err := c.Write(resp); err != nil || h[0] == modeCRR {
				// In CRR the server closes first, as netserver does,
				// so TIME_WAIT lands on its side and the client does
				// not run out of ephemeral ports.
				return
			}
		}
	}
}

func header(mode byte, s1, s2 int, d time.Duration) []byte {
	h := make([]byte, hdrLen)
	h[0] = mode
	binary.BigEndian.PutUint32(h[1:], uint32(s1))
	binary.BigEndian.PutUint32(h[5:], uint32(s2))
	binary.BigEndian.PutUint32(h[9:], uint32(d/time.Millisecond))
	return h
}

// Run implements Generator.
func (b *Builtin) Run(ctx context.Context, t result.Test, d time.Duration) (Measurement, error) {
	var m Measurement
	c0, err := readCPU()
	if err != nil {
		return m, err
	}
	start := time.Now()
	var bytes, trans int64
	err = b.tb.Do(topo.SUT, func() error {
		var err error
		switch t.Name {
		case TCPStream:
			bytes, err = b.stream(ctx, t, d)
		case TCPMaerts:
			bytes, err = b.maerts(ctx, t, d)
		case TCPRR:
			trans, err = b.rr(ctx, t, d)
		case TCPCRR:
			trans, err = b.crr(ctx, t, d)
		default:
			err = fmt.Errorf("builtin generator: test %s not supported", t.Name)
		}
		return err
	})
	m.Elapsed = time.Since(start)
	c1, cerr := readCPU()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return m, err
	}
	if cerr != nil {
		return m, cerr
	}
	secs := m.Elapsed.Seconds()
	util := utilisation(c0, c1)
	m.LocalCPU, m.RemoteCPU = util, util
	ncpu := runtime.NumCPU()
	if t.Stream() {
		m.ThroughputMbps = float64(bytes) * 8 / secs / 1e6
		m.LocalSD = serviceDemand(util, float64(bytes)/1024/secs, ncpu)
	} else {
		m.TransPerSec = float64(trans) / secs
		m.LocalSD = serviceDemand(util, m.TransPerSec, ncpu)
	}
	m.RemoteSD = m.LocalSD
	return m, nil
}

func (b *Builtin) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", b.addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// watch closes c's I/O when ctx is cancelled.
func watch(ctx context.Context, c net.Conn) func() bool {
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
}

func (b *Builtin) stream(ctx context.Context, t result.Test, d time.Duration) (int64, error) {
	c, err := b.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	defer watch(ctx, c)()
	if _, err := c.Write(header(modeSink, max(t.SendSize, 1), 0, d)); err != nil {
		return 0, err
	}
	buf := make([]byte, max(t.SendSize, 1))
	var n int64
	for end := time.Now().Add(d); time.Now().Before(end); {
		k, err := c.Write(buf)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	// Wait for the server to drain, as netperf does (shutdown, then EOF).
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return n, err
	}
	_, err = io.Copy(io.Discard, c)
	return n, err
}

func (b *Builtin) maerts(ctx context.Context, t result.Test, d time.Duration) (int64, error) {
	c, err := b.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	defer watch(ctx, c)()
	if _, err := c.Write(header(modeSource, max(t.SendSize, 1), 0, d)); err != nil {
		return 0, err
	}
	buf := make([]byte, max(t.SendSize, 64<<10))
	var n int64
	for {
		k, err := c.Read(buf)
		n += int64(k)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (b *Builtin) rr(ctx context.Context, t result.Test, d time.Duration) (int64, error) {
	c, err := b.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	defer watch(ctx, c)()
	return transact(c, t, d, false)
}

func (b *Builtin) crr(ctx context.Context, t result.Test, d time.Duration) (int64, error) {
	var n int64
	for end := time.Now().Add(d); time.Now().Before(end); {
		c, err := b.dial(ctx)
		if err != nil {
			return n, err
		}
		stop := watch(ctx, c)
		k, err := transact(c, t, 0, true)
		stop()
		c.Close()
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// transact sends the RR header and runs transactions for d, or exactly
// one when once is set.
func transact(c net.Conn, t result.Test, d time.Duration, once bool) (int64, error) {
	req, resp := make([]byte, max(t.ReqSize, 1)), make([]byte, max(t.RespSize, 1))
	mode := byte(modeRR)
	if once {
		mode = modeCRR
	}
	if _, err := c.Write(header(mode, len(req), len(resp), 0)); err != nil {
		return 0, err
	}
	var n int64
	for end := time.Now().Add(d); once || time.Now().Before(end); {
		if _, err := c.Write(req); err != nil {
			return n, err
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			return n, err
		}
		n++
		if once {
			// Wait for the server's close.
			_, err := io.Copy(io.Discard, c)
			return n, err
		}
	}
	return n, nil
}

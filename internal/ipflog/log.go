package ipflog

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"sluice/internal/packet"
)

// DefaultSize is the default capacity of a Log in bytes (IPFILTER_LOGSIZE).
const DefaultSize = 8192 * 16

// maxBody is the most payload "log body" records (ipl_logall off).
const maxBody = 128

// Config configures a Log.
type Config struct {
	// Size is the buffer capacity in bytes (0 = DefaultSize). Records
	// that do not fit are dropped and counted, as in the kernel.
	Size int
	// Suppress merges a record identical to the previous one into it by
	// counting it (the ipl_suppress tunable, on by default in IPFilter;
	// the zero Config leaves it off, NewDefault turns it on).
	Suppress bool
	// LogAll logs whole packets, not only headers (ipl_logall).
	LogAll bool
}

// Log is the ipf log device: a bounded buffer of encoded records that
// readers drain (ipmon) or that is written out at exit (ipftest -l).
// It is safe for concurrent use; mu guards every field.
type Log struct {
	mu      sync.Mutex
	cfg     Config
	buf     []byte
	seq     uint32
	last    int // offset in buf of the last record, -1 if none
	dropped uint64
	scratch []byte
	event   [eventBodySize]byte
	wake    chan struct{}
}

// New returns an empty Log.
func New(cfg Config) *Log {
	if cfg.Size <= 0 {
		cfg.Size = DefaultSize
	}
	return &Log{cfg: cfg, last: -1, wake: make(chan struct{}, 1)}
}

// NewDefault returns a Log with IPFilter's defaults (suppression on).
func NewDefault() *Log { return New(Config{Suppress: true}) }

// Entry is what the engine hands to Append for one logged packet.
type Entry struct {
	// Time is the packet time (ipftest uses the zero time).
	Time time.Time
	// Iface is the interface name.
	Iface string
	// Group and GroupUnset identify the rule's group (see Record).
	Group      string
	GroupUnset bool
	// Rule is the 0-based rule index in its list or group, -1 for none.
	Rule int32
	// Flags are the FR_* result flags to log (FRLogBody selects the body).
	Flags uint32
	// Out is the direction.
	Out bool
	// LogTag, NatTag, Level and Reason are as in Record (Level: NoLevel
	// when the rule has none).
	LogTag uint32
	NatTag string
	Level  uint16
	Reason uint8
	// Info is the parsed packet (Parse's result, even when it returned an
	// error) and Packet its bytes from the IP header. A nil Info logs the
	// whole packet as its header.
	Info   *packet.Info
	Packet []byte
}

// logHeaderLen is ipf_log_pkt's header size: the IP (and extension)
// headers up to the transport header, plus the transport header, plus for
// ICMP errors the start of the embedded packet.
func logHeaderLen(in *packet.Info) int {
	hlen := in.L4Off
	if in.Off != 0 {
		return hlen
	}
	dlen := in.DLen
	switch in.Proto {
	case packet.ProtoTCP:
		hlen += min(packet.TCPMinimumSize, dlen)
	case packet.ProtoUDP:
		hlen += min(packet.UDPMinimumSize, dlen)
	case packet.ProtoICMP:
		if in.Flags&packet.FlagICMPErr != 0 {
			hlen += min(28+8, dlen)
		} else {
			hlen += min(28, dlen)
		}
	case packet.ProtoICMPv6:
		if in.HasICMP && in.ICMPType < 128 {
			hlen += min(8+8, dlen)
		} else {
			hlen += min(8, dlen)
		}
	}
	return hlen
}

// Append logs one packet (ipf_log_pkt + ipf_log_items). It returns false
// when the record did not fit (the caller applies "or-block"). With
// suppression on, a record equal to the previous one, apart from its
// sequence number, only bumps that record's count; the sequence number
// advances either way, so ipmon sees no gap. Append does not allocate
// once the buffers have grown.
func (l *Log) Append(e *Entry) bool {
	in := e.Info
	if in == nil {
		// Without parsed information log the whole packet as header.
		in = &packet.Info{L4Off: len(e.Packet), PLen: len(e.Packet)}
	}
	hlen := logHeaderLen(in)
	body := in.PLen - hlen
	if body < 0 {
		body = 0
	}
	if !l.cfg.LogAll || e.Flags&FRLogBody == 0 {
		if e.Flags&FRLogBody != 0 {
			body = min(body, maxBody)
		} else {
			body = 0
		}
	}
	n := min(hlen+body, len(e.Packet))
	if hlen > n {
		hlen = n
	}
	body = n - hlen
	r := Record{
		Type: TypeIPF, Count: 1, Time: e.Time, Iface: e.Iface, Group: e.Group,
		GroupUnset: e.GroupUnset, Rule: e.Rule, Flags: e.Flags, LFlags: uint32(in.Flags),
		Out: e.Out, LogTag: e.LogTag, NatTag: e.NatTag, Level: e.Level, Reason: e.Reason,
		Family: in.Version, HLen: hlen, BodyLen: body, Data: e.Packet[:n],
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	r.Seq = l.seq
	l.scratch = r.AppendBinary(l.scratch[:0])
	if l.cfg.Suppress && in.Off == 0 && l.last >= 0 && sameRecord(l.buf[l.last:], l.scratch) {
		c := le32(l.buf[l.last+12:]) + 1
		putLE32(l.buf[l.last+12:], c)
		return true
	}
	if len(l.buf)+len(l.scratch) > l.cfg.Size {
		l.dropped++
		return false
	}
	l.last = len(l.buf)
	l.buf = append(l.buf, l.scratch...)
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return true
}

// sameRecord compares two encoded records ignoring sequence, count and
// time: IPFilter compares the packet information, not the clock.
func sameRecord(a, b []byte) bool {
	if len(a) < headerSize || len(b) < headerSize {
		return false
	}
	size := int(le32(a[4:]))
	if size != len(b) || size > len(a) {
		return false
	}
	return bytes.Equal(a[:8], b[:8]) && bytes.Equal(a[28:size], b[28:])
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func putLE32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// Dropped returns how many records did not fit.
func (l *Log) Dropped() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Len returns the bytes waiting to be read.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buf)
}

// WriteTo writes and drains every buffered record (ipftest -l at exit,
// or a reader of the log device).
func (l *Log) WriteTo(w io.Writer) (int64, error) {
	l.mu.Lock()
	b := l.buf
	l.buf = nil
	l.last = -1
	l.mu.Unlock()
	n, err := w.Write(b)
	return int64(n), err
}

// Flush discards the buffered records and returns how many bytes they
// held (ipmon -F / ipf -F... on the log device).
func (l *Log) Flush() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.buf)
	l.buf = l.buf[:0]
	l.last = -1
	return n
}

// Wait returns a channel that receives after records are appended, for
// live readers.
func (l *Log) Wait() <-chan struct{} { return l.wake }

// Read copies whole buffered records into p, oldest first, and removes
// them from the log, as a read of the ipf log device does. It does not
// block: with nothing buffered it returns 0, nil. When p cannot hold even
// the first record it returns io.ErrShortBuffer.
func (l *Log) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for n+headerSize <= len(l.buf) {
		size := int(le32(l.buf[n+4:]))
		if n+size > len(p) {
			break
		}
		n += size
	}
	if n == 0 {
		if len(l.buf) > 0 {
			return 0, io.ErrShortBuffer
		}
		return 0, nil
	}
	copy(p, l.buf[:n])
	rest := copy(l.buf, l.buf[n:])
	l.buf = l.buf[:rest]
	if l.last >= n {
		l.last -= n
	} else {
		l.last = -1 // the record suppression would extend has been read
	}
	return n, nil
}

// WaitRead is Read that blocks until records are buffered or ctx ends.
func (l *Log) WaitRead(ctx context.Context, p []byte) (int, error) {
	for {
		n, err := l.Read(p)
		if n > 0 || err != nil {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-l.wake:
		}
	}
}

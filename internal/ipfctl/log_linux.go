package ipfctl

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
	"sluice/internal/ipflog"
)

// LiveLog reads the datapath's log ring and hands out ipflog records, so
// ipmon prints live and offline records with the same code.
type LiveLog struct {
	d  *bpf.Datapath
	rd *bpf.LogReader
	// monoToWall converts the ring's CLOCK_MONOTONIC stamps to wall time.
	monoToWall time.Duration
	seq        uint32
	ifnames    map[uint32]string
	// failed is the datapath's count of records it could not log (ring
	// buffer full) when last looked at; checked is when that was.
	failed  uint64
	checked time.Time
}

// lostPoll is how often Next looks at the datapath's log-failure counter.
// Reading it takes one map lookup per CPU: not worth doing per record.
const lostPoll = 100 * time.Millisecond

// OpenLiveLog starts reading the log ring of the datapath pinned in dir
// ("" = default). Only one reader should run at a time: each record goes
// to one reader.
func OpenLiveLog(dir string) (*LiveLog, error) {
	d, err := bpf.OpenPinned(orDefault(dir))
	if err != nil {
		return nil, permissionHint(explainNotLoaded(orDefault(dir), err))
	}
	rd, err := d.OpenLog()
	if err != nil {
		d.Close()
		return nil, permissionHint(err)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		rd.Close()
		d.Close()
		return nil, fmt.Errorf("reading the monotonic clock: %w", err)
	}
	l := &LiveLog{d: d, rd: rd, ifnames: map[uint32]string{}}
	l.monoToWall = time.Duration(time.Now().UnixNano() - ts.Nano())
	// records lost before this reader started are not its to report
	l.failed, _ = l.logFailures()
	l.checked = time.Now()
	return l, nil
}

// SetDeadline makes Next return os.ErrDeadlineExceeded after t.
func (l *LiveLog) SetDeadline(t time.Time) { l.rd.SetDeadline(t) }

// Close stops reading.
func (l *LiveLog) Close() error {
	err := l.rd.Close()
	l.d.Close()
	return err
}

// logFailures is the datapath's count of records the ring had no room
// for (ipfstat's "log failures", IPFilter's ST_LOGFAIL).
func (l *LiveLog) logFailures() (uint64, error) {
	st, err := l.d.Stats()
	if err != nil {
		return 0, err
	}
	return st.In.LogFail + st.Out.LogFail, nil
}

// Next blocks for the next record. Records the datapath could not log
// (the ring was full because the reader fell behind) are counted by the
// datapath; Next skips that many sequence numbers, so the gap shows in
// the records' Seq as it does in IPFilter's log, and ipmon reports it
// ("missed N ipf log entries"). The gap comes at the first record read
// after the loss was counted, which may be a few records after it
// happened.
func (l *LiveLog) Next() (ipflog.Record, error) {
	raw, err := l.rd.Read()
	if err != nil {
		return ipflog.Record{}, err
	}
	if now := time.Now(); now.Sub(l.checked) >= lostPoll {
		l.checked = now
		if n, err := l.logFailures(); err == nil && n > l.failed {
			l.seq += uint32(n - l.failed)
			l.failed = n
		}
	}
	wall := time.Unix(0, int64(raw.Time+l.monoToWall))
	r := Convert(&raw, l.ifname(raw.Ifindex), l.group(raw.List), wall, l.seq)
	l.seq++
	return r, nil
}

func (l *LiveLog) ifname(idx uint32) string {
	if n, ok := l.ifnames[idx]; ok {
		return n
	}
	n := fmt.Sprint(idx)
	if ifc, err := net.InterfaceByIndex(int(idx)); err == nil {
		n = ifc.Name
	}
	l.ifnames[idx] = n
	return n
}

// group names list id of the active set from the datapath's list names
// (one map lookup, not cached: the set may be replaced while ipmon runs).
func (l *LiveLog) group(id uint32) string {
	if id < firstGroupList {
		return ""
	}
	n, err := l.d.ListName(bpf.Active, id)
	if err != nil || n == "" {
		return fmt.Sprint(id)
	}
	return n
}

// logHeaderSize is the fixed part of a kernel log record, before the
// packet bytes.
const logHeaderSize = 48

// Flush discards the records waiting in the ring (ipmon -F) and returns
// how many bytes they held.
func (l *LiveLog) Flush() (int, error) {
	l.rd.SetDeadline(time.Now())
	defer l.rd.SetDeadline(time.Time{})
	n := 0
	for {
		r, err := l.rd.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += logHeaderSize + len(r.Data)
	}
}

// Package ipflog holds IPFilter's packet log: the records the filter
// appends when a rule logs (ip_log.c ipf_log_pkt/ipf_log_items), their
// binary encoding (what ipftest -l writes and ipmon reads), and ipmon's
// text rendering of them (ipmon.c print_ipflog).
//
// The binary encoding is Sluice's own, not IPFilter's iplog_t layout: a
// little-endian fixed header followed by the interface name, group name,
// NAT tag and the logged packet bytes (see Record.AppendBinary). Records
// are self-delimiting and 8-byte aligned, so a log file is a plain
// concatenation of records.
package ipflog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Rule and verdict flag bits carried in Record.Flags (IPFilter's FR_* and
// FF_* values from ip_fil.h; the engine passes its result flags unchanged).
const (
	FRCmdMask    = 0x0000f
	FRBlock      = 0x00001
	FRPass       = 0x00002
	FRAuth       = 0x00003
	FRPreAuth    = 0x00004
	FRAccount    = 0x00005
	FRLog        = 0x00010
	FRLogMask    = FRLog | FRCmdMask
	FRQuick      = 0x00100
	FRKeepFrag   = 0x00200
	FRKeepState  = 0x00400
	FRLogBody    = 0x10000
	FRLogFirst   = 0x20000
	FRLogOrBlock = 0x40000
	FRNoMatch    = 0x8000000
	FFLogPass    = 0x10000000
	FFLogBlock   = 0x20000000
	FFLogNoMatch = 0x40000000
)

// Log types (IPL_LOGIPF, IPL_LOGNAT, IPL_LOGSTATE).
const (
	TypeIPF   = 0
	TypeNAT   = 1
	TypeState = 2
)

// magic starts every record (IPFilter's IPL_MAGIC value).
const magic = 0x97353535

// headerSize is the fixed part of an encoded record.
const headerSize = 64

// NoLevel is Record.Level when the rule set no "level".
const NoLevel = 0xffff

// Record is one ipf log record (iplog_t + ipflog_t + packet bytes).
type Record struct {
	// Type is TypeIPF (NAT and state records are reserved).
	Type uint8
	// Seq is the log sequence number; ipmon reports gaps.
	Seq uint32
	// Count is how many identical packets this record stands for (log
	// suppression); ipmon prints "Nx" when it is above 1.
	Count uint32
	// Time is when the packet was logged.
	Time time.Time
	// Iface is the interface name.
	Iface string
	// Group is the rule's group ("" = none, printed "@0:"); GroupUnset
	// means no rule had matched yet (printed "@-1:").
	Group      string
	GroupUnset bool
	// Rule is the 0-based index of the rule in its list or group, -1 if
	// none; ipmon prints Rule+1.
	Rule int32
	// Flags are the FR_* flags of the result (pass/block/log, keep state...).
	Flags uint32
	// LFlags are the packet's FI_* flags (packet.Flags).
	LFlags uint32
	// Out is the direction.
	Out bool
	// LogTag is the rule's log-tag (0 = none).
	LogTag uint32
	// NatTag is the NAT tag ("" = none).
	NatTag string
	// Level is the rule's syslog level, or NoLevel.
	Level uint16
	// Reason is the block reason (fin_reason), 0 for none.
	Reason uint8
	// Family is 4 or 6.
	Family uint8
	// HLen is the number of header bytes at the start of Data (IP header
	// and transport header); BodyLen the payload bytes that follow
	// ("log body").
	HLen, BodyLen int
	// Data holds HLen+BodyLen bytes of the packet from its IP header
	// (for state and NAT records: the encoded event).
	Data []byte

	// State is the event of a TypeState record, NAT that of a TypeNAT
	// record (filled by Decode).
	State StateLog
	NAT   NATLog
}

// ErrCorrupt reports an undecodable log record.
var ErrCorrupt = errors.New("ipflog: corrupt log record")

func pad8(n int) int { return (n + 7) &^ 7 }

// EncodedLen is the size of r's binary encoding.
func (r *Record) EncodedLen() int {
	return pad8(headerSize + len(r.Iface) + len(r.Group) + len(r.NatTag) + len(r.Data))
}

// AppendBinary appends r's binary encoding to dst:
//
//	0  magic u32      4  size u32 (whole record, padded to 8)
//	8  seq u32       12  count u32
//	16 sec i64       24  usec u32     28 rule i32
//	32 flags u32     36 lflags u32    40 logtag u32
//	44 level u16     46 dir u8        47 reason u8
//	48 hlen u16      50 bodylen u16
//	52 type u8       53 family u8     54 groupunset u8
//	55 len(iface) u8 56 len(group) u8 57 len(nattag) u8  58..63 zero
//	64 iface, group, nattag, data, zero padding
func (r *Record) AppendBinary(dst []byte) []byte {
	size := r.EncodedLen()
	start := len(dst)
	dst = slices.Grow(dst, size)[:start+size]
	b := dst[start:]
	clear(b)
	le := binary.LittleEndian
	le.PutUint32(b[0:], magic)
	le.PutUint32(b[4:], uint32(size))
	le.PutUint32(b[8:], r.Seq)
	le.PutUint32(b[12:], r.Count)
	var sec int64
	var usec uint32
	if !r.Time.IsZero() {
		sec, usec = r.Time.Unix(), uint32(r.Time.Nanosecond()/1000)
	}
	le.PutUint64(b[16:], uint64(sec))
	le.PutUint32(b[24:], usec)
	le.PutUint32(b[28:], uint32(r.Rule))
	le.PutUint32(b[32:], r.Flags)
	le.PutUint32(b[36:], r.LFlags)
	le.PutUint32(b[40:], r.LogTag)
	le.PutUint16(b[44:], r.Level)
	if r.Out {
		b[46] = 1
	}
	b[47] = r.Reason
	le.PutUint16(b[48:], uint16(r.HLen))
	le.PutUint16(b[50:], uint16(r.BodyLen))
	b[52] = r.Type
	b[53] = r.Family
	if r.GroupUnset {
		b[54] = 1
	}
	b[55], b[56], b[57] = uint8(len(r.Iface)), uint8(len(r.Group)), uint8(len(r.NatTag))
	o := headerSize
	o += copy(b[o:], r.Iface)
	o += copy(b[o:], r.Group)
	o += copy(b[o:], r.NatTag)
	copy(b[o:], r.Data)
	return dst
}

// Decode decodes the record at the start of b and returns its encoded size.
// Data aliases b.
func Decode(b []byte) (Record, int, error) {
	var r Record
	if len(b) < headerSize {
		return r, 0, ErrCorrupt
	}
	le := binary.LittleEndian
	if le.Uint32(b) != magic {
		return r, 0, fmt.Errorf("%w: bad magic %#x", ErrCorrupt, le.Uint32(b))
	}
	size := int(le.Uint32(b[4:]))
	if size < headerSize || size > len(b) || size%8 != 0 {
		return r, 0, fmt.Errorf("%w: bad size %d", ErrCorrupt, size)
	}
	r.Seq = le.Uint32(b[8:])
	r.Count = le.Uint32(b[12:])
	sec, usec := int64(le.Uint64(b[16:])), le.Uint32(b[24:])
	if usec >= 1000000 {
		return r, 0, fmt.Errorf("%w: bad microseconds %d", ErrCorrupt, usec)
	}
	r.Time = time.Unix(sec, int64(usec)*1000)
	r.Rule = int32(le.Uint32(b[28:]))
	r.Flags = le.Uint32(b[32:])
	r.LFlags = le.Uint32(b[36:])
	r.LogTag = le.Uint32(b[40:])
	r.Level = le.Uint16(b[44:])
	r.Out = b[46] != 0
	r.Reason = b[47]
	r.HLen = int(le.Uint16(b[48:]))
	r.BodyLen = int(le.Uint16(b[50:]))
	r.Type = b[52]
	r.Family = b[53]
	r.GroupUnset = b[54] != 0
	li, lg, ln := int(b[55]), int(b[56]), int(b[57])
	o := headerSize
	if o+li+lg+ln+r.HLen+r.BodyLen > size {
		return r, 0, fmt.Errorf("%w: lengths exceed record size", ErrCorrupt)
	}
	r.Iface = string(b[o : o+li])
	o += li
	r.Group = string(b[o : o+lg])
	o += lg
	r.NatTag = string(b[o : o+ln])
	o += ln
	r.Data = b[o : o+r.HLen+r.BodyLen]
	if err := r.decodeEvent(); err != nil {
		return r, 0, err
	}
	return r, size, nil
}

// Reader reads records from a log file or device.
type Reader struct {
	r   io.Reader
	buf []byte
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Next returns the next record, or io.EOF at a clean end of input. A
// trailing partial record is reported as io.ErrUnexpectedEOF. The
// record's Data is valid until the next call.
func (rd *Reader) Next() (Record, error) {
	if cap(rd.buf) < headerSize {
		rd.buf = make([]byte, headerSize, 4096)
	}
	hdr := rd.buf[:headerSize]
	if _, err := io.ReadFull(rd.r, hdr); err != nil {
		return Record{}, err
	}
	size := int(binary.LittleEndian.Uint32(hdr[4:]))
	if binary.LittleEndian.Uint32(hdr) != magic || size < headerSize || size%8 != 0 || size > 1<<20 {
		return Record{}, ErrCorrupt
	}
	if cap(rd.buf) < size {
		nb := make([]byte, size)
		copy(nb, hdr)
		rd.buf = nb
	}
	b := rd.buf[:size]
	if _, err := io.ReadFull(rd.r, b[headerSize:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Record{}, err
	}
	r, _, err := Decode(b)
	return r, err
}

// Package proto encodes and decodes netperf 2.7's control messages (the
// "omni" path): fixed 656-byte messages whose header and leading numeric
// words are big-endian and whose tail holds raw NUL-terminated strings.
//
// Decoding is tolerant on purpose: the C netserver reuses and byte-swaps its
// buffers in place, so fields a message does not rewrite carry junk (quirk
// Q1). Callers must trust only the fields their test asked for.
package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
)

// MsgSize is the size of every control message in either direction.
const MsgSize = 656

// Message types carried in word 0.
const (
	TypeCPUCalibrate = 5
	TypePassphrase   = 6
	TypeDoOmni       = 97
	TypeOmniResponse = 98
	TypeOmniResults  = 99
)

// ErrnoUnknownType is the serv_errno a netserver answers to a message type it
// does not implement.
const ErrnoUnknownType = 998

// Request flag bits (omni_request_struct.flags).
const (
	FlagNoDelay        = 0x1
	FlagSendfile       = 0x2
	FlagConnectTest    = 0x4
	FlagMeasureCPU     = 0x8
	FlagRoutingAllowed = 0x20
	FlagFastOpen       = 0x800
	FlagConnected      = 0x4000
	FlagKeepalive      = 0x80000000
)

// Direction values, from the server's point of view.
const (
	DirServerSends = 2
	DirServerRecvs = 4
	DirBoth        = 6
)

// Address families on the wire.
const (
	FamilyINET  = 4
	FamilyINET6 = 6
)

// Msg is one raw control message.
type Msg [MsgSize]byte

// Header offsets shared by all messages.
const (
	offType  = 0x00
	offWord1 = 0x04 // request: CPU affinity; response and results: serv_errno
)

// Type returns word 0. Results from a C netserver carry a byte-swapped type
// (Q1), so clients should not rely on it after the first response.
func (m *Msg) Type() int32 { return m.i32(offType) }

// Errno returns word 1 of a response (serv_errno, 0 = OK).
func (m *Msg) Errno() int32 { return m.i32(offWord1) }

// SetHeader sets words 0 and 1.
func (m *Msg) SetHeader(typ, word1 int32) {
	m.put(offType, typ)
	m.put(offWord1, word1)
}

func (m *Msg) i32(off int) int32  { return int32(binary.BigEndian.Uint32(m[off:])) }
func (m *Msg) u32(off int) uint32 { return binary.BigEndian.Uint32(m[off:]) }
func (m *Msg) put(off int, v int32) {
	binary.BigEndian.PutUint32(m[off:], uint32(v))
}
func (m *Msg) putU(off int, v uint32) { binary.BigEndian.PutUint32(m[off:], v) }
func (m *Msg) f32(off int) float32    { return math.Float32frombits(m.u32(off)) }
func (m *Msg) putF(off int, v float32) {
	binary.BigEndian.PutUint32(m[off:], math.Float32bits(v))
}

func (m *Msg) str(off, n int) string {
	b := m[off : off+n]
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func (m *Msg) putStr(off, n int, s string) {
	b := m[off : off+n]
	clear(b)
	copy(b[:n-1], s) // always leave the terminating NUL
}

// ReadMsg reads exactly one message. A short read is reported as
// io.ErrUnexpectedEOF so callers can tell truncation from a clean close.
func ReadMsg(r io.Reader, m *Msg) error {
	_, err := io.ReadFull(r, m[:])
	return err
}

// WriteMsg writes one message.
func WriteMsg(w io.Writer, m *Msg) error {
	_, err := w.Write(m[:])
	return err
}

// ErrShort is returned when decoding fewer than MsgSize bytes.
var ErrShort = errors.New("control message shorter than 656 bytes")

// FromBytes copies b into a Msg, failing if b is not exactly MsgSize long.
func FromBytes(b []byte) (*Msg, error) {
	if len(b) != MsgSize {
		return nil, fmt.Errorf("%w: got %d bytes", ErrShort, len(b))
	}
	m := new(Msg)
	copy(m[:], b)
	return m, nil
}

// IPWords encodes an address as netperf's uint32[4]. IPv4 is one host-order
// word; IPv6 is the 16 raw bytes as C stores them on a little-endian host and
// then htonl's, so every 4-byte group is reversed on the wire.
func IPWords(a netip.Addr) [4]uint32 {
	var w [4]uint32
	switch {
	case !a.IsValid():
	case a.Is4() || a.Is4In6():
		b := a.Unmap().As4()
		w[0] = binary.BigEndian.Uint32(b[:])
	default:
		b := a.As16()
		for i := range 4 {
			w[i] = binary.LittleEndian.Uint32(b[i*4:])
		}
	}
	return w
}

// AddrFromWords reverses IPWords for the given wire family.
func AddrFromWords(w [4]uint32, family int32) netip.Addr {
	if family == FamilyINET6 {
		var b [16]byte
		for i := range 4 {
			binary.LittleEndian.PutUint32(b[i*4:], w[i])
		}
		return netip.AddrFrom16(b)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], w[0])
	return netip.AddrFrom4(b)
}

// offPassphrase is where PASSPHRASE carries its NUL-terminated phrase.
const offPassphrase = 0x08

// MaxPassphrase is the longest phrase that fits in a PASSPHRASE message.
const MaxPassphrase = MsgSize - offPassphrase - 1

// EncodePassphrase builds the PASSPHRASE message netperf -Z sends first.
func EncodePassphrase(m *Msg, phrase string) error {
	if len(phrase) > MaxPassphrase {
		return fmt.Errorf("passphrase longer than %d bytes", MaxPassphrase)
	}
	clear(m[:])
	m.SetHeader(TypePassphrase, -1)
	copy(m[offPassphrase:], phrase)
	return nil
}

// Passphrase returns the phrase carried by a PASSPHRASE message.
func (m *Msg) Passphrase() string { return m.str(offPassphrase, MsgSize-offPassphrase) }

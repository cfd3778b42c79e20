package ipflog

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// StateEvent is what happened to a state entry (IPFilter's ISL_* codes).
type StateEvent uint8

// State events, printed as STATE:NEW, STATE:CLONED, ...
const (
	StateNew StateEvent = iota
	StateClone
	StateExpire
	StateFlush
	StateIntermediate
	StateRemove
	StateKilled
	StateUnload
)

// TCPStateEstablished is IPFilter's IPF_TCPS_ESTABLISHED: an expiring TCP
// entry with either side past it is logged as STATE:CLOSE.
const TCPStateEstablished = 4

// StateLog is a state-table log event (ipslog_t). Log one with
// Log.AppendState on the state log; ipmon -S prints it.
type StateLog struct {
	Event StateEvent
	Proto uint8
	// ICMPType is the ICMP type of ICMP entries.
	ICMPType uint8
	// TCPState are the two sides' TCP states (IPFilter numbering).
	TCPState         [2]uint8
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	// Tag is the rule's log tag (0 = none).
	Tag uint32
	// Pkts and Bytes are forward in, forward out, backward in, backward out.
	Pkts, Bytes [4]uint64
}

// NATAction is what happened to a NAT session (IPFilter's NL_* codes).
type NATAction uint8

// NAT actions, printed as NAT:NEW, NAT:CLONE, ...
const (
	NATNew NATAction = iota
	NATClone
	NATExpire
	NATFlush
	NATDestroy
	NATPurge
)

// NATKind is the kind of NAT rule that made the session.
type NATKind uint8

// NAT rule kinds; the first four print the short 3-address form.
const (
	NATMap NATKind = iota
	NATRdr
	NATBimap
	NATMapBlock
	NATRewriteMap
	NATRewriteRdr
	NATEncapMap
	NATEncapRdr
	NATDivertMap
	NATDivertRdr
)

// NATLog is a NAT session log event (natlog_t). Log one with
// Log.AppendNAT on the NAT log; ipmon -N prints it.
type NATLog struct {
	Action NATAction
	Kind   NATKind
	// Rule is the 0-based NAT rule number (printed +1).
	Rule  int32
	Proto uint8
	// Original and translated addresses and ports.
	OSrc, ODst, NSrc, NDst                 netip.Addr
	OSrcPort, ODstPort, NSrcPort, NDstPort uint16
	// Pkts and Bytes count both directions.
	Pkts, Bytes [2]uint64
}

const eventBodySize = 112

func putAddr(b []byte, a netip.Addr) {
	if a.IsValid() {
		s := a.As16()
		copy(b, s[:])
	}
}

func getAddr(b []byte, v6 bool) netip.Addr {
	a := netip.AddrFrom16([16]byte(b))
	if !v6 {
		return a.Unmap()
	}
	return a
}

func family(a netip.Addr) uint8 {
	if a.Is4() || a.Is4In6() {
		return 4
	}
	return 6
}

func (s *StateLog) encode(b []byte) {
	clear(b[:eventBodySize])
	b[0], b[1], b[2], b[3] = byte(s.Event), s.Proto, s.ICMPType, family(s.Src)
	b[4], b[5] = s.TCPState[0], s.TCPState[1]
	le := binary.LittleEndian
	le.PutUint16(b[8:], s.SrcPort)
	le.PutUint16(b[10:], s.DstPort)
	le.PutUint32(b[12:], s.Tag)
	putAddr(b[16:], s.Src)
	putAddr(b[32:], s.Dst)
	for k := 0; k < 4; k++ {
		le.PutUint64(b[48+8*k:], s.Pkts[k])
		le.PutUint64(b[80+8*k:], s.Bytes[k])
	}
}

func decodeState(b []byte) StateLog {
	le := binary.LittleEndian
	s := StateLog{Event: StateEvent(b[0]), Proto: b[1], ICMPType: b[2], TCPState: [2]uint8{b[4], b[5]},
		SrcPort: le.Uint16(b[8:]), DstPort: le.Uint16(b[10:]), Tag: le.Uint32(b[12:]),
		Src: getAddr(b[16:32], b[3] == 6), Dst: getAddr(b[32:48], b[3] == 6)}
	for k := 0; k < 4; k++ {
		s.Pkts[k] = le.Uint64(b[48+8*k:])
		s.Bytes[k] = le.Uint64(b[80+8*k:])
	}
	return s
}

func (n *NATLog) encode(b []byte) {
	clear(b[:eventBodySize])
	b[0], b[1], b[2], b[3] = byte(n.Action), byte(n.Kind), n.Proto, family(n.OSrc)
	le := binary.LittleEndian
	le.PutUint32(b[4:], uint32(n.Rule))
	le.PutUint16(b[8:], n.OSrcPort)
	le.PutUint16(b[10:], n.ODstPort)
	le.PutUint16(b[12:], n.NSrcPort)
	le.PutUint16(b[14:], n.NDstPort)
	putAddr(b[16:], n.OSrc)
	putAddr(b[32:], n.ODst)
	putAddr(b[48:], n.NSrc)
	putAddr(b[64:], n.NDst)
	for k := 0; k < 2; k++ {
		le.PutUint64(b[80+8*k:], n.Pkts[k])
		le.PutUint64(b[96+8*k:], n.Bytes[k])
	}
}

func decodeNAT(b []byte) NATLog {
	le := binary.LittleEndian
	v6 := b[3] == 6
	n := NATLog{Action: NATAction(b[0]), Kind: NATKind(b[1]), Proto: b[2], Rule: int32(le.Uint32(b[4:])),
		OSrcPort: le.Uint16(b[8:]), ODstPort: le.Uint16(b[10:]), NSrcPort: le.Uint16(b[12:]), NDstPort: le.Uint16(b[14:]),
		OSrc: getAddr(b[16:32], v6), ODst: getAddr(b[32:48], v6), NSrc: getAddr(b[48:64], v6), NDst: getAddr(b[64:80], v6)}
	for k := 0; k < 2; k++ {
		n.Pkts[k] = le.Uint64(b[80+8*k:])
		n.Bytes[k] = le.Uint64(b[96+8*k:])
	}
	return n
}

// decodeEvent fills r.State or r.NAT from r.Data for state and NAT records.
func (r *Record) decodeEvent() error {
	switch r.Type {
	case TypeState, TypeNAT:
		if len(r.Data) != eventBodySize {
			return fmt.Errorf("%w: event body of %d bytes", ErrCorrupt, len(r.Data))
		}
		if r.Type == TypeState {
			r.State = decodeState(r.Data)
		} else {
			r.NAT = decodeNAT(r.Data)
		}
	}
	return nil
}

// AppendState logs a state event (ipf_state_log). Use a Log dedicated to
// state events, as IPFilter has a separate state log device.
func (l *Log) AppendState(t time.Time, s *StateLog) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.encode(l.event[:])
	return l.appendEventLocked(Record{Type: TypeState, Time: t, Count: 1, Family: family(s.Src),
		HLen: eventBodySize, Data: l.event[:]})
}

// AppendNAT logs a NAT event (ipf_nat_log) on a Log dedicated to NAT.
func (l *Log) AppendNAT(t time.Time, n *NATLog) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n.encode(l.event[:])
	return l.appendEventLocked(Record{Type: TypeNAT, Time: t, Count: 1, Family: family(n.OSrc),
		HLen: eventBodySize, Data: l.event[:]})
}

func (l *Log) appendEventLocked(r Record) bool {
	l.seq++
	r.Seq = l.seq
	l.scratch = r.AppendBinary(l.scratch[:0])
	if len(l.buf)+len(l.scratch) > l.cfg.Size {
		l.dropped++
		return false
	}
	l.last = -1 // events are never merged
	l.buf = append(l.buf, l.scratch...)
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return true
}

var stateEventNames = [...]string{"NEW", "CLONED", "EXPIRE", "FLUSH", "INTERMEDIATE", "REMOVE", "KILLED", "UNLOAD"}

func (p *Printer) appendTime(dst []byte, t time.Time) []byte {
	loc := p.Opts.Location
	if loc == nil {
		loc = time.Local
	}
	t = t.In(loc)
	if !p.Opts.Syslog {
		dst = append2(dst, t.Day())
		dst = append(dst, '/')
		dst = append2(dst, int(t.Month()))
		dst = append(dst, '/')
		dst = strconv.AppendInt(dst, int64(t.Year()), 10)
		dst = append(dst, ' ')
	}
	dst = append2(dst, t.Hour())
	dst = append(dst, ':')
	dst = append2(dst, t.Minute())
	dst = append(dst, ':')
	dst = append2(dst, t.Second())
	dst = append(dst, '.')
	us := t.Nanosecond() / 1000
	for d := 100000; d > 0; d /= 10 {
		dst = append(dst, byte('0'+us/d%10))
	}
	return dst
}

func appendAddrPort(dst []byte, p *Printer, a netip.Addr, port uint16, proto string) []byte {
	dst = a.Unmap().AppendTo(dst)
	dst = append(dst, ',')
	return p.appendPort(dst, port, proto)
}

// appendState renders a state record line (ipmon print_statelog).
func (p *Printer) appendState(dst []byte, r *Record) []byte {
	s := &r.State
	dst = p.appendTime(dst, r.Time)
	dst = append(dst, " STATE:"...)
	switch {
	case s.Event == StateExpire && s.Proto == 6 && (s.TCPState[0] > TCPStateEstablished || s.TCPState[1] > TCPStateEstablished):
		dst = append(dst, "CLOSE"...)
	case int(s.Event) < len(stateEventNames):
		dst = append(dst, stateEventNames[s.Event]...)
	default:
		dst = append(dst[:len(dst)-len("STATE:")], "Type: "...)
		dst = strconv.AppendInt(dst, int64(s.Event), 10)
	}
	dst = append(dst, ' ')
	pr := protoName(s.Proto)
	switch s.Proto {
	case 6, 17:
		dst = appendAddrPort(dst, p, s.Src, s.SrcPort, pr)
		dst = append(dst, " -> "...)
		dst = appendAddrPort(dst, p, s.Dst, s.DstPort, pr)
		dst = append(dst, " PR "...)
		dst = append(dst, pr...)
	case 1, 58:
		dst = s.Src.Unmap().AppendTo(dst)
		dst = append(dst, " -> "...)
		dst = s.Dst.Unmap().AppendTo(dst)
		if s.Proto == 1 {
			dst = append(dst, " PR icmp "...)
		} else {
			dst = append(dst, " PR icmpv6 "...)
		}
		dst = strconv.AppendInt(dst, int64(s.ICMPType), 10)
	default:
		dst = s.Src.Unmap().AppendTo(dst)
		dst = append(dst, " -> "...)
		dst = s.Dst.Unmap().AppendTo(dst)
		dst = append(dst, " PR "...)
		dst = append(dst, pr...)
	}
	if s.Tag != 0 {
		dst = append(dst, " tag "...)
		dst = strconv.AppendUint(dst, uint64(s.Tag), 10)
	}
	if s.Event != StateNew {
		for k, dir := range [2]string{" Forward:", " Backward:"} {
			dst = append(dst, dir...)
			dst = append(dst, " Pkts in "...)
			dst = strconv.AppendUint(dst, s.Pkts[2*k], 10)
			dst = append(dst, " Bytes in "...)
			dst = strconv.AppendUint(dst, s.Bytes[2*k], 10)
			dst = append(dst, " Pkts out "...)
			dst = strconv.AppendUint(dst, s.Pkts[2*k+1], 10)
			dst = append(dst, " Bytes out "...)
			dst = strconv.AppendUint(dst, s.Bytes[2*k+1], 10)
		}
	}
	return dst
}

var (
	natActionNames = [...]string{"NEW", "CLONE", "EXPIRE", "FLUSH", "DESTROY", "PURGE"}
	natKindNames   = [...]string{"MAP", "RDR", "BIMAP", "MAPBLOCK", "RWR_MAP", "RWR_RDR", "ENC_MAP", "ENC_RDR", "DIV_MAP", "DIV_RDR"}
)

// appendNAT renders a NAT record line (ipmon print_natlog, 5.x).
func (p *Printer) appendNAT(dst []byte, r *Record) []byte {
	n := &r.NAT
	dst = p.appendTime(dst, r.Time)
	dst = append(dst, " @"...)
	dst = strconv.AppendInt(dst, int64(int16(n.Rule+1)), 10)
	dst = append(dst, " NAT:"...)
	if int(n.Action) < len(natActionNames) {
		dst = append(dst, natActionNames[n.Action]...)
	} else {
		dst = append(dst, "Action("...)
		dst = strconv.AppendInt(dst, int64(n.Action), 10)
		dst = append(dst, ')')
	}
	dst = append(dst, '-')
	if int(n.Kind) < len(natKindNames) {
		dst = append(dst, natKindNames[n.Kind]...)
	} else {
		dst = append(dst, "Type("...)
		dst = strconv.AppendInt(dst, int64(n.Kind), 10)
		dst = append(dst, ')')
	}
	dst = append(dst, ' ')
	pr := protoName(n.Proto)
	if n.Kind <= NATMapBlock {
		dst = appendAddrPort(dst, p, n.OSrc, n.OSrcPort, pr)
		dst = append(dst, " <- -> "...)
		dst = appendAddrPort(dst, p, n.NSrc, n.NSrcPort, pr)
		dst = append(dst, " ["...)
		dst = appendAddrPort(dst, p, n.ODst, n.ODstPort, pr)
		dst = append(dst, "] "...)
	} else {
		dst = appendAddrPort(dst, p, n.OSrc, n.OSrcPort, pr)
		dst = append(dst, ' ')
		dst = appendAddrPort(dst, p, n.ODst, n.ODstPort, pr)
		dst = append(dst, " <- -> "...)
		dst = appendAddrPort(dst, p, n.NSrc, n.NSrcPort, pr)
		dst = append(dst, ' ')
		dst = appendAddrPort(dst, p, n.NDst, n.NDstPort, pr)
		dst = append(dst, ' ')
	}
	dst = append(dst, pr...)
	if n.Action == NATExpire || n.Action == NATFlush {
		dst = append(dst, " Pkts "...)
		dst = strconv.AppendUint(dst, n.Pkts[0], 10)
		dst = append(dst, '/')
		dst = strconv.AppendUint(dst, n.Pkts[1], 10)
		dst = append(dst, " Bytes "...)
		dst = strconv.AppendUint(dst, n.Bytes[0], 10)
		dst = append(dst, '/')
		dst = strconv.AppendUint(dst, n.Bytes[1], 10)
	}
	return dst
}

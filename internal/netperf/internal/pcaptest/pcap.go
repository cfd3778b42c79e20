// Package pcaptest reads the control-connection captures under
// /work/shared/netperf-wire/captures without libpcap: classic pcap files of
// Ethernet/IPv4/TCP on loopback, reassembled per direction and cut into
// 656-byte control messages.
package pcaptest

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"time"
)

// Dir is the directory holding the reference captures.
const Dir = "/work/shared/netperf-wire/captures"

// Message is one control message seen on the wire.
type Message struct {
	Time       time.Duration // since the first packet of the capture
	FromClient bool          // sent to the control port
	ClientPort uint16        // the client's control-connection port
	Data       []byte        // exactly 656 bytes
}

type flowKey struct{ src, dst uint16 }

// ReadMessages parses a capture and returns its control messages in time
// order. ctlPort is the netserver's control port.
func ReadMessages(path string, ctlPort uint16, msgSize int) ([]Message, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw) < 24 {
		return nil, fmt.Errorf("%s: too short for a pcap header", path)
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(raw) {
	case 0xa1b2c3d4:
		bo = binary.LittleEndian
	default:
		if binary.BigEndian.Uint32(raw) != 0xa1b2c3d4 {
			return nil, fmt.Errorf("%s: not a microsecond pcap file", path)
		}
		bo = binary.BigEndian
	}
	if lt := bo.Uint32(raw[20:]); lt != 1 {
		return nil, fmt.Errorf("%s: link type %d, want 1 (Ethernet)", path, lt)
	}
	pending := map[flowKey][]byte{}
	seen := map[flowKey]uint32{} // next expected sequence number
	var out []Message
	var t0 time.Duration
	first := true
	for p := raw[24:]; len(p) > 0; {
		if len(p) < 16 {
			return nil, fmt.Errorf("%s: truncated record header", path)
		}
		ts := time.Duration(bo.Uint32(p))*time.Second + time.Duration(bo.Uint32(p[4:]))*time.Microsecond
		incl := int(bo.Uint32(p[8:]))
		if len(p) < 16+incl {
			return nil, fmt.Errorf("%s: truncated record", path)
		}
		pkt := p[16 : 16+incl]
		p = p[16+incl:]
		if first {
			t0, first = ts, false
		}
		if len(pkt) < 14+20 || binary.BigEndian.Uint16(pkt[12:]) != 0x0800 {
			continue
		}
		ip := pkt[14:]
		ihl := int(ip[0]&0x0f) * 4
		totLen := int(binary.BigEndian.Uint16(ip[2:]))
		if ip[9] != 6 || totLen > len(ip) || ihl < 20 || totLen < ihl+20 {
			continue
		}
		tcp := ip[ihl:totLen]
		doff := int(tcp[12]>>4) * 4
		if doff < 20 || doff > len(tcp) {
			continue
		}
		k := flowKey{binary.BigEndian.Uint16(tcp), binary.BigEndian.Uint16(tcp[2:])}
		if k.src != ctlPort && k.dst != ctlPort {
			continue
		}
		payload := tcp[doff:]
		seq := binary.BigEndian.Uint32(tcp[4:])
		if len(payload) == 0 {
			continue
		}
		if next, ok := seen[k]; ok && seq != next {
			continue // retransmission or out of order: the captures have none
		}
		seen[k] = seq + uint32(len(payload))
		buf := append(pending[k], payload...)
		for len(buf) >= msgSize {
			m := Message{Time: ts - t0, FromClient: k.dst == ctlPort, Data: append([]byte(nil), buf[:msgSize]...)}
			if m.FromClient {
				m.ClientPort = k.src
			} else {
				m.ClientPort = k.dst
			}
			out = append(out, m)
			buf = buf[msgSize:]
		}
		pending[k] = buf
	}
	for k, b := range pending {
		if len(b) != 0 {
			return out, fmt.Errorf("%s: %d trailing bytes on flow %d->%d", path, len(b), k.src, k.dst)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out, nil
}

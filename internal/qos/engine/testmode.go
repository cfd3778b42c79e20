package engine

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"sluice/internal/qos"
)

// RunTest classifies and marks packets offline (`ipqosadmin -test`) and
// writes one record per packet: a summary line and the marked packet in
// hex. Packets are classified by adapter `adapter` if it is not empty,
// else by the adapter named like the packet's interface, else by the
// first adapter. Inbound packets are printed but not classified: IPQoS
// acts on outbound traffic only.
func RunTest(w io.Writer, rs *qos.Ruleset, adapter string, pkts []InputPacket) error {
	if adapter != "" && rs.Adapter(adapter) == nil {
		return fmt.Errorf("adapter %s is not in the configuration", adapter)
	}
	e := NewEngine(rs)
	for _, p := range pkts {
		name := adapter
		if name == "" {
			name = rs.Adapters[0].Name
			if rs.Adapter(p.Ifname) != nil {
				name = p.Ifname
			}
		}
		ai := e.AdapterIndex(name)
		data := append([]byte(nil), p.Data...)
		var b strings.Builder
		dir := "in"
		if p.Out {
			dir = "out"
		}
		fmt.Fprintf(&b, "%s on %s %s", dir, name, describe(data))
		if !p.Out {
			b.WriteString(": inbound, not classified\n")
		} else {
			r := e.Process(ai, data, nil)
			a := rs.Adapters[ai]
			field := "tos"
			if len(data) > 0 && data[0]>>4 == 6 {
				field = "tclass"
			}
			switch r.Action {
			case Unmatched:
				fmt.Fprintf(&b, ": unmatched, %s 0x%02x untouched\n", field, r.OldTC)
			default:
				fmt.Fprintf(&b, ": policy %s filter %s %s 0x%02x -> 0x%02x dscp %d -> %d",
					a.Policies[r.Policy].Name, a.Filters[r.Filter].Name, field, r.OldTC, r.NewTC, r.OldTC>>2, r.NewTC>>2)
				if r.Priority != 0 {
					fmt.Fprintf(&b, " class %x:%x", r.Priority>>16, r.Priority&0xffff)
				}
				if v := a.Policies[r.Policy].VPR; v >= 0 {
					fmt.Fprintf(&b, " vpr %d", v)
				}
				b.WriteString("\n")
			}
		}
		writeHex(&b, data)
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// describe summarises an IP packet as `ipv4 tcp 10.0.0.1,20 > 10.0.0.2,80 len 40`.
func describe(l3 []byte) string {
	var f flow
	if !parseFlow(l3, &f) {
		return fmt.Sprintf("non-IP len %d", len(l3))
	}
	addr := func(a qos.Addr128) netip.Addr {
		if f.family == 4 {
			return netip.AddrFrom4([4]byte{byte(a.Lo >> 24), byte(a.Lo >> 16), byte(a.Lo >> 8), byte(a.Lo)})
		}
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[i] = byte(a.Hi >> (56 - 8*i))
			b[8+i] = byte(a.Lo >> (56 - 8*i))
		}
		return netip.AddrFrom16(b)
	}
	proto := map[uint8]string{1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6"}[f.proto]
	if proto == "" {
		proto = fmt.Sprint(f.proto)
	}
	if f.hasPorts {
		return fmt.Sprintf("ipv%d %s %s,%d > %s,%d len %d", f.family, proto, addr(f.src), f.sport, addr(f.dst), f.dport, len(l3))
	}
	return fmt.Sprintf("ipv%d %s %s > %s len %d", f.family, proto, addr(f.src), addr(f.dst), len(l3))
}

// writeHex prints bytes as 16-bit groups, 16 bytes per line, indented.
func writeHex(b *strings.Builder, data []byte) {
	for off := 0; off < len(data); off += 16 {
		b.WriteString("   ")
		end := min(off+16, len(data))
		for i := off; i < end; i += 2 {
			if i+1 < end {
				fmt.Fprintf(b, " %02x%02x", data[i], data[i+1])
			} else {
				fmt.Fprintf(b, " %02x", data[i])
			}
		}
		b.WriteString("\n")
	}
}

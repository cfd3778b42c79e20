package nat

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"
	"strings"
	"testing"

	"sluice/internal/packet"
	"sluice/internal/rules/ipnat"
)

// proxyNAT loads rules and records the state entries and debug output
// its proxies produce.
type proxyNAT struct {
	*NAT
	states []ProxyState
	debug  strings.Builder
}

func newProxyNAT(t *testing.T, rules string, tun map[string]int) *proxyNAT {
	t.Helper()
	f, err := ipnat.Parse("t", rules, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pn := &proxyNAT{}
	pn.NAT, err = New(f, Config{
		AddState: func(ps ProxyState) bool { pn.states = append(pn.states, ps); return true },
		Debug:    func(m string) { pn.debug.WriteString(m) },
		Tunable:  func(name string) (int, bool) { v, ok := tun[name]; return v, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	return pn
}

// seg builds a TCP segment with payload, with spare capacity.
func seg(src, dst string, sp, dp uint16, seq, ack uint32, payload string) []byte {
	b := build(6, netip.MustParseAddr(src), netip.MustParseAddr(dst), sp, dp, len(payload))
	copy(b[40:], payload)
	binary.BigEndian.PutUint32(b[24:], seq)
	binary.BigEndian.PutUint32(b[28:], ack)
	fixL4(b)
	out := make([]byte, len(b), len(b)+64)
	copy(out, b)
	return out
}

func udpMsg(src, dst string, sp, dp uint16, payload []byte) []byte {
	b := build(17, netip.MustParseAddr(src), netip.MustParseAddr(dst), sp, dp, len(payload))
	copy(b[28:], payload)
	fixL4(b)
	out := make([]byte, len(b), len(b)+64)
	copy(out, b)
	return out
}

func tcpPayload(b []byte) string {
	var v view
	parse(&v, b)
	return string(v.payload())
}

// The ni8/ni11 case: IPFilter's CALC_SUMD decrements the new port in
// place, so a port that goes down leaves the ICMP checksum one high.
func TestIPFPortDelta(t *testing.T) {
	tests := []struct {
		name                string
		cksum, os, ns, od   uint16
		nd, want            uint16
		exactSameAsIPFilter bool
	}{
		{"port down (ni8)", 0x0fa3, 0x5000, 0x5000, 0x9d58, 0x0500, 0xa7fc, false},
		{"port up", 0xa7fb, 0x5000, 0x5000, 0x0500, 0x9d58, 0x0fa3, true},
		{"no change", 0x1234, 1, 1, 2, 2, 0x1234, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ipfPortDelta(tc.cksum, tc.os, tc.ns, tc.od, tc.nd)
			if got != tc.want {
				t.Errorf("got %#04x, want %#04x", got, tc.want)
			}
			exact := packet.ChecksumUpdate16(packet.ChecksumUpdate16(tc.cksum, tc.os, tc.ns), tc.od, tc.nd)
			if (exact == got) != tc.exactSameAsIPFilter {
				t.Errorf("exact update %#04x vs IPFilter's %#04x: equal=%v, want %v", exact, got, exact == got, tc.exactSameAsIPFilter)
			}
		})
	}
}

// ICMPv6 types below 128 are errors only for 1-4; others (such as 0)
// are translated as bare IP, and the query types by their id.
func TestICMPv6Kinds(t *testing.T) {
	tests := []struct {
		typ        uint8
		query, err bool
	}{
		{0, false, false}, {1, false, true}, {4, false, true}, {5, false, false},
		{128, true, false}, {129, true, false}, {133, false, false}, {139, true, false},
	}
	a := netip.MustParseAddr
	for _, tc := range tests {
		b := build(58, a("10:1:1::1"), a("10:4:3::2"), 7, 0, 80)
		b[40] = tc.typ
		var v view
		parse(&v, b)
		if (v.flags&flagICMPQuery != 0) != tc.query || v.icmpErr != tc.err {
			t.Errorf("type %d: query %v error %v, want %v %v", tc.typ, v.flags&flagICMPQuery != 0, v.icmpErr, tc.query, tc.err)
		}
	}
	n := mustNAT(t, "map nic0 10:1:1::1/128 -> 10::2:2:2/128")
	b := build(58, a("10:1:1::1"), a("10:4:3::2"), 7, 0, 80)
	b[40] = 0
	fixL4(b)
	if res := n.Out(b, "nic0", ""); res != Translated {
		t.Fatalf("ICMPv6 type 0: got %v, want translated", res)
	}
	if got := netip.AddrFrom16([16]byte(b[8:24])); got != a("10::2:2:2") {
		t.Errorf("source %v, want 10::2:2:2", got)
	}
}

func TestSeqAdj(t *testing.T) {
	var a seqAdj
	if a.offFor(100) != 0 || a.ackOff(100) != 0 {
		t.Fatal("fresh adjustment must be zero")
	}
	// Segment at 1000 with 25 bytes shrank by 4.
	a.record(1000, 25, -4)
	tests := []struct {
		seq, ack uint32
		off, ao  int32
	}{
		{999, 1020, 0, 0},    // before the change; ack short of its end
		{1025, 1021, -4, -4}, // after it; ack of all 21 rewritten bytes
	}
	for _, tc := range tests {
		if got := a.offFor(tc.seq); got != tc.off {
			t.Errorf("offFor(%d): got %d, want %d", tc.seq, got, tc.off)
		}
		if got := a.ackOff(tc.ack); got != tc.ao {
			t.Errorf("ackOff(%d): got %d, want %d", tc.ack, got, tc.ao)
		}
	}
	// A second change stacks on the first; acks between the two get the
	// first offset.
	a.record(1031, 25, -4)
	if a.offFor(1056) != -8 || a.offFor(1031) != -4 || a.ackOff(1040) != -4 || a.ackOff(1048) != -8 {
		t.Errorf("stacked: off(1056)=%d off(1031)=%d ackOff(1040)=%d ackOff(1048)=%d, want -8 -4 -4 -8",
			a.offFor(1056), a.offFor(1031), a.ackOff(1040), a.ackOff(1048))
	}
}

// Passive FTP to a redirected server: the 227 reply gets the public
// address and the client's data connection is redirected too.
func TestFTPPasvRdr(t *testing.T) {
	pn := newProxyNAT(t, "rdr le0 203.0.113.1/32 port 21 -> 10.0.0.5 port 21 tcp proxy ftp\n", map[string]int{"ftp_insecure": 1})
	in := seg("198.51.100.7", "203.0.113.1", 4000, 21, 100, 0, "")
	if pn.In(in, "le0") != Translated {
		t.Fatal("SYN not redirected")
	}
	pasv := seg("198.51.100.7", "203.0.113.1", 4000, 21, 101, 501, "PASV\r\n")
	pn.In(pasv, "le0")
	reply := seg("10.0.0.5", "198.51.100.7", 21, 4000, 501, 107, "227 Entering Passive Mode (10,0,0,5,200,10)\r\n")
	b, res := pn.OutPacket(reply, "le0", "")
	if res != Translated {
		t.Fatalf("reply: got %v", res)
	}
	if got, want := tcpPayload(b), "227 Entering Passive Mode (203,0,113,1,200,10)\r\n"; got != want {
		t.Errorf("reply payload %q, want %q", got, want)
	}
	checksumsValid(t, b)
	if len(pn.states) != 1 || pn.states[0].Out || pn.states[0].Dst != netip.MustParseAddr("10.0.0.5") ||
		pn.states[0].DPort != 51210 || !pn.states[0].WildSrcPort {
		t.Fatalf("state entries %+v, want one inbound to 10.0.0.5:51210 from any port", pn.states)
	}
	data := seg("198.51.100.7", "203.0.113.1", 4001, 51210, 1, 0, "")
	if pn.In(data, "le0") != Translated || netip.AddrFrom4([4]byte(data[16:20])) != netip.MustParseAddr("10.0.0.5") {
		t.Errorf("data connection not redirected: %x", data)
	}
	// The reply grew: the client's ack of it is shifted back to the
	// server's numbering.
	sent, seen := uint32(len("227 Entering Passive Mode (10,0,0,5,200,10)\r\n")), uint32(len(tcpPayload(b)))
	ack := seg("198.51.100.7", "203.0.113.1", 4000, 21, 107, 501+seen, "")
	if pn.In(ack, "le0") != Translated {
		t.Fatal("ack not translated")
	}
	if got := binary.BigEndian.Uint32(ack[28:]); got != 501+sent {
		t.Errorf("client ack %d, want %d", got, 501+sent)
	}
	checksumsValid(t, ack)
}

// A server's continuation line ("220-") is buffered; with ftp_debug 8
// IPFilter reports the empty rest it then checks.
func TestFTPDebugContinuation(t *testing.T) {
	pn := newProxyNAT(t, "map le0 10.0.0.0/8 -> 1.1.1.1/32 proxy port ftp ftp/tcp\n", map[string]int{"ftp_debug": 8})
	pn.Out(seg("10.0.0.1", "2.2.2.2", 3000, 21, 1, 0, ""), "le0", "")
	pn.In(seg("2.2.2.2", "1.1.1.1", 21, 3000, 1, 2, "220-hello\r\n"), "le0")
	pn.In(seg("2.2.2.2", "1.1.1.1", 21, 3000, 12, 2, "220 done\r\n"), "le0")
	if got, want := pn.debug.String(), "ipf_p_ftp_servert_valid:i(0) < 5\n"; got != want {
		t.Errorf("debug output %q, want %q", got, want)
	}
}

func pptpMsg(typ uint16, callID, peer uint16) string {
	b := make([]byte, 32)
	binary.BigEndian.PutUint16(b, 32)
	binary.BigEndian.PutUint16(b[2:], 1)
	binary.BigEndian.PutUint32(b[4:], pptpMagic)
	binary.BigEndian.PutUint16(b[8:], typ)
	binary.BigEndian.PutUint16(b[12:], callID)
	binary.BigEndian.PutUint16(b[14:], peer)
	return string(b)
}

// PPTP: once the server answers an outgoing call, GRE between the two
// ends is mapped like the control connection and admitted.
func TestPPTPGRE(t *testing.T) {
	pn := newProxyNAT(t, "map le0 10.2.2.2/32 -> 192.0.2.9/32 proxy port 1723 pptp/tcp\n", nil)
	a := netip.MustParseAddr
	gre := build(47, a("10.2.2.2"), a("203.0.113.3"), 0, 0, 16)
	if pn.Out(bytes.Clone(gre), "le0", "") != NoMatch {
		t.Fatal("GRE translated before any call")
	}
	pn.Out(seg("10.2.2.2", "203.0.113.3", 1511, 1723, 1, 0, ""), "le0", "")
	pn.Out(seg("10.2.2.2", "203.0.113.3", 1511, 1723, 2, 1, pptpMsg(pptpOutCallRq, 0x4000, 0)), "le0", "")
	if len(pn.states) != 0 {
		t.Fatal("state made before the call was answered")
	}
	pn.In(seg("203.0.113.3", "192.0.2.9", 1723, 1511, 1, 34, pptpMsg(pptpOutCallRp, 0, 0x4000)), "le0")
	if len(pn.states) != 1 || pn.states[0].Proto != 47 || !pn.states[0].Out || pn.states[0].Src != a("10.2.2.2") {
		t.Fatalf("state entries %+v, want one outbound GRE from 10.2.2.2", pn.states)
	}
	out := bytes.Clone(gre)
	if pn.Out(out, "le0", "") != Translated || netip.AddrFrom4([4]byte(out[12:16])) != a("192.0.2.9") {
		t.Errorf("GRE out: %x, want source 192.0.2.9", out)
	}
	back := build(47, a("203.0.113.3"), a("192.0.2.9"), 0, 0, 16)
	if pn.In(back, "le0") != Translated || netip.AddrFrom4([4]byte(back[16:20])) != a("10.2.2.2") {
		t.Errorf("GRE in: %x, want destination 10.2.2.2", back)
	}
}

func rpcCallV2(xid, prog, vers, proto uint32) []byte {
	w := []uint32{xid, rpcCall, 2, rpcbProg, 2, rpcbGetPort, 0, 0, 0, 0, prog, vers, proto, 0}
	b := make([]byte, 4*len(w))
	for i, x := range w {
		binary.BigEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func rpcReplyWords(w ...uint32) []byte {
	b := make([]byte, 4*len(w))
	for i, x := range w {
		binary.BigEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// rpcbind through an rdr: a GETPORT answer opens the service port with a
// cloning session, from which each client connection gets its own.
func TestRPCBGetPort(t *testing.T) {
	pn := newProxyNAT(t, "rdr nic0 192.168.6.2 port 111 -> 192.168.7.1 port 111 udp proxy rpcbu\n", nil)
	a := netip.MustParseAddr
	call := udpMsg("192.168.6.1", "192.168.6.2", 32885, 111, rpcCallV2(7, 100003, 3, 17))
	if pn.In(call, "nic0") != Translated {
		t.Fatal("call not redirected")
	}
	// A reply to another xid opens nothing.
	pn.Out(udpMsg("192.168.7.1", "192.168.6.1", 111, 32885, rpcReplyWords(8, rpcReply, 0, 0, 0, 0, 2049)), "nic0", "")
	if len(pn.states) != 0 {
		t.Fatalf("state for an unknown xid: %+v", pn.states)
	}
	pn.Out(udpMsg("192.168.7.1", "192.168.6.1", 111, 32885, rpcReplyWords(7, rpcReply, 0, 0, 0, 0, 2049)), "nic0", "")
	if len(pn.states) != 1 || !pn.states[0].Clone || pn.states[0].Dst != a("192.168.7.1") || pn.states[0].DPort != 2049 ||
		pn.states[0].Pass != rpcbPass || pn.states[0].PLen != 28 {
		t.Fatalf("state entries %+v, want one cloning entry to 192.168.7.1:2049", pn.states)
	}
	for _, sp := range []uint16{32991, 32992} {
		p := udpMsg("192.168.6.1", "192.168.6.2", sp, 2049, []byte("nfs"))
		if pn.In(p, "nic0") != Translated || netip.AddrFrom4([4]byte(p[16:20])) != a("192.168.7.1") {
			t.Errorf("client port %d: not redirected: %x", sp, p)
		}
	}
	var dump strings.Builder
	pn.Dump(&dump)
	if c := strings.Count(dump.String(), "RDR CLONE 192.168.7.1     2049  <- -> 192.168.6.2     2049  [192.168.6.1 0]"); c != 1 {
		t.Errorf("dump has %d clone lines, want 1:\n%s", c, dump.String())
	}
	if c := strings.Count(dump.String(), "\tproxy active\n"); c != 1 {
		t.Errorf("dump has %d proxy lines, want 1", c)
	}
}

// rpcbind v3 GETADDR: the universal address of the inside server is
// rewritten to the redirected one (the reply changes length).
func TestRPCBGetAddrRewrite(t *testing.T) {
	pn := newProxyNAT(t, "rdr nic0 192.168.6.2 port 111 -> 192.168.7.1 port 111 udp proxy rpcbu\n", nil)
	netid := rpcReplyWords(3)
	netid = append(netid, "udp\x00"...)
	call := rpcReplyWords(9, rpcCall, 2, rpcbProg, 3, rpcbGetPort, 0, 0, 0, 0, 100003, 3)
	call = append(call, netid...)
	call = append(call, rpcReplyWords(0, 0)...) // uaddr, owner
	pn.In(udpMsg("192.168.6.1", "192.168.6.2", 700, 111, call), "nic0")
	ua := "192.168.7.1.8.1"
	rep := rpcReplyWords(9, rpcReply, 0, 0, 0, 0, uint32(len(ua)))
	rep = append(rep, ua...)
	rep = append(rep, 0)
	b, res := pn.OutPacket(udpMsg("192.168.7.1", "192.168.6.1", 111, 700, rep), "nic0", "")
	if res != Translated {
		t.Fatalf("reply: got %v", res)
	}
	checksumsValid(t, b)
	body := b[28+24:]
	if n := binary.BigEndian.Uint32(body); string(body[4:4+n]) != "192.168.6.2.8.1" {
		t.Errorf("uaddr %q, want 192.168.6.2.8.1", body[4:4+n])
	}
	if len(pn.states) != 1 || pn.states[0].DPort != 2049 {
		t.Errorf("state entries %+v, want one for port 2049", pn.states)
	}
}

// FuzzProxyPayload feeds arbitrary application data to each proxy in
// both directions: no panic, and a translated packet keeps valid
// checksums and a consistent length.
func FuzzProxyPayload(f *testing.F) {
	f.Add(uint8(0), true, []byte("PORT 10,1,1,1,4,1\r\n"))
	f.Add(uint8(0), false, []byte("227 Entering Passive Mode (2,2,2,2,4,1)\r\n"))
	f.Add(uint8(0), false, []byte("229 Entering Extended Passive Mode (|||4097|)\r\n"))
	f.Add(uint8(0), true, []byte("EPRT |1|10.1.1.1|4097|\r\n"))
	f.Add(uint8(1), true, []byte("1008\x00"))
	f.Add(uint8(2), false, []byte(pptpMsg(pptpOutCallRp, 1, 2)))
	f.Add(uint8(3), true, rpcCallV2(1, 100003, 3, 17))
	f.Add(uint8(3), false, rpcReplyWords(1, rpcReply, 0, 0, 0, 0, 2049))
	f.Add(uint8(4), false, append([]byte{0x80, 0, 0, 40}, rpcReplyWords(1, rpcReply, 0, 0, 0, 0, 12)...))
	f.Fuzz(runProxyCase)
}

func runProxyCase(t *testing.T, which uint8, fromClient bool, data []byte) {
	{
		rules := []string{
			"map le0 10.0.0.0/8 -> 198.51.100.7/32 proxy port ftp ftp/tcp\n",
			"map le0 10.0.0.0/8 -> 198.51.100.7/32 proxy port shell rcmd/tcp\n",
			"map le0 10.0.0.0/8 -> 198.51.100.7/32 proxy port 1723 pptp/tcp\n",
			"rdr le0 198.51.100.1/32 port 111 -> 10.9.9.7 port 111 udp proxy rpcbu\n",
			"rdr le0 198.51.100.1/32 port 111 -> 10.9.9.7 port 111 tcp proxy rpcbt\n",
		}
		ports := []uint16{21, 514, 1723, 111, 111}
		if len(data) > 1400 {
			return
		}
		i := int(which) % len(rules)
		pn := newProxyNAT(t, rules[i], map[string]int{"ftp_insecure": 1, "ftp_debug": 0x3f})
		var pkt []byte
		var out bool
		if i == 3 {
			pn.In(udpMsg("203.0.113.5", "198.51.100.1", 700, 111, nil), "le0")
			if fromClient {
				pkt, out = udpMsg("203.0.113.5", "198.51.100.1", 700, 111, data), false
			} else {
				pkt, out = udpMsg("10.9.9.7", "203.0.113.5", 111, 700, data), true
			}
		} else if i == 4 {
			pn.In(seg("203.0.113.5", "198.51.100.1", 700, 111, 1, 0, ""), "le0")
			if fromClient {
				pkt, out = seg("203.0.113.5", "198.51.100.1", 700, 111, 1, 1, string(data)), false
			} else {
				pkt, out = seg("10.9.9.7", "203.0.113.5", 111, 700, 1, 1, string(data)), true
			}
		} else {
			pn.Out(seg("10.1.1.1", "203.0.113.5", 3000, ports[i], 1, 0, ""), "le0", "")
			if fromClient {
				pkt, out = seg("10.1.1.1", "203.0.113.5", 3000, ports[i], 2, 1, string(data)), true
			} else {
				pkt, out = seg("203.0.113.5", "198.51.100.7", ports[i], 3000, 1, 2, string(data)), false
			}
		}
		buf := make([]byte, len(pkt), len(pkt)+200)
		copy(buf, pkt)
		var b []byte
		var res Result
		if out {
			b, res = pn.OutPacket(buf, "le0", "")
		} else {
			b, res = pn.InPacket(buf, "le0")
		}
		if res != Translated {
			return
		}
		if int(binary.BigEndian.Uint16(b[2:])) != len(b) {
			t.Fatalf("IP length %d, packet %d bytes", binary.BigEndian.Uint16(b[2:]), len(b))
		}
		checksumsValid(t, b)
	}
}

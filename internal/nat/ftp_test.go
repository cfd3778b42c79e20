package nat

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

// segAny builds a TCP segment of either family carrying payload, with
// spare capacity for a proxy to grow it.
func segAny(src, dst string, sp, dp uint16, seq, ack uint32, payload string) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	b := build(6, s, d, sp, dp, len(payload))
	l4 := 20
	if !s.Is4() {
		l4 = 40
	}
	copy(b[l4+20:], payload)
	binary.BigEndian.PutUint32(b[l4+4:], seq)
	binary.BigEndian.PutUint32(b[l4+8:], ack)
	fixL4(b)
	out := make([]byte, len(b), len(b)+64)
	copy(out, b)
	return out
}

// ftpStep is one control-connection packet: fromClient says which way
// it goes; want is the payload after NAT and states the number of
// proxy state entries made so far.
type ftpStep struct {
	fromClient bool
	payload    string
	want       string
	states     int
}

// TestFTPTunables follows IPFilter's ip_ftp_pxy.c for the tunables that
// decide whether a data connection is set up: ftp_forcepasv (default 1
// in ipf_p_ftp_soft_create) ties a 227/229 to the client's PASV/EPSV;
// ftp_single_xfer refuses a new PORT/PASV while the last data
// connection is still in the NAT table (ipf_p_ftp_addport,
// ipf_p_ftp_pasvreply); the line itself is still rewritten. A 227 must
// start with PASV_REPLEN bytes of "227 Entering Passive Mode".
func TestFTPTunables(t *testing.T) {
	const rule = "map le0 10.0.0.0/8 -> 198.51.100.7/32 proxy port ftp ftp/tcp\n"
	tests := []struct {
		name  string
		tun   map[string]int
		steps []ftpStep
		debug string // substring the debug output must contain ("" none)
	}{
		{
			name: "227 without PASV, forcepasv default",
			tun:  map[string]int{"ftp_insecure": 1, "ftp_debug": ftpDebugError},
			steps: []ftpStep{
				{false, "227 Entering Passive Mode (203,0,113,5,200,10)\r\n", "227 Entering Passive Mode (203,0,113,5,200,10)\r\n", 0},
			},
			debug: "ipf_p_ftp_pasv:ftps_cmd(0) != FTPXY_C_PASV\n",
		},
		{
			name: "227 without PASV, forcepasv 0",
			tun:  map[string]int{"ftp_insecure": 1, "ftp_forcepasv": 0},
			steps: []ftpStep{
				{false, "227 Entering Passive Mode (203,0,113,5,200,10)\r\n", "227 Entering Passive Mode (203,0,113,5,200,10)\r\n", 1},
			},
		},
		{
			name: "229 after PASV, forcepasv 1",
			tun:  map[string]int{"ftp_insecure": 1, "ftp_forcepasv": 1},
			steps: []ftpStep{
				{true, "PASV\r\n", "PASV\r\n", 0},
				{false, "229 Entering Extended Passive Mode (|||51210|)\r\n", "229 Entering Extended Passive Mode (|||51210|)\r\n", 0},
			},
		},
		{
			name: "229 after EPSV",
			tun:  map[string]int{"ftp_insecure": 1},
			steps: []ftpStep{
				{true, "EPSV\r\n", "EPSV\r\n", 0},
				{false, "229 Entering Extended Passive Mode (|||51210|)\r\n", "229 Entering Extended Passive Mode (|||51210|)\r\n", 1},
			},
		},
		{
			name: "227 not in IPFilter's wording",
			tun:  map[string]int{"ftp_insecure": 1, "ftp_debug": ftpDebugError},
			steps: []ftpStep{
				{true, "PASV\r\n", "PASV\r\n", 0},
				{false, "227 Passive (203,0,113,5,200,10)\r\n", "227 Passive (203,0,113,5,200,10)\r\n", 0},
			},
			debug: "ipf_p_ftp_pasv:227 reply wrong\n",
		},
		{
			name: "two PORTs, single_xfer 0",
			tun:  map[string]int{"ftp_insecure": 1},
			steps: []ftpStep{
				{true, "PORT 10,1,1,1,4,1\r\n", "PORT 198,51,100,7,4,1\r\n", 1},
				{true, "PORT 10,1,1,1,4,2\r\n", "PORT 198,51,100,7,4,2\r\n", 2},
			},
		},
		{
			name: "two PORTs, single_xfer 1",
			tun:  map[string]int{"ftp_insecure": 1, "ftp_single_xfer": 1, "ftp_debug": ftpDebugError},
			steps: []ftpStep{
				{true, "PORT 10,1,1,1,4,1\r\n", "PORT 198,51,100,7,4,1\r\n", 1},
				{true, "PORT 10,1,1,1,4,2\r\n", "PORT 198,51,100,7,4,2\r\n", 1},
			},
			debug: "ipf_p_ftp_addport:xfer active ",
		},
		{
			name: "two PASVs, single_xfer 1",
			tun:  map[string]int{"ftp_insecure": 1, "ftp_single_xfer": 1},
			steps: []ftpStep{
				{true, "PASV\r\n", "PASV\r\n", 0},
				{false, "227 Entering Passive Mode (203,0,113,5,200,10)\r\n", "227 Entering Passive Mode (203,0,113,5,200,10)\r\n", 1},
				{true, "PASV\r\n", "PASV\r\n", 1},
				{false, "227 Entering Passive Mode (203,0,113,5,200,11)\r\n", "227 Entering Passive Mode (203,0,113,5,200,11)\r\n", 1},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pn := newProxyNAT(t, rule, tc.tun)
			if pn.Out(segAny("10.1.1.1", "203.0.113.5", 3000, 21, 1, 0, ""), "le0", "") != Translated {
				t.Fatal("control connection not mapped")
			}
			cseq, sseq := uint32(1), uint32(1000)
			for i, st := range tc.steps {
				var b []byte
				var res Result
				if st.fromClient {
					b, res = pn.OutPacket(segAny("10.1.1.1", "203.0.113.5", 3000, 21, cseq, sseq, st.payload), "le0", "")
					cseq += uint32(len(st.payload))
				} else {
					b, res = pn.InPacket(segAny("203.0.113.5", "198.51.100.7", 21, 3000, sseq, cseq, st.payload), "le0")
					sseq += uint32(len(st.payload))
				}
				if res != Translated {
					t.Fatalf("step %d: %v", i, res)
				}
				checksumsValid(t, b)
				if got := tcpPayload(b); got != st.want {
					t.Errorf("step %d: payload %q, want %q", i, got, st.want)
				}
				if len(pn.states) != st.states {
					t.Errorf("step %d: %d state entries, want %d", i, len(pn.states), st.states)
				}
			}
			if d := pn.debug.String(); tc.debug == "" && strings.Contains(d, "xfer active") ||
				tc.debug != "" && !strings.Contains(d, tc.debug) {
				t.Errorf("debug output %q, want it to contain %q", d, tc.debug)
			}
		})
	}
}

// TestFTPEPRTv6 follows ipf_p_ftp_eprt6: over IPv6 a mapped client's
// "EPRT |2|addr|port|" names its translated address, and the server's
// connection back to that port is admitted from any source port.
func TestFTPEPRTv6(t *testing.T) {
	pn := newProxyNAT(t, "map le0 inet6 fd00::/64 -> 2001:db8::7/128 proxy port ftp ftp/tcp\n", map[string]int{"ftp_insecure": 1})
	if pn.Out(segAny("fd00::1", "2001:db8:1::5", 3000, 21, 1, 0, ""), "le0", "") != Translated {
		t.Fatal("control connection not mapped")
	}
	const in, want = "EPRT |2|fd00::1|5001|\r\n", "EPRT |2|2001:db8::7|5001|\r\n"
	b, res := pn.OutPacket(segAny("fd00::1", "2001:db8:1::5", 3000, 21, 1, 1000, in), "le0", "")
	if res != Translated {
		t.Fatalf("EPRT: %v", res)
	}
	if got := tcpPayload(b); got != want {
		t.Errorf("payload %q, want %q", got, want)
	}
	if pl := int(binary.BigEndian.Uint16(b[4:])); pl != len(b)-40 {
		t.Errorf("payload length %d, packet has %d", pl, len(b)-40)
	}
	checksumsValid(t, b)
	if len(pn.states) != 1 || pn.states[0].Out || !pn.states[0].V6 ||
		pn.states[0].Dst != netip.MustParseAddr("fd00::1") || pn.states[0].DPort != 5001 || !pn.states[0].WildSrcPort {
		// Inbound, the filter sees the packet after NAT: the client.
		t.Fatalf("state entries %+v, want one inbound IPv6 to [fd00::1]:5001 from any port", pn.states)
	}
	data := segAny("2001:db8:1::5", "2001:db8::7", 20, 5001, 1, 0, "")
	if pn.In(data, "le0") != Translated || netip.AddrFrom16([16]byte(data[24:40])) != netip.MustParseAddr("fd00::1") {
		t.Errorf("data connection not translated to the client: %x", data)
	}
	// The grown EPRT shifts the client's later sequence numbers.
	next := segAny("fd00::1", "2001:db8:1::5", 3000, 21, 1+uint32(len(in)), 1000, "")
	if pn.Out(next, "le0", "") != Translated {
		t.Fatal("next segment not translated")
	}
	if got, want := binary.BigEndian.Uint32(next[44:]), 1+uint32(len(want)); got != want {
		t.Errorf("next seq %d, want %d", got, want)
	}
}

// rpcbt: a GETADDR reply over TCP whose universal address grows. The
// message behind the record mark is rewritten, the record mark carries
// the new length, and later segments of the stream are shifted as
// IPFilter's ipf_proxy_fixseqack does for a proxy that changed length.
func TestRPCBTGetAddrGrows(t *testing.T) {
	pn := newProxyNAT(t, "rdr nic0 192.168.6.20 port 111 -> 10.1.1.1 port 111 tcp proxy rpcbt\n", nil)
	recMark := func(m []byte) string {
		var rm [4]byte
		binary.BigEndian.PutUint32(rm[:], 0x80000000|uint32(len(m)))
		return string(rm[:]) + string(m)
	}
	netid := append(rpcReplyWords(3), "tcp\x00"...)
	call := rpcReplyWords(9, rpcCall, 2, rpcbProg, 3, rpcbGetPort, 0, 0, 0, 0, 100003, 3)
	call = append(call, netid...)
	call = append(call, rpcReplyWords(0, 0)...)
	const cseq, sseq = 100, 5000
	callSeg := segAny("192.168.6.1", "192.168.6.20", 700, 111, cseq, sseq, recMark(call))
	if pn.In(callSeg, "nic0") != Translated {
		t.Fatal("call not redirected")
	}
	ua := "10.1.1.1.8.1" // 12 bytes; the client must see 192.168.6.20.8.1 (16)
	rep := append(rpcReplyWords(9, rpcReply, 0, 0, 0, 0, uint32(len(ua))), ua...)
	repSeg := segAny("10.1.1.1", "192.168.6.1", 111, 700, sseq, cseq+uint32(4+len(call)), recMark(rep))
	b, res := pn.OutPacket(repSeg, "nic0", "")
	if res != Translated {
		t.Fatalf("reply: %v", res)
	}
	checksumsValid(t, b)
	p := []byte(tcpPayload(b))
	if got, want := len(p), 4+len(rep)+4; got != want {
		t.Fatalf("payload %d bytes, want %d", got, want)
	}
	if rm := binary.BigEndian.Uint32(p); rm != 0x80000000|uint32(len(rep)+4) {
		t.Errorf("record mark %#x, want %#x", rm, 0x80000000|uint32(len(rep)+4))
	}
	body := p[4+24:]
	if n := binary.BigEndian.Uint32(body); string(body[4:4+n]) != "192.168.6.20.8.1" {
		t.Errorf("uaddr %q, want 192.168.6.20.8.1", body[4:4+n])
	}
	if len(pn.states) != 1 || pn.states[0].DPort != 2049 || pn.states[0].Dst != netip.MustParseAddr("10.1.1.1") {
		t.Errorf("state entries %+v, want one to 10.1.1.1:2049", pn.states)
	}
	// The client acks the longer reply; the server must see its own
	// numbering. The server's next segment moves up by 4.
	ack := segAny("192.168.6.1", "192.168.6.20", 700, 111, cseq+uint32(4+len(call)), sseq+uint32(len(p)), "")
	if pn.In(ack, "nic0") != Translated {
		t.Fatal("ack not translated")
	}
	checksumsValid(t, ack)
	if got, want := binary.BigEndian.Uint32(ack[28:]), uint32(sseq+4+len(rep)); got != want {
		t.Errorf("client ack %d, want %d", got, want)
	}
	next := segAny("10.1.1.1", "192.168.6.1", 111, 700, sseq+uint32(4+len(rep)), cseq+uint32(4+len(call)), "x")
	if pn.Out(next, "nic0", "") != Translated {
		t.Fatal("next server segment not translated")
	}
	checksumsValid(t, next)
	if got, want := binary.BigEndian.Uint32(next[24:]), uint32(sseq+len(p)); got != want {
		t.Errorf("server seq %d, want %d", got, want)
	}
}

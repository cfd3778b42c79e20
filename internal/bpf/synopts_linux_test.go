package bpf

import (
	"bytes"
	"fmt"
	"testing"

	"sluice/internal/engine"
	"sluice/internal/state"
)

// synOptionCases are SYN options as hosts send them and as they should
// not: each a connection's SYN and SYN-ACK carry them
// (TestPrivilegedSYNOptions). parse_fast reads the usual ones in place
// (tcp_opts_fast) and leaves the rest to the full walk (sl_tcp_options):
// both must track the window as the engine does.
var synOptionCases = []struct {
	name string
	opts []byte
}{
	{"linux", synOpts},
	{"linux without timestamps", []byte{2, 4, 5, 0xb4, 1, 1, 4, 2, 1, 3, 3, 7}},
	{"windows", []byte{2, 4, 5, 0xb4, 1, 3, 3, 8, 1, 1, 4, 2}},
	{"macos", []byte{2, 4, 5, 0xb4, 1, 3, 3, 6, 1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 0, 4, 2, 0, 0}},
	{"mss only", []byte{2, 4, 5, 0xb4}},
	{"no window scale", []byte{2, 4, 5, 0xb4, 4, 2, 1, 1}},
	{"EOL first", []byte{0, 3, 3, 7}},
	{"EOL before the window scale", []byte{4, 2, 0, 1, 3, 3, 7, 1}},
	{"window scale repeated", []byte{3, 3, 2, 1, 3, 3, 9, 1}},
	{"window scale over 14", []byte{1, 3, 3, 20}},
	{"window scale zero", []byte{1, 3, 3, 0}},
	{"length 1", []byte{1, 3, 1, 7}},
	{"length 0", []byte{8, 0, 3, 3, 7, 1, 1, 1}},
	{"length past the header", []byte{1, 1, 3, 3, 7, 2, 40, 0}},
	{"window scale past the header", []byte{1, 1, 1, 1, 1, 1, 3, 3}},
	{"MSS of length 3", []byte{2, 3, 5, 1}},
	{"kind past the header", []byte{1, 1, 1, 3}},
	{"NOPs, then the window scale (11 steps)", append(bytes.Repeat([]byte{1}, 11), 3, 3, 7, 1, 1)},
	{"NOPs to byte 39", append(bytes.Repeat([]byte{1}, 39), 3)},
	{"NOPs, the window scale at byte 36", append(bytes.Repeat([]byte{1}, 36), 3, 3, 7, 1)},
	{"unknown kinds", []byte{30, 6, 1, 2, 3, 4, 3, 3, 5, 1, 1, 1}},
	// options of the wrong length: the SYN passes and makes its entry,
	// which records FI_BAD for the SYN's direction (ipf_state_add), so
	// that side's later segments miss it; a SYN-ACK's changes nothing
	{"window scale of length 4", []byte{3, 4, 7, 0}},
	{"SACK-permitted of length 3", []byte{4, 3, 0, 1}},
	{"a window scale of length 2 after a good one", []byte{3, 3, 7, 1, 1, 3, 2, 1}},
	{"MSS of length 5", []byte{2, 5, 5, 0xb4, 0, 1, 1, 1}},
}

// TestPrivilegedSYNOptions runs a connection through HP's stateful set
// for each of synOptionCases, its SYN and SYN-ACK carrying the options,
// then segments of each side at offsets only a scaled window takes (and
// not): every segment gets the engine's verdict, and the kernel's entry
// holds the engine's window state (scale, SACK and scale flags, ends,
// windows) after the handshake and at the end. A fast option walk that
// read a scale the full walk does not (an option past the header, past
// EOL, past byte 39), or missed one (repeated, after NOPs), or took a bad
// length, makes the windows, then the verdicts, differ.
func TestPrivilegedSYNOptions(t *testing.T) {
	h := newHarness(t)
	h.load(hpStatefulRules)
	eng, _ := engineClock(t, hpStatefulRules)
	for ci, c := range synOptionCases {
		if len(c.opts)%4 != 0 || len(c.opts) > 40 {
			t.Fatalf("%s: %d bytes of options", c.name, len(c.opts))
		}
		port := uint16(30000 + ci)
		cli := tcp4("10.1.0.1", "10.0.0.2", port, 5001, synF)
		seg := func(out bool, flags uint8, seq, ack uint32, payload int) testPkt {
			p := cli
			if out {
				p = p.reply(flags)
			}
			p.flags, p.seq, p.ack, p.payload = flags, seq, ack, payload
			p.win = 1000
			return p
		}
		syn := seg(false, synF, 100, 0, 0)
		syn.tcpOptions = c.opts
		synack := seg(true, synF|ackF, 9000, 101, 0)
		synack.tcpOptions = c.opts
		type step struct {
			name string
			out  bool
			p    testPkt
		}
		steps := []step{
			{"SYN", false, syn},
			{"SYN-ACK", true, synack},
			{"ACK", false, seg(false, ackF, 101, 9001, 0)},
		}
		// a byte each way at offsets in and past the unscaled window
		// (1000) and the scaled ones (1000 << 7 = 128 000, << 14)
		for _, off := range []uint32{500, 5000, 100000, 200000, 1 << 22} {
			steps = append(steps,
				step{fmt.Sprintf("data in +%d", off), false, seg(false, ackF|0x08, 101+off, 9001, 1)},
				step{fmt.Sprintf("data out +%d", off), true, seg(true, ackF|0x08, 9001+off, 101, 1)})
		}
		for si, st := range steps {
			frame := tcpSum4(st.p.build())
			var p engine.Packet
			p.Load(append([]byte(nil), frame[14:]...), "eth0", st.out, 0)
			want := eng.Check(&p)
			ret, _ := h.run(st.out, frame)
			got := verdictName(ret)
			if (got == "pass") != want.Verdict.Passed() {
				t.Errorf("%s, %s: kernel %s, engine %s (%v)", c.name, st.name, got, want.Verdict, want.Reason)
			}
			if si == 2 || si == len(steps)-1 {
				if d := windowDiff(t, h.d, eng, port); d != "" {
					t.Errorf("%s, after %s: %s", c.name, st.name, d)
				}
			}
		}
	}
}

// windowDiff compares the window tracking of the entries of the flow
// with client port port in the kernel and the engine: "" when they hold
// the same.
func windowDiff(t *testing.T, d *Datapath, eng *engine.Engine, port uint16) string {
	t.Helper()
	var (
		k    filterStateKey
		v    filterStateEntry
		kern []string
	)
	side := func(wscale, wflags uint8, end, maxend, maxwin uint32) string {
		return fmt.Sprintf("scale %d flags %#x end %d maxend %d maxwin %d", wscale, wflags, end, maxend, maxwin)
	}
	it := d.objs.States.Iterate()
	for it.Next(&k, &v) {
		if k.Sport != port && k.Dport != port {
			continue
		}
		// the established packets decided through the flow's st_dm
		// slot moved its window there (est15)
		if err := d.withSlot(k, &v); err != nil {
			t.Fatal(err)
		}
		kern = append(kern, side(v.Tcp[0].Wscale, v.Tcp[0].Wflags, v.Tcp[0].End, v.Tcp[0].Maxend, v.Tcp[0].Maxwin)+
			" / "+side(v.Tcp[1].Wscale, v.Tcp[1].Wflags, v.Tcp[1].End, v.Tcp[1].Maxend, v.Tcp[1].Maxwin))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	var engs []string
	eng.States.Walk(func(e *state.Entry) {
		if e.Deleted() || (e.SPort != port && e.DPort != port) {
			return
		}
		s := e.TCP
		engs = append(engs, side(s[0].WinScale, s[0].WinFlags, s[0].End, s[0].MaxEnd, s[0].MaxWin)+
			" / "+side(s[1].WinScale, s[1].WinFlags, s[1].End, s[1].MaxEnd, s[1].MaxWin))
	})
	if fmt.Sprint(kern) != fmt.Sprint(engs) {
		return fmt.Sprintf("kernel %v, engine %v", kern, engs)
	}
	return ""
}

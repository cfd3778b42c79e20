//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"bytes"
	"testing"

	"sluice/internal/packet/packettest"
)

// TestPrivilegedPlain checks the plain programs (plainIfCan): a datapath
// whose hot line holds nothing for the fast path runs them; their fast
// path reaches no hot line (a clock offset written there behind their
// back does not reach the time they stamp on the entry) and translates as
// the general programs do; setting a field of the hot line through the
// datapath makes the programs general first, which then read it; and a
// datapath that needs nothing there any more is made plain again.
func TestPrivilegedPlain(t *testing.T) {
	h := newHarness(t)
	if !h.d.Plain() {
		t.Fatal("the harness's datapath does not run plain programs")
	}
	if err := h.do(func() error {
		_, err := h.load("map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp/udp auto\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	seg := func(flags uint8) []byte {
		return packettest.V4{Src: "10.0.0.1", Dst: "2.2.2.2", Proto: 6, TTL: 64,
			Payload: packettest.TCP{SrcPort: 1000, DstPort: 80, Seq: 1, Ack: 1, Flags: flags, Win: 8192}.Bytes()}.Bytes()
	}
	fastOut := func() uint64 {
		t.Helper()
		st, err := h.d.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st.Side[dirOut].Fast
	}
	// send runs an established segment out, which the fast path must
	// translate, and returns it and the outbound fast entry's time
	send := func(when string) ([]byte, uint64) {
		t.Helper()
		n := fastOut()
		var out []byte
		if err := h.do(func() error { var err error; _, out, err = h.run(true, "nic0", seg(0x10)); return err }); err != nil {
			t.Fatal(err)
		}
		if got := fastOut() - n; got != 1 {
			t.Fatalf("%s: %d packets by the fast path, want 1", when, got)
		}
		var k natNatFkey
		var f natNatFast4
		it := h.d.objs.Fast4.Iterate()
		for it.Next(&k, &f) {
			if k.Dir == dirOut {
				// the fast path stamps the entry's slot if it has one
				f, err := h.d.withSlot(k, f.F)
				if err != nil {
					t.Fatal(err)
				}
				return out, f.Last
			}
		}
		t.Fatalf("%s: no outbound fast entry", when)
		return nil, 0
	}
	if err := h.do(func() error { _, _, err := h.run(true, "nic0", seg(0x02)); return err }); err != nil {
		t.Fatal(err)
	}
	want, _ := send("plain")
	const far = 1 << 62
	hot := h.d.hot()
	hot.Clock = far
	if err := h.d.objs.Hot.Update(uint32(0), hot, 0); err != nil {
		t.Fatal(err)
	}
	if got, last := send("plain, a clock offset behind its back"); last >= far {
		t.Errorf("the plain fast path stamped %#x: it read the hot line's clock", last)
	} else if !bytes.Equal(got, want) {
		t.Errorf("the plain program translates to %x, before %x", got, want)
	}
	hot.Clock = 0
	if err := h.d.objs.Hot.Update(uint32(0), hot, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.d.AdvanceClock(far); err != nil {
		t.Fatal(err)
	}
	if h.d.Plain() {
		t.Fatal("plain programs with a clock offset")
	}
	if got, last := send("general"); last < far {
		t.Errorf("the general fast path stamped %#x: it did not read the clock offset", last)
	} else if !bytes.Equal(got, want) {
		t.Errorf("the general program translates to %x, the plain one to %x", got, want)
	}
	if err := h.d.setCfg(cfgClock, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.d.plainIfCan(false); err != nil {
		t.Fatal(err)
	}
	if !h.d.Plain() {
		t.Fatal("no plain programs again after the clock offset went")
	}
	if _, last := send("plain again"); last >= far {
		t.Errorf("the plain fast path stamped %#x after the offset went", last)
	}
}

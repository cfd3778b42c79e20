//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	gonat "sluice/internal/nat"
	"sluice/internal/packet/packettest"
	"sluice/internal/state"
)

// chainOut is a packet of one TCP flow, 10.0.0.1:1000 > 2.2.2.2:80, and
// chainIn a reply to its translation (to, port).
func chainOut() []byte {
	return packettest.V4{Src: "10.0.0.1", Dst: "2.2.2.2", Proto: 6,
		Payload: packettest.TCP{SrcPort: 1000, DstPort: 80, Flags: 0x10, Win: 8192}.Bytes()}.Bytes()
}

func chainIn(to string, port uint16) []byte {
	return packettest.V4{Src: "2.2.2.2", Dst: to, Proto: 6,
		Payload: packettest.TCP{SrcPort: 80, DstPort: port, Flags: 0x10, Win: 8192}.Bytes()}.Bytes()
}

// sharedTuple makes two sessions of one tuple (10.0.0.1:1000 >
// 2.2.2.2:80) with a `map *` rule on three interfaces, comparing every
// packet and the session listing with the engine (randomRun): A (port
// 40000) is bound out on nic1 and in on nic0; the flow out on nic0 then
// finds A bound elsewhere and makes B, which shadows A's forward entry;
// B is bound out on nic2 by the next packet, and the packet out on nic1
// after it finds A under B (the kernel walks the shadows). rules is the
// rule set (its first rule a `map *` with port 40000 first). aging runs
// the packets with the timers on, without the engine.
func sharedTuple(t *testing.T, h *harness, rules string, aging bool) {
	t.Helper()
	pkts := sharedTuplePkts()
	if err := h.do(func() error {
		if !aging {
			_, _, err := randomRun(h, rules, pkts)
			return err
		}
		// the same packets with the timers on (the engine's sessions
		// never age, so no comparison); a session the kernel gives no
		// timer is made all the same (the sweeper's), so every packet
		// passes
		if err := h.loadAging(rules); err != nil {
			return err
		}
		for i, p := range pkts {
			ret, _, err := h.run(p.out, p.iface, p.b)
			if err != nil {
				return err
			}
			if ret != VerdictNext {
				return fmt.Errorf("packet %d: verdict %d", i, ret)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("rules:\n%s%v", rules, err)
	}
	if n := h.d.cfg(cfgShadows); n != 1 {
		t.Errorf("%d shadow entries, want 1 (A's forward entry under B's)", n)
	}
	ss, err := h.d.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 {
		t.Fatalf("%d sessions listed, want 2: %+v", len(ss), ss)
	}
	nic := func(name string) uint32 {
		i, err := h.ifindex(name)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(i)
	}
	// newest first: B, then A
	if a := ss[1]; a.NSPort != 40000 || a.IfOut != nic("nic1") || a.IfIn != nic("nic0") {
		t.Errorf("session A: port %d, bound out %d in %d; want 40000, nic1 (%d), nic0 (%d)", a.NSPort, a.IfOut, a.IfIn, nic("nic1"), nic("nic0"))
	}
	if b := ss[0]; b.IfOut != nic("nic2") || b.IfIn != 0 {
		t.Errorf("session B: bound out %d in %d; want nic2 (%d) and not yet (0)", b.IfOut, b.IfIn, nic("nic2"))
	}
}

// sharedTuplePkts are sharedTuple's packets.
func sharedTuplePkts() []randPkt {
	return []randPkt{
		{out: true, iface: "nic0", b: chainOut()},                 // A made, unbound
		{out: true, iface: "nic1", b: chainOut()},                 // A out: nic1
		{out: false, iface: "nic0", b: chainIn("1.1.1.1", 40000)}, // A in: nic0
		{out: true, iface: "nic0", b: chainOut()},                 // B made
		{out: true, iface: "nic2", b: chainOut()},                 // B out: nic2
		{out: true, iface: "nic1", b: chainOut()},                 // A, under B
	}
}

// assertEmpty checks that nothing of any session is left: no entry in
// the session table or the fast tables, and the live and shadow counts
// back at 0.
func assertEmpty(t *testing.T, h *harness, when string) {
	t.Helper()
	if n := mapLen(t, h.d.objs.Sessions); n != 0 {
		t.Errorf("%s: %d session entries left", when, n)
	}
	if n := mapLen(t, h.d.objs.Fast4); n != 0 {
		t.Errorf("%s: %d IPv4 fast entries left", when, n)
	}
	if n := mapLen(t, h.d.objs.Fast6); n != 0 {
		t.Errorf("%s: %d IPv6 fast entries left", when, n)
	}
	if n := h.d.cfg(cfgCount); n != 0 {
		t.Errorf("%s: %d sessions counted", when, n)
	}
	if n := h.d.cfg(cfgShadows); n != 0 {
		t.Errorf("%s: %d shadow entries counted", when, n)
	}
}

func mapLen(t *testing.T, m *ebpf.Map) int {
	t.Helper()
	var k, v []byte
	n := 0
	it := m.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPrivilegedSharedTuple checks the sessions of `map *` rules that
// share a tuple on several interfaces through their ends: a flush leaves
// no entry behind, the older session is found again when the newer one
// has ended (its forward entry was a shadow under the newer one's), and
// so are their timers. About 3 s (the timers' part).
func TestPrivilegedSharedTuple(t *testing.T) {
	h := newHarness(t)
	const one = "map * 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp 40000:40000\n"

	t.Run("flush", func(t *testing.T) {
		sharedTuple(t, h, one+"map * 10.0.0.0/24 -> 1.1.1.2/32 portmap tcp 40000:40000\n", false)
		if n, err := h.d.FlushSessions(); err != nil || n != 2 {
			t.Errorf("flush: %d %v, want 2", n, err)
		}
		assertEmpty(t, h, "after ipnat -F")
	})

	t.Run("newer-ends", func(t *testing.T) {
		// B is the second rule's (port 40000 of 1.1.1.1 is A's on
		// nic0): ending that rule's sessions leaves A, whose forward
		// entry is a shadow with no entry above it
		sharedTuple(t, h, one+"map * 10.0.0.0/24 -> 1.1.1.2/32 portmap tcp 40000:40000\n", false)
		rules, err := h.d.Rules()
		if err != nil || len(rules) != 2 {
			t.Fatalf("rules: %v %v", rules, err)
		}
		if n, err := h.d.FlushRuleSessions(rules[1].ID); err != nil || n != 1 {
			t.Fatalf("flushing the second rule's sessions: %d %v, want 1", n, err)
		}
		err = h.do(func() error {
			for _, c := range []struct {
				iface string
				want  string // translated source, "" untranslated
			}{
				{"nic1", "1.1.1.1:40000"}, // A, its forward entry a shadow with none above
				{"nic0", "1.1.1.2:40000"}, // C: port 40000 of 1.1.1.1 is A's in on nic0
				{"nic0", "1.1.1.2:40000"}, // C, bound out on nic0 by this packet
				{"nic1", "1.1.1.1:40000"}, // A again, under C
			} {
				ret, got, err := h.run(true, c.iface, chainOut())
				if err != nil {
					return err
				}
				src := fmt.Sprintf("%v:%d", netip.AddrFrom4([4]byte(got[12:16])), binary.BigEndian.Uint16(got[20:22]))
				if src != c.want || ret != VerdictNext {
					t.Errorf("out on %s after B ended: %d %s, want %s", c.iface, ret, src, c.want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := h.d.FlushSessions(); err != nil || n != 2 {
			t.Errorf("flush: %d %v, want 2", n, err)
		}
		assertEmpty(t, h, "after ipnat -F")
	})

	t.Run("expiry", func(t *testing.T) {
		defer h.d.SetIPFTestMode(true)
		sharedTuple(t, h, "map * 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp 40000:40001 sequential age 1/1\n", true)
		deadline := time.Now().Add(4 * time.Second)
		for mapLen(t, h.d.objs.Sessions) != 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		assertEmpty(t, h, "4 s after the last packet, with a lifetime of 1 s")
	})
}

// TestPrivilegedExistsShadow: the clash check of a rewrite session (the
// engine's exists) counts every live session of a tuple, one whose entry
// is a shadow with no entry above it too. sharedTuple's packets make A
// and B, B's forward entry over A's (a shadow); B's rule ages its
// sessions in 1 s, so B ends first and leaves A's forward entry alone
// under a key that has no entry. A `rewrite in` whose first try is that
// tuple must then take its next port, as the engine does (the kernel
// looked at the key's entry only and took the tuple). The engine runs
// with a clock here; the kernel's is moved as far and its sessions past
// their lifetime ended, as their timers would.
func TestPrivilegedExistsShadow(t *testing.T) {
	h := newHarness(t)
	const rules = "map * 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp 40000:40000\n" +
		"map * 10.0.0.0/24 -> 1.1.1.2/32 portmap tcp 40000:40000 age 1/1\n" +
		"rewrite in on nic3 proto tcp from any to any -> src 2.2.2.2 port = 80 dst 10.0.0.1,1000-1001;\n"
	rewritePkt := packettest.V4{Src: "5.5.5.5", Dst: "9.9.9.9", Proto: 6,
		Payload: packettest.TCP{SrcPort: 2000, DstPort: 3000, Flags: 0x10, Win: 8192}.Bytes()}.Bytes()
	err := h.do(func() error {
		f, err := h.load(rules)
		if err != nil {
			return err
		}
		clock := &state.ManualClock{}
		eng, err := gonat.New(f, gonat.Config{Clock: clock})
		if err != nil {
			return err
		}
		// both ways, compared: the engine's output
		both := func(what string, p randPkt) []byte {
			want, res := engineRun(eng, p)
			ret, got, err := h.run(p.out, p.iface, p.b)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if res == gonat.Failed || ret != VerdictNext || !bytes.Equal(want, got) {
				t.Errorf("%s: engine %v %x, kernel %d %x", what, res, want, ret, got)
			}
			return want
		}
		for i, p := range sharedTuplePkts() {
			both(fmt.Sprintf("packet %d", i), p)
		}
		if n := h.d.cfg(cfgShadows); n != 1 {
			t.Fatalf("%d shadow entries, want 1 (A's forward entry under B's)", n)
		}
		// B ends (1 s), A does not
		clock.Advance(20)
		if n := eng.Expire(); n != 1 {
			t.Fatalf("the engine ended %d sessions, want 1 (B)", n)
		}
		if err := h.d.AdvanceClock(10 * time.Second); err != nil {
			return err
		}
		if n, err := h.d.ExpireSessions(); err != nil || n != 1 {
			t.Fatalf("the kernel ended %d sessions (%v), want 1 (B)", n, err)
		}
		if n := h.d.cfg(cfgShadows); n != 1 {
			t.Fatalf("%d shadow entries after B ended, want 1 (A's forward entry)", n)
		}
		out := both("rewrite", randPkt{iface: "nic3", b: rewritePkt})
		if got := binary.BigEndian.Uint16(out[22:24]); got != 1001 {
			t.Errorf("the engine's rewrite went to port %d, want 1001 (1000 is A's tuple)", got)
		}
		ss, err := h.d.Sessions()
		if err != nil {
			return err
		}
		wantS, _ := engineSections(eng)
		if got := sessionList(ss); got != wantS {
			t.Errorf("sessions differ:\nengine:\n%skernel:\n%s", wantS, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

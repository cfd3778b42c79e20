//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"sluice/internal/packet/packettest"
)

// reuseRules: flow A's host and flow B's hosts are mapped to different
// addresses, so a packet rewritten by another flow's entry shows.
const reuseRules = "map nic0 10.0.0.1/32 -> 1.1.1.1/32 portmap udp 2000:30000\n" +
	"map nic0 10.0.1.0/24 -> 1.1.1.2/32 portmap udp 30001:60000\n" +
	"map nic0 fd00::1/128 -> fd01::1/128 portmap udp 2000:30000\n" +
	"map nic0 fd00:1::/64 -> fd01::2/128 portmap udp 30001:60000\n"

// TestPrivilegedFastStaleElement puts in fast4 and fast6, under flow A's
// key, each state a packet can find in an element it looked up while
// another CPU deletes or replaces it (the tables are preallocated: the
// element is reused at once, struct nat_fast4 in c/nat.h): another flow's
// whole entry, A's entry marked dead, A's entry being written. The fast
// path must use none of them: the packet goes the whole way and leaves
// with A's translation (its session's), and the entry counts no packet
// of the fast path. A's own whole entry (seq even, its key) is used as
// before. The fast4dm slots are off (stNoDM): the hash path is the one
// under test.
func TestPrivilegedFastStaleElement(t *testing.T) {
	h := newHarnessStage(t, stNoDM)
	if err := h.do(func() error { _, err := h.load(reuseRules); return err }); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []struct {
		name  string
		a, b  []byte
		srcOf func([]byte) netip.Addr
		wantA string
		fast6 bool
	}{
		{"ipv4", udp4("10.0.0.1", "2.2.2.2", 1000, 53), udp4("10.0.1.1", "2.2.2.2", 1000, 53),
			func(ip []byte) netip.Addr { return netip.AddrFrom4([4]byte(ip[12:16])) }, "1.1.1.1", false},
		{"ipv6", udp6("fd00::1", "2001:db8::2", 1000, 53), udp6("fd00:1::1", "2001:db8::2", 1000, 53),
			func(ip []byte) netip.Addr { return netip.AddrFrom16([16]byte(ip[8:24])) }, "fd01::1", true},
	} {
		t.Run(fam.name, func(t *testing.T) {
			wantA := netip.MustParseAddr(fam.wantA)
			send := func() (netip.Addr, error) {
				var src netip.Addr
				err := h.do(func() error {
					v, out, err := h.run(true, "nic0", fam.a)
					if err != nil {
						return err
					}
					if v == VerdictShot {
						return fmt.Errorf("flow A's packet dropped")
					}
					src = fam.srcOf(out)
					return nil
				})
				return src, err
			}
			h.openFlows(t, fam.a, fam.b)
			// the outbound entries of A and B, found by the key each
			// element holds
			var (
				ka4, kb4 natNatFkey
				va4, vb4 natNatFast4
				ka6, kb6 natNatKey
				va6, vb6 natNatFast6
			)
			if !fam.fast6 {
				var k natNatFkey
				var v natNatFast4
				for it := h.d.objs.Fast4.Iterate(); it.Next(&k, &v); {
					if k != v.K {
						t.Fatalf("fast4 holds %+v under %+v", v.K, k)
					}
					if k.Dir != dirOut {
						continue
					}
					if k.Src == outKey("10.0.0.1", "2.2.2.2", 1000).Src {
						ka4, va4 = k, v
					} else {
						kb4, vb4 = k, v
					}
				}
				if ka4.Proto == 0 || kb4.Proto == 0 {
					t.Fatal("no outbound fast4 entry of flow A or B")
				}
			} else {
				var k natNatKey
				var v natNatFast6
				for it := h.d.objs.Fast6.Iterate(); it.Next(&k, &v); {
					if k != v.K {
						t.Fatalf("fast6 holds %+v under %+v", v.K, k)
					}
					if k.Dir != dirOut {
						continue
					}
					if k.Src[0] == binary.NativeEndian.Uint32([]byte{0xfd, 0, 0, 0}) { // fd00:0:: is A's, fd00:1:: B's
						ka6, va6 = k, v
					} else {
						kb6, vb6 = k, v
					}
				}
				if ka6.Proto == 0 || kb6.Proto == 0 {
					t.Fatal("no outbound fast6 entry of flow A or B")
				}
			}
			put := func(other bool, seq func(uint32) uint32) error {
				if !fam.fast6 {
					v := va4
					if other {
						v = vb4
					}
					v.Seq = seq(v.Seq)
					return h.d.objs.Fast4.Update(ka4, v, 0)
				}
				v := va6
				if other {
					v = vb6
				}
				v.Seq = seq(v.Seq)
				return h.d.objs.Fast6.Update(ka6, v, 0)
			}
			pkts := func() (uint64, error) {
				if !fam.fast6 {
					var v natNatFast4
					err := h.d.objs.Fast4.Lookup(ka4, &v)
					return v.F.Pkts, err
				}
				var v natNatFast6
				err := h.d.objs.Fast6.Lookup(ka6, &v)
				return v.F.Pkts, err
			}
			same := func(q uint32) uint32 { return q }
			for _, c := range []struct {
				name  string
				other bool // B's entry
				seq   func(uint32) uint32
				fast  bool // the fast path translates it
			}{
				{"another flow's entry", true, same, false},
				{"dead", false, func(uint32) uint32 { return 1 }, false},
				{"being made", false, func(q uint32) uint32 { return q + 1 }, false},
				{"another flow's entry being made", true, func(q uint32) uint32 { return q + 1 }, false},
				{"whole", false, same, true},
			} {
				if err := put(c.other, c.seq); err != nil {
					t.Fatal(err)
				}
				n0, err := pkts()
				if err != nil {
					t.Fatal(err)
				}
				src, err := send()
				if err != nil {
					t.Fatal(err)
				}
				n1, err := pkts()
				if err != nil {
					t.Fatal(err)
				}
				if src != wantA {
					t.Errorf("%s: flow A's packet left from %v, want %v (its own session's)", c.name, src, wantA)
				}
				if got := n1 - n0; (got == 1) != c.fast || got > 1 {
					t.Errorf("%s: the fast path counted %d packets of flow A's element, want fast %v", c.name, got, c.fast)
				}
			}
		})
	}
}

// TestPrivilegedFastReuseRace: one CPU sends flow A's packets through the
// fast path's hash (fast4dm off: stNoDM) while the other ends every
// session (flush) and makes the sessions of four other flows at once, so
// that the elements of A's entries, deleted on that CPU, are taken from
// its free list by the other flows' entries while A's packets may be
// reading them. A's packets make its session anew after each flush. Every
// packet of A must leave with A's address and valid checksums, or be
// dropped as a session made and gone at once (counted BadNAT). Bounded:
// 2000 rounds. (On main before trust12 it could not be made to fail: the
// delete and the reuse are a syscall apart, the reader's window a few
// instructions; TestPrivilegedFastStaleElement puts the states the
// window can show in place instead.)
func TestPrivilegedFastReuseRace(t *testing.T) {
	if runtime.NumCPU() < 2 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs two CPUs")
		}
		t.Skip("needs two CPUs")
	}
	h := newHarnessStage(t, stNoDM)
	if err := h.do(func() error { _, err := h.load(reuseRules); return err }); err != nil {
		t.Fatal(err)
	}
	idx, err := h.ifindex("nic0")
	if err != nil {
		t.Fatal(err)
	}
	a := ethFrame(udp4("10.0.0.1", "2.2.2.2", 1000, 53))
	var others [][]byte
	for i := range 4 {
		others = append(others, ethFrame(udp4(fmt.Sprintf("10.0.1.%d", 1+i), "2.2.2.2", 1000, 53)))
	}
	a1 := netip.MustParseAddr("1.1.1.1").As4()
	var (
		stop    atomic.Bool
		runs    int
		dropped atomic.Uint64
	)
	const rounds = 2000
	errc := make(chan error, 2)
	go func() {
		errc <- h.do(func() error {
			if err := pin(0); err != nil {
				return err
			}
			for !stop.Load() {
				v, out, err := h.d.Run(true, a, idx)
				if err != nil {
					return err
				}
				runs++
				if v == VerdictShot {
					dropped.Add(1)
					continue
				}
				ip := out[14:]
				if [4]byte(ip[12:16]) != a1 {
					return fmt.Errorf("flow A's packet %d left from %v, not A's address", runs, netip.AddrFrom4([4]byte(ip[12:16])))
				}
				if err := checkUDP4(ip); err != nil {
					return fmt.Errorf("flow A's packet %d: %w", runs, err)
				}
			}
			return nil
		})
	}()
	go func() {
		defer stop.Store(true)
		errc <- h.do(func() error {
			if err := pin(1); err != nil {
				return err
			}
			for range rounds {
				if _, err := h.d.FlushSessions(); err != nil {
					return err
				}
				for _, f := range others {
					if _, _, err := h.d.Run(true, f, idx); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}()
	for range 2 {
		if err := <-errc; err != nil {
			stop.Store(true)
			t.Fatal(err)
		}
	}
	st, err := h.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rounds, %d packets of flow A (%d dropped), %d translated outbound", rounds, runs, dropped.Load(), st.Side[dirOut].Translated)
	if d := dropped.Load(); d > st.Side[dirOut].BadNAT {
		t.Errorf("%d packets of flow A dropped, %d counted BadNAT: a drop that is not a failed session", d, st.Side[dirOut].BadNAT)
	}
	if runs == 0 {
		t.Error("no packet of flow A ran: the race was not run")
	}
}

// TestPrivilegedFragHalfGone: the body of a fragmented datagram whose
// first fragment made a session, sent when the session is half gone:
// another CPU ending it has deleted one entry (the one of the body's
// direction) and not yet the other, which the fragment entry then finds;
// or a new session of another host has meanwhile taken that entry's key.
// The engine removes a session whole and forgets its fragment entries
// with it: the body is then a fragment of no known datagram, which a UDP
// body leaves untranslated (NoMatch). The kernel must do the same: never
// translate by the other session's entry (before trust12 it did, with
// that session's address), nor by a half. Before each case the body is
// translated by the whole session, as a control.
func TestPrivilegedFragHalfGone(t *testing.T) {
	h := newHarness(t)
	if err := h.do(func() error { _, err := h.load(reuseRules); return err }); err != nil {
		t.Fatal(err)
	}
	udp := packettest.UDP(1000, 53, make([]byte, 16), false)
	first := packettest.V4{Src: "10.0.0.1", Dst: "2.2.2.2", Proto: 17, ID: 77, FlagsOff: 0x2000, Payload: udp}.Bytes()
	body := packettest.V4{Src: "10.0.0.1", Dst: "2.2.2.2", Proto: 17, ID: 77, FlagsOff: uint16(len(udp) / 8),
		Payload: []byte("fragment")}.Bytes()
	src := func(ip []byte) netip.Addr { return netip.AddrFrom4([4]byte(ip[12:16])) }
	send := func(ip []byte) (netip.Addr, error) {
		var a netip.Addr
		err := h.do(func() error {
			_, out, err := h.run(true, "nic0", ip)
			if err == nil {
				a = src(out)
			}
			return err
		})
		return a, err
	}
	a1, a2, inside := netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("1.1.1.2"), netip.MustParseAddr("10.0.0.1")
	if got, err := send(first); err != nil || got != a1 {
		t.Fatalf("the first fragment left from %v (%v), want %v", got, err, a1)
	}
	// another host's session (the other rule: 1.1.1.2)
	if _, err := send(udp4("10.0.1.1", "2.2.2.2", 1000, 53)); err != nil {
		t.Fatal(err)
	}
	// the outbound entries of the two sessions
	var (
		ko, kg natNatKey
		vo, vg natNatSess
		k      natNatKey
		v      natNatSess
	)
	for it := h.d.objs.Sessions.Iterate(); it.Next(&k, &v); {
		if k.Dir != dirOut || k.Family != 4 {
			continue
		}
		switch k.Src[0] {
		case binary.NativeEndian.Uint32([]byte{10, 0, 0, 1}):
			ko, vo = k, v
		case binary.NativeEndian.Uint32([]byte{10, 0, 1, 1}):
			kg, vg = k, v
		}
	}
	if ko.Proto == 0 || kg.Proto == 0 {
		t.Fatal("no outbound entry of the fragmented datagram's session or of the other host's")
	}
	for _, c := range []struct {
		name string
		set  func() error
	}{
		{"its entry gone", func() error { return h.d.objs.Sessions.Delete(ko) }},
		{"its key taken by another session", func() error { return h.d.objs.Sessions.Update(ko, vg, 0) }},
	} {
		if err := h.d.objs.Sessions.Update(ko, vo, 0); err != nil {
			t.Fatal(err)
		}
		if got, err := send(body); err != nil || got != a1 {
			t.Fatalf("%s: with the session whole the body left from %v (%v), want %v", c.name, got, err, a1)
		}
		if err := c.set(); err != nil {
			t.Fatal(err)
		}
		got, err := send(body)
		if err != nil {
			t.Fatal(err)
		}
		if got == a2 {
			t.Errorf("%s: the body left with the other session's address %v", c.name, got)
		} else if got != inside {
			t.Errorf("%s: the body left from %v, want %v (untranslated: no session, as in the engine)", c.name, got, inside)
		}
	}
	// the session whole again, for the flush of the next test's reset
	if err := h.d.objs.Sessions.Update(ko, vo, 0); err != nil {
		t.Fatal(err)
	}
}

// TestPrivilegedSessStaleElement puts in the session table, under flow
// A's outbound key, each state a packet can find in an element it looked
// up while another CPU ends A's session and makes another (sessions is
// preallocated: the element is reused at once, sess_pin in c/nat.c):
// another session's whole entry, another session's entry being written
// (marked, seq 0), A's entry marked. The fast twins are off (stNoTwin),
// so A's packets take the session table's paths (nat_run's hit, then
// nat_slow and nat_finish). A's packet must never leave with the other
// session's address, nor untranslated: it leaves with A's own (1.1.1.1)
// or is dropped, counted BadNAT (fail closed). A's whole entry, put back,
// is used as before. Before trust13 the first two states sent A's packet
// out with 1.1.1.2 / fd01::2.
func TestPrivilegedSessStaleElement(t *testing.T) {
	h := newHarnessStage(t, stNoTwin)
	if err := h.do(func() error { _, err := h.load(reuseRules); return err }); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []struct {
		name       string
		a, b       []byte
		srcOf      func([]byte) netip.Addr
		wantA, isB string
		inside     string
		aWord      uint32 // word 0 of A's source
		family     uint8
	}{
		{"ipv4", udp4("10.0.0.1", "2.2.2.2", 1000, 53), udp4("10.0.1.1", "2.2.2.2", 1000, 53),
			func(ip []byte) netip.Addr { return netip.AddrFrom4([4]byte(ip[12:16])) }, "1.1.1.1", "1.1.1.2",
			"10.0.0.1", binary.NativeEndian.Uint32([]byte{10, 0, 0, 1}), 4},
		{"ipv6", udp6("fd00::1", "2001:db8::2", 1000, 53), udp6("fd00:1::1", "2001:db8::2", 1000, 53),
			func(ip []byte) netip.Addr { return netip.AddrFrom16([16]byte(ip[8:24])) }, "fd01::1", "fd01::2",
			"fd00::1", binary.NativeEndian.Uint32([]byte{0xfd, 0, 0, 0}), 6},
	} {
		t.Run(fam.name, func(t *testing.T) {
			wantA, isB, inside := netip.MustParseAddr(fam.wantA), netip.MustParseAddr(fam.isB), netip.MustParseAddr(fam.inside)
			h.openFlows(t, fam.a, fam.b)
			var (
				ka, kb, k natNatKey
				va, vb, v natNatSess
			)
			for it := h.d.objs.Sessions.Iterate(); it.Next(&k, &v); {
				if k.Dir != dirOut || k.Family != fam.family {
					continue
				}
				if k.Src[0] == fam.aWord {
					ka, va = k, v
				} else {
					kb, vb = k, v
				}
			}
			if ka.Proto == 0 || kb.Proto == 0 {
				t.Fatal("no outbound entry of flow A or B")
			}
			// no fast twin: the session table is what A's packets read
			var (
				fk natNatFkey
				f4 natNatFast4
			)
			for it := h.d.objs.Fast4.Iterate(); it.Next(&fk, &f4); {
				t.Fatalf("fast4 holds %+v with the twins off", fk)
			}
			send := func() (int32, netip.Addr, uint64, error) {
				var (
					verdict int32
					src     netip.Addr
					bad     uint64
				)
				err := h.do(func() error {
					s0, err := h.d.Stats()
					if err != nil {
						return err
					}
					r, out, err := h.run(true, "nic0", fam.a)
					if err != nil {
						return err
					}
					s1, err := h.d.Stats()
					if err != nil {
						return err
					}
					verdict, src, bad = r, fam.srcOf(out), s1.Side[dirOut].BadNAT-s0.Side[dirOut].BadNAT
					return nil
				})
				return verdict, src, bad, err
			}
			for _, c := range []struct {
				name  string
				v     natNatSess
				seq   uint64
				whole bool // A's own entry: translated by it
			}{
				{"another session's entry", vb, vb.Seq, false},
				{"another session's entry being written", vb, 0, false},
				{"A's entry marked", va, 0, false},
				{"A's entry whole", va, va.Seq, true},
			} {
				e := c.v
				e.Seq = c.seq
				if err := h.d.objs.Sessions.Update(ka, e, 0); err != nil {
					t.Fatal(err)
				}
				verdict, src, bad, err := send()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case verdict == VerdictShot:
					if c.whole {
						t.Errorf("%s: flow A's packet dropped", c.name)
					} else if bad != 1 {
						t.Errorf("%s: flow A's packet dropped, BadNAT +%d, want +1", c.name, bad)
					}
				case src == isB:
					t.Errorf("%s: flow A's packet left with the other session's address %v", c.name, src)
				case src == inside:
					t.Errorf("%s: flow A's packet left untranslated", c.name)
				case src != wantA:
					t.Errorf("%s: flow A's packet left from %v, want %v", c.name, src, wantA)
				}
			}
			// A's entry as it was, for the next test's flush
			if err := h.d.objs.Sessions.Update(ka, va, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPrivilegedFragStaleEntry puts under a datagram's fragment entry key
// the entry of another host's datagram, as a body finds an element of
// frags (an LRU hash) that was evicted or replaced and written for
// another datagram while it read it (frag_copy in c/nat.c). The body
// must not follow that datagram's session: it is one of no known
// datagram (a UDP body leaves untranslated, as in the engine). Before
// trust13 it left with the other session's address 1.1.1.2. Its own
// entry, put back, is followed as before (control).
func TestPrivilegedFragStaleEntry(t *testing.T) {
	h := newHarness(t)
	if err := h.do(func() error { _, err := h.load(reuseRules); return err }); err != nil {
		t.Fatal(err)
	}
	udp := packettest.UDP(1000, 53, make([]byte, 16), false)
	first := func(src string, id uint16) []byte {
		return packettest.V4{Src: src, Dst: "2.2.2.2", Proto: 17, ID: id, FlagsOff: 0x2000, Payload: udp}.Bytes()
	}
	body := packettest.V4{Src: "10.0.0.1", Dst: "2.2.2.2", Proto: 17, ID: 77, FlagsOff: uint16(len(udp) / 8),
		Payload: []byte("fragment")}.Bytes()
	send := func(ip []byte) (netip.Addr, error) {
		var a netip.Addr
		err := h.do(func() error {
			_, out, err := h.run(true, "nic0", ip)
			if err == nil {
				a = netip.AddrFrom4([4]byte(out[12:16]))
			}
			return err
		})
		return a, err
	}
	a1, a2, inside := netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("1.1.1.2"), netip.MustParseAddr("10.0.0.1")
	if got, err := send(first("10.0.0.1", 77)); err != nil || got != a1 {
		t.Fatalf("the first fragment left from %v (%v), want %v", got, err, a1)
	}
	if got, err := send(first("10.0.1.1", 78)); err != nil || got != a2 {
		t.Fatalf("the other host's first fragment left from %v (%v), want %v", got, err, a2)
	}
	var (
		ko, kg, k natNatFragKey
		vo, vg, v natNatFrag
	)
	for it := h.d.objs.Frags.Iterate(); it.Next(&k, &v); {
		switch k.Src[0] {
		case binary.NativeEndian.Uint32([]byte{10, 0, 0, 1}):
			ko, vo = k, v
		case binary.NativeEndian.Uint32([]byte{10, 0, 1, 1}):
			kg, vg = k, v
		}
	}
	if ko.Proto == 0 || kg.Proto == 0 {
		t.Fatal("no fragment entry of the datagram or of the other host's")
	}
	if got, err := send(body); err != nil || got != a1 {
		t.Fatalf("with its own entry the body left from %v (%v), want %v", got, err, a1)
	}
	if err := h.d.objs.Frags.Update(ko, vg, 0); err != nil {
		t.Fatal(err)
	}
	got, err := send(body)
	if err != nil {
		t.Fatal(err)
	}
	if got == a2 {
		t.Errorf("the body left with the other datagram's session's address %v", got)
	} else if got != inside {
		t.Errorf("the body left from %v, want %v (untranslated: no known datagram)", got, inside)
	}
	if err := h.d.objs.Frags.Update(ko, vo, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := send(body); err != nil || got != a1 {
		t.Errorf("with its own entry back the body left from %v (%v), want %v", got, err, a1)
	}
}

// openFlows sends the first outbound packet of each frame through nic0,
// so that each has its session.
func (h *harness) openFlows(t *testing.T, frames ...[]byte) {
	t.Helper()
	if err := h.do(func() error {
		for _, f := range frames {
			if _, _, err := h.run(true, "nic0", f); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

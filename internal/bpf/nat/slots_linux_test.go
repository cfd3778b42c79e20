//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"sluice/internal/packet/packettest"
	"sluice/internal/testutil"
	"sluice/internal/testutil/bpffs"
)

// udpTo is an outbound UDP datagram from src:sport to dst:53.
func udpTo(src, dst string, sport uint16) []byte {
	return packettest.V4{Src: src, Dst: dst, Proto: 17, TTL: 64, Payload: packettest.UDP(sport, 53, []byte("q"), false)}.Bytes()
}

// outKey is the fast4 key of the outbound entry of udpTo(src, dst, sport).
func outKey(src, dst string, sport uint16) natNatFkey {
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	return natNatFkey{Src: binary.NativeEndian.Uint32(s[:]), Dst: binary.NativeEndian.Uint32(d[:]),
		Sport: htons(sport), Dport: htons(53), Proto: 17, Dir: dirOut}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// srcPort is the UDP source port of IPv4 packet ip (no options).
func srcPort(ip []byte) uint16 { return binary.BigEndian.Uint16(ip[20:]) }

// collider finds a flow from 10.0.0.2 whose outbound key has the slot of
// k: destinations 2.2.x.y, source ports 1024 up.
func collider(t *testing.T, k natNatFkey) (dst string, sport uint16) {
	t.Helper()
	want := slotIdx(k)
	for d := 0; d < 1<<16; d++ {
		dst := fmt.Sprintf("2.2.%d.%d", d>>8, d&0xff)
		for sp := 1024; sp < 1<<16; sp++ {
			if slotIdx(outKey("10.0.0.2", dst, uint16(sp))) == want {
				return dst, uint16(sp)
			}
		}
	}
	t.Fatal("no flow with the same slot")
	return "", 0
}

// TestPrivilegedSlots follows a flow's fast4dm slot through its life: a
// new session's outbound entry takes the slot of its key and the next
// packets are translated through it (counted there, and in the session
// listing and the statistics as before); a flow whose key has the same
// slot is translated through fast4, by its own session; the times kept in
// the slot keep the session alive (expiry reads them); `ipnat -F` empties
// the slot, and the next packet makes a new session by the slow path.
func TestPrivilegedSlots(t *testing.T) {
	h := newHarness(t)
	k1 := outKey("10.0.0.1", "2.2.2.2", 1000)
	dst2, sp2 := collider(t, k1)
	k2 := outKey("10.0.0.2", dst2, sp2)
	one := udpTo("10.0.0.1", "2.2.2.2", 1000)
	two := udpTo("10.0.0.2", dst2, sp2)
	run := func(pkt []byte) uint16 {
		t.Helper()
		var out []byte
		err := h.do(func() error {
			ret, o, err := h.run(true, "nic0", pkt)
			if err == nil && ret != VerdictNext {
				err = fmt.Errorf("verdict %d", ret)
			}
			out = o
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return srcPort(out)
	}
	slot := func(k natNatFkey) (uint64, bool) {
		t.Helper()
		c, ok, err := h.d.slotOf(k)
		if err != nil {
			t.Fatal(err)
		}
		return c.Pkts, ok
	}
	if err := h.do(func() error {
		_, err := h.load("map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap udp 10000:60000 age 30/30\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p1 := run(one)
	if n, ok := slot(k1); !ok || n != 0 {
		t.Fatalf("after the first packet the slot holds the flow %v with %d packets, want it with 0", ok, n)
	}
	p2 := run(two)
	if _, ok := slot(k2); ok {
		t.Fatal("a second key took an occupied slot")
	}
	for i := range 3 {
		if p := run(one); p != p1 {
			t.Fatalf("packet %d of flow 1 left with port %d, its session's is %d", i, p, p1)
		}
		if p := run(two); p != p2 {
			t.Fatalf("packet %d of flow 2 left with port %d, its session's is %d", i, p, p2)
		}
	}
	if n, _ := slot(k1); n != 3 {
		t.Errorf("the slot counted %d packets, want 3", n)
	}
	ss, err := h.d.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].Pkts[0]+ss[1].Pkts[0] != 8 || st.Side[dirOut].Fast != 6 || st.Side[dirOut].Translated != 8 {
		t.Errorf("sessions %+v, outbound statistics %+v: want 2 sessions of 4 packets each, 6 of the 8 by the fast path",
			ss, st.Side[dirOut])
	}

	// expiry: 20 s on, a packet through the slot; 20 s more is 40 s
	// after the entry's fast4 time but 20 s after the slot's (age 30 s)
	if err := h.d.AdvanceClock(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	run(one)
	if err := h.d.AdvanceClock(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := h.d.ExpireSessions(); err != nil || n != 1 {
		t.Fatalf("expiry ended %d sessions (%v), want 1: flow 2's (flow 1's last packet is in its slot)", n, err)
	}
	if _, ok := slot(k1); !ok {
		t.Fatal("flow 1's slot was emptied while its session lives")
	}

	// ipnat -F empties the slot; the next packet is the slow path's
	before, err := h.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.d.FlushSessions(); err != nil || n != 1 {
		t.Fatalf("flush: %d %v", n, err)
	}
	if _, ok := slot(k1); ok {
		t.Fatal("the slot holds flow 1 after its session was flushed")
	}
	if p := run(one); p == p1 {
		t.Errorf("after the flush flow 1 left with its ended session's port %d", p)
	}
	after, err := h.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.Side[dirOut].Added != before.Side[dirOut].Added+1 || after.Side[dirOut].Fast != before.Side[dirOut].Fast {
		t.Errorf("the packet after the flush: added %d -> %d, fast %d -> %d: want a new session, not the fast path",
			before.Side[dirOut].Added, after.Side[dirOut].Added, before.Side[dirOut].Fast, after.Side[dirOut].Fast)
	}
	if _, ok := slot(k1); !ok {
		t.Error("the new session did not take the empty slot")
	}
}

// pin puts the calling thread (locked) on cpu.
func pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}

// sum16 is the one's complement sum of b (big-endian words) added to acc.
func sum16(acc uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		acc += uint32(b[len(b)-1]) << 8
	}
	return acc
}

func fold16(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// checkUDP4 verifies an IPv4 UDP packet's header and UDP checksums (a
// rewrite by a torn copy of two entries' differences would break them).
func checkUDP4(ip []byte) error {
	if fold16(sum16(0, ip[:20])) != 0xffff {
		return errors.New("bad IPv4 header checksum")
	}
	udp := ip[20:]
	pseudo := sum16(0, ip[12:20]) + 17 + uint32(len(udp))
	if fold16(sum16(pseudo, udp)) != 0xffff {
		return errors.New("bad UDP checksum")
	}
	return nil
}

// TestPrivilegedSlotRace: one CPU translates flow 1's packets while the
// other keeps making sessions for flow 1 and for flow 2, whose key has
// the same slot (another rule: another address), and flushing them all,
// so that the slot is filled, emptied and taken by either flow while
// packets go through it (and the first CPU's packets make flow 1's
// sessions anew after each flush, filling the slot as the second ends
// them). Every packet of flow 1 must leave with flow 1's address and
// valid checksums (never a rewrite by flow 2's session, nor by a torn
// copy of two); and whenever the slot holds flow 1 (seq even), fast4 must
// hold flow 1 with the same rewrite: only the second CPU ends sessions,
// so a slot left after its session's end would show (before and after
// each flush). Bounded: 300 rounds.
func TestPrivilegedSlotRace(t *testing.T) {
	if runtime.NumCPU() < 2 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs two CPUs")
		}
		t.Skip("needs two CPUs")
	}
	h := newHarness(t)
	if err := h.do(func() error {
		_, err := h.load("map nic0 10.0.0.1/32 -> 1.1.1.1/32 portmap udp 2000:30000\n" +
			"map nic0 10.0.0.2/32 -> 1.1.1.2/32 portmap udp 30001:60000\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	idx, err := h.ifindex("nic0")
	if err != nil {
		t.Fatal(err)
	}
	k1 := outKey("10.0.0.1", "2.2.2.2", 1000)
	dst2, sp2 := collider(t, k1)
	one := ethFrame(udpTo("10.0.0.1", "2.2.2.2", 1000))
	two := ethFrame(udpTo("10.0.0.2", dst2, sp2))
	a1 := netip.MustParseAddr("1.1.1.1").As4()

	// consistent: the slot of flow 1, if it holds flow 1 and is not being
	// written, has the rewrite of fast4's entry of flow 1
	consistent := func() (bool, error) {
		var s natNatSlot
		if err := h.d.objs.Fast4dm.LookupWithFlags(slotIdx(k1), &s, ebpf.LookupLock); err != nil {
			return false, err
		}
		if s.K != k1 || s.Seq&1 != 0 {
			return false, nil
		}
		var f4 natNatFast4
		if err := h.d.objs.Fast4.Lookup(k1, &f4); err != nil {
			return true, fmt.Errorf("the slot holds flow 1 (seq %d), fast4 does not: %w", s.Seq, err)
		}
		f := f4.F
		if f.Nsrc != s.F.Nsrc || f.Nsport != s.F.Nsport || f.Ifindex != s.F.Ifindex || f.CsumL3 != s.F.CsumL3 ||
			f.CsumL4a != s.F.CsumL4a || f.CsumL4p != s.F.CsumL4p {
			return true, fmt.Errorf("the slot holds flow 1 with %+v, fast4 with %+v", s.F, f)
		}
		return true, nil
	}

	var (
		stop           atomic.Bool
		runs, held     int
		dropped        atomic.Uint64
		viaSlot, total uint64
	)
	const rounds = 300
	errc := make(chan error, 2)
	go func() {
		errc <- h.do(func() error {
			if err := pin(0); err != nil {
				return err
			}
			// from the start: both CPUs make flow 1's first session at
			// once (and again after each flush), the race of
			// TestPrivilegedFirstPacketRace, here with the slot's
			for !stop.Load() {
				v, out, err := h.d.Run(true, one, idx)
				if err != nil {
					return err
				}
				ip := out[14:]
				runs++
				if v == VerdictShot {
					// a session made and gone at once (the flush):
					// dropped, counted BadNAT, never sent on
					// untranslated
					dropped.Add(1)
					continue
				}
				if [4]byte(ip[12:16]) != a1 {
					st, _ := h.d.Stats()
					return fmt.Errorf("flow 1's packet left from %v, not flow 1's address (verdict %d, out side %+v)", netip.AddrFrom4([4]byte(ip[12:16])), v, st.Side[dirOut])
				}
				if err := checkUDP4(ip); err != nil {
					return fmt.Errorf("flow 1's packet %d: %w", runs, err)
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
			for r := 1; r <= rounds; r++ {
				order := [][]byte{one, two}
				if r%2 == 0 {
					order = [][]byte{two, one}
				}
				for _, f := range order {
					if _, _, err := h.d.Run(true, f, idx); err != nil {
						return err
					}
				}
				ok, err := consistent()
				if err != nil {
					return fmt.Errorf("round %d, before the flush: %w", r, err)
				}
				if ok {
					held++
				}
				if c, ok, err := h.d.slotOf(k1); err != nil {
					return err
				} else if ok {
					viaSlot += c.Pkts
				}
				if _, err := h.d.FlushSessions(); err != nil {
					return err
				}
				if _, err := consistent(); err != nil {
					return fmt.Errorf("round %d, after the flush: %w", r, err)
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
	total = st.Side[dirOut].Translated
	t.Logf("%d rounds (the slot held flow 1 in %d), %d packets of flow 1 from the other CPU (%d dropped), %d counted in its slot, %d translated",
		rounds, held, runs, dropped.Load(), viaSlot, total)
	if d := dropped.Load(); d > st.Side[dirOut].BadNAT {
		t.Errorf("%d packets of flow 1 dropped, %d counted BadNAT: a drop that is not a failed session", d, st.Side[dirOut].BadNAT)
	}
	if viaSlot == 0 || held == 0 {
		t.Error("no packet of flow 1 went through the slot: the race was not run")
	}
}

// TestPrivilegedSlotsOlderLayout: the maps of a datapath made before
// fast4dm (here: its pin removed) are refused, by a load and by the
// commands that open them, with an error that says what to do (ipf -D
// still removes them), and left as they were.
func TestPrivilegedSlotsOlderLayout(t *testing.T) {
	testutil.RequireRoot(t)
	dir := filepath.Join(bpffs.Mount(t), "nat")
	old, err := Load(Options{PinDir: dir})
	if err != nil {
		t.Fatalf("Load: %+v", err)
	}
	old.objs.Close()
	if err := os.Remove(filepath.Join(dir, "fast4dm")); err != nil {
		t.Fatal(err)
	}
	_, err = Load(Options{PinDir: dir})
	if !errors.Is(err, ebpf.ErrMapIncompatible) || !strings.Contains(err.Error(), "another layout") {
		t.Fatalf("loading over maps without fast4dm: %v, want an incompatible-maps error saying so", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fast4dm")); err == nil {
		t.Error("the refused load pinned a fast4dm")
	}
	if _, err := OpenPinned(dir); !errors.Is(err, ebpf.ErrMapIncompatible) || !strings.Contains(err.Error(), "another layout") {
		t.Errorf("opening the older maps: %v, want an incompatible-maps error saying so", err)
	}
	again, err := Load(Options{PinDir: dir})
	if err == nil {
		again.objs.Close()
		t.Error("a second load over the older maps was taken")
	}
}

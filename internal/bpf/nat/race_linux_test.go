//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"sluice/internal/packet/packettest"
)

// firstRaceCase is a rule set and the first packet of flow i under it,
// which the two CPUs send at once; inside is where the untranslated
// packet shows the address the rule hides (the source going out, the
// destination coming in: offset and bytes in the IP header).
type firstRaceCase struct {
	name, rules string
	out         bool
	ifaces      [2]string // the interface each CPU's packet is on
	pkt         func(i int) []byte
	inside      func(ip []byte) bool // the packet left with the address the rule replaces
	// setup, if set, runs before the race (inside the namespace): what
	// flow i's first packet needs to be one (the ftp proxy's wildcard)
	setup func(h *harness, i int) error
	// wild: the flows' sessions are made from wildcards, not by rules
	// (counted WildUsed, not Added), one live session besides each
	wild bool
}

func udp4(src, dst string, sport, dport uint16) []byte {
	return packettest.V4{Src: src, Dst: dst, Proto: 17, TTL: 64, Payload: packettest.UDP(sport, dport, []byte("q"), false)}.Bytes()
}

func udp6(src, dst string, sport, dport uint16) []byte {
	return packettest.V6{Src: src, Dst: dst, Next: 17, HopLimit: 64, L4Proto: 17,
		Payload: packettest.UDP(sport, dport, []byte("q"), false)}.Bytes()
}

func tcpSyn4(src, dst string, sport, dport uint16) []byte {
	// a SYN with an MSS option of 1460, which the rule clamps
	return packettest.V4{Src: src, Dst: dst, Proto: 6, TTL: 64, Payload: packettest.TCP{SrcPort: sport, DstPort: dport, Seq: 1,
		Flags: 0x02, Win: 65535, Options: []byte{2, 4, 0x05, 0xb4}}.Bytes()}.Bytes()
}

func dstIs(a string) func([]byte) bool {
	want := netip.MustParseAddr(a)
	return func(ip []byte) bool { return netip.AddrFrom4([4]byte(ip[16:20])) == want }
}

// raceHost is the inside host of flow i: 200 of them, so that no host
// runs out of the ports a rule gives each (portmap auto, map-block).
func raceHost(i int) string { return fmt.Sprintf("10.0.0.%d", 1+i%200) }

func srcIn(prefix string) func([]byte) bool {
	p := netip.MustParsePrefix(prefix)
	return func(ip []byte) bool { return p.Contains(netip.AddrFrom4([4]byte(ip[12:16]))) }
}

func firstRaceCases() []firstRaceCase {
	both := [2]string{"nic0", "nic0"}
	out4 := func(i int) []byte { return udp4(raceHost(i), "2.2.2.2", uint16(1024+i), 53) }
	insideSrc := srcIn("10.0.0.0/24")
	return []firstRaceCase{
		{name: "map portmap", rules: "map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap udp 2000:60000\n", out: true, ifaces: both,
			pkt: out4, inside: insideSrc},
		{name: "map portmap sequential", rules: "map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap udp 2000:60000 sequential\n", out: true,
			ifaces: both, pkt: out4, inside: insideSrc},
		{name: "map portmap auto", rules: "map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp/udp auto\n", out: true, ifaces: both,
			pkt: out4, inside: insideSrc},
		// ports kept: the second CPU's clash check sees the first's
		// session (its reply key) and finds no other choice
		{name: "map address", rules: "map nic0 10.0.0.0/24 -> 1.1.1.1/32\n", out: true, ifaces: both,
			pkt: out4, inside: insideSrc},
		{name: "map mssclamp", rules: "map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap tcp/udp 2000:60000 mssclamp 1200\n", out: true,
			ifaces: both, pkt: func(i int) []byte { return tcpSyn4(raceHost(i), "2.2.2.2", uint16(1024+i), 80) },
			inside: insideSrc},
		{name: "map-block", rules: "map-block nic0 10.0.0.0/24 -> 1.1.1.0/28 ports auto\n", out: true, ifaces: both,
			pkt: out4, inside: insideSrc},
		{name: "bimap", rules: "bimap nic0 10.0.0.0/24 -> 1.1.1.0/24\n", out: true, ifaces: both,
			pkt: out4, inside: insideSrc},
		{name: "rdr", rules: "rdr nic0 1.1.1.1/32 port 53 -> 10.0.0.5 port 53 udp\n", out: false, ifaces: both,
			pkt:    func(i int) []byte { return udp4("2.2.2.2", "1.1.1.1", uint16(1024+i), 53) },
			inside: dstIs("1.1.1.1")},
		{name: "map IPv6", rules: "map nic0 fd00::/64 -> 2001:db8::1/128 portmap udp 2000:60000\n", out: true, ifaces: both,
			pkt:    func(i int) []byte { return udp6(fmt.Sprintf("fd00::%x", 1+i%200), "2001:db8::99", uint16(1024+i), 53) },
			inside: func(ip []byte) bool { return ip[8] == 0xfd }},
		// a rule of no interface: the flow's first packets on two
		// interfaces at once (the session is unbound until a lookup
		// binds it, and a key held on another interface is shadowed)
		{name: "map * on two interfaces", rules: "map * 10.0.0.0/24 -> 1.1.1.1/32 portmap udp 2000:60000\n", out: true,
			ifaces: [2]string{"nic0", "nic1"}, pkt: out4, inside: insideSrc},
		// the ftp proxy's data connection: flow i's control connection
		// sends PORT for data port 10000+i, and the server's SYN to it
		// is the first packet, which turns the wildcard into a session
		{name: "ftp data connection", rules: "map nic0 10.0.0.0/24 -> 1.1.1.1/32 proxy port ftp ftp/tcp\n", out: false,
			ifaces: both, setup: ftpPort, wild: true,
			pkt: func(i int) []byte {
				return packettest.V4{Src: "2.2.2.2", Dst: "1.1.1.1", Proto: 6, TTL: 64, Payload: packettest.TCP{SrcPort: 20,
					DstPort: uint16(10000 + i), Seq: 900, Flags: 0x02, Win: 8192}.Bytes()}.Bytes()
			},
			inside: dstIs("1.1.1.1")},
	}
}

// ftpPort opens flow i's ftp control connection (10.0.0.1, port 2000+i,
// kept by the rule) and sends PORT for data port 10000+i through it.
func ftpPort(h *harness, i int) error {
	if err := h.d.setCfg(cfgFTPInsec, 1); err != nil { // no login needed
		return err
	}
	cp := uint16(2000 + i)
	dp := 10000 + i
	tcp := func(src, dst string, sp, dport uint16, seq, ack uint32, flags uint8, data string) []byte {
		return packettest.V4{Src: src, Dst: dst, Proto: 6, TTL: 64, Payload: packettest.TCP{SrcPort: sp, DstPort: dport,
			Seq: seq, Ack: ack, Flags: flags, Win: 8192, Data: []byte(data)}.Bytes()}.Bytes()
	}
	for _, s := range []struct {
		out bool
		b   []byte
	}{
		{true, tcp("10.0.0.1", "2.2.2.2", cp, 21, 100, 0, 0x02, "")},
		{false, tcp("2.2.2.2", "1.1.1.1", 21, cp, 500, 101, 0x12, "")},
		{true, tcp("10.0.0.1", "2.2.2.2", cp, 21, 101, 501, 0x10, "")},
		{true, tcp("10.0.0.1", "2.2.2.2", cp, 21, 101, 501, 0x18, fmt.Sprintf("PORT 10,0,0,1,%d,%d\r\n", dp>>8, dp&0xff))},
	} {
		if v, _, err := h.run(s.out, "nic0", s.b); err != nil {
			return err
		} else if v == VerdictShot {
			return fmt.Errorf("flow %d's control connection dropped", i)
		}
	}
	if w := h.d.cfg(cfgWilds); w != uint64(i+1) {
		return fmt.Errorf("flow %d's PORT: %d wildcards, want %d", i, w, i+1)
	}
	return nil
}

// TestPrivilegedFirstPacketRace: two CPUs send the first packet of one
// flow at the same moment, for many fresh flows, under each kind of rule
// that makes sessions. The slow path of each finds no session and makes
// one; IPFilter, serialised by its NAT lock, would make one session and
// translate both packets by it. Every packet must leave translated (or be
// dropped, counted as a failed session), never with the address the rule
// replaces; two packets of a flow that both leave must leave the same
// (one session); and the counters must agree: one session added a flow,
// all of them live, two entries each in the table, the packets counted
// translated those that were. Bounded: 400 flows a case.
func TestPrivilegedFirstPacketRace(t *testing.T) {
	if runtime.NumCPU() < 2 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs two CPUs")
		}
		t.Skip("needs two CPUs")
	}
	const flows = 400
	h := newHarness(t)
	var raced uint64
	for _, c := range firstRaceCases() {
		t.Run(c.name, func(t *testing.T) {
			if err := h.do(h.reset); err != nil {
				t.Fatal(err)
			}
			var idx [2]int
			if err := h.do(func() error {
				if _, err := h.load(c.rules); err != nil {
					return err
				}
				for cpu, name := range c.ifaces {
					i, err := h.ifindex(name)
					if err != nil {
						return err
					}
					idx[cpu] = i
				}
				for i := 0; c.setup != nil && i < flows; i++ {
					if err := c.setup(h, i); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			before, err := h.d.Stats()
			if err != nil {
				t.Fatal(err)
			}
			var (
				outs    [2][flows][]byte
				verd    [2][flows]int32
				arrived atomic.Int64
				abort   atomic.Bool
			)
			errc := make(chan error, 2)
			for cpu := range 2 {
				go func() {
					errc <- h.do(func() error {
						if err := pin(cpu); err != nil {
							abort.Store(true)
							return err
						}
						for i := range flows {
							frame := ethFrame(c.pkt(i))
							// both CPUs start flow i together
							arrived.Add(1)
							for spin := 0; arrived.Load() < int64(2*(i+1)); spin++ {
								if abort.Load() {
									return nil
								}
								if spin > 1000 {
									unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) // the other CPU may be busy with another task
								}
							}
							v, out, err := h.d.Run(c.out, frame, idx[cpu])
							if err != nil {
								abort.Store(true)
								return err
							}
							verd[cpu][i], outs[cpu][i] = v, out[14:]
						}
						return nil
					})
				}()
			}
			for range 2 {
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			var translated, dropped uint64
			for i := range flows {
				for cpu := range 2 {
					ip := outs[cpu][i]
					switch {
					case verd[cpu][i] == VerdictShot:
						dropped++
					case c.inside(ip):
						t.Fatalf("flow %d: CPU %d's packet left untranslated (verdict %d)", i, cpu, verd[cpu][i])
					default:
						translated++
					}
				}
				if verd[0][i] != VerdictShot && verd[1][i] != VerdictShot && !bytes.Equal(outs[0][i], outs[1][i]) {
					t.Fatalf("flow %d: its two packets left differently (two sessions for one flow):\n% x\n% x", i, outs[0][i], outs[1][i])
				}
			}
			st, err := h.d.Stats()
			if err != nil {
				t.Fatal(err)
			}
			dir := dirIn
			if c.out {
				dir = dirOut
			}
			side, was := st.Side[dir], before.Side[dir]
			raced += side.Raced
			t.Logf("%d flows: %d packets translated, %d dropped; %d found the session the other CPU made at once; stats %+v",
				flows, translated, dropped, side.Raced, side)
			made, live := side.Added-was.Added, uint64(flows)
			if c.wild {
				if made != 0 {
					t.Errorf("%d sessions added by rules, want none", made)
				}
				made, live = st.WildUsed-before.WildUsed, 2*flows
			}
			if made != flows {
				t.Errorf("%d sessions made for %d flows, want one each", made, flows)
			}
			if st.Active != live {
				t.Errorf("%d sessions live, want %d: leaked or lost", st.Active, live)
			}
			if n := mapLen(t, h.d.objs.Sessions); uint64(n) != 2*st.Active {
				t.Errorf("%d session entries for %d sessions, want two each", n, st.Active)
			}
			if d := side.Translated - was.Translated; d != translated {
				t.Errorf("%d packets counted translated, %d left translated", d, translated)
			}
			if d := side.BadNAT - was.BadNAT; dropped > d {
				t.Errorf("%d packets dropped, %d counted BadNAT", dropped, d)
			}
			// counted as the sequential engine would: one miss a flow
			// (its first packet; the second finds the session), no
			// clash, no wrapped port search
			if d := side.Miss - was.Miss; d != made {
				t.Errorf("%d misses counted for %d sessions made, want one each", d, made)
			}
			if d := side.Exists - was.Exists; d != 0 {
				t.Errorf("%d clashes counted, want none", d)
			}
			if d := side.Wrap - was.Wrap; d != 0 {
				t.Errorf("%d wrapped port searches counted, want none", d)
			}
		})
	}
	t.Logf("%d first packets in all took the session the other CPU made at the same moment", raced)
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	gonat "sluice/internal/nat"
	"sluice/internal/packet/packettest"
	"sluice/internal/rules/ipnat"
)

var (
	randomSeed  = flag.Uint64("nat.seed", 0, "seed of TestDifferentialRandom (0: from the clock)")
	randomCases = flag.Int("nat.cases", 250, "rule sets TestDifferentialRandom tries")
	randomOnly  = flag.Int("nat.only", -1, "compare only this case of TestDifferentialRandom (with -nat.seed), printing every packet")
)

// randGen makes random NAT rule sets and flows over small address pools,
// so that rules overlap, allocations collide and replies find sessions.
type randGen struct {
	r  *rand.Rand
	v6 bool
}

var (
	// 10.1.38.0 and 10.0.0.0, fd00:7f:: and fd00:: share a bucket of
	// IPFilter's rule hash tables (internal/nat/rulehash.go): with the /8
	// and /16 masks below, a rule of the second is tried for an address
	// of the first before rules of longer masks.
	inside4  = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.1", "10.1.38.1"}
	outside4 = []string{"2.2.2.2", "2.2.2.3", "3.3.3.3"}
	pub4     = []string{"1.1.1.1", "1.1.1.2", "1.1.1.3"}
	inside6  = []string{"fd00::1", "fd00::2", "fd00::3", "fd00:1::1", "fd00:7f::1"}
	outside6 = []string{"2001:db8:2::2", "2001:db8:2::3", "2001:db8:3::3"}
	pub6     = []string{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:1::3"}
	// three interfaces, and rules without one ("*", ifStar): a `*`
	// rule's session is bound per direction by its first lookup, and
	// sessions of one tuple on several interfaces share a chain
	ifaces = []string{"nic0", "nic1", "nic2"}
)

func (g *randGen) pick(s []string) string { return s[g.r.IntN(len(s))] }

// ifStar is an interface for a map, rdr or bimap rule: one of ifaces,
// or none ("*") one time in three.
func (g *randGen) ifStar(ifn string) string {
	if g.r.IntN(3) == 0 {
		return "*"
	}
	return ifn
}

func (g *randGen) pools() (in, out, pub []string) {
	if g.v6 {
		return inside6, outside6, pub6
	}
	return inside4, outside4, pub4
}

// net returns an address/mask operand around one of the pool's addresses.
func (g *randGen) net(pool []string) string {
	a := g.pick(pool)
	if g.v6 {
		return a + "/" + []string{"128", "127", "120", "64", "16", "0"}[g.r.IntN(6)]
	}
	return a + "/" + []string{"32", "31", "30", "24", "16", "8", "0"}[g.r.IntN(7)]
}

func (g *randGen) proto() string {
	return []string{"tcp", "udp", "tcp/udp", "tcp", "udp"}[g.r.IntN(5)]
}

func (g *randGen) ports() (int, int) {
	lo := []int{1000, 2000, 5000, 40000}[g.r.IntN(4)]
	return lo, lo + []int{0, 1, 3, 10, 1000}[g.r.IntN(5)]
}

func (g *randGen) family() string {
	if g.v6 {
		return " inet6"
	}
	return ""
}

// rule returns one random rule the kernel supports.
func (g *randGen) rule() string {
	in, out, pub := g.pools()
	ifn := g.pick(ifaces)
	fam := g.family()
	// optParts draws a rule's mssclamp and age; opts and the rdr case
	// write them in IPFilter's order (age before mssclamp, and an rdr's
	// round-robin and sticky around age: its grammar refuses any other).
	optParts := func() (mss, age string) {
		if g.r.IntN(6) == 0 {
			mss = fmt.Sprintf(" mssclamp %d", []int{100, 1000, 1460}[g.r.IntN(3)])
		}
		if g.r.IntN(8) == 0 {
			age = fmt.Sprintf(" age %d/%d", 1+g.r.IntN(30), 1+g.r.IntN(30))
		}
		return mss, age
	}
	opts := func() string {
		mss, age := optParts()
		return age + mss
	}
	switch g.r.IntN(12) {
	case 0, 1, 2:
		rhs := g.net(pub)
		if g.r.IntN(4) == 0 {
			rhs = "0/32"
			if g.v6 {
				rhs = "0/128"
			}
		}
		s := fmt.Sprintf("map %s%s %s -> %s", g.ifStar(ifn), fam, g.net(in), rhs)
		switch g.r.IntN(4) {
		case 0:
			lo, hi := g.ports()
			seq := ""
			if g.r.IntN(2) == 0 {
				seq = " sequential"
			}
			s += fmt.Sprintf(" portmap %s %d:%d%s", g.proto(), lo, hi, seq)
		case 1:
			s += " portmap tcp/udp auto"
		case 2:
			if !g.v6 {
				lo, hi := g.ports()
				s += fmt.Sprintf(" icmpidmap icmp %d:%d", lo, hi)
			}
		}
		return s + opts()
	case 3:
		port := ""
		if g.r.IntN(2) == 0 {
			port = fmt.Sprintf(" port %s %d", []string{"=", "!=", ">", "<"}[g.r.IntN(4)], []int{80, 1000, 2000}[g.r.IntN(3)])
		}
		not := ""
		if g.r.IntN(4) == 0 {
			not = "! "
		}
		p := ""
		if port != "" {
			p = " " + g.proto()
		}
		ifs, src, dst, to := g.ifStar(ifn), g.net(in), g.net(out), g.net(pub)
		// the protocol after the options: IPFilter's map grammar
		// (setproto) refuses it before them
		return fmt.Sprintf("map %s%s from %s to %s%s%s -> %s%s%s", ifs, fam, src, not, dst, port, to, opts(), p)
	case 4:
		if g.v6 {
			return fmt.Sprintf("map %s%s %s -> %s", g.ifStar(ifn), fam, g.net(in), g.net(pub))
		}
		ports := []string{"", " ports auto", " ports 256", " ports 1000"}[g.r.IntN(4)]
		return fmt.Sprintf("map-block %s %s -> %s%s", ifn, []string{"10.0.0.0/24", "10.0.0.0/30", "10.0.0.0/16"}[g.r.IntN(3)],
			[]string{"1.1.1.0/30", "1.1.1.0/24", "1.1.1.1/32"}[g.r.IntN(3)], ports)
	case 5, 6, 7:
		lo, hi := g.ports()
		lhs := fmt.Sprintf("%s port %d", g.net(pub), lo)
		if hi != lo && g.r.IntN(2) == 0 {
			lhs = fmt.Sprintf("%s port %d-%d", g.net(pub), lo, hi)
		}
		dst := g.pick(in)
		sticky, rr := "", ""
		if g.r.IntN(3) == 0 {
			dst += "," + g.pick(in)
			if g.r.IntN(2) == 0 {
				sticky = " sticky"
			}
		}
		if g.r.IntN(4) == 0 {
			rr = " round-robin"
		}
		nport := fmt.Sprintf(" port %d", []int{80, 8080, lo}[g.r.IntN(3)])
		if g.r.IntN(4) == 0 {
			nport = fmt.Sprintf(" port %d-%d", 8000, 8003)
		}
		if g.r.IntN(5) == 0 {
			nport = fmt.Sprintf(" port = %d", 8080)
		}
		proto := g.proto()
		mss, age := optParts()
		return fmt.Sprintf("rdr %s%s %s -> %s%s %s%s%s%s%s", g.ifStar(ifn), fam, lhs, dst, nport, proto, rr, age, sticky, mss)
	case 8:
		return fmt.Sprintf("bimap %s%s %s -> %s", g.ifStar(ifn), fam, g.net(in), g.net(pub))
	case 9:
		dir := []string{"in", "out"}[g.r.IntN(2)]
		src := g.net(pub)
		if g.r.IntN(2) == 0 {
			lo, hi := g.ports()
			src += fmt.Sprintf(",%d-%d", lo, hi)
		}
		dst := g.net(out)
		if g.r.IntN(3) == 0 {
			// a fourth steppable field for the odometer
			lo, hi := g.ports()
			dst += fmt.Sprintf(",%d-%d", lo, hi)
		}
		return fmt.Sprintf("rewrite %s on %s%s proto %s from %s to %s -> src %s dst %s;", dir, ifn, fam,
			[]string{"tcp", "udp", "ip"}[g.r.IntN(3)], g.net(in), g.net(out), src, dst)
	case 10:
		return fmt.Sprintf("no map %s%s %s %s;", ifn, fam, g.net(in), g.proto())
	default:
		return fmt.Sprintf("no rdr %s%s %s port %d %s;", ifn, fam, g.net(pub), []int{1000, 2000}[g.r.IntN(2)], g.proto())
	}
}

type randPkt struct {
	out   bool
	iface string
	b     []byte
	// reply, when not 0, makes this packet the reply to what packet
	// reply-1 became (1) or an ICMP error about it (2), built when the
	// run gets there from the engine's output.
	reply, of int
	// quote, when not 0, is how many bytes of the packet an IPv6 error
	// (reply 2) quotes, so that quoted extension header chains are cut
	// short too; 0 quotes 48 bytes past them.
	quote int
}

func (g *randGen) ip(src, dst string, proto uint8, l4 []byte, fragOff uint16, id uint16) []byte {
	if g.v6 {
		return packettest.V6{Src: src, Dst: dst, Next: proto, HopLimit: 64, Payload: l4, L4Proto: proto}.Bytes()
	}
	var opts []byte
	if g.r != nil && g.r.IntN(6) == 0 {
		// IPv4 options: the transport header is not at 20 (NOPs,
		// record route, router alert). Not in ICMP errors, which
		// randomRun builds from the engine's output (no g.r).
		opts = [][]byte{{1, 1, 1, 0}, {7, 7, 4, 0, 0, 0, 0, 0}, {148, 4, 0, 0}, {1, 1, 1, 1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0}}[g.r.IntN(4)]
	}
	return packettest.V4{Src: src, Dst: dst, Proto: proto, Options: opts, Payload: l4, FlagsOff: fragOff, ID: id}.Bytes()
}

// packet returns a random packet, sometimes the reply to an earlier
// output (so sessions are found both ways) or an ICMP error about one.
func (g *randGen) packet(prev []randPkt) randPkt {
	in, out, pub := g.pools()
	if len(prev) > 0 && g.r.IntN(3) == 0 {
		j := g.r.IntN(len(prev))
		kind := 1
		if g.r.IntN(4) == 0 {
			kind = 2
		}
		q := 0
		if kind == 2 && g.v6 && g.r.IntN(3) == 0 {
			q = 41 + g.r.IntN(60)
		}
		ifn := prev[j].iface
		if g.r.IntN(4) == 0 {
			// the reply comes back by another interface (or the
			// same, picked again)
			ifn = g.pick(ifaces)
		}
		if prev[j].reply == 0 && g.r.IntN(4) == 0 {
			// the same packet again, by any interface: the flow
			// leaves (or comes in) by another one
			return randPkt{out: prev[j].out, iface: g.pick(ifaces), b: prev[j].b}
		}
		return randPkt{out: !prev[j].out, iface: ifn, reply: kind, of: j, quote: q}
	}
	o := g.r.IntN(2) == 0
	var src, dst string
	if o {
		src, dst = g.pick(in), g.pick(out)
	} else {
		src, dst = g.pick(out), g.pick(pub)
	}
	ifn := g.pick(ifaces)
	sp := uint16([]int{1000, 1001, 2000, 33333, 40000}[g.r.IntN(5)])
	dp := uint16([]int{80, 1000, 1001, 2000, 2003, 8080}[g.r.IntN(6)])
	var b []byte
	switch g.r.IntN(8) {
	case 0, 1, 2:
		flags := []uint8{0x02, 0x12, 0x10, 0x11, 0x04, 0x18}[g.r.IntN(6)]
		t := packettest.TCP{SrcPort: sp, DstPort: dp, Seq: g.r.Uint32(), Ack: g.r.Uint32(), Flags: flags, Win: 8192}
		if flags == 0x02 && g.r.IntN(2) == 0 {
			t.Options = []byte{2, 4, 0x05, 0xb4, 1, 1, 1, 1}
		}
		b = g.ip(src, dst, 6, t.Bytes(), 0, 0)
	case 3, 4:
		b = g.ip(src, dst, 17, packettest.UDP(sp, dp, []byte("data"), g.r.IntN(8) == 0 && !g.v6), 0, 0)
	case 5:
		typ, proto := uint8(8), uint8(1)
		if g.v6 {
			typ, proto = 128, 58
		}
		b = g.ip(src, dst, proto, packettest.ICMP(typ, 0, uint32(g.r.IntN(3))<<16|1, []byte("ping")), 0, 0)
	case 6:
		b = g.ip(src, dst, 47, []byte{0, 0, 8, 0, 1, 2, 3, 4}, 0, 0)
	default:
		// a datagram in two fragments: the first with the header, then
		// the rest
		id := uint16(g.r.IntN(4))
		if g.v6 {
			if g.r.IntN(4) == 0 {
				b = g.ip(src, dst, 17, packettest.UDP(sp, dp, nil, false), 0, 0)
			} else if g.r.IntN(2) == 0 {
				b = packettest.V6{Src: src, Dst: dst, Next: 44, HopLimit: 64,
					Payload: packettest.Cat(packettest.Frag(17, 0, true, uint32(id)), packettest.UDP(sp, dp, make([]byte, 16), false))}.Bytes()
			} else {
				b = packettest.V6{Src: src, Dst: dst, Next: 44, HopLimit: 64,
					Payload: packettest.Cat(packettest.Frag(17, 24, false, uint32(id)), make([]byte, 16))}.Bytes()
			}
			break
		}
		if g.r.IntN(2) == 0 {
			b = g.ip(src, dst, 17, packettest.UDP(sp, dp, make([]byte, 16), false), 0x2000, id)
		} else {
			// at 24 bytes the rest follows the first fragment
			// (8 bytes of UDP header and 16); at 16 it overlaps it
			b = g.ip(src, dst, 17, make([]byte, 16), uint16(2+g.r.IntN(2)), id)
		}
	}
	if g.v6 && b[6] != 44 && g.r.IntN(3) == 0 {
		b = g.extHeaders(b)
	}
	return randPkt{out: o, iface: ifn, b: b}
}

// extHeaders puts 1-3 random IPv6 extension headers (hop-by-hop,
// routing, destination options, AH, an atomic fragment header) of 8 or
// 16 bytes between b's IPv6 header and its L4 header, so that its
// translation and the ICMPv6 errors quoting it walk them. Together they
// stay within the 128 quoted bytes the kernel holds (ICMP_INNER).
func (g *randGen) extHeaders(b []byte) []byte {
	proto, l4 := b[6], b[40:]
	types := make([]uint8, 1+g.r.IntN(3))
	for i := range types {
		types[i] = []uint8{0, 43, 60, 51, 44}[g.r.IntN(5)]
	}
	// built back to front: each header's next header is the type of the
	// one after it, the last's the L4 protocol
	var exts []byte
	next := proto
	for i := len(types) - 1; i >= 0; i-- {
		var h []byte
		switch types[i] {
		case 44:
			h = packettest.Frag(next, 0, false, uint32(g.r.IntN(4)))
		case 43:
			h = packettest.Routing(next, uint8(g.r.IntN(2)), 0, 0)
		default:
			h = packettest.Ext(next, uint8(g.r.IntN(2)))
		}
		exts = packettest.Cat(h, exts)
		next = types[i]
	}
	return packettest.V6{Src: netip.AddrFrom16([16]byte(b[8:24])).String(), Dst: netip.AddrFrom16([16]byte(b[24:40])).String(),
		Next: next, HopLimit: b[7], Payload: packettest.Cat(exts, l4), L4Off: len(exts), L4Proto: proto}.Bytes()
}

// v6L4 walks the extension headers of IPv6 packet b as the engine does
// and returns its L4 protocol and offset; ok is false for a chain cut
// short or a fragment body.
func v6L4(b []byte) (proto uint8, off int, ok bool) {
	proto, off = b[6], 40
	for {
		switch proto {
		case 0, 43, 60, 135, 51:
			if off+8 > len(b) || off+(int(b[off+1])+1)*8 > len(b) {
				return 0, 0, false
			}
			proto, off = b[off], off+(int(b[off+1])+1)*8
		case 44:
			if off+8 > len(b) || binary.BigEndian.Uint16(b[off+2:])&0xfff8 != 0 {
				return 0, 0, false
			}
			proto, off = b[off], off+8
		default:
			return proto, off, true
		}
	}
}

// reverse returns the reply to packet b (addresses and ports swapped, an
// echo turned into its reply), nil for what has none.
func reverse(b []byte) []byte {
	if len(b) < 20 {
		return nil
	}
	r := append([]byte(nil), b...)
	var l4 []byte
	var proto uint8
	if r[0]>>4 == 4 {
		hl := int(r[0]&15) * 4
		if binary.BigEndian.Uint16(r[6:])&0x1fff != 0 || len(r) < hl {
			return nil
		}
		var s [4]byte
		copy(s[:], r[12:16])
		copy(r[12:16], r[16:20])
		copy(r[16:20], s[:])
		proto, l4 = r[9], r[hl:]
	} else {
		if len(r) < 40 {
			return nil
		}
		var s [16]byte
		copy(s[:], r[8:24])
		copy(r[8:24], r[24:40])
		copy(r[24:40], s[:])
		// past the extension headers (a fragment body or a cut chain
		// gets its addresses swapped only)
		proto, l4 = r[6], r[40:]
		if p, off, ok := v6L4(r); ok {
			proto, l4 = p, r[off:]
		}
	}
	switch proto {
	case 6, 17:
		if len(l4) < 4 {
			return nil
		}
		a, c := binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
		binary.BigEndian.PutUint16(l4, c)
		binary.BigEndian.PutUint16(l4[2:], a)
		if proto == 6 && len(l4) >= 14 {
			l4[13] = 0x12
		}
	case 1:
		if len(l4) < 1 || l4[0] != 8 {
			return nil
		}
		l4[0] = 0
	case 58:
		if len(l4) < 1 || l4[0] != 128 {
			return nil
		}
		l4[0] = 129
	}
	refresh(r)
	return r
}

// refresh recomputes a packet's checksums from scratch.
func refresh(b []byte) {
	var src, dst string
	var proto uint8
	var l4 []byte
	if b[0]>>4 == 4 {
		hl := int(b[0]&15) * 4
		src, dst = netip.AddrFrom4([4]byte(b[12:16])).String(), netip.AddrFrom4([4]byte(b[16:20])).String()
		proto, l4 = b[9], b[hl:]
		n := packettest.V4{Src: src, Dst: dst, Proto: proto, Payload: l4, ID: binary.BigEndian.Uint16(b[4:]),
			FlagsOff: binary.BigEndian.Uint16(b[6:]), TTL: b[8]}.Bytes()
		copy(b, n)
		return
	}
	src, dst = netip.AddrFrom16([16]byte(b[8:24])).String(), netip.AddrFrom16([16]byte(b[24:40])).String()
	proto, off, ok := v6L4(b)
	if !ok {
		proto = 0 // no L4 header to sum
	}
	n := packettest.V6{Src: src, Dst: dst, Next: b[6], HopLimit: b[7], Payload: b[40:], L4Off: off - 40, L4Proto: proto}.Bytes()
	copy(b, n)
}

// icmpErr builds the ICMP error a router between would send back about
// packet p (port unreachable, the first bytes of p embedded).
func (g *randGen) icmpErr(p randPkt) []byte {
	b := p.b
	n := min(len(b), 48)
	if b[0]>>4 == 6 {
		// past the extension headers, or cut where p says
		if _, off, ok := v6L4(b); ok {
			n = min(len(b), off+8)
		}
		if p.quote != 0 {
			n = min(len(b), p.quote)
		}
	}
	emb := append([]byte(nil), b[:n]...)
	if b[0]>>4 == 4 {
		src := netip.AddrFrom4([4]byte(b[16:20])).String()
		dst := netip.AddrFrom4([4]byte(b[12:16])).String()
		return g.ip(src, dst, 1, packettest.ICMP(3, 3, 0, emb), 0, 0)
	}
	src := netip.AddrFrom16([16]byte(b[24:40])).String()
	dst := netip.AddrFrom16([16]byte(b[8:24])).String()
	return g.ip(src, dst, 58, packettest.ICMP(1, 4, 0, emb), 0, 0)
}

// TestDifferentialRandom runs random NAT rule sets over random flows,
// IPv4 and IPv6, through the Go engine and the kernel programs, and
// requires the same packets out, the same drops and the same session and
// host map listings. It runs -nat.cases rule sets (about 20 s as run in
// CI); the seed is logged so a failure can be replayed with -nat.seed.
//
// It runs twice: with the programs as loaded in use, and with their IPv4
// fast path off, so that both ways of translating an established flow
// are held to the engine; the first must have taken the fast path.
func TestDifferentialRandom(t *testing.T) {
	seed := *randomSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for _, c := range []struct {
		name  string
		stage uint32
	}{{"fast", 0}, {"nofast", stOff}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarnessStage(t, c.stage)
			fast := differentialRandom(t, h, seed)
			switch {
			case c.stage == 0 && fast == 0:
				t.Error("no packet took the fast path")
			case c.stage == 0 && h.slotHits() == 0:
				t.Error("no packet was translated through a fast4dm slot")
			case c.stage == stOff && fast != 0:
				t.Errorf("%d packets took the fast path, which is off", fast)
			}
		})
	}
}

// differentialRandom is TestDifferentialRandom with one datapath; it
// returns how many packets the fast path translated.
func differentialRandom(t *testing.T, h *harness, seed uint64) uint64 {
	var fast uint64
	t.Logf("seed %d (replay: go test -run TestDifferentialRandom -nat.seed %d ./internal/bpf/nat)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed^0x5a7e))
	var packets, translated, refused, failures, engineFails int
	for c := 0; c < *randomCases && failures < 5; c++ {
		g := &randGen{r: r, v6: r.IntN(3) == 0}
		n := 1 + r.IntN(5)
		var lines []string
		for range n {
			lines = append(lines, g.rule())
		}
		text := strings.Join(lines, "\n") + "\n"
		if _, err := ipnat.Parse("random.nat", text, io.Discard); err != nil {
			t.Fatalf("generated rules do not parse: %v\n%s", err, text)
		}
		var pkts []randPkt
		var outs []randPkt
		for range 20 + r.IntN(40) {
			pkts = append(pkts, g.packet(outs))
			outs = append(outs, pkts[len(pkts)-1])
		}
		if *randomOnly >= 0 && c != *randomOnly {
			continue
		}
		var np, nt int
		err := h.do(func() error {
			var err error
			np, nt, err = randomRun(h, text, pkts)
			return err
		})
		if errors.Is(err, ErrUnsupported) {
			refused++
			continue
		}
		if errors.Is(err, ErrEngine) {
			// the engine itself fails on these rules (reported, not
			// compared)
			engineFails++
			t.Logf("case %d: %v\n%s", c, err, text)
			continue
		}
		if err != nil {
			failures++
			t.Errorf("case %d (seed %d), rules:\n%s%v", c, seed, text, err)
		}
		st, err := h.d.Stats()
		if err != nil {
			t.Fatal(err)
		}
		fast += st.Side[0].Fast + st.Side[1].Fast
		packets += np
		translated += nt
	}
	t.Logf("random differential: %d packets compared (%d translated), %d rule sets refused as unsupported, %d the engine fails on",
		packets, translated, refused, engineFails)
	if translated == 0 {
		t.Error("nothing was translated: the generator is broken")
	}
	t.Logf("%d packets translated by the fast path", fast)
	return fast
}

// expectTranslated runs pkts through the engine and the kernel with rules
// (randomRun: any disagreement fails) and checks how many the engine
// translated, so a case cannot pass by translating nothing on both sides.
func expectTranslated(t *testing.T, h *harness, rules string, pkts []randPkt, want int) {
	t.Helper()
	var tr int
	if err := h.do(func() error {
		var err error
		_, tr, err = randomRun(h, rules, pkts)
		return err
	}); err != nil {
		t.Fatalf("rules:\n%s%v", rules, err)
	}
	if tr != want {
		t.Errorf("the engine translated %d packets, want %d", tr, want)
	}
}

func randomRun(h *harness, text string, pkts []randPkt) (int, int, error) {
	if err := h.reset(); err != nil {
		return 0, 0, err
	}
	f, err := h.load(text)
	if err != nil {
		return 0, 0, err
	}
	eng, err := gonat.New(f, gonat.Config{IfAddr: func(name string, v6 bool) (netip.Addr, bool) {
		a, ok := randIfAddr(name, v6)
		return a, ok
	}})
	if err != nil {
		return 0, 0, err
	}
	for _, ifn := range ifaces {
		idx, err := h.ifindex(ifn)
		if err != nil {
			return 0, 0, err
		}
		a4, _ := randIfAddr(ifn, false)
		a6, _ := randIfAddr(ifn, true)
		if err := h.d.SetIfAddr(idx, a4, a6); err != nil {
			return 0, 0, err
		}
	}
	var msgs []string
	translated := 0
	outputs := make([][]byte, len(pkts))
	g := &randGen{}
	for i, p := range pkts {
		if p.reply != 0 {
			// the reply to (or an ICMP error about) what an earlier
			// packet became
			o := outputs[p.of]
			if o == nil {
				continue
			}
			if p.reply == 2 {
				g.v6 = o[0]>>4 == 6
				p.b = g.icmpErr(randPkt{b: o, quote: p.quote})
			} else if p.b = reverse(o); p.b == nil {
				continue
			}
		}
		want, res := engineRun(eng, p)
		ret, got, err := h.runFirst(p.out, p.iface, p.b)
		if err != nil {
			return i, translated, err
		}
		if *randomOnly >= 0 {
			fmt.Printf("packet %d %v %s\n  in:     %x\n  engine: %v %x\n  kernel: %d %x\n", i, p.out, p.iface, p.b, res, want, ret, got)
		}
		if !bytes.Equal(want, p.b) {
			translated++
		}
		if res != gonat.Failed {
			outputs[i] = append([]byte(nil), want...)
		}
		dir := map[bool]string{false: "in", true: "out"}[p.out]
		switch {
		case res == gonat.Failed && ret != VerdictShot:
			msgs = append(msgs, fmt.Sprintf("packet %d (%s %s %x): engine drops, kernel %d", i, dir, p.iface, p.b, ret))
		case res != gonat.Failed && ret == VerdictShot:
			msgs = append(msgs, fmt.Sprintf("packet %d (%s %s %x): kernel drops, engine %v", i, dir, p.iface, p.b, res))
		case res != gonat.Failed && !bytes.Equal(want, got):
			msgs = append(msgs, fmt.Sprintf("packet %d (%s %s): differ\n  in:     %x\n  engine: %x\n  kernel: %x", i, dir, p.iface, p.b, want, got))
		}
		if len(msgs) >= 4 {
			break
		}
	}
	ss, err := h.d.Sessions()
	if err != nil {
		return len(pkts), translated, err
	}
	hs, err := h.d.Hostmaps()
	if err != nil {
		return len(pkts), translated, err
	}
	wantS, wantH := engineSections(eng)
	if got := sessionList(ss); got != wantS {
		msgs = append(msgs, fmt.Sprintf("sessions differ:\nengine:\n%skernel:\n%s", wantS, got))
	}
	if got := hostmapList(hs); got != wantH {
		msgs = append(msgs, fmt.Sprintf("host maps differ:\nengine:\n%skernel:\n%s", wantH, got))
	}
	if len(msgs) > 0 {
		return len(pkts), translated, errors.New(strings.Join(msgs, "\n"))
	}
	return len(pkts), translated, nil
}

// randIfAddr gives the test interfaces addresses for 0/32 targets.
func randIfAddr(name string, v6 bool) (netip.Addr, bool) {
	switch {
	case name == "nic0" && !v6:
		return netip.MustParseAddr("1.1.1.9"), true
	case name == "nic0":
		return netip.MustParseAddr("2001:db8:1::9"), true
	case name == "nic1" && !v6:
		return netip.MustParseAddr("1.1.1.10"), true
	case name == "nic2" && !v6:
		return netip.MustParseAddr("1.1.1.11"), true
	case name == "nic2":
		return netip.MustParseAddr("2001:db8:1::b"), true
	}
	return netip.Addr{}, false
}

// engineRun translates a copy of p in the engine, in p's direction on its
// interface: what the kernel's output is compared with.
func engineRun(eng *gonat.NAT, p randPkt) ([]byte, gonat.Result) {
	b := append(make([]byte, 0, len(p.b)+128), p.b...)
	if p.out {
		return eng.OutPacket(b, p.iface, "")
	}
	return eng.InPacket(b, p.iface)
}

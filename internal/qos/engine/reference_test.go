package engine

import (
	"bytes"
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"testing"

	"sluice/internal/rules/ipqos"
)

// slowMatch is an obviously-correct classifier written straight from the
// configuration semantics (no expansion, no Addr128, no sorting): it tries
// every (policy, filter) pair of the adapter and keeps the best priority.
func slowMatch(cfg *ipqos.Config, adapter string, l3 []byte) (policy, filter string, ok bool) {
	var src, dst netip.Addr
	var proto uint8
	var tc uint8
	var sport, dport int = -1, -1
	switch {
	case len(l3) >= 20 && l3[0]>>4 == 4 && int(l3[0]&15)*4 >= 20 && len(l3) >= int(l3[0]&15)*4:
		src = netip.AddrFrom4([4]byte(l3[12:16]))
		dst = netip.AddrFrom4([4]byte(l3[16:20]))
		proto, tc = l3[9], l3[1]
		ihl := int(l3[0]&15) * 4
		if binary.BigEndian.Uint16(l3[6:])&0x1fff == 0 && hasPorts(proto) && len(l3) >= ihl+4 {
			sport, dport = int(binary.BigEndian.Uint16(l3[ihl:])), int(binary.BigEndian.Uint16(l3[ihl+2:]))
		}
	case len(l3) >= 40 && l3[0]>>4 == 6:
		src = netip.AddrFrom16([16]byte(l3[8:24]))
		dst = netip.AddrFrom16([16]byte(l3[24:40]))
		proto, tc = l3[6], l3[0]<<4|l3[1]>>4 // tests here use no extension headers
		if hasPorts(proto) && len(l3) >= 44 {
			sport, dport = int(binary.BigEndian.Uint16(l3[40:])), int(binary.BigEndian.Uint16(l3[42:]))
		}
	default:
		return "", "", false
	}
	portIn := func(r ipqos.Range, p int) bool { return !r.Set || (p >= 0 && r.Contains(uint16(p))) }
	best := 1 << 30
	var a *ipqos.Adapter
	for _, x := range cfg.Adapters {
		if x.Name == adapter {
			a = x
		}
	}
	for _, pu := range a.Uses {
		p := cfg.Policy(pu.Name)
		for _, fu := range p.Uses {
			f := cfg.Filter(fu.Name)
			if fam := f.Family(); fam != 0 && (fam == 4) != src.Is4() {
				continue
			}
			if f.Protocol >= 0 && uint8(f.Protocol) != proto {
				continue
			}
			if f.DSCP.Set && !f.DSCP.Contains(uint16(tc>>2)) {
				continue
			}
			if f.HasMAC {
				continue
			}
			side := func(eitherOnSrc bool) bool {
				if !f.Addr[ipqos.Src].Contains(src) || !f.Addr[ipqos.Dst].Contains(dst) ||
					!portIn(f.Port[ipqos.Src], sport) || !portIn(f.Port[ipqos.Dst], dport) {
					return false
				}
				if eitherOnSrc {
					return f.Addr[ipqos.Either].Contains(src) && portIn(f.Port[ipqos.Either], sport)
				}
				return f.Addr[ipqos.Either].Contains(dst) && portIn(f.Port[ipqos.Either], dport)
			}
			if !side(true) && !side(false) {
				continue
			}
			prio := f.Priority
			if prio == ipqos.NoPriority {
				prio = 1 << 20
			}
			if prio < best {
				best, policy, filter, ok = prio, p.Name, f.Name, true
			}
		}
	}
	return
}

var (
	addrPool = []string{"10.1.0.1", "10.1.255.255", "10.2.0.1", "192.168.0.1", "192.168.0.2", "1.2.3.4",
		"2001:db8::1", "2001:db8::20", "2001:db8::100", "fe80::1"}
	portPool = []uint16{0, 20, 21, 22, 53, 80, 443, 5000, 65535}
)

func randomPacket(r *rand.Rand) []byte {
	v6 := r.IntN(2) == 0
	pick := func() string {
		for {
			a := addrPool[r.IntN(len(addrPool))]
			if strings.Contains(a, ":") == v6 {
				return a
			}
		}
	}
	protos := []uint8{6, 17, 1, 132}
	p := pkt(pick(), pick(), protos[r.IntN(len(protos))], portPool[r.IntN(len(portPool))], portPool[r.IntN(len(portPool))], uint8(r.Uint32()))
	return p
}

func TestDifferentialAgainstSlowReference(t *testing.T) {
	rs := mustCompile(t, conf)
	e := NewEngine(rs)
	r := rand.New(rand.NewPCG(7, 8))
	matched := 0
	for i := 0; i < 20000; i++ {
		p := randomPacket(r)
		orig := append([]byte(nil), p...)
		wantP, wantF, wantOK := slowMatch(rs.Config, "eth0", orig)
		res := e.Process(0, p, nil)
		gotOK := res.Action != Unmatched
		if gotOK != wantOK {
			t.Fatalf("packet %x: matched %v, reference %v (%s/%s)", orig, gotOK, wantOK, wantP, wantF)
		}
		if !gotOK {
			if !bytes.Equal(p, orig) {
				t.Fatalf("unmatched packet changed")
			}
			continue
		}
		matched++
		a := rs.Adapters[0]
		if a.Policies[res.Policy].Name != wantP || a.Filters[res.Filter].Name != wantF {
			t.Fatalf("packet %x: got %s/%s, reference %s/%s", orig, a.Policies[res.Policy].Name, a.Filters[res.Filter].Name, wantP, wantF)
		}
		checkHeader(t, orig, p)
	}
	if matched < 1000 {
		t.Errorf("only %d of 20000 random packets matched; the test is not exercising the classifier", matched)
	}
}

func TestProcessZeroAllocs(t *testing.T) {
	rs := mustCompile(t, conf)
	e := NewEngine(rs)
	p4 := pkt("10.1.2.3", "192.168.0.1", 6, 80, 5000, 0)
	p6 := pkt("2001:db8::9999", "2001:db8::20", 6, 1, 2, 9<<2)
	allocs := testing.AllocsPerRun(1000, func() {
		e.Process(0, p4, nil)
		e.Process(0, p6, nil)
	})
	if allocs != 0 {
		t.Errorf("Process allocates %v times per run, want 0", allocs)
	}
}

func BenchmarkProcess(b *testing.B) {
	rs := mustCompile(b, conf)
	e := NewEngine(rs)
	p := pkt("10.1.2.3", "192.168.0.1", 6, 80, 5000, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		p[1] = 0
		e.Process(0, p, nil)
	}
}

func FuzzMark(f *testing.F) {
	f.Add(pkt("10.1.2.3", "192.168.0.1", 6, 80, 5000, 0), uint8(10))
	f.Add(pkt("2001:db8::9999", "2001:db8::20", 17, 1, 2, 9<<2), uint8(63))
	f.Add([]byte{0x45}, uint8(1))
	rs := mustCompile(f, conf)
	f.Fuzz(func(t *testing.T, data []byte, dscp uint8) {
		e := NewEngine(rs)
		orig := append([]byte(nil), data...)
		e.Process(0, data, nil) // must not panic on any input
		if len(data) >= 20 && data[0] == 0x45 {
			m := append([]byte(nil), orig...)
			binary.BigEndian.PutUint16(m[10:], IPv4HeaderChecksum(m))
			SetDSCP(m, dscp&63)
			if got, want := binary.BigEndian.Uint16(m[10:]), IPv4HeaderChecksum(m); got != want {
				t.Fatalf("checksum after SetDSCP: got %#04x, want %#04x", got, want)
			}
		}
	})
}

var updateTest = flag.Bool("update", false, "rewrite golden files")

func TestRunTestGolden(t *testing.T) {
	cfgSrc, err := os.ReadFile("testdata/test.conf")
	if err != nil {
		t.Fatal(err)
	}
	rs := mustCompile(t, string(cfgSrc))
	for _, format := range []string{"text", "hex"} {
		t.Run(format, func(t *testing.T) {
			in, err := os.Open("testdata/packets." + format)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			pkts, err := ReadPackets(in, format)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := RunTest(&out, rs, "", pkts); err != nil {
				t.Fatal(err)
			}
			name := "testdata/packets." + format + ".golden"
			if *updateTest {
				if err := os.WriteFile(name, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Errorf("output differs from %s:\ngot:\n%s\nwant:\n%s", name, out.String(), want)
			}
			// Every marked packet's checksum equals a recomputation.
			for _, p := range pkts {
				e := NewEngine(rs)
				d := append([]byte(nil), p.Data...)
				e.Process(0, d, nil)
				if d[0]>>4 == 4 && Checksum(d[:int(d[0]&15)*4]) != 0 {
					t.Errorf("line %d: marked packet's IPv4 header checksum does not verify", p.Line)
				}
			}
		})
	}
}

func TestReadPackets(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"out tcp 1.2.3.4 5.6.7.8\n", "text input: line 1: tcp with no source port"},
		{"sideways 1.2.3.4 5.6.7.8\n", `text input: line 1: bad direction "sideways"`},
	} {
		_, err := ReadPackets(strings.NewReader(tc.in), "text")
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
	if _, err := ReadPackets(strings.NewReader(""), "pcap"); err == nil {
		t.Error("unknown format accepted")
	}
	// IP options come through (the kit's reader builds them).
	pkts, err := ReadPackets(strings.NewReader("nic e0\nout on e0 udp 1.2.3.4,1 5.6.7.8,2 opt nop\n"), "text")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkts) != 1 || !pkts[0].Out || pkts[0].Ifname != "e0" || pkts[0].Data[0] != 0x46 {
		t.Errorf("got %+v, want one outbound packet on e0 with a 24-byte IPv4 header", pkts)
	}
}

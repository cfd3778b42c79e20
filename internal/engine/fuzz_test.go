package engine

import (
	"testing"
)

// FuzzCheck feeds arbitrary bytes through a stateful rule set: whatever
// the packet, Check must return a verdict without panicking, and a second
// identical packet must not change the state table's size.
func FuzzCheck(f *testing.F) {
	f.Add(mkTCP("1.1.1.1", "2.2.2.2", 1, 2, 0x02, 1, 0), false)
	f.Add(mkUDP("1.1.1.1", "2.2.2.2", 1, 2), true)
	f.Add([]byte{0x60, 0, 0, 0, 0, 8, 44, 64}, false)
	f.Add([]byte{0x45, 0, 0, 20, 0, 0, 0x20, 0, 64, 1}, false)
	f.Fuzz(func(t *testing.T, data []byte, out bool) {
		e := newEngine(t, sixRules+"pass out proto tcp all keep state keep frags\npass in proto udp all keep state\npass in proto icmp all keep state\n")
		var p Packet
		buf := append([]byte(nil), data...)
		r1 := check(e, &p, buf, out, "nic0")
		if r1.Verdict > VerdictPreauth {
			t.Fatalf("verdict out of range: %d", r1.Verdict)
		}
		n := e.States.Active()
		buf = append(buf[:0], data...)
		check(e, &p, buf, out, "nic0")
		if m := e.States.Active(); m != n {
			t.Fatalf("replaying a packet changed the state table: %d -> %d", n, m)
		}
	})
}

// FuzzDecapExpr runs arbitrary packets through decapsulate and exp rules:
// no panic, a verdict in range, and an outer packet that is not IP-in-IP
// or GRE is never judged by the decapsulated group.
func FuzzDecapExpr(f *testing.F) {
	f.Add(encap(4, nil, mkUDP("10.0.0.1", "10.0.0.2", 1, 53)))
	f.Add(encap(47, []byte{0xb0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2}, mkTCP("10.0.0.1", "10.0.0.2", 1, 2, 0x02, 1, 0)))
	f.Add(encap(41, nil, []byte{0x60, 0, 0, 0, 0, 8, 17, 64}))
	f.Fuzz(func(t *testing.T, data []byte) {
		e := newEngine(t, "decapsulate in all head 1\nblock in quick all group 1\n"+
			"pass in exp { \"ip.p = tcp; tcp.flags = S/SA; ip.addr = 10.0.0.0/8;\" }\n")
		var p Packet
		r := check(e, &p, append([]byte(nil), data...), false, "nic0")
		if r.Verdict > VerdictPreauth {
			t.Fatalf("verdict out of range: %d", r.Verdict)
		}
		if p.ParseErr == nil && r.Verdict == VerdictBlock && p.Info.L4Proto != 4 && p.Info.L4Proto != 41 && p.Info.L4Proto != 47 {
			t.Fatalf("proto %d packet blocked by the decapsulated group", p.Info.L4Proto)
		}
	})
}

//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/packet/packettest"
)

// TestPrivilegedEgressInstance checks the second egress program KeepOrder
// attaches when it moves NAT behind the filter (egressInstance): it must
// work on every one of the datapath's maps (it once got its own fast
// entries and configuration, so that behind the filter outbound packets
// of established flows never took the fast path and the move's
// double-translation guard read a cookie nobody set), and an established
// flow's packets keep the fast path through it.
func TestPrivilegedEgressInstance(t *testing.T) {
	h := newHarness(t)
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
	fast := func() uint64 {
		st, err := h.d.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st.Side[dirOut].Fast
	}
	send := func(flags uint8) []byte {
		t.Helper()
		var out []byte
		if err := h.do(func() error { var err error; _, out, err = h.run(true, "nic0", seg(flags)); return err }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	send(0x02)
	before := send(0x10)
	n := fast()
	if n != 1 {
		t.Fatalf("%d packets by the fast path before the move, want 1", n)
	}
	prog, err := h.d.egressInstance()
	if err != nil {
		t.Fatal(err)
	}
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, ok := info.MapIDs()
	if !ok {
		t.Skip("the kernel does not list a program's maps")
	}
	ours := map[ebpf.MapID]string{}
	for name, m := range h.d.objs.natMaps.byName() {
		if m == nil {
			t.Fatalf("map %s is not open", name)
		}
		mi, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := mi.ID()
		ours[id] = name
	}
	for _, id := range ids {
		if _, ok := ours[id]; !ok {
			m, err := ebpf.NewMapFromID(id)
			name := "?"
			if err == nil {
				if mi, err := m.Info(); err == nil {
					name = mi.Name
				}
				m.Close()
			}
			if !strings.HasPrefix(name, ".") && !strings.Contains(name, ".rodata") && !strings.Contains(name, ".data") {
				t.Errorf("the new egress instance uses map %d (%s), not one of the datapath's", id, name)
			}
		}
	}
	spec, err := loadNat()
	if err != nil {
		t.Fatal(err)
	}
	for name := range spec.Maps {
		if _, ok := h.d.objs.natMaps.fields()[name]; !ok && !strings.HasPrefix(name, ".") {
			t.Errorf("map %s of the object is not in natMaps.fields", name)
		}
	}
	if got := send(0x10); string(got) != string(before) {
		t.Errorf("the moved instance translates to %x, the first gave %x", got, before)
	}
	if got := fast() - n; got != 1 {
		t.Errorf("%d packets by the moved instance's fast path, want 1", got)
	}
}

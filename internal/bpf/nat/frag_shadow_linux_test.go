//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"encoding/hex"
	"testing"
)

// TestPrivilegedFragBothKeysShadowed (dif19, from TestDifferentialRandom
// seed 190303 case 20884): a fragment entry's session whose two keys a
// newer session has both taken over (shadow) still lives, and the later
// fragments of its datagram follow it (engine; IPFilter's cache points at
// the nat itself). The kernel's frag_sess/frag_live look only at the two
// keys and judge it ended: the later fragment is left untranslated.
func TestPrivilegedFragBothKeysShadowed(t *testing.T) {
	h := newHarness(t)
	hx := func(s string) []byte { b, _ := hex.DecodeString(s); return b }
	// in nic2: first fragment (MF, id 0) UDP 2.2.2.2:2000 -> 1.1.1.1:2003
	first := hx("4500002c00002000401154bc020202020101010107d007d30018ea1500000000000000000000000000000000")
	// in nic2: its last fragment (offset 24, id 0)
	later := hx("4500002400000003401174c1020202020101010100000000000000000000000000000000")
	pkts := []randPkt{
		{iface: "nic2", b: first},                   // session A (inbound, bimap), fragment entry F -> A
		{out: true, iface: "nic2", reply: 2, of: 0}, // ICMP error out nic2 about A's packet
		{iface: "nic1", b: first},                   // found A
		{out: true, iface: "nic0", reply: 1, of: 2}, // the reply (MF, id 0) out nic0: new session B, both of A's keys shadowed
		{iface: "nic2", b: later},                   // engine: translated by F -> A to 10.0.0.3; kernel: untouched
	}
	if err := h.do(func() error {
		_, _, err := randomRun(h, "bimap * 10.0.0.3/32 -> 1.1.1.2/30\n", pkts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

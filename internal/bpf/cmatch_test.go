package bpf

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestCompactMatchCovers checks that the rules of HP's sets are decided by their compact match alone (no
// CM_FULL: the scan fetches no rule that the packet does not match), and
// that the tests the compact match cannot hold still mark the rule for the
// whole match.
func TestCompactMatchCovers(t *testing.T) {
	hp, err := os.ReadFile("../../examples/ipf/hp-test-nostate.conf")
	if err != nil {
		t.Fatal(err)
	}
	hps, err := os.ReadFile("../../examples/ipf/hp-test-state.conf")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"hp-test-nostate": string(hp), "hp-test-state": string(hps)} {
		im := compileText(t, text)
		for l := listIn; l <= listOut; l++ {
			h := im.hotList(l)
			if h.N > 0 && h.Ok == 0 {
				t.Errorf("%s: list %d has no compact form", name, l)
			}
			for i := 0; i < int(h.N); i++ {
				if h.R[i].M.Flags&cmFull != 0 {
					t.Errorf("%s: list %d rule %d needs the whole match (flags %#x)", name, l, i, h.R[i].M.Flags)
				}
			}
		}
	}
	for _, c := range []struct {
		rule string
		full bool
	}{
		{"pass in quick proto tcp from 10.0.0.0/8 port > 1023 to 192.168.0.0/16 port = 22 flags S/SA", false},
		{"block in from !10.0.0.0/8 to any", false},
		{"pass in on lo0 all", true},
		{"pass in proto tcp from 2001:db8::/32 to any", true},
		{"pass in proto icmp all icmp-type echo", true},
		{"pass in all with opt lsrr", true},
		{"block in tos 0x10 all", true},
		{"block in quick proto tcp from 10.0.0.0/8 to any port = 22", false},
		{"pass in exp { \"ip.p = 6;\" }", true},
	} {
		im := compileText(t, c.rule)
		r := &im.rules[im.lists[listIn].start]
		cm := compactMatch(r, false)
		if got := cm.Flags&cmFull != 0; got != c.full {
			t.Errorf("%q: CM_FULL %v, want %v (flags %#x)", c.rule, got, c.full, cm.Flags)
		}
	}
}

// TestCblocks checks the compact matches by block: each rule's at its
// place, a run's first rule with the run's length and without the run's
// address, and the places past the last rule never matching.
func TestCblocks(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("block in all\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&sb, "block in proto tcp from 10.0.0.%d to any port = 25\n", i)
	}
	sb.WriteString("pass in proto udp from any to 192.168.0.0/16\n")
	im := compileText(t, sb.String())
	cbs := im.cblocks()
	if len(cbs) != 2 {
		t.Fatalf("%d rules: %d blocks, want 2", len(im.rules), len(cbs))
	}
	head := cbs[0].M[1]
	if cbs[0].RunLen[1] != 20 || head.Flags&cmRun == 0 || head.Flags&cmSrc != 0 || head.Flags&cmDport == 0 {
		t.Errorf("run head: run_len %d flags %#x, want 20 and CM_RUN|CM_DPORT without CM_SRC", cbs[0].RunLen[1], head.Flags)
	}
	// an IPv4 run the compact match decides but for its address: the
	// scan looks the source up in place, masked as the run's rules are
	if head.Flags&(cmRun4|cmRunSrc) != cmRun4|cmRunSrc || head.Smask != im.rules[1].Smask[0] || head.Smask == 0 {
		t.Errorf("run head: flags %#x smask %#x, want CM_RUN4|CM_RUNSRC and the rules' mask %#x", head.Flags, head.Smask, im.rules[1].Smask[0])
	}
	// and the runs bitmap's shift in the source word the run leaves free
	// (20 entries: the least bitmap, 2^9 bits), with RUN_FLAT: a set that
	// small has its bits in the slot's run_flat words too (ten14)
	if want := uint32(64-runBitsMin) | runFlatBit; head.Src != want || im.runShift != 64-runBitsMin || !im.runFlat {
		t.Errorf("run head: src %#x, image's shift %d (flat %v), want %#x: the bitmap's shift %d and RUN_FLAT", head.Src, im.runShift, im.runFlat, want, 64-runBitsMin)
	}
	if m := cbs[0].M[2]; m.Flags&cmSrc == 0 || m.Flags&cmRun != 0 || cbs[0].RunLen[2] != 0 {
		t.Errorf("run member: flags %#x run_len %d, want CM_SRC, no run", m.Flags, cbs[0].RunLen[2])
	}
	if m := cbs[1].M[21-16]; m.Flags&cmDst == 0 || m.Dst != im.rules[21].Dst[0] || m.Dmask != im.rules[21].Dmask[0] {
		t.Errorf("last rule: %+v", m)
	}
	for k := 22 - 16; k < 16; k++ {
		if cbs[1].M[k].Flags != cmNever {
			t.Errorf("place %d past the last rule: flags %#x, want CM_NEVER", 16+k, cbs[1].M[k].Flags)
		}
	}
}

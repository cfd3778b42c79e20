package ipfctl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// TestPrivilegedAheadOfFilter: another tool's program that passes every
// packet (TCX_PASS ends the chain) on an interface before ipf loads does
// not let packets past the rules: the filter goes in front of it. One put
// in front of the filter afterwards is not silent: ipf -V lists it, and
// ipf's loads and ipfstat warn. About 5 s.
func TestPrivilegedAheadOfFilter(t *testing.T) {
	tp := ownTopo(t)
	ifname, addr, _ := tp.addLink(61)
	idx := tp.ifindex(ifname)
	attachPass := func(name string, anchor link.Anchor) link.Link {
		t.Helper()
		var l link.Link
		if err := tp.inNS(tp.b, func() error {
			p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SchedCLS, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
			if err != nil {
				return err
			}
			defer p.Close()
			l, err = link.AttachTCX(link.TCXOptions{Interface: idx, Program: p, Attach: ebpf.AttachTCXIngress, Anchor: anchor})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	attachPass("early_pass", link.Tail())
	rules := tp.file("ahead.conf", fmt.Sprintf("block in quick proto udp from any to any port = %d\npass in all\npass out all\n", udpPort))
	code, _, e := tp.run("ipf", "-Fa", "-f", rules)
	if code != 0 || strings.Contains(e, "before the filter") {
		t.Fatalf("ipf -f with early_pass attached before it: exit %d, stderr %q", code, e)
	}
	if !tp.udpBlocked(addr) {
		t.Errorf("UDP to %s passes the rule that blocks it: early_pass ran before the filter", addr)
	}

	late := attachPass("late_pass", link.Head())
	want := fmt.Sprintf("%s ingress: late_pass (program ", ifname)
	code, o, e := tp.run("ipf", "-V")
	if code != 0 || !strings.Contains(o, "Ahead of the filter: "+want) || !strings.Contains(e, "not filtered") {
		t.Errorf("ipf -V with late_pass ahead: exit %d\nstdout %s\nstderr %s", code, o, e)
	}
	for _, args := range [][]string{{"ipf", "-f", rules}, {"ipfstat"}} {
		code, _, e := tp.run(args[0], args[1:]...)
		if code != 0 || !strings.Contains(e, "other programs run before the filter ("+want) || strings.Count(e, "before the filter") != 1 {
			t.Errorf("%v with late_pass ahead: exit %d, stderr %q, want one warning naming it", args, code, e)
		}
	}
	late.Close()
	if _, o, e := tp.run("ipf", "-V"); strings.Contains(o, "Ahead") || strings.Contains(e, "before the filter") {
		t.Errorf("ipf -V once late_pass went:\nstdout %s\nstderr %s", o, e)
	}
}

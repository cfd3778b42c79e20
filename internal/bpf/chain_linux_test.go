package bpf

import (
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// passProg is another tool's tc program that lets every packet through
// with TCX_PASS (TC_ACT_OK, 0), which ends the hook's chain.
func passProg(t *testing.T, name string) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestPrivilegedFilterFirstOnChain: a program another tool attached to an
// interface before the filter, which passes everything with TCX_PASS,
// does not take the interface's packets past the filter: Attach puts the
// filter in front of it on both hooks (it used to append the filter, so
// every packet was passed unfiltered). A program put in front of the
// filter afterwards is reported by Ahead, with its hook and name.
func TestPrivilegedFilterFirstOnChain(t *testing.T) {
	tp := newTopo(t)
	foreign := passProg(t, "other_pass")
	ifindex := 0
	inNS(t, tp.b, func() {
		ifc, err := net.InterfaceByName(tp.ifB)
		if err != nil {
			t.Error(err)
			return
		}
		ifindex = ifc.Index
		for _, typ := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: foreign, Attach: typ})
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { l.Close() })
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	listenTCP(t, tp.b, "10.99.0.2:8080")
	if !tcpWorks(t, tp.a, "10.99.0.2:8080") {
		t.Fatal("no TCP to b before the filter")
	}

	d := tp.attach(t)
	var im *Image
	inNS(t, tp.b, func() { im = compileText(t, "block in all\nblock out all\n") })
	if err := d.LoadRules(im, Active); err != nil {
		t.Fatal(err)
	}
	if tcpWorks(t, tp.a, "10.99.0.2:8080") {
		t.Error("TCP to b passes 'block in all': the other tool's program ran before the filter and ended the chain")
	}
	inNS(t, tp.b, func() {
		for _, typ := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			names, err := chainNames(ifindex, typ)
			if err != nil {
				t.Error(err)
				continue
			}
			want := filterIngressNm
			if typ == ebpf.AttachTCXEgress {
				want = "sluice_egress"
			}
			if len(names) != 2 || names[0].name != want || names[1].name != "other_pass" {
				t.Errorf("%v chain %v, want the filter's %s first, then other_pass", typ, names, want)
			}
		}
		if a, err := d.Ahead(); err != nil || len(a) != 0 {
			t.Errorf("Ahead: %v (%v), want none", a, err)
		}
	})

	// a tool that attaches at the head afterwards gets ahead: that
	// cannot be prevented, and must not go unseen
	late := passProg(t, "late_pass")
	inNS(t, tp.b, func() {
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: late, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
		if err != nil {
			t.Error(err)
			return
		}
		defer l.Close()
		a, err := d.Ahead()
		if err != nil || len(a) != 1 || a[0].Name != "late_pass" || a[0].Hook != "ingress" || a[0].Ifindex != ifindex {
			t.Errorf("Ahead with late_pass at the head of ingress: %+v (%v), want it alone", a, err)
		}
	})
	// gone again: nothing ahead
	inNS(t, tp.b, func() {
		if a, err := d.Ahead(); err != nil || len(a) != 0 {
			t.Errorf("Ahead after late_pass went: %v (%v), want none", a, err)
		}
	})
}

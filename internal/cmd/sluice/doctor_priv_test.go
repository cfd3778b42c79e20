//go:build linux

package sluice

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"sluice/internal/bpf"
	"sluice/internal/testutil/bpffs"
	"sluice/internal/testutil/netnstest"
)

// TestPrivilegedDoctorDatapathPlace: what the doctor says about a pinned
// filter, from its own network namespace and from another one, and once
// the interface it was on is gone (the datapath of `ipf -E` run in a
// namespace deleted since filters nothing, and only the doctor says so).
func TestPrivilegedDoctorDatapathPlace(t *testing.T) {
	ns := netnstest.New(t)
	pin := filepath.Join(bpffs.Mount(t), "sluice")
	var d *bpf.Datapath
	if err := netnstest.Do(ns, func() (err error) {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sldoc0"}, PeerName: "sldoc1"}
		if err = netlink.LinkAdd(veth); err != nil {
			return err
		}
		if d, err = bpf.Load(bpf.Options{PinDir: pin}); err != nil {
			return err
		}
		return d.Attach([]string{"sldoc0"})
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Remove() })
	check := func(where string, wantSev Severity, wantMsg string) {
		t.Helper()
		var sev Severity
		var msg string
		f := func() error { sev, msg = datapathPlace(pin); return nil }
		if where == "there" {
			netnstest.Do(ns, f)
		} else {
			f()
		}
		if sev != wantSev || !strings.Contains(msg, wantMsg) {
			t.Errorf("from %s: %s %q, want %s containing %q", where, sev, msg, wantSev, wantMsg)
		}
	}
	check("there", SevInfo, "runs on sldoc0")
	check("here", SevWarn, "filters another network namespace")
	// another tool's program put in front of the filter: packets it
	// passes are not filtered, which the doctor must say
	if err := netnstest.Do(ns, func() error {
		ifc, err := net.InterfaceByName("sldoc0")
		if err != nil {
			return err
		}
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "doc_ahead", Type: ebpf.SchedCLS, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
		if err != nil {
			return err
		}
		defer p.Close()
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: p, Attach: ebpf.AttachTCXEgress, Anchor: link.Head()})
		if err != nil {
			return err
		}
		defer l.Close()
		var sev Severity
		var msg string
		sev, msg = datapathPlace(pin)
		if sev != SevWarn || !strings.Contains(msg, "sldoc0 egress: doc_ahead (program ") || !strings.Contains(msg, "not filtered") {
			t.Errorf("with doc_ahead ahead of the filter: %s %q, want a warning naming it", sev, msg)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("there", SevInfo, "runs on sldoc0")
	if err := netnstest.Do(ns, func() error {
		l, err := netlink.LinkByName("sldoc0")
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	}); err != nil {
		t.Fatal(err)
	}
	check("there", SevWarn, "runs on no interface")
}

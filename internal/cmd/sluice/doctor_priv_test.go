//go:build linux

package sluice

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"sluice/internal/bpf"
	natbpf "sluice/internal/bpf/nat"
	"sluice/internal/bpf/qosmark"
	"sluice/internal/qos"
	"sluice/internal/rules/ipqos"
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
		checkPlace(t, ns, where, "the filter", datapathPlace, pin, wantSev, wantMsg)
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
	delLinkIn(t, ns, "sldoc0")
	check("there", SevWarn, "runs on no interface")
}

// TestPrivilegedDoctorNATAndQoSPlace: what the doctor says about NAT's
// and IPQoS's pins, from their namespace and from another one (the doctor
// said nothing of either before): where they run, that they are another
// namespace's, a link pin of another namespace that no record names (NAT
// attached by a Sluice that recorded none), and defunct link pins.
func TestPrivilegedDoctorNATAndQoSPlace(t *testing.T) {
	ns := netnstest.New(t)
	mnt := bpffs.Mount(t)
	natPin := bpf.NATPinDir(filepath.Join(mnt, "sluice"))
	qdir := filepath.Join(mnt, "sluice-qos")
	rs := func() *qos.Ruleset {
		cfg, err := ipqos.Parse("test.conf", []byte("filter f {\n    udp\n}\npolicy p {\n    uses f\n    dscp 10\n}\nadapter sldoq0 {\n    uses p\n}\n"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := qos.Compile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}()
	var d *natbpf.Datapath
	if err := netnstest.Do(ns, func() (err error) {
		for _, n := range []string{"sldoc0", "sldoq0"} {
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n}, PeerName: n + "p"}); err != nil {
				return err
			}
		}
		if d, err = natbpf.Load(natbpf.Options{PinDir: natPin}); err != nil {
			return err
		}
		if err := d.Attach([]string{"sldoc0"}); err != nil {
			return err
		}
		_, err = qosmark.Load(rs, qosmark.Options{PinDir: qdir, LinkRate: func(string) uint64 { return 10e9 }})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		natbpf.Remove(natPin)
		netnstest.Do(ns, func() error { return qosmark.Disable(qdir) })
	})
	check := func(where, what string, place func(string) (Severity, string), arg string, wantSev Severity, wantMsg string) {
		t.Helper()
		checkPlace(t, ns, where, what, place, arg, wantSev, wantMsg)
	}
	check("there", "NAT", natPlace, natPin, SevInfo, "runs on sldoc0")
	check("here", "NAT", natPlace, natPin, SevWarn, "works in another network namespace")
	check("there", "IPQoS", qosPlace, qdir, SevInfo, "runs on sldoq0")
	check("here", "IPQoS", qosPlace, qdir, SevWarn, "marks in another network namespace")
	// NAT without the record: its link pins tell
	rec := filepath.Join(natPin, "netns")
	saved, err := ebpf.LoadPinnedMap(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer saved.Close()
	if err := os.Remove(rec); err != nil {
		t.Fatal(err)
	}
	check("here", "NAT unrecorded", natPlace, natPin, SevWarn, "run on interfaces of another network namespace")
	if err := saved.Pin(rec); err != nil {
		t.Fatal(err)
	}
	delLinkIn(t, ns, "sldoc0")
	check("there", "NAT", natPlace, natPin, SevWarn, "are of interfaces that went away")
	if err := netnstest.Do(ns, func() error { return qosmark.Unload(qdir, nil) }); err != nil {
		t.Fatal(err)
	}
	check("here", "IPQoS unloaded", qosPlace, qdir, SevInfo, "no configuration loaded")
}

// checkPlace runs a doctor check of where a datapath runs (place, on the
// pin arg) from namespace ns ("there") or the test's own ("here"), and
// wants its severity and a part of its message.
func checkPlace(t *testing.T, ns netns.NsHandle, where, what string, place func(string) (Severity, string), arg string,
	wantSev Severity, wantMsg string) {
	t.Helper()
	var sev Severity
	var msg string
	f := func() error { sev, msg = place(arg); return nil }
	if where == "there" {
		netnstest.Do(ns, f)
	} else {
		f()
	}
	if sev != wantSev || !strings.Contains(msg, wantMsg) {
		t.Errorf("%s from %s: %s %q, want %s containing %q", what, where, sev, msg, wantSev, wantMsg)
	}
}

// delLinkIn deletes interface name of namespace ns.
func delLinkIn(t *testing.T, ns netns.NsHandle, name string) {
	t.Helper()
	if err := netnstest.Do(ns, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	}); err != nil {
		t.Fatal(err)
	}
}

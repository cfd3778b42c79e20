//go:build linux

package sluice

import (
	"path/filepath"
	"strings"
	"testing"

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

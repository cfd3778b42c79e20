package bpf

import (
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// ifacesKeys lists the ifindexes the ifaces map has entries for (slot
// ifindex % ifaceSlots holds ifindex<<8 | link-layer length).
func ifacesKeys(t *testing.T, d *Datapath) []int {
	t.Helper()
	var (
		k, v uint32
		out  []int
	)
	it := d.objs.Ifaces.Iterate()
	for it.Next(&k, &v) {
		if v != 0 {
			out = append(out, int(v>>8))
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestPrivilegedPruneClsactFallback attaches the way kernels without TCX
// get it (clsact filters, no link pins) to two interfaces, deletes one and
// checks that Prune forgets its ifaces entry (and only it): with no pin to
// find defunct, the entries of the fallback used to stay for ever.
func TestPrivilegedPruneClsactFallback(t *testing.T) {
	tp := newTopo(t)
	var (
		d        *Datapath
		err      error
		idxB, ix int
	)
	inNS(t, tp.b, func() {
		// a second interface of b: a veth pair inside it
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "slprune0"}, PeerName: "slprune1"}
		if err = netlink.LinkAdd(veth); err != nil {
			return
		}
		var l netlink.Link
		if l, err = netlink.LinkByName("slprune0"); err != nil {
			return
		}
		ix = l.Attrs().Index
		if l, err = netlink.LinkByName(tp.ifB); err != nil {
			return
		}
		idxB = l.Attrs().Index
		if d, err = Load(Options{PinDir: tp.pinDir}); err != nil {
			return
		}
		d.forceTC = true
		err = d.Attach([]string{tp.ifB, "slprune0"})
	})
	if err != nil {
		t.Fatalf("setting up: %+v", err)
	}
	t.Cleanup(func() { inNS(t, tp.b, func() { d.Remove() }) })
	want := []int{idxB, ix}
	slices.Sort(want)
	if got := ifacesKeys(t, d); !slices.Equal(got, want) {
		t.Fatalf("ifaces after attaching %s and slprune0 with clsact: %v, want %v", tp.ifB, got, want)
	}
	var pruned []int
	inNS(t, tp.b, func() {
		// nothing went yet: nothing to forget
		if pruned, err = d.Prune(); err != nil || len(pruned) != 0 {
			t.Errorf("Prune with every interface there: %v, %v; want nothing", pruned, err)
		}
		var l netlink.Link
		if l, err = netlink.LinkByName("slprune0"); err == nil {
			err = netlink.LinkDel(l)
		}
		if err == nil {
			pruned, err = d.Prune()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pruned, []int{ix}) {
		t.Errorf("Prune after deleting slprune0 (ifindex %d): forgot %v", ix, pruned)
	}
	if got := ifacesKeys(t, d); !slices.Equal(got, []int{idxB}) {
		t.Errorf("ifaces after Prune: %v, want [%d]", got, idxB)
	}
	// the filter still runs where it was
	var hooked map[int]bool
	inNS(t, tp.b, func() { hooked, err = d.Hooked() })
	if err != nil || !hooked[idxB] || len(hooked) != 1 {
		t.Errorf("Hooked after Prune: %v, %v; want only %d", hooked, err, idxB)
	}
}

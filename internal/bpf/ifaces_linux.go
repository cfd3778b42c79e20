package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
)

// AllInterfaces reports whether the filter belongs on every non-loopback
// interface (SetAllInterfaces was called since the datapath was made).
// The mark is kept in the pinned configuration (cfgAllIfaces, which no
// packet reads), so it lasts as long as the datapath (ipf -D removes both)
// and every process reads it.
func (d *Datapath) AllInterfaces() bool {
	return d.cfg(cfgAllIfaces) != 0
}

// SetAllInterfaces records that the filter belongs on every non-loopback
// interface: ipf attaches it to those that appear later (ipf -y, any
// load) and ipfstat warns about those it is not on.
func (d *Datapath) SetAllInterfaces() error {
	if err := d.setCfg(cfgAllIfaces, 1); err != nil {
		return fmt.Errorf("recording the all-interfaces mode: %w", err)
	}
	return nil
}

// linkPin parses the name of a link pin, link_<ifindex>_<hook>: ingress,
// egress, or natin (the inline NAT prefix's, at the head of ingress).
func linkPin(name string) (ifindex int, hook string, ok bool) {
	rest, found := strings.CutPrefix(name, "link_")
	if !found {
		return 0, "", false
	}
	idx, hook, found := strings.Cut(rest, "_")
	if !found || (hook != "ingress" && hook != "egress" && hook != "natin") {
		return 0, "", false
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, hook, true
}

// pinnedLinkIfindex returns the interface a pinned TCX link is attached
// to, or 0 when the link is defunct: the kernel detaches a TCX link when
// its device is unregistered and reports ifindex 0 for it from then on.
func pinnedLinkIfindex(path string) (int, error) {
	info, err := pinnedLinkInfo(path)
	if err != nil {
		return 0, err
	}
	tcx := info.TCX()
	if tcx == nil {
		return 0, fmt.Errorf("%s: not a TCX link", path)
	}
	return int(tcx.Ifindex), nil
}

// pinnedLinkInfo reads the kernel's information of the link pinned at
// path.
func pinnedLinkInfo(path string) (*link.Info, error) {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Info()
}

// pinnedLinkHere reports whether the pinned ingress link at path runs on
// the interface idx (the ifindex its pin is named after) of the caller's
// network namespace: not when defunct, another namespace's, or not a link.
func pinnedLinkHere(path string, idx int) bool {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return false
	}
	defer l.Close()
	place, err := PinnedLinkPlace(l, idx, ebpf.AttachTCXIngress)
	return err == nil && place == LinkHere
}

// Hooked returns the interfaces (ifindexes of the caller's network
// namespace) the filter runs on now: those with a pinned TCX link that is
// still attached to an interface of this namespace, and those carrying
// the clsact fallback's filter. Unlike Attached, it leaves out the links
// of interfaces that went away and of other namespaces'.
func (d *Datapath) Hooked() (map[int]bool, error) {
	out := map[int]bool{}
	if d.dir != "" {
		ents, err := os.ReadDir(d.dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		for _, e := range ents {
			idx, hook, ok := linkPin(e.Name())
			if !ok || hook != "ingress" {
				continue
			}
			if pinnedLinkHere(filepath.Join(d.dir, e.Name()), idx) {
				out[idx] = true
			}
		}
	}
	if len(out) > 0 {
		// a datapath attaches with TCX wherever the kernel has it, so
		// there is no clsact filter to look for (one netlink dump per
		// interface spared)
		return out, nil
	}
	return clsactHooked()
}

// Prune forgets the interfaces that went away: their pinned links, which
// the kernel detached with the device, are unpinned (so a new interface
// that gets the same ifindex is attached afresh) and their ifaces entries
// deleted (so the map does not fill up as interfaces come and go). The
// clsact fallback (kernels without TCX) pins no link: its qdisc and
// filters go with the device, so an entry is forgotten when no interface
// of this network namespace with that ifindex carries the fallback's
// filter (the device went, or a new one took its ifindex). It returns the
// ifindexes it forgot.
func (d *Datapath) Prune() ([]int, error) {
	if d.dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var errs []error
	gone := map[int]bool{}
	// live: ifindexes with a link pin that stays (a live link, or one
	// that could not be unpinned)
	live := map[int]bool{}
	for _, e := range ents {
		idx, _, ok := linkPin(e.Name())
		if !ok {
			continue
		}
		p := filepath.Join(d.dir, e.Name())
		now, err := pinnedLinkIfindex(p)
		if err == nil && now > 0 {
			live[idx] = true
			continue
		}
		// defunct, or a pin that no longer opens as a link
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpinning %s: %w", p, err))
			live[idx] = true
			continue
		}
		gone[idx] = true
	}
	// the clsact fallback's entries (slot ifindex % ifaceSlots holds
	// ifindex<<8 | link-layer length, 0 when free). With a live TCX link
	// the kernel has TCX, and every entry belongs to a link pin: the
	// slots are read only when there is none.
	var stale []int
	if len(live) == 0 {
		var (
			k, v   uint32
			clsact map[int]bool
		)
		it := d.objs.Ifaces.Iterate()
		for it.Next(&k, &v) {
			idx := int(v >> 8)
			if v == 0 || gone[idx] {
				continue
			}
			if clsact == nil {
				if clsact, err = clsactHooked(); err != nil {
					return nil, errors.Join(append(errs, err)...)
				}
			}
			if !clsact[idx] {
				stale = append(stale, idx)
			}
		}
		if err := it.Err(); err != nil {
			errs = append(errs, fmt.Errorf("reading the interfaces map: %w", err))
		}
	}
	for _, idx := range stale {
		gone[idx] = true
	}
	var out []int
	for idx := range gone {
		// the array slot of the ifindex, if it still holds that one
		var v uint32
		key := uint32(idx) % ifaceSlots
		if err := d.objs.Ifaces.Lookup(key, &v); err == nil && int(v>>8) == idx {
			if err := d.objs.Ifaces.Put(key, uint32(0)); err != nil {
				errs = append(errs, fmt.Errorf("forgetting ifindex %d: %w", idx, err))
			}
		}
		out = append(out, idx)
	}
	return out, errors.Join(errs...)
}

// clsactHooked returns the interfaces of this network namespace that
// carry the clsact fallback's ingress filter.
func clsactHooked() (map[int]bool, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	out := map[int]bool{}
	for _, l := range links {
		fs, err := netlink.FilterList(l, netlink.HANDLE_MIN_INGRESS)
		if err != nil {
			continue // no clsact qdisc
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == tcFilterName {
				out[l.Attrs().Index] = true
			}
		}
	}
	return out, nil
}

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

// allIfacesKey is the key of the ifaces map that records the
// all-interfaces mode. No packet has ifindex 0, so the program never
// looks it up; keeping the mark in a pinned map makes it last as long as
// the datapath (ipf -D removes both) and lets every process read it.
const allIfacesKey = uint32(0)

// AllInterfaces reports whether the filter belongs on every non-loopback
// interface (SetAllInterfaces was called since the datapath was made).
func (d *Datapath) AllInterfaces() bool {
	var v uint32
	return d.objs.Ifaces.Lookup(allIfacesKey, &v) == nil
}

// SetAllInterfaces records that the filter belongs on every non-loopback
// interface: ipf attaches it to those that appear later (ipf -y, any
// load) and ipfstat warns about those it is not on.
func (d *Datapath) SetAllInterfaces() error {
	if err := d.objs.Ifaces.Put(allIfacesKey, uint32(0)); err != nil {
		return fmt.Errorf("recording the all-interfaces mode: %w", err)
	}
	return nil
}

// linkPin parses the name of a link pin, link_<ifindex>_<hook>.
func linkPin(name string) (ifindex int, hook string, ok bool) {
	rest, found := strings.CutPrefix(name, "link_")
	if !found {
		return 0, "", false
	}
	idx, hook, found := strings.Cut(rest, "_")
	if !found || (hook != "ingress" && hook != "egress") {
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
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		return 0, err
	}
	tcx := info.TCX()
	if tcx == nil {
		return 0, fmt.Errorf("%s: not a TCX link", path)
	}
	return int(tcx.Ifindex), nil
}

// Hooked returns the interfaces (ifindexes of the caller's network
// namespace) the filter runs on now: those with a pinned TCX link that is
// still attached, and those carrying the clsact fallback's filter. Unlike
// Attached, it leaves out the links of interfaces that went away.
func (d *Datapath) Hooked() (map[int]bool, error) {
	out := map[int]bool{}
	if d.dir != "" {
		ents, err := os.ReadDir(d.dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		for _, e := range ents {
			if _, hook, ok := linkPin(e.Name()); !ok || hook != "ingress" {
				continue
			}
			if idx, err := pinnedLinkIfindex(filepath.Join(d.dir, e.Name())); err == nil && idx > 0 {
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
	links, err := netlink.LinkList()
	if err != nil {
		return out, fmt.Errorf("listing interfaces: %w", err)
	}
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

// Prune forgets the interfaces that went away: their pinned links, which
// the kernel detached with the device, are unpinned (so a new interface
// that gets the same ifindex is attached afresh) and their ifaces entries
// deleted (so the map does not fill up as interfaces come and go). It
// returns the ifindexes it forgot.
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
	for _, e := range ents {
		idx, _, ok := linkPin(e.Name())
		if !ok {
			continue
		}
		p := filepath.Join(d.dir, e.Name())
		now, err := pinnedLinkIfindex(p)
		if err == nil && now > 0 {
			continue
		}
		// defunct, or a pin that no longer opens as a link
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpinning %s: %w", p, err))
			continue
		}
		gone[idx] = true
	}
	var out []int
	for idx := range gone {
		if err := d.objs.Ifaces.Delete(uint32(idx)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("forgetting ifindex %d: %w", idx, err))
		}
		out = append(out, idx)
	}
	return out, errors.Join(errs...)
}

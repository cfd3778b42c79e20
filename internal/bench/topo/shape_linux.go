//go:build linux

package topo

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// shapeHandle is the handle of the token-bucket qdisc the bench puts at
// the root of each veth end; a root qdisc with another handle belongs to
// a configuration (IPQoS's HTB for res/max) and is left alone.
var shapeHandle = netlink.MakeHandle(0x5b1, 0)

// Shape shapes both veth ends to p's line rate with a token-bucket
// filter at their root (tbf: the rate the papers' adapters ran at, in
// both directions), or removes the shaping for an unshaped profile. It
// is cheap when the link is already as asked, so the runner calls it
// before every test. A root qdisc that a configuration installed (an
// IPQoS HTB tree for res/max, shaped itself to the adapter's declared
// speed) is left in place and the configuration's own shaping applies
// to that direction (Shaping tells).
func (t *Topo) Shape(p Profile) error {
	if t.remote {
		if p.Shaped() {
			return fmt.Errorf("topo: link profile %s: with --remote the link is a real one, which the bench does not shape", p.Name)
		}
		return nil
	}
	var errs []error
	for r := range t.hosts {
		if err := t.shapeHost(Role(r), p); err != nil {
			errs = append(errs, fmt.Errorf("topo: shaping the %s's %s to %s: %w", Role(r), t.hosts[r].Link, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (t *Topo) shapeHost(r Role, p Profile) error {
	h, err := netlink.NewHandleAt(t.ns[r])
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(t.hosts[r].Link)
	if err != nil {
		return err
	}
	qs, err := h.QdiscList(l)
	if err != nil {
		return err
	}
	var root netlink.Qdisc
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT {
			root = q
		}
	}
	ours := root != nil && root.Attrs().Handle == shapeHandle
	if !p.Shaped() {
		if ours {
			return h.QdiscDel(root)
		}
		return nil
	}
	rate, burst, limit := p.TBF()
	if ours {
		if tb, ok := root.(*netlink.Tbf); ok && tb.Rate == rate {
			return nil
		}
	} else if root != nil && root.Attrs().Handle != 0 && root.Type() != "noqueue" {
		return nil
	}
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: shapeHandle, Parent: netlink.HANDLE_ROOT},
		Rate:       rate,
		Limit:      limit,
		Buffer:     netlink.Xmittime(rate, burst),
	}
	return h.QdiscReplace(q)
}

// Shaping returns the rate in bits/s of the bench's shaper on a host's
// link (0 when not shaped) and the type of a configuration's root qdisc
// that stands in its place ("" if none); for tests and the record.
func (t *Topo) Shaping(r Role) (bitsPerSec uint64, foreign string, err error) {
	if t.remote {
		return 0, "", nil
	}
	h, err := netlink.NewHandleAt(t.ns[r])
	if err != nil {
		return 0, "", err
	}
	defer h.Close()
	l, err := h.LinkByName(t.hosts[r].Link)
	if err != nil {
		return 0, "", err
	}
	qs, err := h.QdiscList(l)
	if err != nil {
		return 0, "", err
	}
	for _, q := range qs {
		if q.Attrs().Parent != netlink.HANDLE_ROOT {
			continue
		}
		if tb, ok := q.(*netlink.Tbf); ok && q.Attrs().Handle == shapeHandle {
			return tb.Rate * 8, "", nil
		}
		if q.Attrs().Handle != 0 && q.Type() != "noqueue" {
			return 0, q.Type(), nil
		}
	}
	return 0, "", nil
}

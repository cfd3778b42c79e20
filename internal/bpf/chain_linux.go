package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The filter's place on an interface's TCX chain. TCX runs a hook's
// programs in order, and one that returns TCX_PASS (TC_ACT_OK: what most
// tc programs return for "let it through") or redirects ends the chain:
// the packets a program ahead of the filter passes are never filtered.
// A host firewall must see every packet first, so Attach puts the filter
// in front of every program but those of Sluice's own that IPFilter runs
// before the filter: right after the last of them (NAT inbound and the
// filter's NAT prefix on ingress, the ftp proxy's NAT program on egress),
// else at the head. It used to append the filter to the chain, behind
// whatever another tool had attached before. A program put in front of
// the filter later (another tool attaching at the head) cannot be
// prevented; Ahead finds it, and ipf's loads, ipf -V, ipfstat and sluice
// doctor say so.

// AheadProg is a program that runs before the filter on one of the hooks
// it is attached to, and is not one of Sluice's.
type AheadProg struct {
	Ifindex int
	Hook    string // "ingress" or "egress"
	ID      ebpf.ProgramID
	Name    string // the kernel's name of the program ("" if unreadable)
}

// ownAheadLinks returns the link IDs of Sluice's own programs that run
// before the filter on ifindex's hook, from their pins: on ingress NAT's
// inbound program and the filter's NAT prefix, on egress the ftp proxy's
// NAT program.
func (d *Datapath) ownAheadLinks(ifindex int, typ ebpf.AttachType) map[link.ID]bool {
	var pins []string
	if typ == ebpf.AttachTCXIngress {
		pins = []string{prefixPin(d.dir, ifindex), filepath.Join(d.natDir(), fmt.Sprintf("link_%d_ingress", ifindex))}
	} else {
		pins = []string{filepath.Join(d.natDir(), fmt.Sprintf("link_%d_egresspre", ifindex))}
	}
	ids := map[link.ID]bool{}
	for _, p := range pins {
		if id, ok := pinnedLinkID(p); ok {
			ids[id] = true
		}
	}
	// the prefix's links of this process, when they are not pinned
	for _, l := range d.natin.links {
		if info, err := l.Info(); err == nil {
			ids[info.ID] = true
		}
	}
	return ids
}

func pinnedLinkID(pin string) (link.ID, bool) {
	info, err := pinnedLinkInfo(pin)
	if err != nil {
		return 0, false
	}
	return info.ID, true
}

// attachFirst attaches prog to ifindex's hook where the filter belongs
// (above): after the last of Sluice's programs that go before it, else
// at the head. The chain is read and attached to at one revision; when
// another process changed it in between, it is read again.
func (d *Datapath) attachFirst(ifindex int, prog *ebpf.Program, typ ebpf.AttachType) (link.Link, error) {
	var err error
	for try := 0; try < 5; try++ {
		var q *link.QueryResult
		q, err = link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: typ})
		if err != nil {
			// a kernel without TCX: AttachTCX says so
			// (ebpf.ErrNotSupported), and Attach falls back to tc
			return link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: typ, Anchor: link.Head()})
		}
		own := d.ownAheadLinks(ifindex, typ)
		var anchor link.Anchor = link.Head()
		for _, p := range q.Programs {
			if id, ok := p.LinkID(); ok && own[id] {
				anchor = link.AfterLinkByID(id)
			}
		}
		var l link.Link
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: typ, Anchor: anchor,
			ExpectedRevision: q.Revision})
		if err == nil {
			return l, nil
		}
		// ESTALE: the chain moved since it was read; ENOENT: the
		// anchor's link went meanwhile
		if !errors.Is(err, unix.ESTALE) && !errors.Is(err, unix.ENOENT) {
			return nil, err
		}
	}
	return nil, err
}

// Ahead returns the programs that run before the filter on the hooks of
// the interfaces of this network namespace it is attached to with TCX,
// Sluice's own that belong there (NAT inbound) left out, sorted by
// interface, hook and place. A packet such a program passes with
// TCX_PASS or redirects is not filtered.
func (d *Datapath) Ahead() ([]AheadProg, error) {
	if d.dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []AheadProg
	for _, e := range ents {
		idx, hook, ok := linkPin(e.Name())
		if !ok || (hook != "ingress" && hook != "egress") {
			continue
		}
		typ := ebpf.AttachTCXIngress
		if hook == "egress" {
			typ = ebpf.AttachTCXEgress
		}
		l, err := link.LoadPinnedLink(filepath.Join(d.dir, e.Name()), nil)
		if err != nil {
			continue
		}
		place, err := PinnedLinkPlace(l, idx, typ)
		var info *link.Info
		if err == nil && place == LinkHere {
			info, err = l.Info()
		}
		l.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the filter's link on interface %d %s: %w", idx, hook, err)
		}
		if place != LinkHere {
			continue
		}
		q, err := link.QueryPrograms(link.QueryOptions{Target: idx, Attach: typ})
		if err != nil {
			return nil, fmt.Errorf("listing the programs on interface %d %s: %w", idx, hook, err)
		}
		own := d.ownAheadLinks(idx, typ)
		var before []AheadProg
		for _, p := range q.Programs {
			id, _ := p.LinkID()
			if id == info.ID {
				out = append(out, before...)
				break
			}
			if own[id] {
				continue
			}
			a := AheadProg{Ifindex: idx, Hook: hook, ID: p.ID}
			if prog, err := ebpf.NewProgramFromID(p.ID); err == nil {
				if pi, err := prog.Info(); err == nil {
					a.Name = pi.Name
				}
				prog.Close()
			}
			before = append(before, a)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Ifindex != out[j].Ifindex {
			return out[i].Ifindex < out[j].Ifindex
		}
		return out[i].Hook > out[j].Hook // ingress first
	})
	return out, nil
}

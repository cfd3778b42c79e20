package sluice

// What the doctor says about NAT's and IPQoS's pins: like the filter's
// (datapathPlace), their pins are seen from every network namespace of
// the mount namespace, while the interfaces they run on are one
// namespace's.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"sluice/internal/bpf"
	natbpf "sluice/internal/bpf/nat"
	"sluice/internal/bpf/qosmark"
)

// pinPlaces sorts link pins by where their links run, seen from this
// network namespace: the interfaces here they run on (names, sorted,
// once each), and the pins whose device went away (defunct), or that run
// on an interface of another namespace or on another interface than the
// one the pin was made for (elsewhere).
type pinPlaces struct {
	here, defunct, elsewhere []string
}

// add sorts the link pinned at path, made for the interface ifindex of
// this namespace (0: none of that name here).
func (p *pinPlaces) add(path string, ifindex int, typ ebpf.AttachType) error {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	place, err := bpf.PinnedLinkPlace(l, ifindex, typ)
	if err != nil {
		return err
	}
	name := filepath.Base(path)
	switch place {
	case bpf.LinkHere:
		if ifc, err := net.InterfaceByIndex(ifindex); err == nil {
			name = ifc.Name
		}
		if !slices.Contains(p.here, name) {
			p.here = append(p.here, name)
		}
	case bpf.LinkDefunct:
		p.defunct = append(p.defunct, name)
	default:
		p.elsewhere = append(p.elsewhere, name)
	}
	return nil
}

// report turns the places into a finding: what about names (e.g. "NAT
// pinned in DIR"), with the advice for pins of another namespace and for
// defunct ones. idle is said when it runs nowhere and need not (no rules
// or configuration); else running nowhere is a warning with advice none.
func (p *pinPlaces) report(what, elsewhere, defunct, none string, idle bool) (Severity, string) {
	sort.Strings(p.here)
	var msgs []string
	sev := SevInfo
	switch {
	case len(p.here) > 0:
		msgs = append(msgs, fmt.Sprintf("%s runs on %s", what, strings.Join(p.here, " ")))
	case idle:
		msgs = append(msgs, fmt.Sprintf("%s runs on no interface (nothing loaded that needs one)", what))
	default:
		sev = SevWarn
		msgs = append(msgs, fmt.Sprintf("%s runs on no interface of this network namespace: %s", what, none))
	}
	if len(p.elsewhere) > 0 {
		sev = SevWarn
		msgs = append(msgs, fmt.Sprintf("its link pins %s run on interfaces of another network namespace (or another interface): %s",
			strings.Join(p.elsewhere, " "), elsewhere))
	}
	if len(p.defunct) > 0 {
		sev = SevWarn
		msgs = append(msgs, fmt.Sprintf("its link pins %s are of interfaces that went away: %s", strings.Join(p.defunct, " "), defunct))
	}
	return sev, strings.Join(msgs, "; ")
}

// natPlace says where the NAT datapath pinned in pin runs, seen from
// this network namespace.
func natPlace(pin string) (Severity, string) {
	d, err := natbpf.OpenPinned(pin)
	if err != nil {
		return SevWarn, fmt.Sprintf("a NAT datapath is pinned in %s but cannot be read: %v", pin, err)
	}
	defer d.Close()
	if err := d.CheckNetNS(); err != nil {
		if errors.Is(err, bpf.ErrOtherNetNS) {
			return SevWarn, fmt.Sprintf("the NAT datapath pinned in %s works in another network namespace than this one: "+
				"run ipnat there (nsenter --net=/run/netns/NAME …); if that namespace was deleted, its rules translate "+
				"nothing and ipf -D removes them", pin)
		}
		return SevWarn, fmt.Sprintf("a NAT datapath is pinned in %s; whose network namespace it works in cannot be told: %v", pin, err)
	}
	rules, err := d.Rules()
	if err != nil {
		return SevWarn, fmt.Sprintf("a NAT datapath is pinned in %s; its rules cannot be read: %v", pin, err)
	}
	var p pinPlaces
	ents, err := os.ReadDir(pin)
	if err != nil {
		return SevWarn, fmt.Sprintf("a NAT datapath is pinned in %s; its link pins cannot be read: %v", pin, err)
	}
	for _, e := range ents {
		var idx int
		var which string
		if n, _ := fmt.Sscanf(strings.ReplaceAll(e.Name(), "_", " "), "link %d %s", &idx, &which); n != 2 {
			continue
		}
		typ := ebpf.AttachTCXEgress
		if which == "ingress" {
			typ = ebpf.AttachTCXIngress
		}
		if err := p.add(filepath.Join(pin, e.Name()), idx, typ); err != nil {
			return SevWarn, fmt.Sprintf("a NAT datapath is pinned in %s; its link pin %s cannot be read: %v", pin, e.Name(), err)
		}
	}
	return p.report(fmt.Sprintf("the NAT datapath pinned in %s (%d rules)", pin, len(rules)),
		"NAT loaded there by a Sluice that recorded no namespace; run ipnat there, or ipf -D removes NAT",
		"NAT translates nothing there; ipf -y attaches NAT where its rules belong, ipf -D removes it",
		"its interfaces went away, or its rules name none that exist; ipf -y attaches it where they belong, ipf -D removes it",
		len(rules) == 0)
}

// qosPlace says where the IPQoS configuration in dir marks, seen from
// this network namespace.
func qosPlace(dir string) (Severity, string) {
	if err := qosmark.CheckNetNS(dir); err != nil {
		if errors.Is(err, bpf.ErrOtherNetNS) {
			return SevWarn, fmt.Sprintf("the IPQoS configuration in %s marks in another network namespace than this one: "+
				"run ipqosadmin there (nsenter --net=/run/netns/NAME …); if that namespace was deleted, it marks nothing "+
				"and ipqosadmin -unload removes it", dir)
		}
		return SevWarn, fmt.Sprintf("IPQoS is enabled in %s; whose network namespace it marks in cannot be told: %v", dir, err)
	}
	text, err := qosmark.ActiveConfig(dir)
	if err != nil {
		return SevWarn, fmt.Sprintf("IPQoS is enabled in %s; its configuration cannot be read: %v", dir, err)
	}
	var p pinPlaces
	ents, err := os.ReadDir(filepath.Join(dir, "links"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return SevWarn, fmt.Sprintf("IPQoS is enabled in %s; its link pins cannot be read: %v", dir, err)
	}
	for _, e := range ents {
		idx := 0
		if ifc, err := net.InterfaceByName(e.Name()); err == nil {
			idx = ifc.Index
		}
		if err := p.add(filepath.Join(dir, "links", e.Name()), idx, ebpf.AttachTCXEgress); err != nil {
			return SevWarn, fmt.Sprintf("IPQoS is enabled in %s; its link pin %s cannot be read: %v", dir, e.Name(), err)
		}
	}
	what := fmt.Sprintf("the IPQoS configuration in %s", dir)
	if text == "" {
		what = fmt.Sprintf("IPQoS, enabled in %s with no configuration loaded,", dir)
	}
	sev, msg := p.report(what,
		"IPQoS loaded there by a Sluice that recorded no namespace; run ipqosadmin there, or ipqosadmin -unload removes it",
		"ipqosadmin -resync attaches the adapters that exist again",
		"its adapters went away, or were not there at the load; ipqosadmin -resync marks those that exist",
		text == "")
	if text != "" {
		if si, err := qosmark.GetState(dir); err == nil && len(si.Missing) > 0 && len(p.here) > 0 {
			sev = SevWarn
			msg += fmt.Sprintf("; adapters not marked: %s (ipqosadmin -resync marks those that exist)", strings.Join(si.Missing, " "))
		}
	}
	return sev, msg
}

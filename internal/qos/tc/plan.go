// Package tc turns an adapter's `res`/`max` policies into an HTB qdisc
// tree (rate = reservation, ceil = maximum) and applies it with netlink;
// it also sets a VLAN device's egress QoS map so the skb->priority chosen
// by the marker becomes the 802.1p priority (`vpr`).
package tc

import (
	"fmt"

	"sluice/internal/qos"
)

// Class is one HTB leaf class; rates are in bits per second.
type Class struct {
	Minor      uint16
	Policy     string // "" for the default class
	Rate, Ceil uint64
}

// Plan is the HTB tree of one adapter: root HTBMajor:0, class
// HTBMajor:RootClass at the link rate, and leaves under it.
type Plan struct {
	Ifname  string
	Link    uint64 // bits/s
	Classes []Class
	Default Class
}

// minRate keeps every HTB rate positive (the kernel rejects zero).
const minRate = 8000

// NewPlan builds the HTB tree for an adapter whose link runs at link
// bits/s. It returns nil (no shaping) if no policy has res or max.
// Policies without res share the unreserved bandwidth equally with the
// unmatched traffic's default class (Sluice's choice).
func NewPlan(a *qos.Adapter, link uint64) (*Plan, error) {
	var shaping []qos.Policy
	for _, p := range a.Policies {
		if p.Shapes() {
			shaping = append(shaping, p)
		}
	}
	if len(shaping) == 0 {
		return nil, nil
	}
	if link == 0 {
		return nil, fmt.Errorf("adapter %s: link speed unknown; res and max need it", a.Name)
	}
	var reserved uint64
	noRes := 1 // the default class
	for _, p := range shaping {
		if p.Res.Set {
			reserved += p.Res.BitsPerSecond(link)
		} else {
			noRes++
		}
	}
	if reserved > link {
		return nil, fmt.Errorf("adapter %s: reservations total %d bit/s, more than the link's %d bit/s", a.Name, reserved, link)
	}
	share := max((link-reserved)/uint64(noRes), minRate)
	pl := &Plan{Ifname: a.Name, Link: link}
	for _, p := range shaping {
		c := Class{Minor: p.Class, Policy: p.Name, Rate: share, Ceil: link}
		if p.Res.Set {
			c.Rate = max(p.Res.BitsPerSecond(link), minRate)
		}
		if p.Max.Set {
			c.Ceil = max(p.Max.BitsPerSecond(link), minRate)
			if c.Ceil > link {
				c.Ceil = link
			}
		}
		if c.Rate > c.Ceil {
			c.Rate = c.Ceil
		}
		pl.Classes = append(pl.Classes, c)
	}
	pl.Default = Class{Minor: qos.DefaultClass, Rate: share, Ceil: link}
	return pl, nil
}

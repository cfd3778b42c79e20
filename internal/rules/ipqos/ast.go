// Package ipqos parses and prints HP-UX IPQoS configuration files:
// filter, policy and adapter blocks (see docs/ipqos.md). Parse returns a
// Config that has been fully checked (names, references, value ranges);
// Format prints it back in a normalized form that parses to the same Config.
package ipqos

import (
	"fmt"
	"net/netip"
)

// Pos is a position in a configuration file (1-based line and column).
type Pos struct {
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Config is a parsed configuration: the blocks of each kind in file order.
type Config struct {
	Filters  []*Filter
	Policies []*Policy
	Adapters []*Adapter
}

// Side says which header field an address or port match applies to.
type Side uint8

// Sides: Either matches the source in one expanded filter and the
// destination in the other (HP's `addr` and `port`).
const (
	Src Side = iota
	Dst
	Either
	numSides
)

// AddrMatch is an address condition: a prefix (Prefix valid) or an
// inclusive range Lo..Hi of one address family. The zero value matches
// everything.
type AddrMatch struct {
	Prefix netip.Prefix
	Lo, Hi netip.Addr
}

// IsSet reports whether the condition restricts anything.
func (a AddrMatch) IsSet() bool { return a.Lo.IsValid() }

// Contains reports whether ip lies within the condition (an unset condition
// contains everything; an address of the other family never matches).
func (a AddrMatch) Contains(ip netip.Addr) bool {
	if !a.IsSet() {
		return true
	}
	if ip.Is4() != a.Lo.Is4() {
		return false
	}
	return a.Lo.Compare(ip) <= 0 && ip.Compare(a.Hi) <= 0
}

// Range is an inclusive range of small integers (ports, DSCP values).
type Range struct {
	Set    bool
	Lo, Hi uint16
}

// Contains reports whether v lies in the range (an unset range contains
// everything).
func (r Range) Contains(v uint16) bool { return !r.Set || (r.Lo <= v && v <= r.Hi) }

// NoPriority is Filter.Priority when the filter sets none: such filters
// lose to every numbered one.
const NoPriority = -1

// Filter is a `filter NAME { … }` block.
type Filter struct {
	Name     string
	Pos      Pos
	Addr     [numSides]AddrMatch // indexed by Side
	Port     [numSides]Range     // indexed by Side
	Protocol int                 // IP protocol number, -1 = any
	NetProto uint16              // 0x800 or 0x86DD, 0 = any
	DSCP     Range               // current DSCP
	DstMAC   [6]byte
	HasMAC   bool
	Priority int // NoPriority or 0..65535
}

// Family returns 4 or 6 when an address or `net` fixes the family, else 0.
func (f *Filter) Family() int {
	for _, a := range f.Addr {
		if a.IsSet() {
			if a.Lo.Is4() {
				return 4
			}
			return 6
		}
	}
	switch f.NetProto {
	case 0x800:
		return 4
	case 0x86DD:
		return 6
	}
	return 0
}

// Rate is a bandwidth: a percentage of the link or bits per second.
type Rate struct {
	Set     bool
	Percent bool
	Value   uint64 // percent (1..100) or bits/s
}

// BitsPerSecond resolves the rate against a link of the given speed.
func (r Rate) BitsPerSecond(link uint64) uint64 {
	if r.Percent {
		return link * r.Value / 100 // link speeds stay far below 2^57, so no overflow
	}
	return r.Value
}

// Ref names a block of another kind, with the position of the reference.
type Ref struct {
	Name string
	Pos  Pos
}

// Policy is a `policy NAME { … }` block. DSCP and VPR are -1 when unset.
type Policy struct {
	Name     string
	Pos      Pos
	Uses     []Ref
	Res, Max Rate
	DSCP     int
	VPR      int
}

// Adapter is an `adapter NAME { … }` block; NAME is the interface name.
type Adapter struct {
	Name string
	Pos  Pos
	Uses []Ref
	// Speed is the adapter's line rate in bits/s declared with `speed
	// RATE` (a Sluice extension; 0 = not declared): res and max given as
	// percentages resolve against it instead of the speed the interface
	// reports, which virtual adapters give as 10 Gb/s or not at all.
	Speed uint64
}

// Filter returns the filter of that name, or nil.
func (c *Config) Filter(name string) *Filter {
	for _, f := range c.Filters {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Policy returns the policy of that name, or nil.
func (c *Config) Policy(name string) *Policy {
	for _, p := range c.Policies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

package topo

import (
	"fmt"
	"strings"
)

// Profile is a link profile: the line rate the test link is shaped to,
// so that a run on veth (which moves data as fast as the CPU allows)
// behaves like the adapters of HP's white papers. At a line rate the
// machine can sustain, throughput is flat and a filter's cost shows in
// CPU utilisation and service demand, as in the papers' tables.
type Profile struct {
	// Name is the profile's name in test IDs and flags: "veth" (not
	// shaped), "100BaseT", "1GigE" or "10GigE".
	Name string
	// BitsPerSec is the line rate; 0 means not shaped.
	BitsPerSec uint64
}

// Shaped reports whether the profile limits the link.
func (p Profile) Shaped() bool { return p.BitsPerSec > 0 }

// The link profiles. Veth is the unshaped default.
var (
	Veth     = Profile{Name: "veth"}
	Eth100   = Profile{Name: "100BaseT", BitsPerSec: 100_000_000}
	GigE     = Profile{Name: "1GigE", BitsPerSec: 1_000_000_000}
	TenGigE  = Profile{Name: "10GigE", BitsPerSec: 10_000_000_000}
	Profiles = []Profile{Veth, Eth100, GigE, TenGigE}
)

// ParseProfile reads a profile name, case-insensitively, also accepting
// "100m", "1g", "10g" and "none" (= veth).
func ParseProfile(s string) (Profile, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	switch k {
	case "", "none", "veth", "unshaped":
		return Veth, nil
	case "100m", "100mbit", "100baset", "100base-t":
		return Eth100, nil
	case "1g", "1gbit", "1gige", "gige", "1000baset":
		return GigE, nil
	case "10g", "10gbit", "10gige":
		return TenGigE, nil
	}
	return Profile{}, fmt.Errorf("topo: unknown link profile %q (want veth, 100BaseT, 1GigE or 10GigE)", s)
}

// ProfileByName returns the profile of that name ("" = veth).
func ProfileByName(name string) (Profile, bool) {
	if name == "" {
		return Veth, true
	}
	for _, p := range Profiles {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// TBF returns the token-bucket parameters that shape a veth end to the
// profile's rate: rate in bytes/s, the bucket (burst) in bytes and the
// queue limit in bytes. The bucket holds a whole 64 KiB GSO segment
// (smaller buckets make the qdisc split every TSO skb, a cost no real
// adapter has) or a millisecond of line rate if that is more; the queue
// holds 20 ms at line rate beyond the bucket, enough for TCP to fill the
// pipe without a standing queue that inflates RR latency much.
func (p Profile) TBF() (rate uint64, burst, limit uint32) {
	rate = p.BitsPerSec / 8
	b := max(rate/1000, 64<<10+1514)
	l := b + rate/50
	return rate, uint32(b), uint32(min(l, 1<<31))
}

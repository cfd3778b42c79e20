package bpf

import (
	"fmt"
	"sort"
	"time"

	"sluice/internal/state"
)

// tunable is one of the datapath's ipf -T tunables: the config keys it
// sets (a TCP timeout tunable sets the timeout of each state it covers),
// whether it is a timeout in ticks (0.5 s; the map holds nanoseconds), and
// its range.
type tunable struct {
	keys     []uint32
	ticks    bool
	min, max uint64
}

// tunables maps IPFilter 5.x tunable names (ipf -T) to config keys.
var tunables = func() map[string]tunable {
	m := map[string]tunable{
		"udp_timeout":      {[]uint32{cfgToUDP}, true, 1, 0x7fffffff},
		"udp_ack_timeout":  {[]uint32{cfgToUDPAck}, true, 1, 0x7fffffff},
		"icmp_timeout":     {[]uint32{cfgToICMP}, true, 1, 0x7fffffff},
		"icmp_ack_timeout": {[]uint32{cfgToICMPAck}, true, 1, 0x7fffffff},
		"ip_timeout":       {[]uint32{cfgToIP}, true, 1, 0x7fffffff},
		"state_max":        {[]uint32{cfgStateMax}, false, 1, 0x7fffffff},
		"state_size":       {[]uint32{cfgStateSize}, false, 1, 0x7fffffff},
		"state_wm_high":    {[]uint32{cfgWMHigh}, false, 2, 100},
		"state_wm_low":     {[]uint32{cfgWMLow}, false, 1, 99},
		"state_wm_freq":    {[]uint32{cfgWMFreq}, true, 2, 999999},
		"min_ttl":          {[]uint32{cfgMinTTL}, false, 0, 255},
		"default_pass":     {[]uint32{cfgDefPass}, false, 0, 0xffffffff},
		"state_logging":    {[]uint32{cfgStateLog}, false, 0, 1},
		"frag_ttl":         {[]uint32{cfgFragTTL}, true, 1, 0x7fffffff},
		// the fragment cache's map holds fragCap; IPFilter sizes its
		// table at start, the kernel's takes a new size at once
		"frag_size": {[]uint32{cfgFragSize}, false, 1, fragCap},
	}
	for _, tt := range state.TCPTimeoutTunables {
		t := tunable{ticks: true, min: 1, max: 0x7fffffff}
		for _, st := range tt.States {
			t.keys = append(t.keys, cfgToTCP+uint32(st))
		}
		m[tt.Name] = t
	}
	return m
}()

// Tunable is one ipf -T value.
type Tunable struct {
	Name          string
	Min, Max, Cur uint64
}

// Tunables lists the datapath's tunables in name order, in IPFilter units.
func (d *Datapath) Tunables() []Tunable {
	var out []Tunable
	for name, t := range tunables {
		v := d.cfg(t.keys[0])
		if t.ticks {
			v /= uint64(tick)
		}
		out = append(out, Tunable{Name: name, Min: t.min, Max: t.max, Cur: v})
	}
	out = append(out, Tunable{Name: natInlineTunable, Min: 0, Max: 1, Cur: b2u64(d.NATInlineAllowed())})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetTunable sets one tunable (ipf -T name=value), timeouts in ticks.
func (d *Datapath) SetTunable(name string, v uint64) error {
	if name == natInlineTunable {
		return d.setNATAllowed(v)
	}
	t, ok := tunables[name]
	if !ok {
		return fmt.Errorf("unknown tunable %q", name)
	}
	if v < t.min || v > t.max {
		return fmt.Errorf("tunable %s: %d outside %d..%d", name, v, t.min, t.max)
	}
	if name == "state_max" && v > stateCap {
		// IPFilter's range is shown; the kernel table is smaller
		return fmt.Errorf("tunable state_max: %d: the kernel state table holds at most %d entries", v, stateCap)
	}
	val := v
	if t.ticks {
		val = uint64(time.Duration(v) * tick)
	}
	for _, k := range t.keys {
		if err := d.setCfg(k, val); err != nil {
			return err
		}
	}
	return nil
}

// natInlineTunable is Sluice's ipf -T switch for NAT's established path
// inside the filter's programs (natin_linux.go): 1 (the default) lets
// ipnat put it there where it can, 0 keeps NAT's programs apart (two
// programs on each hook, as before nat15: slower, nothing else changes).
const natInlineTunable = "nat_inline"

// setNATAllowed is ipf -T nat_inline=v: 0 takes the path out at once (the
// prefix's links first) and keeps ipnat from putting it back; 1 only
// allows it (the caller, ipfctl, puts it back where it can).
func (d *Datapath) setNATAllowed(v uint64) error {
	if v > 1 {
		return fmt.Errorf("tunable %s: %d outside 0..1", natInlineTunable, v)
	}
	if v == 1 {
		return d.setCfg(cfgNATOff, 0)
	}
	if err := d.setCfg(cfgNATOff, 1); err != nil {
		return err
	}
	if d.dir == "" {
		return nil
	}
	return d.SetNATInline(0)
}

func b2u64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

package bpf

import (
	"fmt"
	"sort"
	"time"
)

// tunables maps IPFilter 5.x tunable names (ipf -T) to config keys. Timeouts
// are in ticks (0.5 s) as ipf -T shows them; the map holds nanoseconds.
var tunables = map[string]struct {
	key   uint32
	ticks bool
	min   uint64
	max   uint64
}{
	"tcp_timeout":      {cfgToTCP + 0, true, 1, 0x7fffffff},
	"tcp_syn_sent":     {cfgToTCP + 1, true, 1, 0x7fffffff},
	"tcp_syn_received": {cfgToTCP + 2, true, 1, 0x7fffffff},
	"tcp_idle_timeout": {cfgToTCP + 4, true, 1, 0x7fffffff},
	"tcp_half_closed":  {cfgToTCP + 5, true, 1, 0x7fffffff},
	"tcp_last_ack":     {cfgToTCP + 8, true, 1, 0x7fffffff},
	"tcp_close_wait":   {cfgToTCP + 9, true, 1, 0x7fffffff},
	"tcp_time_wait":    {cfgToTCP + 10, true, 1, 0x7fffffff},
	"tcp_closed":       {cfgToTCP + 11, true, 1, 0x7fffffff},
	"udp_timeout":      {cfgToUDP, true, 1, 0x7fffffff},
	"udp_ack_timeout":  {cfgToUDPAck, true, 1, 0x7fffffff},
	"icmp_timeout":     {cfgToICMP, true, 1, 0x7fffffff},
	"icmp_ack_timeout": {cfgToICMPAck, true, 1, 0x7fffffff},
	"ip_timeout":       {cfgToIP, true, 1, 0x7fffffff},
	"state_max":        {cfgStateMax, false, 1, 0x7fffffff},
	"min_ttl":          {cfgMinTTL, false, 0, 255},
	"default_pass":     {cfgDefPass, false, 0, 0xffffffff},
	"state_logging":    {cfgStateLog, false, 0, 1},
}

// The timeouts that IPFilter keeps in one tunable but the datapath per TCP
// state: setting the tunable sets all of them.
var tunableAlso = map[string][]uint32{
	"tcp_timeout":     {cfgToTCP + 3, cfgToTCP + 7}, // HALF_ESTAB, CLOSING
	"tcp_half_closed": {cfgToTCP + 6},               // FIN_WAIT_1
}

// Tunable is one ipf -T value.
type Tunable struct {
	Name          string
	Min, Max, Cur uint64
}

// Tunables lists the datapath's tunables in name order, in IPFilter units.
func (d *Datapath) Tunables() []Tunable {
	var out []Tunable
	for name, t := range tunables {
		v := d.cfg(t.key)
		if t.ticks {
			v /= uint64(tick)
		}
		out = append(out, Tunable{Name: name, Min: t.min, Max: t.max, Cur: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetTunable sets one tunable (ipf -T name=value), timeouts in ticks.
func (d *Datapath) SetTunable(name string, v uint64) error {
	t, ok := tunables[name]
	if !ok {
		return fmt.Errorf("unknown tunable %q", name)
	}
	if v < t.min || v > t.max {
		return fmt.Errorf("tunable %s: %d outside %d..%d", name, v, t.min, t.max)
	}
	val := v
	if t.ticks {
		val = uint64(time.Duration(v) * tick)
	}
	for _, k := range append([]uint32{t.key}, tunableAlso[name]...) {
		if err := d.setCfg(k, val); err != nil {
			return err
		}
	}
	return nil
}

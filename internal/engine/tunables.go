package engine

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"sluice/internal/frag"
	"sluice/internal/state"
)

// Tunable describes one `ipf -T` tunable (ipf-reference §3.7).
type Tunable struct {
	Name     string // 5.x name
	Alias    string // 4.1 name, "" if none
	Min, Max uint64
	Default  uint64
	ReadOnly bool
}

// stateDefaults are the state table's defaults (sluice/internal/state
// holds them for both datapaths).
var stateDefaults = state.DefaultConfig()

// tunableTable lists every tunable with its 5.x defaults. Timeouts are in
// ticks (0.5 s).
var tunableTable = []Tunable{
	{"ipf_flags", "fr_flags", 0, 0xffffffff, 0, false},
	{"active", "fr_active", 0, 0, 0, true},
	{"control_forwarding", "fr_control_forwarding", 0, 1, 0, false},
	{"update_ipid", "fr_update_ipid", 0, 1, 0, false},
	{"chksrc", "fr_chksrc", 0, 1, 0, false},
	{"min_ttl", "fr_minttl", 0, 1, 4, false},
	{"icmp_minfragmtu", "fr_icmpminfragmtu", 0, 1, 68, false},
	{"default_pass", "fr_pass", 0, 0xffffffff, 0x8000002, false},
	{"tcp_idle_timeout", "fr_tcpidletimeout", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_idle_timeout")), false},
	{"tcp_close_wait", "fr_tcpclosewait", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_close_wait")), false},
	{"tcp_last_ack", "fr_tcplastack", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_last_ack")), false},
	{"tcp_timeout", "fr_tcptimeout", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_timeout")), false},
	{"tcp_syn_sent", "", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_syn_sent")), false},
	{"tcp_syn_received", "", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_syn_received")), false},
	{"tcp_closed", "fr_tcpclosed", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_closed")), false},
	{"tcp_half_closed", "fr_tcphalfclosed", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_half_closed")), false},
	{"tcp_time_wait", "fr_tcptimewait", 1, 0x7fffffff, uint64(state.TCPTimeoutDefault("tcp_time_wait")), false},
	{"udp_timeout", "fr_udptimeout", 1, 0x7fffffff, uint64(stateDefaults.UDPTimeout), false},
	{"udp_ack_timeout", "fr_udpacktimeout", 1, 0x7fffffff, uint64(stateDefaults.UDPAckTimeout), false},
	{"icmp_timeout", "fr_icmptimeout", 1, 0x7fffffff, uint64(stateDefaults.ICMPTimeout), false},
	{"icmp_ack_timeout", "fr_icmpacktimeout", 1, 0x7fffffff, uint64(stateDefaults.ICMPAckTimeout), false},
	{"ip_timeout", "fr_iptimeout", 1, 0x7fffffff, uint64(stateDefaults.IPTimeout), false},
	{"state_max", "fr_statemax", 1, 0x7fffffff, uint64(stateDefaults.Max), false},
	{"state_size", "fr_statesize", 1, 0x7fffffff, 5737, false},
	{"state_lock", "fr_state_lock", 0, 1, 0, false},
	{"state_maxbucket", "fr_state_maxbucket", 1, 0x7fffffff, 26, false},
	{"state_logging", "ipstate_logging", 0, 1, 1, false},
	{"state_wm_high", "", 2, 100, 99, false},
	{"state_wm_low", "", 1, 99, 90, false},
	{"state_wm_freq", "", 2, 999999, 20, false},
	{"nat_lock", "fr_nat_lock", 0, 1, 0, false},
	{"nat_table_size", "ipf_nattable_sz", 1, 0x7fffffff, 2047, false},
	{"nat_table_max", "ipf_nattable_max", 1, 0x7fffffff, 30000, false},
	{"nat_rules_size", "ipf_natrules_sz", 1, 0x7fffffff, 127, false},
	{"rdr_rules_size", "ipf_rdrrules_sz", 1, 0x7fffffff, 127, false},
	{"hostmap_size", "ipf_hostmap_sz", 1, 0x7fffffff, 2047, false},
	{"nat_maxbucket", "fr_nat_maxbucket", 1, 0x7fffffff, 22, false},
	{"nat_logging", "nat_logging", 0, 1, 1, false},
	{"nat_doflush", "fr_nat_doflush", 0, 1, 0, false},
	{"nat_table_wm_low", "", 1, 99, 90, false},
	{"nat_table_wm_high", "", 2, 100, 99, false},
	{"frag_size", "ipfr_size", 1, 0x7fffffff, frag.DefaultSize, false},
	{"frag_ttl", "fr_ipfrttl", 1, 0x7fffffff, frag.DefaultTTL, false},
	{"log_suppress", "ipl_suppress", 0, 1, 1, false},
	{"log_all", "ipl_logall", 0, 1, 0, false},
	{"log_size", "ipl_logsize", 0, 0x80000, 32768, false},
	{"proxy_debug", "ipf_proxy_debug", 0, 0x1f, 0, false},
	{"ftp_debug", "", 0, 10, 0, false},
	{"ftp_forcepasv", "", 0, 1, 1, false},
	{"ftp_insecure", "", 0, 1, 0, false},
	{"ftp_pasvonly", "", 0, 1, 0, false},
	{"ftp_pasvrdr", "", 0, 1, 0, false},
	{"ftp_single_xfer", "", 0, 1, 0, false},
	{"tftp_read_only", "", 0, 1, 0, false},
	{"fr_defnatage", "", 1, 0x7fffffff, 1200, false},
	{"fr_defnatipage", "", 1, 0x7fffffff, 120, false},
	{"fr_defnaticmpage", "", 1, 0x7fffffff, 6, false},
}

// Tunables holds current tunable values. It is not safe for concurrent
// use; the engine copies what it needs when they are applied.
type Tunables struct {
	vals map[string]uint64
}

// NewTunables returns the defaults.
func NewTunables() *Tunables {
	t := &Tunables{vals: make(map[string]uint64, len(tunableTable))}
	for _, d := range tunableTable {
		t.vals[d.Name] = d.Default
	}
	return t
}

func lookupTunable(name string) (*Tunable, bool) {
	for i := range tunableTable {
		d := &tunableTable[i]
		if d.Name == name || (d.Alias != "" && d.Alias == name) {
			return d, true
		}
	}
	return nil, false
}

// Get returns the value of name (5.x or 4.1 name).
func (t *Tunables) Get(name string) (uint64, bool) {
	d, ok := lookupTunable(name)
	if !ok {
		return 0, false
	}
	return t.vals[d.Name], true
}

// Set changes one tunable, checking its range.
func (t *Tunables) Set(name string, v uint64) error {
	d, ok := lookupTunable(name)
	if !ok {
		return fmt.Errorf("unknown tunable %q", name)
	}
	if d.ReadOnly {
		return fmt.Errorf("tunable %s is read-only", d.Name)
	}
	if d.Max != 0 && (v < d.Min || v > d.Max) && !(d.Max == 1 && d.Default > 1) {
		return fmt.Errorf("tunable %s: value %d out of range %d-%d", d.Name, v, d.Min, d.Max)
	}
	t.vals[d.Name] = v
	if d.Name == "state_size" {
		// IPFilter sizes a bucket's chain by the table (ipftest -T
		// list shows it): twice the bit length of state_size, 26 for
		// the default 5737, whatever state_maxbucket was; a later
		// state_maxbucket overrides it. A one-bucket table then holds
		// two entries, and a third flow's add fails (faith17).
		t.vals["state_maxbucket"] = 2 * uint64(bits.Len64(v))
	}
	return nil
}

// IPFilter's error numbers for a tunable that ipftest's -T cannot set
// (ipf_ipftune's IPFERROR codes, which ipf_perror_fd prints with their
// text, TuneErrorText).
const (
	TuneNotFound     = 77
	TuneWhileRunning = 78
	TuneOutsideRange = 79
)

// TuneErrorText is IPFilter's text for each of its tunable error numbers.
var TuneErrorText = map[int]string{
	TuneNotFound:     "could not find tunable",
	TuneWhileRunning: "tunable can only be changed when ipfilter disabled",
	TuneOutsideRange: "new tunable value outside accepted range",
}

// notInIPFilter are tunables Sluice has that IPFilter 5's table has not.
var notInIPFilter = map[string]bool{"fr_defnatage": true, "fr_defnatipage": true, "fr_defnaticmpage": true}

// SetChecked changes one tunable as IPFilter's SIOCIPFSET does in its
// ipftest, where the filter is always running: by its 5.x name only,
// never frag_size (its table is made at start), and within the range
// -T list shows, taken literally (min_ttl and icmp_minfragmtu list 0-1,
// so their defaults 4 and 68 cannot be set back; ipf -T on a live
// datapath is ipfctl's, not this). It returns IPFilter's error number
// (TuneErrorText), 0 when the value is set; a refused value leaves the
// tunable as it was.
func (t *Tunables) SetChecked(name string, v uint64) int {
	d, ok := t.ipfTunable(name)
	switch {
	case !ok:
		return TuneNotFound
	case d.Name == "frag_size":
		// IPFT_WRDISABLED: the fragment table is sized at start
		return TuneWhileRunning
	case v < d.Min || v > d.Max:
		return TuneOutsideRange
	case d.ReadOnly:
		// active: its range (0-0) holds its one value
		return 0
	}
	if err := t.Set(d.Name, v); err != nil {
		return TuneOutsideRange
	}
	return 0
}

// Line returns name's `-T list` line, as ipftest prints a tunable named
// without a value; ok is false for a name IPFilter's table lacks.
func (t *Tunables) Line(name string) (string, bool) {
	d, ok := t.ipfTunable(name)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%s\tmin %d\tmax %d\tcurrent %d", d.Name, d.Min, d.Max, t.vals[d.Name]), true
}

// ipfTunable finds a tunable by IPFilter 5's name (ipf_tune_findbyname).
func (t *Tunables) ipfTunable(name string) (*Tunable, bool) {
	if notInIPFilter[name] {
		return nil, false
	}
	for i := range tunableTable {
		if d := &tunableTable[i]; d.Name == name {
			return d, true
		}
	}
	return nil, false
}

// SetString applies "name=value[,name=value...]" as ipftest -T and
// ipf -T do. Values are decimal or 0x hex.
func (t *Tunables) SetString(s string) error {
	for _, item := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("tunable %q: expected name=value", item)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 0, 64)
		if err != nil {
			return fmt.Errorf("tunable %s: bad value %q", name, val)
		}
		if err := t.Set(strings.TrimSpace(name), v); err != nil {
			return err
		}
	}
	return nil
}

// List returns `ipf -T list` lines: name\tmin N\tmax N\tcurrent N.
func (t *Tunables) List() []string {
	out := make([]string, 0, len(tunableTable))
	for _, d := range tunableTable {
		out = append(out, fmt.Sprintf("%s\tmin %d\tmax %d\tcurrent %d", d.Name, d.Min, d.Max, t.vals[d.Name]))
	}
	return out
}

// Names returns every tunable name, sorted.
func (t *Tunables) Names() []string {
	n := make([]string, 0, len(tunableTable))
	for _, d := range tunableTable {
		n = append(n, d.Name)
	}
	sort.Strings(n)
	return n
}

// StateConfig derives the state table configuration.
func (t *Tunables) StateConfig() state.Config {
	v := func(n string) uint32 { return uint32(t.vals[n]) }
	c := state.DefaultConfig()
	c.Max = int(t.vals["state_max"])
	c.Size = int(t.vals["state_size"])
	c.MaxBucket = int(t.vals["state_maxbucket"])
	c.WMHigh, c.WMLow, c.WMFreq = int(t.vals["state_wm_high"]), int(t.vals["state_wm_low"]), v("state_wm_freq")
	c.Lock = t.vals["state_lock"] != 0
	c.Logging = t.vals["state_logging"] != 0
	for _, tt := range state.TCPTimeoutTunables {
		c.SetTCPTimeout(tt.Name, v(tt.Name))
	}
	c.UDPTimeout, c.UDPAckTimeout = v("udp_timeout"), v("udp_ack_timeout")
	c.ICMPTimeout, c.ICMPAckTimeout = v("icmp_timeout"), v("icmp_ack_timeout")
	c.IPTimeout = v("ip_timeout")
	return c
}

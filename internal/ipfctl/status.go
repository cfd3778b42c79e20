package ipfctl

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// This file is the read-only side of the kernel datapaths for monitoring
// (`sluice exporter`, `sluice doctor`): one call returns a snapshot of the
// filter's and IPQoS's counters in plain types, so its users need neither
// the eBPF packages nor Linux to be compiled and tested. Nothing here
// writes to a map, takes the rule lock or attaches anything.

// QoSDirEnv names the environment variable that moves the IPQoS pins away
// from /sys/fs/bpf/sluice-qos (ipqosadmin's -pindir; the boot script and
// the exporter read it, tests point it at a private bpffs).
const QoSDirEnv = "SLUICE_QOS_DIR"

// QoSPinDir returns $SLUICE_QOS_DIR, or "" for IPQoS's default
// (DefaultQoSPinDir; QoSBackend and ReadStatus resolve "").
func QoSPinDir() string { return os.Getenv(QoSDirEnv) }

// ErrStatusUnsupported is returned by ReadStatus where there is no kernel
// datapath (not Linux).
var ErrStatusUnsupported = fmt.Errorf("kernel datapath status: %w", errors.ErrUnsupported)

// Status is one snapshot of the kernel datapaths.
type Status struct {
	// Filter is nil when no filter datapath is pinned.
	Filter *FilterStatus
	// QoS is nil when IPQoS is disabled (nothing pinned).
	QoS *QoSStatus
}

// FilterStatus is the IPFilter datapath's state and counters.
type FilterStatus struct {
	Enabled   bool
	ActiveSet int // 0 or 1, as ipf -V shows it
	// Interfaces the filter runs on ("if<N>" for an index this network
	// namespace does not know).
	Interfaces []string
	// AllInterfaces is set when the filter belongs on every non-loopback
	// interface (see Coverage).
	AllInterfaces bool
	// Unfiltered are the non-loopback interfaces that are up without the
	// filter although it belongs on them: their traffic is not filtered
	// until ipf -y (or any load) attaches it.
	Unfiltered []string
	// Ahead are the other programs that run before the filter on its
	// hooks (see Coverage).
	Ahead []AheadProgram
	// Rules of the active set, in ipfstat's order, with their counters.
	Rules    []RuleCounters
	In, Out  DirCounters
	State    StateCounters
	Frag     FragCounters
	Replies  ReplyCounters
	Route    RouteCounters
	DCABlock uint64 // packets refused by `keep limit` (HP DCA)
	PPSBlock uint64 // packets refused by `pps N`
	// Drops by block reason (ipmon's names, bpf.ReasonName); reasons
	// that never happened are left out.
	Drops map[string]uint64
	// Programs are the in-kernel run statistics of the attached
	// programs by hook ("ingress", "egress").
	Programs []ProgramRun
}

// RuleCounters is one loaded rule.
type RuleCounters struct {
	Direction  string // "in" or "out"
	Accounting bool   // a `count` rule
	Group      string // "" for the main lists
	Number     int    // 1-based within its list
	Text       string // as ipfstat prints it
	Packets    uint64
	Bytes      uint64
	States     uint32 // live state entries created by this rule
	KeepState  bool
}

// DirCounters are one direction's packet counters (IPFilter's
// filterstats_t).
type DirCounters struct {
	Packets, Pass, Block, Nomatch, Accounted uint64
	Short, Bad, Frag, IPv6, NotIP            uint64
	Logged, LogFail, LogPass, LogBlock       uint64
	StateKept, StateLost                     uint64
}

// StateCounters are the state table's.
type StateCounters struct {
	Active     int64
	Max        uint64            // state_max
	Added      map[string]uint64 // by protocol: tcp, udp, icmp, other
	Hits       uint64
	Misses     uint64
	Expired    uint64
	Closed     uint64
	MaxRefused uint64 // not created: the table (or a rule's limit) was full
	OutOfWin   uint64 // TCP packets outside the window
	// SrcsFull are the entries of max-srcs rules not created because the
	// kernel's source table was full; DCAFull the connections a keep
	// limit rule refused because its connection table was full.
	SrcsFull, DCAFull uint64
}

// FragCounters are the fragment cache's.
type FragCounters struct {
	Entries int // live (not expired) entries
	Max     int // capacity (an LRU: the oldest go when full)
}

// ReplyCounters are the generated replies (return-rst, return-icmp).
type ReplyCounters struct {
	RST, ICMP, Failed uint64
}

// RouteCounters are to/fastroute/dup-to's.
type RouteCounters struct {
	Routed, Duplicated, Failed uint64
}

// ProgramRun is the kernel's run-time statistics of the programs on one
// hook, summed over the distinct programs attached there. They count
// only while BPF statistics are enabled (kernel.bpf_stats_enabled, or a
// process holding BPF_ENABLE_STATS).
type ProgramRun struct {
	Hook     string
	Programs int
	RunCount uint64
	RunTime  time.Duration
}

// PerPacket is the mean in-kernel time of one run, 0 when nothing was
// counted (BPF statistics off).
func (p ProgramRun) PerPacket() time.Duration {
	if p.RunCount == 0 {
		return 0
	}
	return p.RunTime / time.Duration(p.RunCount)
}

// RunLine is ipfstat's line for the run statistics of hooks: the mean
// ns/packet per hook, or "" when BPF statistics counted nothing.
func RunLine(runs []ProgramRun) string {
	var parts []string
	for _, p := range runs {
		if p.RunCount > 0 {
			parts = append(parts, fmt.Sprintf("%s %d ns/packet (%d runs)", p.Hook, p.PerPacket().Nanoseconds(), p.RunCount))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "Datapath run time: " + strings.Join(parts, ", ") + "\n"
}

// QoSStatus is IPQoS's state and counters.
type QoSStatus struct {
	State    string // as ipqosadmin -state prints it
	StateNo  int    // ipqosadmin -state's exit code: 0 disabled .. 3 filtering
	Adapters []QoSAdapter
}

// QoSAdapter is one adapter's policies.
type QoSAdapter struct {
	Name     string
	Policies []QoSPolicy
}

// QoSPolicy is one policy's counters and its filters'.
type QoSPolicy struct {
	Name                    string
	Packets, Bytes, Dropped uint64
	Filters                 []QoSFilter
}

// QoSFilter is one filter's counters.
type QoSFilter struct {
	Name           string
	Packets, Bytes uint64
}

// Coverage is which interfaces the filter is on (ipf -V, ipfstat and the
// exporter show it).
type Coverage struct {
	// All is the all-interfaces mode: a loaded rule applies on every
	// interface (or the first load named none, or unmatched packets are
	// blocked), so the filter belongs on every non-loopback interface and
	// each load and ipf -y attaches it to those that appeared.
	All bool
	// Attached are the interfaces the filter runs on, by name ("if<N>"
	// for an index this network namespace does not know), sorted.
	Attached []string
	// Unfiltered are, in all-interfaces mode, the non-loopback interfaces
	// that are up and do not have the filter, sorted.
	Unfiltered []string
	// OlderMaps are the maps this version's programs use that the
	// datapath lacks: an older Sluice loaded it (its rules are in force
	// and read as usual); the next load (ipf -f, ipf -y) adds them.
	OlderMaps []string
	// OtherNetNS is set when the datapath filters in another network
	// namespace than the reader's: Attached are then that namespace's
	// ifindexes ("if<N>"), and Unfiltered is not looked for.
	OtherNetNS bool
	// Ahead are the other tools' programs that run before the filter on
	// the hooks it is attached to: a packet one of them passes (TCX_PASS)
	// or redirects is not filtered.
	Ahead []AheadProgram
}

// AheadProgram is a program that runs before the filter on one of its
// hooks (bpf.Datapath.Ahead), named for people.
type AheadProgram struct {
	Interface string // "if<N>" for an index this network namespace does not know
	Hook      string // ingress or egress
	Name      string // the kernel's name of the program, "" if unreadable
	ID        uint32 // the kernel's program ID
}

// String is how the commands name it: "eth0 ingress: name (program 12)".
func (a AheadProgram) String() string {
	name := a.Name
	if name == "" {
		name = "a program"
	}
	return fmt.Sprintf("%s %s: %s (program %d)", a.Interface, a.Hook, name, a.ID)
}

// aheadWarning is what to tell the administrator about programs ahead of
// the filter: "" for none.
func (c Coverage) aheadWarning() string {
	if len(c.Ahead) == 0 {
		return ""
	}
	var names []string
	for _, a := range c.Ahead {
		names = append(names, a.String())
	}
	return fmt.Sprintf("other programs run before the filter (%s): the packets they pass or redirect are not filtered; "+
		"detach them, or attach them after the filter (bpftool net show lists them)", strings.Join(names, "; "))
}

// otherNetNSWarning is what ipf -V and ipfstat say about a datapath of
// another network namespace.
const otherNetNSWarning = "the datapath filters another network namespace than this one: its interfaces, rules and " +
	"counters are that namespace's; run the commands there (nsenter --net=/run/netns/NAME …), or ipf -D to remove it"

// olderWarning is what to tell the administrator about a datapath of an
// older Sluice: "" for none.
func (c Coverage) olderWarning() string {
	if len(c.OlderMaps) == 0 {
		return ""
	}
	return fmt.Sprintf("the datapath was loaded by an older Sluice (it has no %s): "+
		"its rules are in force; the next ipf -f or ipf -y moves it to this version", strings.Join(c.OlderMaps, ", "))
}

// Warning returns what to tell the administrator about c: "" when every
// interface the filter belongs on has it.
func (c Coverage) Warning() string {
	if c.OtherNetNS {
		return otherNetNSWarning
	}
	var msgs []string
	if len(c.Unfiltered) > 0 {
		verb := "is"
		if len(c.Unfiltered) > 1 {
			verb = "are"
		}
		msgs = append(msgs, fmt.Sprintf("%s %s up and not filtered although the rules apply on every interface: ipf -y attaches the filter",
			strings.Join(c.Unfiltered, ", "), verb))
	}
	for _, m := range []string{c.aheadWarning(), c.olderWarning()} {
		if m != "" {
			msgs = append(msgs, m)
		}
	}
	return strings.Join(msgs, "; ")
}

// Lines returns the lines ipf -V and ipfstat print about c.
func (c Coverage) Lines() string {
	var w strings.Builder
	names := "none"
	if len(c.Attached) > 0 {
		names = strings.Join(c.Attached, " ")
	}
	mode := "those the rules name"
	if c.All {
		mode = "every non-loopback interface"
	}
	if c.OtherNetNS {
		mode = "ifindexes of another network namespace"
	}
	fmt.Fprintf(&w, "Interfaces: %s (%s)\n", names, mode)
	if len(c.Unfiltered) > 0 {
		fmt.Fprintf(&w, "Unfiltered: %s (up, not attached: run ipf -y)\n", strings.Join(c.Unfiltered, " "))
	}
	for _, a := range c.Ahead {
		fmt.Fprintf(&w, "Ahead of the filter: %s\n", a)
	}
	if c.OtherNetNS {
		fmt.Fprintf(&w, "Datapath: another network namespace's (run the commands there, or ipf -D)\n")
	}
	if len(c.OlderMaps) > 0 {
		fmt.Fprintf(&w, "Datapath: an older Sluice's, without %s (ipf -f or ipf -y moves it to this version)\n",
			strings.Join(c.OlderMaps, " "))
	}
	return w.String()
}

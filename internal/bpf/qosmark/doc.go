// Package qosmark is the kernel datapath of Sluice's IPQoS: a TCX egress eBPF
// program (qos.c, compiled with bpf2go) that marks DSCP / IPv6 traffic
// class and sets skb->priority by the rules of an internal/qos.Ruleset,
// plus the loader that pins it under a bpffs directory, attaches it to the
// adapters, installs the HTB classes (internal/qos/tc) and reads the
// counters back.
//
// Pinned layout under the directory (default DefaultPinDir):
//
//	settings       array map: log level (exists while IPQoS is enabled)
//	cur/prog       the marker program of the active configuration
//	cur/<map>      its maps (rules, adapters, policies, counters, conf text)
//	links/<ifname> the TCX link of each adapter, updated in place on reload
//
// A load builds and fills a complete new set of objects first, then
// switches each adapter's link to the new program; if any step fails the
// adapters already switched are put back, so a failed load keeps the old
// configuration.
package qosmark

import (
	"errors"
	"fmt"
)

// DefaultPinDir is where ipqosadmin keeps its state.
const DefaultPinDir = "/sys/fs/bpf/sluice-qos"

// ErrNotSupported is returned where the kernel datapath cannot run (not
// Linux, or a kernel without TCX).
var ErrNotSupported = fmt.Errorf("IPQoS kernel datapath not supported on this system: %w", errors.ErrUnsupported)

// State is the IPQoS state, numbered like `ipqosadmin -state`'s exit code.
type State int

// States.
const (
	Disabled  State = 0 // nothing loaded, not enabled
	Error     State = 1 // the state could not be read
	Enabled   State = 2 // enabled but not filtering (no configuration, or adapters not attached)
	Filtering State = 3 // a configuration is loaded and every adapter is attached
)

func (s State) String() string {
	switch s {
	case Disabled:
		return "disabled"
	case Enabled:
		return "enabled, not filtering"
	case Filtering:
		return "enabled, filtering"
	}
	return "error"
}

// Package ipfctl is the control plane between the IPFilter and IPQoS
// commands and the kernel datapaths: it is the only way the commands
// (internal/cmd/...) reach internal/bpf and internal/bpf/qosmark. It owns
//
//   - the ipf backend (Backend): a command line's operations applied as one
//     transaction (Apply), checked against the loaded rules first, with an
//     optional confirm-or-roll-back watchdog, and the dry run (Plan);
//   - the read-only views ipfstat and ipmon use (Reader, LiveLog);
//   - the ippool table store (PoolStore, Pools);
//   - the IPQoS backend (QoS);
//   - where the pins live (PinDir) and the lock beside them.
//
// The datapath keeps no copy of the parsed rules, only their printed text
// (what ipfstat lists). Editing a loaded set therefore re-parses that text,
// edits the rule list and loads the whole set again; a set is always
// replaced atomically, never patched in place.
//
// The ippool tables that `pool/N` and `hash/N` rules use are kept in a
// PoolStore, a JSON file in /run/sluice/pools ($SLUICE_POOL_DIR), not
// among the pins (bpffs holds only BPF objects). A load that names tables
// compiles with the stored ones, and Backend.UpdatePools (ippool -f/-a/-r/...)
// recompiles and reloads the sets that name tables, so the rules follow
// the tables' contents. ipf -D leaves the store alone: the tables are
// configuration, and the next load uses them again.
//
// Concurrency: every change (an ipf command line, an ippool edit, a
// rollback) holds an exclusive flock on the directory beside the pins,
// <pins>-lock, from the moment it reads the loaded rules until it has
// written the new ones, so concurrent runs never lose each other's
// updates. Readers (ipfstat -i/-o) take it shared.
package ipfctl

import (
	"os"

	"sluice/internal/bpf"
)

// PinDirEnv names the environment variable that moves the pins away from
// DefaultPinDir (tests use a private bpffs mount).
const PinDirEnv = "SLUICE_BPF_DIR"

// DefaultPinDir is where the filter datapath is pinned unless $SLUICE_BPF_DIR
// says otherwise.
const DefaultPinDir = bpf.DefaultPinDir

// Tick is IPFilter's clock unit (half a second): ipf -T timeouts, ipfstat's
// TTLs and "IPF Ticks".
const Tick = bpf.Tick

// PinDir returns the pin directory the commands use: $SLUICE_BPF_DIR, or
// DefaultPinDir.
func PinDir() string {
	if d := os.Getenv(PinDirEnv); d != "" {
		return d
	}
	return DefaultPinDir
}

// orDefault resolves "" to DefaultPinDir.
func orDefault(dir string) string {
	if dir == "" {
		return DefaultPinDir
	}
	return dir
}

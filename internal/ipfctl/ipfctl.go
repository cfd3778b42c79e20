// Package ipfctl joins the IPFilter commands (ipf, ipmon, ipfstat) to the
// eBPF datapath of internal/bpf: the ipf Backend, the conversion of kernel
// log records into ipflog records, and where the pins live.
//
// The datapath keeps no copy of the parsed rules, only their printed text
// (what ipfstat lists). Adding to or removing from a non-empty set therefore
// re-parses that text, edits the rule list and loads the whole set again;
// a set is always replaced atomically, never patched in place.
//
// The ippool tables that `pool/N` and `hash/N` rules use are kept in a
// PoolStore, a JSON file in /run/sluice/pools ($SLUICE_POOL_DIR), not
// among the pins (bpffs holds only BPF objects). Every rule load compiles
// with the stored tables, and Backend.UpdatePools (ippool -f/-a/-r/...)
// recompiles and reloads the sets that name tables, so the rules follow
// the tables' contents. ipf -D leaves the store alone: the tables are
// configuration, and the next load uses them again.
package ipfctl

import (
	"os"
)

// PinDirEnv names the environment variable that moves the pins away from
// /sys/fs/bpf/sluice (tests use a private bpffs mount).
const PinDirEnv = "SLUICE_BPF_DIR"

// PinDir returns the pin directory the commands use: $SLUICE_BPF_DIR, or ""
// for the datapath's default.
func PinDir() string { return os.Getenv(PinDirEnv) }

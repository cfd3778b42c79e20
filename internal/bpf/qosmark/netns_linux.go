//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

// Which network namespace IPQoS marks in (see bpf/netns_linux.go for why
// a datapath must know it). The state directory is on a bpffs, seen from
// every network namespace of the mount namespace, while the adapters it
// names, their qdiscs and VLAN priorities are one namespace's. A load
// from another namespace used to replace the configuration (detaching
// the first namespace's adapters as "removed", and removing the qdiscs of
// this namespace's adapters of those names), a -showstats -reset wrote
// drop bases read from this namespace's qdiscs.
//
// The namespace is a pin of its own, "netns", a one-entry array the
// program never reads (bpf.ClaimNetNSPin): IPQoS's maps are made anew by
// every load, but a configuration an older Sluice pinned keeps running on
// its own, and the settings map's layout is what an older ipqosadmin
// checks (settingsSpec). An absent pin is "not claimed": the next load
// that marks an adapter claims it. Unload, which leaves no adapter
// marked, releases it; from another namespace it is the way out (the
// owner was deleted): it detaches the links and removes the
// configuration, and leaves the qdiscs and VLAN priorities, which are
// the owner's (gone with it).

import (
	"path/filepath"

	"sluice/internal/bpf"
)

// netnsPin is the name of the namespace record in the state directory.
const netnsPin = "netns"

// NetNS returns the NetNSID of the network namespace IPQoS marks in: 0
// when none is recorded (nothing loaded since this Sluice, or unloaded).
func NetNS(dir string) (uint64, error) {
	return bpf.NetNSPinOwner(filepath.Join(dir, netnsPin))
}

// CheckNetNS returns bpf.ErrOtherNetNS (wrapped, saying what to do) when
// the IPQoS state in dir is another network namespace's; nil when it is
// this one's or none is recorded.
func CheckNetNS(dir string) error { return qosOwner.CheckPin(dir, filepath.Join(dir, netnsPin)) }

// claimNetNS records the caller's namespace when none is; the caller
// holds the lock.
func claimNetNS(dir string) error { return qosOwner.ClaimPin(dir, filepath.Join(dir, netnsPin)) }

var qosOwner = bpf.NetNSOwner{What: "IPQoS", OwnHint: "ipqosadmin -pindir DIR, or SLUICE_QOS_DIR", Removal: "ipqosadmin -unload"}

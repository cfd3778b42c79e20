package nat

// Which network namespace NAT works in (see bpf/netns_linux.go for why
// a datapath must know it: its pins are seen from every network
// namespace of the mount namespace, while its interfaces, their ifindexes
// and its link pins are one namespace's).
//
// The filter keeps its namespace in a word of its config map. NAT's
// config map has no spare word, and its layout cannot change: a datapath
// pinned by an older Sluice keeps its maps across loads (Load reuses
// them; an incompatible one is refused), and its programs keep running on
// them. So NAT's namespace is a pin of its own, "netns", a one-entry
// array the programs never read (bpf.ClaimNetNSPin). An absent pin (NAT
// loaded by an older Sluice, or not attached yet) is "not claimed": the
// next Attach claims it. Detach, which leaves NAT on no interface,
// releases it.

import (
	"path/filepath"

	"sluice/internal/bpf"
)

// netnsPin is the name of the namespace record in the pin directory.
const netnsPin = "netns"

// NetNS returns the NetNSID of the network namespace NAT works in: 0
// when none is recorded (not attached since this Sluice, or detached).
func (d *Datapath) NetNS() (uint64, error) {
	return bpf.NetNSPinOwner(filepath.Join(d.dir, netnsPin))
}

// CheckNetNS returns bpf.ErrOtherNetNS (wrapped, saying what to do) when
// NAT works in another network namespace than the calling thread's; nil
// when it is this one's or none is recorded.
func (d *Datapath) CheckNetNS() error {
	if d.dir == "" {
		return nil
	}
	return CheckNetNSAt(d.dir)
}

// CheckNetNSAt is CheckNetNS for the NAT datapath pinned in dir, without
// opening it (what every ipf change asks).
func CheckNetNSAt(dir string) error { return natOwner.CheckPin(dir, filepath.Join(dir, netnsPin)) }

// claimNetNS records the caller's namespace as NAT's when none is, and
// refuses another one's.
func (d *Datapath) claimNetNS() error {
	return natOwner.ClaimPin(d.dir, filepath.Join(d.dir, netnsPin))
}

var natOwner = bpf.NetNSOwner{What: "NAT", OwnHint: "SLUICE_BPF_DIR=/sys/fs/bpf/sluice-NAME", Removal: "ipf -D"}

package bpf

// Which network namespace a datapath filters in.
//
// The pins live on a bpffs, which is shared by every network namespace of
// a mount namespace, while what the datapath attaches to and keys by
// (interfaces, their ifindexes, the ifaces map, the link pins
// link_<ifindex>_<hook>) belongs to one network namespace. Two namespaces
// sharing one pin directory (`nsenter --net=… ipf -f` beside the host's
// filter) would each replace the other's rules, and an Attach in the
// second would find the first one's link pin under its own interface's
// ifindex and update that link instead of attaching its interface: the
// interface would pass everything while ipf reported success. So the first
// Attach records its namespace (cfgNetNS), and from then on a change from
// another namespace is refused with what to do (CheckNetNS); reading
// (ipfstat) says whose the interfaces are, and ipf -D works from anywhere
// (removing is how an administrator clears a datapath whose namespace was
// deleted).

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ErrOtherNetNS is returned for a change to a datapath that filters in
// another network namespace than the caller's.
var ErrOtherNetNS = errors.New("the filter datapath pinned there filters another network namespace")

// netnsInodeBit marks an identifier made from the namespace's inode
// number (kernels before 5.14, without SO_NETNS_COOKIE), so that it never
// equals a cookie.
const netnsInodeBit = 1 << 63

// NetNSID returns an identifier of the calling thread's network namespace:
// its cookie (SO_NETNS_COOKIE, never reused while the system runs) or,
// on kernels without it, its nsfs inode number with the top bit set.
// Callers that switch namespaces must hold their OS thread.
func NetNSID() (uint64, error) {
	// a socket belongs to the namespace of the thread that made it
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("network namespace: %w", err)
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, unix.ENOPROTOOPT) {
		return 0, fmt.Errorf("network namespace cookie: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("network namespace: %w", err)
	}
	return st.Ino | netnsInodeBit, nil
}

// NetNS returns the identifier (NetNSID) of the network namespace the
// datapath filters in: 0 until its first Attach, or for a datapath an
// older Sluice attached.
func (d *Datapath) NetNS() uint64 { return d.cfg(cfgNetNS) }

// CheckNetNS returns ErrOtherNetNS (wrapped, saying what to do) when the
// datapath filters in another network namespace than the calling
// thread's; nil when it is this one's or none is recorded yet.
func (d *Datapath) CheckNetNS() error {
	own := d.cfg(cfgNetNS)
	if own == 0 {
		return nil
	}
	here, err := NetNSID()
	if err != nil {
		return err
	}
	return otherNetNS(d.dir, own, here)
}

func otherNetNS(dir string, own, here uint64) error {
	if own == 0 || own == here {
		return nil
	}
	return fmt.Errorf("%s: %w (its rules, state and interfaces are that namespace's): run the command there "+
		"(nsenter --net=/run/netns/NAME …), or give this namespace a datapath of its own "+
		"(SLUICE_BPF_DIR=/sys/fs/bpf/sluice-NAME); ipf -D removes it from any namespace", dir, ErrOtherNetNS)
}

// claimNetNSLocked records the caller's network namespace as the
// datapath's when none is recorded, and refuses another one's. The
// caller holds lockCfg.
func (d *Datapath) claimNetNSLocked() error {
	here, err := NetNSID()
	if err != nil {
		return err
	}
	own := d.cfg(cfgNetNS)
	if own == 0 {
		return d.setCfgLocked(cfgNetNS, here)
	}
	return otherNetNS(d.dir, own, here)
}

// LinkPlace is where a pinned TCX link runs, seen from the caller's
// network namespace (PinnedLinkPlace).
type LinkPlace int

// The places of a pinned link.
const (
	LinkHere    LinkPlace = iota // on the interface with that ifindex here
	LinkDefunct                  // its device went away (the kernel detached it)
	LinkMoved                    // on another interface of this namespace
	LinkOther                    // on an interface of another namespace
)

// PinnedLinkPlace tells where the pinned link l runs against the
// interface ifindex of the caller's namespace. The link's ifindex alone
// cannot tell, as every namespace numbers its interfaces from 1: the
// links attached here at that ifindex are asked for l's ID. Every
// datapath that updates a link pin named after an interface asks first
// (the filter's, NAT's, IPQoS's).
func PinnedLinkPlace(l link.Link, ifindex int, typ ebpf.AttachType) (LinkPlace, error) {
	info, err := l.Info()
	if err != nil {
		return 0, err
	}
	tcx := info.TCX()
	if tcx == nil {
		return 0, errors.New("not a TCX link")
	}
	if tcx.Ifindex == 0 {
		return LinkDefunct, nil
	}
	q, err := link.QueryPrograms(link.QueryOptions{Target: int(tcx.Ifindex), Attach: typ})
	if errors.Is(err, unix.ENODEV) {
		return LinkOther, nil // no interface of that ifindex here
	}
	if err != nil {
		return 0, fmt.Errorf("listing the programs on ifindex %d: %w", tcx.Ifindex, err)
	}
	for _, p := range q.Programs {
		if id, ok := p.LinkID(); ok && id == info.ID {
			if int(tcx.Ifindex) == ifindex {
				return LinkHere, nil
			}
			return LinkMoved, nil
		}
	}
	return LinkOther, nil
}

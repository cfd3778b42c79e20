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
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ErrOtherNetNS is returned for a change to a datapath that filters in
// another network namespace than the caller's (the filter's, NAT's,
// IPQoS's: the error says which).
var ErrOtherNetNS = errors.New("the datapath pinned there works in another network namespace")

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
	return filterOwner.Error(d.dir, own, here)
}

// NetNSOwner names a kind of datapath for the refusals of changes from
// another network namespace than its own: what it is ("the filter",
// "NAT", "IPQoS"), how a namespace gets one of its own (OwnHint), and
// what removes it from any namespace (Removal: the way out when its
// namespace was deleted).
type NetNSOwner struct{ What, OwnHint, Removal string }

var filterOwner = NetNSOwner{"the filter", "SLUICE_BPF_DIR=/sys/fs/bpf/sluice-NAME", "ipf -D"}

// Error is nil when the datapath pinned in dir is this namespace's (own
// is here) or none's (own 0), else ErrOtherNetNS wrapped with what to do.
func (o NetNSOwner) Error(dir string, own, here uint64) error {
	if own == 0 || own == here {
		return nil
	}
	return fmt.Errorf("%s: %w: %s's rules, state and interfaces are that namespace's: run the command there "+
		"(nsenter --net=/run/netns/NAME …), or give this namespace a datapath of its own (%s); "+
		"%s removes it from any namespace", dir, ErrOtherNetNS, o.What, o.OwnHint, o.Removal)
}

// CheckPin is Error for the datapath in dir whose record is the pin at
// path (CheckNetNSPin).
func (o NetNSOwner) CheckPin(dir, path string) error {
	own, here, err := CheckNetNSPin(path)
	if err != nil {
		return err
	}
	return o.Error(dir, own, here)
}

// ClaimPin records the caller's namespace at path when none is
// (ClaimNetNSPin), and is Error of what is recorded.
func (o NetNSOwner) ClaimPin(dir, path string) error {
	own, here, err := ClaimNetNSPin(path)
	if err != nil {
		return err
	}
	return o.Error(dir, own, here)
}

// The datapaths whose map layouts have no spare word for the record (NAT's
// config, whose layout a pinned datapath keeps; IPQoS's, whose maps are
// made anew by every load) keep their namespace in a pin of their own: a
// one-entry array of one NetNSID, only user space reads it. A pinned map's
// layout cannot change under a loaded datapath (its programs and an older
// Sluice's keep using it), while a new pin beside the maps changes none:
// an absent pin (a datapath an older Sluice loaded, or never attached) is
// "not claimed yet", and the next attach claims it.

var netnsPinSpec = ebpf.MapSpec{Name: "netns", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}

// NetNSPinOwner returns the NetNSID recorded in the namespace pin at path:
// 0 when there is no pin, or nothing is recorded.
func NetNSPinOwner(path string) (uint64, error) {
	m, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("namespace record %s: %w", path, err)
	}
	defer m.Close()
	if err := netnsPinSpec.Compatible(m); err != nil {
		return 0, fmt.Errorf("namespace record %s: %w", path, err)
	}
	var v uint64
	if err := m.Lookup(uint32(0), &v); err != nil {
		return 0, fmt.Errorf("namespace record %s: %w", path, err)
	}
	return v, nil
}

// CheckNetNSPin returns the namespace recorded at path and the caller's;
// own is 0 when none is recorded.
func CheckNetNSPin(path string) (own, here uint64, err error) {
	if own, err = NetNSPinOwner(path); err != nil {
		return 0, 0, err
	}
	if here, err = NetNSID(); err != nil {
		return 0, 0, err
	}
	return own, here, nil
}

// ClaimNetNSPin records the caller's namespace at path (making the pin
// when it is missing) unless one is recorded already, and returns the
// namespace recorded and the caller's: they differ when another namespace
// had claimed it (nothing is written then). The caller holds the
// datapath's lock.
func ClaimNetNSPin(path string) (own, here uint64, err error) {
	if own, here, err = CheckNetNSPin(path); err != nil || own != 0 {
		return own, here, err
	}
	m, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		if m, err = ebpf.NewMap(&netnsPinSpec); err == nil {
			if err = m.Pin(path); err != nil {
				m.Close()
			}
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("namespace record %s: %w", path, err)
	}
	defer m.Close()
	if err := m.Update(uint32(0), here, ebpf.UpdateAny); err != nil {
		return 0, 0, fmt.Errorf("namespace record %s: %w", path, err)
	}
	return here, here, nil
}

// ReleaseNetNSPin removes the namespace pin at path (the datapath runs
// on no interface any more: the next attach, from any namespace, claims
// it).
func ReleaseNetNSPin(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("namespace record: %w", err)
	}
	return nil
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
	return filterOwner.Error(d.dir, own, here)
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

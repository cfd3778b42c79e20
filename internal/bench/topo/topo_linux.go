//go:build linux

package topo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetNSDir is where named namespaces are bind-mounted (iproute2's place,
// so `ip netns` shows them while a run is going on).
const NetNSDir = "/run/netns"

// Topo is a running test bed. Create it with New and always Close it.
// Its methods may be called from several goroutines.
type Topo struct {
	opts   Options
	id     string
	remote bool

	nsName [2]string         // named namespaces; empty in remote mode
	ns     [2]netns.NsHandle // open handles; ns[SUT] is the original namespace in remote mode
	hosts  [2]Host

	oldMask *unix.CPUSet // affinity before pinning, restored by Close

	closeOnce sync.Once
	closeErr  error
}

// New builds the test bed. On failure everything it made is removed.
func New(ctx context.Context, opts Options) (*Topo, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	t := &Topo{opts: opts, ns: [2]netns.NsHandle{-1, -1}}
	var err error
	if opts.Remote != "" {
		err = t.setupRemote(ctx)
	} else {
		err = t.setupLocal()
	}
	if err == nil {
		err = t.pin()
	}
	if err != nil {
		cerr := t.Close()
		return nil, errors.Join(err, cerr)
	}
	return t, nil
}

func (o *Options) validate() error {
	if o.Prefix == "" {
		o.Prefix = "slb"
	}
	if strings.ContainsAny(o.Prefix, "/-. ") || len(o.Prefix) > 16 {
		return fmt.Errorf("topo: bad prefix %q (letters and digits, at most 16)", o.Prefix)
	}
	if o.MTU != 0 && (o.MTU < 68 || o.MTU > 65535) {
		return fmt.Errorf("topo: MTU %d out of range 68..65535", o.MTU)
	}
	for _, c := range o.CPUs {
		if c < 0 || c >= 1024 {
			return fmt.Errorf("topo: CPU %d out of range", c)
		}
	}
	return nil
}

// ID is the unique name of this test bed (the namespaces' common stem).
func (t *Topo) ID() string { return t.id }

// Remote reports whether the peer is another machine.
func (t *Topo) Remote() bool { return t.remote }

// Host returns the description of one end.
func (t *Topo) Host(r Role) *Host {
	h := t.hosts[r]
	return &h
}

// NetNSPath returns the path of a host's namespace ("" in remote mode for
// the SUT, meaning the current namespace).
func (t *Topo) NetNSPath(r Role) string { return t.hosts[r].NetNS }

// NetNSNames returns the names of the namespaces made (none in remote mode).
func (t *Topo) NetNSNames() []string {
	var out []string
	for _, n := range t.nsName {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Links returns the names of the two veth ends (SUT first).
func (t *Topo) Links() [2]string { return [2]string{t.hosts[SUT].Link, t.hosts[Peer].Link} }

// NSHandle returns an open handle (a file descriptor) of the host's
// namespace, owned by the Topo: do not close it.
func (t *Topo) NSHandle(r Role) (int, error) {
	if t.remote && r == Peer {
		return -1, ErrRemote
	}
	return int(t.ns[r]), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

func (t *Topo) setupLocal() error {
	rnd := randomHex(4)
	t.id = fmt.Sprintf("%s-%d-%s", t.opts.Prefix, os.Getpid(), rnd)
	t.nsName = [2]string{t.id + "-sut", t.id + "-peer"}
	links := [2]string{"sl" + rnd + "s", "sl" + rnd + "p"}
	for r := range t.nsName {
		h, err := newNamed(t.nsName[r])
		if err != nil {
			t.nsName[r] = "" // nothing to delete
			return fmt.Errorf("topo: creating namespace %s: %w", t.nsName[r], err)
		}
		t.ns[r] = h
	}
	addrs := [2]netip.Addr{SUTAddr, PeerAddr}
	for r := range t.hosts {
		t.hosts[r] = Host{
			Role:     Role(r),
			NetNS:    filepath.Join(NetNSDir, t.nsName[r]),
			Link:     links[r],
			Addr:     addrs[r],
			PeerAddr: addrs[1-r],
			topo:     t,
		}
	}

	sh, err := netlink.NewHandleAt(t.ns[SUT])
	if err != nil {
		return fmt.Errorf("topo: netlink in %s: %w", t.nsName[SUT], err)
	}
	defer sh.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: links[SUT], MTU: t.opts.MTU},
		PeerName:      links[Peer],
		PeerNamespace: netlink.NsFd(int(t.ns[Peer])),
	}
	if err := sh.LinkAdd(veth); err != nil {
		return fmt.Errorf("topo: adding veth %s/%s: %w", links[SUT], links[Peer], err)
	}
	for r := range t.hosts {
		if err := t.configureHost(Role(r)); err != nil {
			return err
		}
	}
	return nil
}

func (t *Topo) configureHost(r Role) error {
	host := &t.hosts[r]
	h, err := netlink.NewHandleAt(t.ns[r])
	if err != nil {
		return fmt.Errorf("topo: netlink in %s: %w", t.nsName[r], err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("topo: %s: finding lo: %w", r, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("topo: %s: lo up: %w", r, err)
	}
	link, err := h.LinkByName(host.Link)
	if err != nil {
		return fmt.Errorf("topo: %s: finding %s: %w", r, host.Link, err)
	}
	host.Index = link.Attrs().Index
	if t.opts.MTU != 0 && link.Attrs().MTU != t.opts.MTU {
		if err := h.LinkSetMTU(link, t.opts.MTU); err != nil {
			return fmt.Errorf("topo: %s: MTU %d: %w", r, t.opts.MTU, err)
		}
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: host.Addr.AsSlice(), Mask: net.CIDRMask(prefixLen4, 32)}}
	if err := h.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("topo: %s: adding %s: %w", r, host.Addr, err)
	}
	if err := t.Do(r, func() error { return setOffloads(host.Link, t.opts) }); err != nil {
		return fmt.Errorf("topo: %s: %w", r, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("topo: %s: %s up: %w", r, host.Link, err)
	}
	return nil
}

func (t *Topo) setupRemote(ctx context.Context) error {
	t.remote = true
	t.id = fmt.Sprintf("%s-%d-%s", t.opts.Prefix, os.Getpid(), randomHex(4))
	peer, err := netip.ParseAddr(t.opts.Remote)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", t.opts.Remote)
		if lerr != nil || len(ips) == 0 {
			return fmt.Errorf("topo: remote %q: not an address and cannot be resolved: %v", t.opts.Remote, lerr)
		}
		peer = ips[0]
	}
	peer = peer.Unmap()
	self, err := netns.Get()
	if err != nil {
		return fmt.Errorf("topo: current namespace: %w", err)
	}
	t.ns[SUT] = self
	routes, err := netlink.RouteGet(peer.AsSlice())
	if err != nil || len(routes) == 0 {
		return fmt.Errorf("topo: no route to remote %s: %v", peer, err)
	}
	link, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return fmt.Errorf("topo: interface towards %s: %w", peer, err)
	}
	src, _ := netip.AddrFromSlice(routes[0].Src)
	sut := Host{Role: SUT, Link: link.Attrs().Name, Index: link.Attrs().Index, topo: t}
	p := Host{Role: Peer, topo: t}
	if peer.Is4() {
		sut.Addr, sut.PeerAddr = src.Unmap(), peer
		p.Addr, p.PeerAddr = peer, src.Unmap()
	} else {
		sut.Addr6, sut.PeerAddr6 = src, peer
		p.Addr6, p.PeerAddr6 = peer, src
	}
	t.hosts = [2]Host{sut, p}
	return nil
}

// newNamed creates a named namespace without leaving the calling thread in it.
func newNamed(name string) (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	defer orig.Close()
	h, err := netns.NewNamed(name)
	if err == nil {
		// the veth ends made or moved in later take the namespace's
		// defaults (the thread is in it now)
		if err = noIPv6(); err != nil {
			h.Close()
			_ = netns.DeleteNamed(name)
		}
	}
	if serr := netns.Set(orig); serr != nil {
		// The thread is in the wrong namespace: keep it locked so the
		// runtime discards it when this goroutine exits.
		if err == nil {
			h.Close()
			_ = netns.DeleteNamed(name)
		}
		return -1, errors.Join(err, fmt.Errorf("restoring namespace: %w", serr))
	}
	runtime.UnlockOSThread()
	if err != nil {
		// NewNamed may have left the mount point file behind.
		_ = os.Remove(filepath.Join(NetNSDir, name))
		return -1, err
	}
	return h, nil
}

// noIPv6 switches IPv6 off in the calling thread's namespace, for the
// links there and those made or moved in later. The test beds carry IPv4
// only (no configuration or test sends IPv6 through them); with IPv6 on,
// the kernel sends router solicitations, MLD reports and neighbour
// solicitations of its own after a link comes up, and each runs the
// filter under test during measured runs. A kernel without IPv6 has no
// such files, and nothing to switch off.
func noIPv6() error {
	for _, k := range []string{"all", "default"} {
		err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("switching IPv6 off: %w", err)
		}
	}
	return nil
}

// Do runs fn on an OS thread inside the namespace of host r.
func (t *Topo) Do(r Role, fn func() error) error {
	if r != SUT && r != Peer {
		return fmt.Errorf("topo: bad role %d", int(r))
	}
	if t.remote && r == Peer {
		return ErrRemote
	}
	return doIn(t.ns[r], r.String(), fn)
}

// doIn runs fn on an OS thread inside the namespace target (named what
// for errors).
func doIn(target netns.NsHandle, what string, fn func() error) error {
	if !target.IsOpen() {
		return fmt.Errorf("topo: %s namespace is closed", what)
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("topo: current namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("topo: entering %s namespace: %w", what, err)
	}
	restored := false
	defer func() {
		// On a panic in fn the thread stays locked and is discarded.
		if restored {
			runtime.UnlockOSThread()
		}
	}()
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return errors.Join(ferr, fmt.Errorf("topo: leaving %s namespace: %w", what, err))
	}
	restored = true
	return ferr
}

// Close removes the veth pair and the namespaces and restores the CPU
// affinity. It is safe to call more than once.
func (t *Topo) Close() error {
	t.closeOnce.Do(func() {
		var errs []error
		if t.oldMask != nil {
			if err := setAffinityAll(t.oldMask); err != nil {
				errs = append(errs, fmt.Errorf("topo: restoring CPU affinity: %w", err))
			}
		}
		for r := range t.nsName {
			if t.nsName[r] == "" {
				continue
			}
			// Delete the veth explicitly: a namespace that something
			// still references (a leaked socket) would otherwise keep
			// it alive after the unmount.
			if t.ns[r].IsOpen() && t.hosts[r].Link != "" {
				if h, err := netlink.NewHandleAt(t.ns[r]); err == nil {
					if l, err := h.LinkByName(t.hosts[r].Link); err == nil {
						if err := h.LinkDel(l); err != nil {
							errs = append(errs, fmt.Errorf("topo: deleting %s: %w", t.hosts[r].Link, err))
						}
					}
					h.Close()
				}
			}
			if err := netns.DeleteNamed(t.nsName[r]); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("topo: deleting namespace %s: %w", t.nsName[r], err))
			}
		}
		for r := range t.ns {
			if t.ns[r].IsOpen() {
				t.ns[r].Close()
			}
			t.ns[r] = -1
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}

// Sweep removes namespaces named PREFIX-PID-… whose process no longer
// exists (left by a run that was killed with SIGKILL). It returns the
// names removed. Namespaces of live processes are left alone.
func Sweep(prefix string) ([]string, error) {
	if prefix == "" {
		prefix = "slb"
	}
	ents, err := os.ReadDir(NetNSDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if len(parts) != 4 || parts[0] != prefix {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, 0); err == nil || errors.Is(err, unix.EPERM) {
			continue // owner alive
		}
		if err := netns.DeleteNamed(e.Name()); err != nil {
			errs = append(errs, fmt.Errorf("topo: sweeping %s: %w", e.Name(), err))
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// ethtoolValue is struct ethtool_value from <linux/ethtool.h>.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with the ifr_data member.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// setOffloads uses the legacy ethtool ioctls, which veth still honours
// and which need no generic-netlink family lookup. It must run inside
// the link's namespace.
func setOffloads(link string, o Options) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	for _, f := range []struct {
		name string
		cmd  uint32
		t    Toggle
	}{{"gro", unix.ETHTOOL_SGRO, o.GRO}, {"gso", unix.ETHTOOL_SGSO, o.GSO}, {"tso", unix.ETHTOOL_STSO, o.TSO}} {
		if f.t == Default {
			continue
		}
		v := ethtoolValue{cmd: f.cmd}
		if f.t == On {
			v.data = 1
		}
		var ifr ifreqData
		copy(ifr.name[:], link)
		ifr.data = unsafe.Pointer(&v)
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		runtime.KeepAlive(&v)
		if errno != 0 {
			return fmt.Errorf("ethtool %s %s on %s: %w", f.name, f.t, link, errno)
		}
	}
	return nil
}

// Offloads reads back GRO, GSO and TSO of a host's link (for the record
// in the results and for tests).
func (t *Topo) Offloads(r Role) (gro, gso, tso bool, err error) {
	err = t.Do(r, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		get := func(cmd uint32) (bool, error) {
			v := ethtoolValue{cmd: cmd}
			var ifr ifreqData
			copy(ifr.name[:], t.hosts[r].Link)
			ifr.data = unsafe.Pointer(&v)
			_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
			runtime.KeepAlive(&v)
			if errno != 0 {
				return false, errno
			}
			return v.data != 0, nil
		}
		var e1, e2, e3 error
		gro, e1 = get(unix.ETHTOOL_GGRO)
		gso, e2 = get(unix.ETHTOOL_GGSO)
		tso, e3 = get(unix.ETHTOOL_GTSO)
		return errors.Join(e1, e2, e3)
	})
	return gro, gso, tso, err
}

func (t *Topo) pin() error {
	if len(t.opts.CPUs) == 0 {
		return nil
	}
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("topo: reading CPU affinity: %w", err)
	}
	var set unix.CPUSet
	for _, c := range t.opts.CPUs {
		set.Set(c)
	}
	t.oldMask = &old
	if err := setAffinityAll(&set); err != nil {
		return fmt.Errorf("topo: pinning to CPUs %v: %w", t.opts.CPUs, err)
	}
	return nil
}

// setAffinityAll applies a mask to every thread of the process: Go may
// run the client and the in-process netserver on any of its threads.
func setAffinityAll(set *unix.CPUSet) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

//go:build linux

package tc

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"sluice/internal/qos"
)

// leafMajor is the first handle major of the fq_codel leaves.
const leafMajor = 0x5400

// quantum keeps HTB's DRR quantum within what the kernel accepts
// without warnings, roughly proportional to the class rate.
func quantum(rate uint64) uint32 {
	return uint32(min(max(rate/8/10, 3000), 200000))
}

// burst is the bucket size in bytes: 10 ms at the rate, but at least one
// 64 KiB GSO packet, which a veth or TSO device hands to the qdisc whole.
func burst(rate uint64) uint32 {
	return uint32(max(rate/8/100, 65536+1600))
}

func htbClass(link netlink.Link, parent, minor uint16, rate, ceil uint64) *netlink.HtbClass {
	c := netlink.NewHtbClass(netlink.ClassAttrs{
		LinkIndex: link.Attrs().Index,
		Parent:    netlink.MakeHandle(qos.HTBMajor, parent),
		Handle:    netlink.MakeHandle(qos.HTBMajor, minor),
	}, netlink.HtbClassAttrs{Rate: rate, Ceil: ceil, Buffer: burst(rate), Cbuffer: burst(ceil), Quantum: quantum(rate)})
	if parent == 0 {
		c.Parent = netlink.MakeHandle(qos.HTBMajor, 0)
	}
	return c
}

// Apply replaces the adapter's root qdisc with the plan's HTB tree.
func Apply(p *Plan) error {
	link, err := netlink.LinkByName(p.Ifname)
	if err != nil {
		return fmt.Errorf("adapter %s: %w", p.Ifname, err)
	}
	if err := Remove(p.Ifname); err != nil {
		return err
	}
	q := netlink.NewHtb(netlink.QdiscAttrs{
		LinkIndex: link.Attrs().Index,
		Handle:    netlink.MakeHandle(qos.HTBMajor, 0),
		Parent:    netlink.HANDLE_ROOT,
	})
	q.Defcls = qos.DefaultClass
	if err := netlink.QdiscReplace(q); err != nil {
		return fmt.Errorf("adapter %s: adding htb qdisc: %w", p.Ifname, err)
	}
	if err := netlink.ClassAdd(htbClass(link, 0, qos.RootClass, p.Link, p.Link)); err != nil {
		return fmt.Errorf("adapter %s: adding root class: %w", p.Ifname, err)
	}
	for i, c := range append(append([]Class(nil), p.Classes...), p.Default) {
		if err := netlink.ClassAdd(htbClass(link, qos.RootClass, c.Minor, c.Rate, c.Ceil)); err != nil {
			return fmt.Errorf("adapter %s: adding class %x:%x: %w", p.Ifname, qos.HTBMajor, c.Minor, err)
		}
		leaf := netlink.NewFqCodel(netlink.QdiscAttrs{
			LinkIndex: link.Attrs().Index,
			Parent:    netlink.MakeHandle(qos.HTBMajor, c.Minor),
			Handle:    netlink.MakeHandle(uint16(leafMajor+i), 0),
		})
		if err := netlink.QdiscAdd(leaf); err != nil {
			// A kernel without fq_codel keeps HTB's default pfifo leaf
			// (limit = the device's txqueuelen).
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("adapter %s: adding leaf qdisc: %w", p.Ifname, err)
		}
	}
	return nil
}

// Installed reports whether the adapter's root qdisc is Sluice's HTB.
func Installed(ifname string) (bool, error) {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return false, err
	}
	qs, err := netlink.QdiscList(link)
	if err != nil {
		return false, err
	}
	for _, q := range qs {
		a := q.Attrs()
		if a.Parent == netlink.HANDLE_ROOT && a.Handle == netlink.MakeHandle(qos.HTBMajor, 0) && q.Type() == "htb" {
			return true, nil
		}
	}
	return false, nil
}

// Remove deletes the adapter's root qdisc if it is Sluice's HTB; any
// other qdisc is left alone.
func Remove(ifname string) error {
	ok, err := Installed(ifname)
	if err != nil || !ok {
		return err
	}
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return err
	}
	err = netlink.QdiscDel(&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(qos.HTBMajor, 0), Parent: netlink.HANDLE_ROOT,
	}, QdiscType: "htb"})
	if err != nil {
		return fmt.Errorf("adapter %s: removing htb qdisc: %w", ifname, err)
	}
	return nil
}

// Drops returns the packets dropped in each HTB class (class drops plus
// its leaf qdisc's drops), keyed by class minor.
func Drops(ifname string) (map[uint16]uint64, error) {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return nil, err
	}
	out := map[uint16]uint64{}
	classes, err := netlink.ClassList(link, netlink.MakeHandle(qos.HTBMajor, 0))
	if err != nil {
		return nil, err
	}
	for _, c := range classes {
		a := c.Attrs()
		if a.Statistics != nil && a.Statistics.Queue != nil {
			out[uint16(a.Handle&0xffff)] += uint64(a.Statistics.Queue.Drops)
		}
	}
	qs, err := netlink.QdiscList(link)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		a := q.Attrs()
		if a.Parent>>16 == qos.HTBMajor && a.Statistics != nil && a.Statistics.Queue != nil {
			out[uint16(a.Parent&0xffff)] += uint64(a.Statistics.Queue.Drops)
		}
	}
	return out, nil
}

// ErrNotVLAN is returned by SetEgressQoS for a device that is not a VLAN.
var ErrNotVLAN = errors.New("not a VLAN device")

// SetEgressQoS adds skb->priority → 802.1p mappings to a VLAN device's
// egress QoS map (a value of 0 removes the mapping's effect).
func SetEgressQoS(ifname string, m map[uint32]uint32) error {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return err
	}
	v, ok := link.(*netlink.Vlan)
	if !ok {
		return fmt.Errorf("adapter %s: %w", ifname, ErrNotVLAN)
	}
	mod := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Index: v.Index, Name: v.Name, ParentIndex: v.ParentIndex}, VlanId: v.VlanId, VlanProtocol: v.VlanProtocol, EgressQosMap: m}
	if err := netlink.LinkModify(mod); err != nil {
		return fmt.Errorf("adapter %s: setting egress qos map: %w", ifname, err)
	}
	return nil
}

// IsVLAN reports whether the interface is a VLAN device.
func IsVLAN(ifname string) bool {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return false
	}
	_, ok := link.(*netlink.Vlan)
	return ok
}

// ethtoolCmd is struct ethtool_cmd (linux/ethtool.h), for ETHTOOL_GSET.
type ethtoolCmd struct {
	Cmd, Supported, Advertising                                 uint32
	Speed                                                       uint16
	Duplex, Port, PhyAddress, Transceiver, Autoneg, MdioSupport uint8
	Maxtxpkt, Maxrxpkt                                          uint32
	SpeedHi                                                     uint16
	EthTpMdix, EthTpMdixCtrl                                    uint8
	LpAdvertising                                               uint32
	Reserved                                                    [2]uint32
}

const ethtoolGSet = 1

// LinkSpeed returns the interface speed in bits/s, 0 if unknown. It asks
// the driver through SIOCETHTOOL on a socket of the calling thread's
// network namespace (sysfs would show the namespace it was mounted in).
func LinkSpeed(ifname string) uint64 {
	if len(ifname) >= unix.IFNAMSIZ {
		return 0
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	cmd := &ethtoolCmd{Cmd: ethtoolGSet} // heap: its address is handed to the kernel
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(cmd)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(cmd)
	if errno != 0 {
		return 0
	}
	mbit := uint32(cmd.SpeedHi)<<16 | uint32(cmd.Speed)
	if mbit == 0 || mbit == 0xffff || mbit == 0xffffffff {
		return 0
	}
	return uint64(mbit) * 1000000
}

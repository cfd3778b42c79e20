package bpf

import (
	"fmt"
	"net"
	"net/netip"
)

// SetInterfaceAddr records the addresses the datapath answers from on
// interface ifindex (return-icmp's source, ipf-reference §1.3.15): the
// first IPv4 and the first IPv6 address given are kept; an invalid
// address leaves that family unset, and such replies use the original
// destination as return-icmp-as-dest does.
func (d *Datapath) SetInterfaceAddr(ifindex int, addrs ...netip.Addr) error {
	var ia filterIfAddr
	var have4, have6 bool
	for _, a := range addrs {
		switch {
		case a.Is4() && !have4:
			b := a.As4()
			ia.V4 = nativeWord(b[:])
			have4 = true
		case a.Is6() && !a.Is4In6() && !have6:
			addrWords(a, &ia.V6)
			have6 = true
		}
	}
	if err := d.objs.Ifaddrs.Put(uint32(ifindex), &ia); err != nil {
		return fmt.Errorf("writing addresses of interface %d: %w", ifindex, err)
	}
	return nil
}

// SyncInterfaces reads the interface addresses of the calling thread's
// network namespace into the datapath (IPFilter's ipf -y). LoadRules
// calls it, so a rule set replies from the addresses the interfaces had
// when it was loaded; call both from the namespace the datapath filters.
func (d *Datapath) SyncInterfaces() error {
	ifcs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("listing interfaces: %w", err)
	}
	// forget interfaces that have gone: their index may be reused
	live := map[uint32]bool{}
	for _, ifc := range ifcs {
		live[uint32(ifc.Index)] = true
	}
	var (
		k     uint32
		v     filterIfAddr
		stale []uint32
	)
	it := d.objs.Ifaddrs.Iterate()
	for it.Next(&k, &v) {
		if !live[k] {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		_ = d.objs.Ifaddrs.Delete(k)
	}
	for _, ifc := range ifcs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue // the interface went away meanwhile
		}
		var list []netip.Addr
		for _, a := range addrs {
			if pn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(pn.IP); ok {
					ip = ip.Unmap()
					if ip.Is6() && ip.IsLinkLocalUnicast() {
						continue // a reply from fe80:: would not route
					}
					list = append(list, ip)
				}
			}
		}
		if err := d.SetInterfaceAddr(ifc.Index, list...); err != nil {
			return err
		}
	}
	return nil
}

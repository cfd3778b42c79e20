package bpf

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// tcFilterName marks the tc filters of the clsact fallback so Detach finds
// them again from any process.
const tcFilterName = "sluice_filter"

// Attach hooks the filter on the ingress and egress of the named
// interfaces (all non-loopback interfaces when names is empty) with TCX,
// falling back to a clsact qdisc with direct-action filters on kernels
// without TCX. Links are pinned, so they outlive the process; attaching an
// interface that is already attached updates it to the current program.
func (d *Datapath) Attach(names []string) error {
	if d.dir == "" {
		return errors.New("attach: datapath is not pinned")
	}
	if d.final != "" {
		// links pinned in the staging directory would be cleared with
		// it if the load were interrupted, and filter meanwhile with a
		// datapath no other process can see
		return errors.New("attach: datapath not published yet")
	}
	if d.objs.SluiceIngress == nil {
		return errNoPrograms
	}
	ifcs, err := pickInterfaces(names)
	if err != nil {
		return err
	}
	// before anything is written: the ifaces map's slots are by ifindex,
	// which means something in one namespace only
	unlock := d.lockCfg()
	err = d.claimNetNSLocked()
	unlock()
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	for _, ifc := range ifcs {
		l2 := uint32(14)
		if len(ifc.HardwareAddr) == 0 {
			l2 = 0 // L3 device (tun, wireguard): no link-layer header
		}
		// the array slot of the ifindex holds it with the length
		if err := d.objs.Ifaces.Put(uint32(ifc.Index)%ifaceSlots, uint32(ifc.Index)<<8|l2); err != nil {
			return fmt.Errorf("attach %s: %w", ifc.Name, err)
		}
		if l2 != 14 && d.cfg(cfgAnyL3) == 0 {
			// packets then look their link-layer length up (the
			// programs are re-specialised for it before they run there)
			if err := d.setCfg(cfgAnyL3, 1); err != nil {
				return fmt.Errorf("attach %s: %w", ifc.Name, err)
			}
		}
	}
	// the programs attached are the ones in force (another process may
	// have re-specialised them since this one loaded): none changes them
	// while the links are made
	unlock = d.lockCfg()
	defer unlock()
	if err := d.specialiseLocked(-1, false); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	for _, ifc := range ifcs {
		for _, dir := range []struct {
			name string
			prog *ebpf.Program
			typ  ebpf.AttachType
			tc   uint32
		}{
			{"ingress", d.objs.SluiceIngress, ebpf.AttachTCXIngress, netlink.HANDLE_MIN_INGRESS},
			{"egress", d.objs.SluiceEgress, ebpf.AttachTCXEgress, netlink.HANDLE_MIN_EGRESS},
		} {
			pin := filepath.Join(d.dir, fmt.Sprintf("link_%d_%s", ifc.Index, dir.name))
			if l, err := link.LoadPinnedLink(pin, nil); err == nil {
				// the pin's name says which ifindex, not which
				// namespace's, nor whether its device is still there
				place, err := PinnedLinkPlace(l, ifc.Index, dir.typ)
				switch {
				case err != nil:
					l.Close()
					return fmt.Errorf("attach %s %s: reading the pinned link: %w", ifc.Name, dir.name, err)
				case place == LinkDefunct:
					// an earlier device of that ifindex went away:
					// attach this one afresh
					err = l.Unpin()
					l.Close()
					if err != nil {
						return fmt.Errorf("attach %s %s: unpinning the defunct link: %w", ifc.Name, dir.name, err)
					}
				case place == LinkOther || place == LinkMoved:
					l.Close()
					return fmt.Errorf("attach %s %s: %s holds a link of another interface (of another network namespace?), "+
						"so %s cannot be attached: ipf -D removes the datapath", ifc.Name, dir.name, pin, ifc.Name)
				default:
					err = l.Update(dir.prog)
					l.Close()
					if err != nil {
						return fmt.Errorf("attach %s %s: updating link: %w", ifc.Name, dir.name, err)
					}
					continue
				}
			}
			var l link.Link
			err := ebpf.ErrNotSupported
			if !d.forceTC {
				// in front of other tools' programs (chain_linux.go)
				l, err = d.attachFirst(ifc.Index, dir.prog, dir.typ)
			}
			if errors.Is(err, ebpf.ErrNotSupported) {
				prog, err := d.clsactProg(dir.name == "egress")
				if err != nil {
					return fmt.Errorf("attach %s %s (tc fallback): %w", ifc.Name, dir.name, err)
				}
				if err := attachClsact(ifc.Index, prog, dir.tc); err != nil {
					return fmt.Errorf("attach %s %s (tc fallback): %w", ifc.Name, dir.name, err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("attach %s %s: %w", ifc.Name, dir.name, err)
			}
			err = l.Pin(pin)
			l.Close()
			if err != nil {
				return fmt.Errorf("attach %s %s: pinning link: %w", ifc.Name, dir.name, err)
			}
		}
	}
	if d.natin.dm != nil && d.natin.links == nil {
		// NAT inside the filter: the prefix at the head of the new
		// interfaces' ingress too
		return d.attachPrefixes()
	}
	return nil
}

// clsactProg returns the program for a clsact filter: the generic one,
// the fallback's programs are never replaced (spec_linux.go). The caller
// holds lockCfg.
func (d *Datapath) clsactProg(egress bool) (*ebpf.Program, error) {
	if d.cfg(cfgClsact) == 0 {
		if err := d.setCfgLocked(cfgClsact, 1); err != nil {
			return nil, err
		}
	}
	if egress {
		return d.objs.SluiceEgress, nil
	}
	return d.objs.SluiceIngress, nil
}

func pickInterfaces(names []string) ([]net.Interface, error) {
	if len(names) > 0 {
		var out []net.Interface
		for _, n := range names {
			ifc, err := net.InterfaceByName(n)
			if err != nil {
				return nil, fmt.Errorf("attach: interface %s: %w", n, err)
			}
			out = append(out, *ifc)
		}
		return out, nil
	}
	all, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("attach: listing interfaces: %w", err)
	}
	var out []net.Interface
	for _, ifc := range all {
		if ifc.Flags&net.FlagLoopback == 0 {
			out = append(out, ifc)
		}
	}
	return out, nil
}

func attachClsact(ifindex int, prog *ebpf.Program, parent uint32) error {
	qd := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscReplace(qd); err != nil {
		return fmt.Errorf("adding clsact: %w", err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: ifindex, Parent: parent, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd:           prog.FD(),
		Name:         tcFilterName,
		DirectAction: true,
	}
	if err := netlink.FilterReplace(f); err != nil {
		return fmt.Errorf("adding filter: %w", err)
	}
	return nil
}

// Detach removes the filter from every interface it is attached to.
func (d *Datapath) Detach() error {
	var errs []error
	if d.dir != "" {
		ents, err := os.ReadDir(d.dir)
		if err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), "link_") {
				continue
			}
			p := filepath.Join(d.dir, e.Name())
			l, err := link.LoadPinnedLink(p, nil)
			if err == nil {
				// unpinning drops the last reference and detaches
				if err := l.Unpin(); err != nil {
					errs = append(errs, err)
				}
				l.Close()
			} else if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// clsact fallback filters carry our name
	if err := detachClsact(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Attached returns the ifindexes the filter is attached to with TCX.
func (d *Datapath) Attached() []int {
	var out []int
	ents, _ := os.ReadDir(d.dir)
	for _, e := range ents {
		var idx int
		var dir string
		if n, _ := fmt.Sscanf(strings.ReplaceAll(e.Name(), "_", " "), "link %d %s", &idx, &dir); n == 2 && dir == "ingress" {
			out = append(out, idx)
		}
	}
	return out
}

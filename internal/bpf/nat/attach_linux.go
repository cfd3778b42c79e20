//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

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

	"sluice/internal/bpf"
)

// tcFilterName marks the tc filters of the clsact fallback.
const tcFilterName = "sluice_nat"

// The clsact fallback's places: inbound NAT shares the filter's priority
// 1 with a handle of its own (cls_bpf runs the filter added last first),
// outbound NAT comes after the filter at priority 2.
const (
	tcPrioIn   = 1
	tcPrioOut  = 2
	tcHandleIn = 0x4e41 // "NA"
)

// Verdicts of Run.
const (
	VerdictNext = -1 // TC_ACT_UNSPEC: on to the next program (the filter)
	VerdictPass = 0  // TC_ACT_OK: passed, the filter skipped (a proxy's data connection)
	VerdictShot = 2  // TC_ACT_SHOT: dropped (no translation could be made)
)

// Run runs the ingress (out false) or egress program over an Ethernet frame
// arriving on ifindex (0: the loopback device), with BPF_PROG_TEST_RUN, and
// returns the program's verdict and the frame as it left.
func (d *Datapath) Run(out bool, frame []byte, ifindex int) (int32, []byte, error) {
	prog := d.objs.NatIngress
	if out {
		prog = d.objs.NatEgress
	}
	return d.run(prog, frame, ifindex)
}

// RunPre runs the egress program that comes before the filter (the ftp
// proxy's data connections) as Run does.
func (d *Datapath) RunPre(frame []byte, ifindex int) (int32, []byte, error) {
	return d.run(d.objs.NatEgressPre, frame, ifindex)
}

func (d *Datapath) run(prog *ebpf.Program, frame []byte, ifindex int) (int32, []byte, error) {
	if prog == nil {
		return 0, nil, errors.New("the NAT programs are not loaded")
	}
	ret, out, err := bpf.RunTC(prog, frame, ifindex)
	if err != nil {
		return 0, nil, fmt.Errorf("running the NAT program: %w", err)
	}
	return ret, out, nil
}

// Program returns the ingress or egress program (benchmarks, statistics).
func (d *Datapath) Program(out bool) *ebpf.Program {
	if out {
		return d.objs.NatEgress
	}
	return d.objs.NatIngress
}

func linkPin(dir string, ifindex int, which string) string {
	return filepath.Join(dir, fmt.Sprintf("link_%d_%s", ifindex, which))
}

// Attach hooks NAT onto the named interfaces: inbound at the head of the
// TCX ingress chain (before the filter), outbound at the tail of the
// egress chain (after it). Links are pinned; an interface that is
// already attached is updated to the current programs. Interfaces without
// a link-layer header (tun, wireguard) are recorded so the programs find
// the IP header.
func (d *Datapath) Attach(names []string) error {
	if d.dir == "" {
		return errors.New("attach: the NAT datapath is not pinned")
	}
	if d.objs.NatIngress == nil || d.objs.NatEgress == nil || d.objs.NatEgressPre == nil {
		return errors.New("attach: the NAT programs are not loaded")
	}
	if len(names) > 0 {
		// the interfaces are this namespace's (netns_linux.go): refused
		// from another one, claimed once attached (an Attach refused by
		// a link pin claims nothing)
		if err := d.CheckNetNS(); err != nil {
			return err
		}
	}
	for _, name := range names {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			return fmt.Errorf("attach NAT to %s: %w", name, err)
		}
		if len(ifc.HardwareAddr) == 0 {
			if err := d.objs.L2lens.Update(uint32(ifc.Index), uint32(0), ebpf.UpdateAny); err != nil {
				return err
			}
			if err := d.setCfg(cfgL3Dev, 1); err != nil {
				return err
			}
		}
		hooks := []struct {
			which  string
			prog   *ebpf.Program
			typ    ebpf.AttachType
			anchor link.Anchor
			parent uint32
			prio   uint16
			handle uint32
		}{
			{"ingress", d.objs.NatIngress, ebpf.AttachTCXIngress, link.Head(), netlink.HANDLE_MIN_INGRESS, tcPrioIn, tcHandleIn},
			{"egress", d.objs.NatEgress, ebpf.AttachTCXEgress, link.Tail(), netlink.HANDLE_MIN_EGRESS, tcPrioOut, 1},
		}
		// the ftp proxy's data connections pass the filter outbound
		// through a program placed before it, only while ftp rules are
		// loaded
		pre := linkPin(d.dir, ifc.Index, "egresspre")
		if d.cfg(cfgFTPRules) != 0 {
			hooks = append(hooks, struct {
				which  string
				prog   *ebpf.Program
				typ    ebpf.AttachType
				anchor link.Anchor
				parent uint32
				prio   uint16
				handle uint32
			}{"egresspre", d.objs.NatEgressPre, ebpf.AttachTCXEgress, link.Head(), netlink.HANDLE_MIN_EGRESS, tcPrioIn, tcHandleIn})
		} else if l, err := link.LoadPinnedLink(pre, nil); err == nil {
			l.Unpin()
			l.Close()
		}
		for _, h := range hooks {
			pin := linkPin(d.dir, ifc.Index, h.which)
			if l, err := link.LoadPinnedLink(pin, nil); err == nil {
				// a pin names an ifindex, not whose namespace's, nor
				// whether its device is still there (bpf/netns_linux.go)
				place, err := bpf.PinnedLinkPlace(l, ifc.Index, h.typ)
				switch {
				case err != nil:
					l.Close()
					return fmt.Errorf("attach NAT to %s %s: reading the pinned link: %w", name, h.which, err)
				case place == bpf.LinkDefunct:
					err = l.Unpin()
					l.Close()
					if err != nil {
						return fmt.Errorf("attach NAT to %s %s: unpinning the defunct link: %w", name, h.which, err)
					}
				case place == bpf.LinkOther || place == bpf.LinkMoved:
					l.Close()
					return fmt.Errorf("attach NAT to %s %s: %s holds a link of another interface (of another network namespace?), "+
						"so %s cannot be attached: ipf -D removes the datapaths", name, h.which, pin, name)
				default:
					err = l.Update(h.prog)
					l.Close()
					if err != nil {
						return fmt.Errorf("attach NAT to %s %s: updating the link: %w", name, h.which, err)
					}
					continue
				}
			}
			var l link.Link
			err := ebpf.ErrNotSupported
			if !d.forceTC {
				l, err = link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: h.prog, Attach: h.typ, Anchor: h.anchor})
			}
			if errors.Is(err, ebpf.ErrNotSupported) {
				// a tc filter is not updated when the programs must
				// read the hot line again: general ones from the start
				if err := d.generalize(); err != nil {
					return err
				}
				prog := map[string]*ebpf.Program{"ingress": d.objs.NatIngress, "egress": d.objs.NatEgress, "egresspre": d.objs.NatEgressPre}[h.which]
				if err := attachClsact(ifc.Index, prog, h.parent, h.prio, h.handle); err != nil {
					return fmt.Errorf("attach NAT to %s %s (tc fallback): %w", name, h.which, err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("attach NAT to %s %s: %w", name, h.which, err)
			}
			err = l.Pin(pin)
			l.Close()
			if err != nil {
				return fmt.Errorf("attach NAT to %s %s: pinning the link: %w", name, h.which, err)
			}
		}
	}
	if len(names) > 0 {
		return d.claimNetNS()
	}
	return nil
}

func attachClsact(ifindex int, prog *ebpf.Program, parent uint32, prio uint16, handle uint32) error {
	qd := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscReplace(qd); err != nil {
		return fmt.Errorf("adding clsact: %w", err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: ifindex, Parent: parent, Handle: handle, Protocol: unix.ETH_P_ALL, Priority: prio},
		Fd:           prog.FD(),
		Name:         tcFilterName,
		DirectAction: true,
	}
	if err := netlink.FilterReplace(f); err != nil {
		return fmt.Errorf("adding the tc filter: %w", err)
	}
	return nil
}

// Attached returns the ifindexes NAT is attached to with TCX.
func (d *Datapath) Attached() []int {
	return attachedIn(d.dir)
}

func attachedIn(dir string) []int {
	var out []int
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		var idx int
		var which string
		if n, _ := fmt.Sscanf(strings.ReplaceAll(e.Name(), "_", " "), "link %d %s", &idx, &which); n == 2 && which == "ingress" {
			out = append(out, idx)
		}
	}
	return out
}

// Detach removes NAT from every interface. NAT then works in no
// namespace: the next Attach claims it (netns_linux.go).
func (d *Datapath) Detach() error {
	if err := detachDir(d.dir); err != nil {
		return err
	}
	if d.dir == "" {
		return nil
	}
	return bpf.ReleaseNetNSPin(filepath.Join(d.dir, netnsPin))
}

func detachDir(dir string) error {
	var errs []error
	if dir != "" {
		ents, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), "link_") {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if l, err := link.LoadPinnedLink(p, nil); err == nil {
				// unpinning drops the last reference, which detaches
				if err := l.Unpin(); err != nil {
					errs = append(errs, err)
				}
				l.Close()
			} else if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := bpf.DetachClsact(tcFilterName); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// KeepOrder puts NAT back where IPFilter has it on the interfaces it is
// attached to, after another program (the filter) was attached to them:
// first on ingress, last on egress. A program attached after NAT lands
// behind it on egress, so the egress link is attached anew at the tail
// and the old one dropped; for the moment both exist the programs mark
// what they translated so nothing is translated twice. With the tc
// fallback the ingress filter is re-added, which puts it first.
func (d *Datapath) KeepOrder() error {
	if d.objs.NatEgress == nil {
		return errors.New("the NAT programs are not loaded")
	}
	unlock, err := d.lock()
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	for _, idx := range d.Attached() {
		ok, err := lastOnEgress(idx, d.objs.NatEgress)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			continue
		}
		if err := d.moveEgress(idx); err != nil {
			errs = append(errs, err)
		}
	}
	// the moves are over (no cookie): plain programs again, if they were
	if err := d.plainIfCan(true); err != nil {
		errs = append(errs, err)
	}
	// the tc fallback: our filters with the first places' handle must
	// stay ahead of the filter's at priority 1, inbound and outbound
	links, err := netlink.LinkList()
	if err == nil {
		for _, l := range links {
			for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
				fs, err := netlink.FilterList(l, parent)
				if err != nil || len(fs) < 2 {
					continue
				}
				if bf, ok := fs[0].(*netlink.BpfFilter); ok && bf.Name == tcFilterName {
					continue
				}
				if err := d.generalize(); err != nil {
					errs = append(errs, err)
					continue
				}
				prog := d.objs.NatIngress
				if parent == netlink.HANDLE_MIN_EGRESS {
					prog = d.objs.NatEgressPre
				}
				for _, f := range fs {
					if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == tcFilterName && bf.Handle == tcHandleIn {
						_ = netlink.FilterDel(f)
						if err := attachClsact(l.Attrs().Index, prog, parent, tcPrioIn, tcHandleIn); err != nil {
							errs = append(errs, err)
						}
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// lastOnEgress reports whether prog is the last TCX egress program of the
// interface.
func lastOnEgress(ifindex int, prog *ebpf.Program) (bool, error) {
	q, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return false, fmt.Errorf("querying the egress programs of interface %d: %w", ifindex, err)
	}
	info, err := prog.Info()
	if err != nil {
		return false, err
	}
	id, _ := info.ID()
	if len(q.Programs) == 0 {
		return false, nil
	}
	return q.Programs[len(q.Programs)-1].ID == id, nil
}

// moveEgress attaches the egress program anew at the tail and drops the
// old link, with the double-translation guard on meanwhile. TCX takes a
// program once per hook, so the new link gets a second instance of the
// egress program over the same maps, which then becomes the pinned one.
func (d *Datapath) moveEgress(ifindex int) error {
	pin := linkPin(d.dir, ifindex, "egress")
	old, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return fmt.Errorf("NAT egress link of interface %d: %w", ifindex, err)
	}
	defer old.Close()
	// the old link's program must mark what it translates (the cookie)
	if err := d.generalize(); err != nil {
		return err
	}
	prog, err := d.egressInstance()
	if err != nil {
		return err
	}
	if err := d.setCfg(cfgCookie, 0x5a7e0000|uint64(ifindex&0xffff)); err != nil {
		return err
	}
	defer d.setCfg(cfgCookie, 0)
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXEgress, Anchor: link.Tail()})
	if err != nil {
		return fmt.Errorf("moving NAT behind the filter on interface %d: %w", ifindex, err)
	}
	defer l.Close()
	if err := old.Unpin(); err != nil {
		return err
	}
	if err := l.Pin(pin); err != nil {
		return fmt.Errorf("pinning the moved NAT link: %w", err)
	}
	return nil
}

// ownMaps maps every map of spec to this datapath's own, for loading
// another instance of its programs: a map made anew would leave the
// instance its own (empty) fast entries and configuration.
func (d *Datapath) ownMaps(spec *ebpf.CollectionSpec) (map[string]*ebpf.Map, error) {
	repl := map[string]*ebpf.Map{}
	have := d.objs.natMaps.byName()
	for name := range spec.Maps {
		if strings.HasPrefix(name, ".") {
			continue
		}
		m := have[name]
		if m == nil {
			return nil, fmt.Errorf("the datapath has no map %s", name)
		}
		repl[name] = m
	}
	return repl, nil
}

// egressInstance loads another instance of the egress program over this
// datapath's maps and makes it the pinned one (and d's).
func (d *Datapath) egressInstance() (*ebpf.Program, error) {
	spec, err := loadNat()
	if err != nil {
		return nil, err
	}
	if d.Plain() {
		if err := setNspj(spec, d.cfg(cfgNsPerJif)); err != nil {
			return nil, err
		}
	}
	repl, err := d.ownMaps(spec)
	if err != nil {
		return nil, fmt.Errorf("loading another NAT egress program: %w", err)
	}
	var objs struct {
		NatEgress *ebpf.Program `ebpf:"nat_egress"`
	}
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, fmt.Errorf("loading another NAT egress program: %w", err)
	}
	if d.dir != "" {
		path := filepath.Join(d.dir, "prog_egress")
		_ = os.Remove(path)
		if err := objs.NatEgress.Pin(path); err != nil {
			objs.NatEgress.Close()
			return nil, err
		}
	}
	if d.objs.NatEgress != nil {
		d.objs.NatEgress.Close()
	}
	d.objs.NatEgress = objs.NatEgress
	return objs.NatEgress, nil
}

// Remove detaches and unpins everything in dir ("" = DefaultPinDir).
func Remove(dir string) error {
	if dir == "" {
		dir = DefaultPinDir
	}
	var errs []error
	if err := detachDir(dir); err != nil {
		errs = append(errs, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return errors.Join(errs...)
		}
		return errors.Join(append(errs, err)...)
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TCXOrder returns the ids of the programs attached with TCX to an
// interface's ingress (out false) or egress, in the order they run.
func TCXOrder(ifindex int, out bool) ([]ebpf.ProgramID, error) {
	typ := ebpf.AttachTCXIngress
	if out {
		typ = ebpf.AttachTCXEgress
	}
	q, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: typ})
	if err != nil {
		return nil, err
	}
	ids := make([]ebpf.ProgramID, len(q.Programs))
	for i, p := range q.Programs {
		ids[i] = p.ID
	}
	return ids, nil
}

// ProgramID returns a program's kernel id.
func ProgramID(p *ebpf.Program) (ebpf.ProgramID, error) {
	if p == nil {
		return 0, errors.New("no program")
	}
	info, err := p.Info()
	if err != nil {
		return 0, err
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("the kernel gives no program id")
	}
	return id, nil
}

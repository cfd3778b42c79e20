package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// natInline is NAT's established IPv4 path inside the filter's programs
// (c/lib/natin.h, nat15): NAT's direct array of fast entries (fast4dm)
// and the length of a jiffy NAT's plain programs stamp times with. dm
// nil: off (the programs as before).
//
// With it, every program made for the active slot (progSpec.nat) has the
// egress half (k_nat bit 1: the egress program translates what it passed
// through the slots and ends the hook's chain), and d keeps, beside each
// such pair, the ingress prefix made for the same specialisation (bit 0),
// attached at the head of each attached interface's ingress chain, ahead
// of NAT's program, and updated with the pair.
type natInline struct {
	dm     *ebpf.Map
	nspj   uint32
	prefix map[uint64]*ebpf.Program // by progSpec key
	cur    *ebpf.Program            // the prefix in force
	links  []link.Link              // its links (head of ingress)
}

const (
	natIngress = 1 // k_nat: the ingress prefix
	natEgress  = 2 // k_nat: the egress program translates what it passed
)

// setVars turns the inline path on in spec (bits of k_nat) for a program
// of s, with NAT's array in place of the object's one-slot placeholder.
func (n *natInline) setVars(spec *ebpf.CollectionSpec, s progSpec, bits uint32) error {
	if n.dm == nil || s.nat == 0 {
		return nil
	}
	if err := spec.Variables["k_nat"].Set(bits); err != nil {
		return err
	}
	if err := spec.Variables["k_nat_nspj"].Set(n.nspj); err != nil {
		return err
	}
	spec.Maps["nat_dm"].MaxEntries = n.dm.MaxEntries()
	return nil
}

// spec marks s as made with the inline path when d has it (the generic
// program, which no datapath runs but a test's, never has it).
func (n *natInline) spec(s progSpec) progSpec {
	if n.dm != nil && s != genericSpec {
		s.nat = n.nspj
	}
	return s
}

// InlineNAT makes the filter's programs translate established NAT'd IPv4
// flows through dm (NAT's fast4dm; nspj the length of a jiffy of NAT's
// plain programs): the egress programs after the filter passed a packet,
// and an ingress prefix program at the head of each attached interface's
// ingress chain. Not wired into the commands (nat15: the measurement's
// stand-in, docs/datapath-cost.md): the caller keeps NAT plain and
// attached after the filter on egress, before it on ingress.
func (d *Datapath) InlineNAT(dm *ebpf.Map, nspj uint32) error {
	if dm == nil || nspj == 0 {
		return errors.New("inline NAT: no direct array or no jiffy length")
	}
	unlock := d.lockCfg()
	defer unlock()
	d.natin.dm, d.natin.nspj = dm, nspj
	if err := d.specialiseLocked(-1, true); err != nil {
		// the programs in force are the ones before (a failed load
		// places nothing): no later specialisation tries the path
		d.natin.dm, d.natin.nspj = nil, 0
		return err
	}
	if d.natin.cur == nil {
		return errors.New("inline NAT: the generic programs have no inline path")
	}
	for _, idx := range d.Attached() {
		l, err := link.AttachTCX(link.TCXOptions{Interface: idx, Program: d.natin.cur, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
		if err != nil {
			return errors.Join(fmt.Errorf("inline NAT: attaching the prefix to interface %d: %w", idx, err), d.closeNATLinks())
		}
		d.natin.links = append(d.natin.links, l)
	}
	return nil
}

// placePrefix makes the prefix of want the one in force (loading it the
// first time) and updates its links; called when want's pair is placed.
func (d *Datapath) placePrefix(want progSpec) error {
	if d.natin.dm == nil || want.nat == 0 {
		return nil
	}
	k := want.key()
	p := d.natin.prefix[k]
	if p == nil {
		spec, err := d.variantSpecNAT(want, natIngress)
		if err != nil {
			return err
		}
		var o struct {
			P *ebpf.Program `ebpf:"sluice_ingress_nat"`
		}
		if err = spec.LoadAndAssign(&o, &ebpf.CollectionOptions{MapReplacements: d.mapsByName()}); err != nil {
			return wrapVerifier("loading the inline NAT prefix", err)
		}
		p = o.P
		if d.natin.prefix == nil {
			d.natin.prefix = map[uint64]*ebpf.Program{}
		}
		d.natin.prefix[k] = p
	}
	for _, l := range d.natin.links {
		if err := l.Update(p); err != nil {
			return fmt.Errorf("inline NAT: updating the prefix: %w", err)
		}
	}
	d.natin.cur = p
	return nil
}

// RunPrefix runs a frame through the inline path's ingress prefix on
// interface ifindex and returns its raw TC verdict: TC_ACT_UNSPEC (-1)
// leaves the packet untouched to the next programs (NAT's, then the
// filter's), TC_ACT_OK (0) ends the chain: translated here and passed.
func (d *Datapath) RunPrefix(frame []byte, ifindex int) (int32, []byte, error) {
	return runAt(d.natin.cur, frame, ifindex)
}

// RunAt runs a frame through the ingress or egress program on interface
// ifindex and returns its raw TC verdict (Run's with the interface); with
// the inline path the egress program's TC_ACT_OK (0) is a packet it
// translated and passed, ending the chain.
func (d *Datapath) RunAt(out bool, frame []byte, ifindex int) (int32, []byte, error) {
	prog := d.objs.SluiceIngress
	if out {
		prog = d.objs.SluiceEgress
	}
	return runAt(prog, frame, ifindex)
}

func runAt(prog *ebpf.Program, frame []byte, ifindex int) (int32, []byte, error) {
	if prog == nil {
		return 0, nil, errNoPrograms
	}
	opts := ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)}
	if ifindex > 1 {
		// struct __sk_buff up to ifindex (offset 40)
		ctx := make([]byte, 44)
		binary.NativeEndian.PutUint32(ctx[36:], uint32(ifindex)) // ingress_ifindex
		binary.NativeEndian.PutUint32(ctx[40:], uint32(ifindex))
		opts.Context = ctx
	}
	ret, err := prog.Run(&opts)
	if err != nil {
		return 0, nil, fmt.Errorf("running the filter: %w", err)
	}
	return int32(ret), opts.DataOut, nil
}

func (d *Datapath) closeNATLinks() error {
	var errs []error
	for _, l := range d.natin.links {
		errs = append(errs, l.Close())
	}
	d.natin.links = nil
	for _, p := range d.natin.prefix {
		errs = append(errs, p.Close())
	}
	d.natin.prefix, d.natin.cur = nil, nil
	return errors.Join(errs...)
}

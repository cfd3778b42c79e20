package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
// through the slots and ends the hook's chain) unless bits leaves it out,
// and d keeps, beside each such pair, the ingress prefix made for the same
// specialisation (bit 0), attached at the head of each attached
// interface's ingress chain, ahead of NAT's program, and updated with the
// pair.
//
// Two ways in. InlineNAT (an unpinned datapath: tests, the bench's older
// stand-in) keeps it in this process, with links of its own. A pinned
// datapath keeps it in its config (cfgNATInline, set by SetNATInline):
// every process's specialisation reads the word (syncNAT), opens NAT's
// fast4dm from NAT's pin directory (NATPinDir), and the prefix's links are
// pinned beside the filter's (link_<ifindex>_natin), so another command's
// rule load or ipf -s puts the prefix of its own set in force.
type natInline struct {
	dm     *ebpf.Map
	nspj   uint32
	bits   uint32                   // natIngress|natEgress: the halves in use
	mapID  uint32                   // dm's id (part of the programs' key)
	prefix map[uint64]*ebpf.Program // by progSpec key
	cur    *ebpf.Program            // the prefix in force
	links  []link.Link              // its links (head of ingress), unpinned datapaths
}

const (
	natIngress = 1 // k_nat: the ingress prefix
	natEgress  = 2 // k_nat: the egress program translates what it passed
)

// NATEgressProgName is the kernel name of a filter egress program with
// NAT's path inside it (the egress half). Such a program ends the hook's
// TCX chain for the packets it translates, so nothing may run after it
// but NAT's own egress program: IPQoS's marker looks for this name and
// refuses to attach behind it (qosmark).
const NATEgressProgName = "sluice_egr_nat"

// The program names the chains around the inline path may hold (kernel
// names, 15 characters at most): NAT's, the filter's own.
const (
	natEgressName    = "nat_egress"
	natIngressName   = "nat_ingress"
	filterIngressNm  = "sluice_ingress"
	filterPrefixName = "sluice_ingress_"
)

// NATPinDir is where the NAT datapath that goes with the filter pinned in
// dir lives: the same path with "-nat" appended (DefaultPinDir's is
// /sys/fs/bpf/sluice-nat, NAT's default).
func NATPinDir(dir string) string {
	if dir == "" {
		dir = DefaultPinDir
	}
	return strings.TrimRight(filepath.Clean(dir), "/") + "-nat"
}

// natDir is NATPinDir of d's published directory.
func (d *Datapath) natDir() string {
	if d.final != "" {
		return NATPinDir(d.final)
	}
	return NATPinDir(d.dir)
}

// setVars turns the inline path on in spec (bits of k_nat) for a program
// of s, with NAT's array in place of the object's one-slot placeholder.
func (n *natInline) setVars(spec *ebpf.CollectionSpec, s progSpec, bits uint32) error {
	bits &= s.natBits
	if n.dm == nil || s.nat == 0 {
		return nil
	}
	// NAT's array replaces the placeholder in every load of d's
	// (mapsByName), with the half or without it
	spec.Maps["nat_dm"].MaxEntries = n.dm.MaxEntries()
	if bits == 0 {
		return nil
	}
	if err := spec.Variables["k_nat"].Set(bits); err != nil {
		return err
	}
	if err := spec.Variables["k_nat_nspj"].Set(n.nspj); err != nil {
		return err
	}
	if bits&natEgress != 0 {
		// qosmark finds it by this name (NATEgressProgName)
		spec.Programs["sluice_egress"].Name = NATEgressProgName
	}
	return nil
}

// spec marks s as made with the inline path when d has it (the generic
// program, which no datapath runs but a test's, never has it).
func (n *natInline) spec(s progSpec) progSpec {
	if n.dm != nil && s != genericSpec {
		s.nat, s.natBits, s.natMap = n.nspj, n.bits, n.mapID
	}
	return s
}

// InlineNAT makes the filter's programs translate established NAT'd IPv4
// flows through dm (NAT's fast4dm; nspj the length of a jiffy of NAT's
// plain programs): the egress programs after the filter passed a packet,
// and an ingress prefix program at the head of each attached interface's
// ingress chain. It is for a datapath that is not pinned (tests): the
// links are this process's and nothing else reads it. A pinned datapath
// takes SetNATInline, which every process follows. The caller keeps NAT
// plain and attached after the filter on egress, before it on ingress.
func (d *Datapath) InlineNAT(dm *ebpf.Map, nspj uint32) error {
	if dm == nil || nspj == 0 {
		return errors.New("inline NAT: no direct array or no jiffy length")
	}
	if d.dir != "" {
		return errors.New("inline NAT: a pinned datapath takes SetNATInline")
	}
	unlock := d.lockCfg()
	defer unlock()
	d.natin.dm, d.natin.nspj, d.natin.bits = dm, nspj, natIngress|natEgress
	d.natin.mapID = mapID(dm)
	if err := d.specialiseLocked(-1, true); err != nil {
		// the programs in force are the ones before (a failed load
		// places nothing): no later specialisation tries the path
		d.natin = natInline{}
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

func mapID(m *ebpf.Map) uint32 {
	info, err := m.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return uint32(id)
}

// NATInline reports whether NAT's established path is inside the
// filter's programs (SetNATInline), and which halves: ingress (the
// prefix) and egress.
func (d *Datapath) NATInline() (on, ingress, egress bool) {
	w := d.cfg(cfgNATInline)
	bits := uint32(w >> 32)
	return w != 0, bits&natIngress != 0, bits&natEgress != 0
}

// NATInlineAllowed reports whether the nat_inline tunable lets ipnat put
// NAT's path inside the filter's programs (ipf -T nat_inline=0 forbids it).
func (d *Datapath) NATInlineAllowed() bool { return d.cfg(cfgNATOff) == 0 }

// SetNATInline puts NAT's established IPv4 path inside the filter's
// programs (nspj: the length of a jiffy NAT's plain programs stamp, as
// natbpf's InlineSlots gives it), or, with 0, takes it out. It is kept in
// the pinned config, so every later command's programs follow it. On:
// NAT's fast4dm is opened from NATPinDir; the egress half only where
// nothing but NAT's egress program follows the filter's on the hook
// (egressClear), the prefix only where nothing but NAT's and the filter's
// ingress programs follow on ingress. Off: the prefix's links go first,
// then the programs are made without the path. A failed change leaves the
// path off (never the programs made for another set: a failed load
// leaves the previous programs, without the path, in force).
func (d *Datapath) SetNATInline(nspj uint32) error {
	if d.dir == "" {
		return errors.New("inline NAT: the datapath is not pinned")
	}
	unlock := d.lockCfg()
	defer unlock()
	if err := d.refuseOlder(); err != nil {
		return err
	}
	var c filterConf
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	if nspj == 0 || c.V[cfgNATOff] != 0 || c.V[cfgClsact] != 0 {
		return d.natOffLocked(&c)
	}
	dm, err := ebpf.LoadPinnedMap(filepath.Join(d.natDir(), "fast4dm"), nil)
	if err != nil {
		return errors.Join(fmt.Errorf("inline NAT: opening NAT's direct array: %w", err), d.natOffLocked(&c))
	}
	dm.Close()
	bits := uint64(natIngress)
	if d.egressClear() {
		bits |= natEgress
	}
	if err := d.writeCfgRaw(&c, cfgNATInline, uint64(nspj)|bits<<32); err != nil {
		return err
	}
	if err := d.specialiseLocked(-1, false); err != nil {
		if rerr := d.objs.Config.Lookup(uint32(0), &c); rerr == nil {
			err = errors.Join(err, d.natOffLocked(&c))
		}
		return err
	}
	if err := d.attachPrefixes(); err != nil {
		if rerr := d.objs.Config.Lookup(uint32(0), &c); rerr == nil {
			err = errors.Join(err, d.natOffLocked(&c))
		}
		return err
	}
	// a marker attached behind the filter meanwhile (qosmark checks for
	// the egress half after it attached, this side after it placed it:
	// one of the two sees the other)
	if d.natin.bits&natEgress != 0 && !d.egressClear() {
		if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
			return err
		}
		if err := d.writeCfgRaw(&c, cfgNATInline, c.V[cfgNATInline]&^(natEgress<<32)); err != nil {
			return err
		}
		return d.specialiseLocked(-1, false)
	}
	return nil
}

// DropNATEgress takes the egress half of NAT's path out of the filter's
// programs (the ingress prefix stays): for a program about to be attached
// behind the filter's on egress (IPQoS's marker), which the half's
// TC_ACT_OK would skip. SetNATInline keeps it out while such a program
// follows the filter's (egressClear).
func (d *Datapath) DropNATEgress() error {
	unlock := d.lockCfg()
	defer unlock()
	var c filterConf
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	w := c.V[cfgNATInline]
	if w == 0 || (w>>32)&natEgress == 0 {
		return nil
	}
	if err := d.refuseOlder(); err != nil {
		return err
	}
	if err := d.writeCfgRaw(&c, cfgNATInline, w&^(natEgress<<32)); err != nil {
		return err
	}
	return d.specialiseLocked(-1, false)
}

// natOffLocked takes the path out: the prefix's links first (they filter
// by the set they were made for, and end the chain), then the word, then
// the programs are made without it. The caller holds lockCfg.
func (d *Datapath) natOffLocked(c *filterConf) error {
	errs := []error{d.detachPrefixes()}
	if c.V[cfgNATInline] != 0 {
		if err := d.writeCfgRaw(c, cfgNATInline, 0); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	errs = append(errs, d.specialiseLocked(-1, false))
	return errors.Join(errs...)
}

// syncNAT makes d's inline state the one the config records (every
// specialisation of a pinned datapath starts here). With the word set it
// opens NAT's fast4dm from NAT's pin directory. When it cannot (NAT was
// removed, or its maps are of another layout), the path is turned off,
// its prefix links detached first, rather than the load failing: failing
// closed would keep every later command (ipf -D included) from changing
// the rules until an admin turned the word off by hand, with the previous
// rules in force meanwhile; off, the filter's own programs decide every
// packet, as without NAT inside them, and only the speed is lost.
func (d *Datapath) syncNAT(c *filterConf) error {
	if d.dir == "" {
		return nil // InlineNAT's, this process's
	}
	w := c.V[cfgNATInline]
	var dm *ebpf.Map
	if w != 0 && c.V[cfgNATOff] == 0 && c.V[cfgClsact] == 0 {
		var err error
		if dm, err = ebpf.LoadPinnedMap(filepath.Join(d.natDir(), "fast4dm"), nil); err != nil {
			dm = nil
		}
	}
	if dm == nil {
		dropNATVariants(d.dir, 0)
		if d.natin.dm == nil && w == 0 && !d.hasPrefixPins() {
			return nil
		}
		errs := []error{d.detachPrefixes()}
		if w != 0 {
			errs = append(errs, d.writeCfgRaw(c, cfgNATInline, 0))
		}
		d.closeNAT()
		return errors.Join(errs...)
	}
	id := mapID(dm)
	dropNATVariants(d.dir, id)
	if d.natin.dm != nil && d.natin.mapID == id {
		dm.Close()
	} else {
		d.closeNAT()
		d.natin.dm, d.natin.mapID = dm, id
	}
	d.natin.nspj, d.natin.bits = uint32(w), uint32(w>>32)
	return nil
}

// closeNAT drops this process's handles of the inline path (not the
// pinned links).
func (d *Datapath) closeNAT() {
	for _, p := range d.natin.prefix {
		p.Close()
	}
	if d.natin.dm != nil {
		d.natin.dm.Close()
	}
	links := d.natin.links
	d.natin = natInline{links: links}
}

func prefixPin(dir string, ifindex int) string {
	return filepath.Join(dir, fmt.Sprintf("link_%d_natin", ifindex))
}

// prefixPins lists the prefix's pinned links in d's directory.
func (d *Datapath) prefixPins() []string {
	ents, _ := os.ReadDir(d.dir)
	var out []string
	for _, e := range ents {
		if _, hook, ok := linkPin(e.Name()); ok && hook == "natin" {
			out = append(out, filepath.Join(d.dir, e.Name()))
		}
	}
	return out
}

func (d *Datapath) hasPrefixPins() bool { return len(d.prefixPins()) > 0 }

// detachPrefixes detaches the prefix's pinned links and removes their
// pins: packets go to NAT's program and the filter's own from then on.
func (d *Datapath) detachPrefixes() error {
	var errs []error
	for _, p := range d.prefixPins() {
		errs = append(errs, detachPin(p))
	}
	return errors.Join(errs...)
}

// attachPrefixes puts the prefix in force at the head of the ingress
// chain of every interface the filter is attached to with TCX where the
// rest of the chain is NAT's and the filter's programs (a prefix that is
// not first is attached again at the head; one where another program
// follows is taken away, since its TC_ACT_OK would skip that program).
// The caller holds lockCfg, after a specialisation placed the prefix.
func (d *Datapath) attachPrefixes() error {
	if d.natin.cur == nil || d.natin.bits&natIngress == 0 {
		return d.detachPrefixes()
	}
	pid, err := progID(d.natin.cur)
	if err != nil {
		return err
	}
	var errs []error
	for _, idx := range d.Attached() {
		pin := prefixPin(d.dir, idx)
		order, err := chainNames(idx, ebpf.AttachTCXIngress)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		first, clear := false, true
		for i, p := range order {
			switch {
			case p.id == pid:
				first = i == 0
			case p.name == natIngressName || p.name == filterIngressNm || strings.HasPrefix(p.name, filterPrefixName):
			default:
				clear = false
			}
		}
		if old, err := link.LoadPinnedLink(pin, nil); err == nil {
			if clear && first {
				old.Close()
				continue
			}
			_ = old.Detach()
			old.Close()
			_ = os.Remove(pin)
		}
		if !clear {
			continue
		}
		_ = os.Remove(pin) // a pin that does not open as a link
		l, err := link.AttachTCX(link.TCXOptions{Interface: idx, Program: d.natin.cur, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
		if err != nil {
			errs = append(errs, fmt.Errorf("inline NAT: attaching the prefix to interface %d: %w", idx, err))
			continue
		}
		err = l.Pin(pin)
		if err != nil {
			_ = l.Detach()
			errs = append(errs, fmt.Errorf("inline NAT: pinning the prefix's link: %w", err))
		}
		l.Close()
	}
	return errors.Join(errs...)
}

type chainProg struct {
	id   ebpf.ProgramID
	name string
}

// chainNames lists the programs of an interface's TCX hook in the order
// they run, with their kernel names.
func chainNames(ifindex int, typ ebpf.AttachType) ([]chainProg, error) {
	q, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: typ})
	if err != nil {
		return nil, fmt.Errorf("querying the TCX programs of interface %d: %w", ifindex, err)
	}
	out := make([]chainProg, len(q.Programs))
	for i, p := range q.Programs {
		out[i].id = p.ID
		if prog, err := ebpf.NewProgramFromID(p.ID); err == nil {
			if info, err := prog.Info(); err == nil {
				out[i].name = info.Name
			}
			prog.Close()
		}
	}
	return out, nil
}

func progID(p *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := p.Info()
	if err != nil {
		return 0, err
	}
	id, _ := info.ID()
	return id, nil
}

// egressClear reports whether, on every interface the filter is attached
// to with TCX, nothing but NAT's egress program follows the filter's
// egress program: the egress half's TC_ACT_OK ends the chain, so a
// program after it (IPQoS's marker) would miss the packets it translates.
func (d *Datapath) egressClear() bool {
	for _, idx := range d.Attached() {
		order, err := chainNames(idx, ebpf.AttachTCXEgress)
		if err != nil {
			return false
		}
		after := false
		for _, p := range order {
			if after && p.name != natEgressName {
				return false
			}
			if p.name == "sluice_egress" || p.name == NATEgressProgName {
				after = true
			}
		}
	}
	return true
}

// placePrefix makes the prefix of want the one in force (loading it the
// first time, or taking it from its pin) and updates its links: this
// process's (InlineNAT) and the pinned ones whose program is another.
// Called when want's pair is placed, and by every process whose
// specialisation finds its pair in place, so a prefix another process
// left for an older set is replaced too.
func (d *Datapath) placePrefix(want progSpec) error {
	if d.natin.dm == nil || want.nat == 0 || want.natBits&natIngress == 0 {
		return nil
	}
	k := want.key()
	p := d.natin.prefix[k]
	if p == nil && d.dir != "" {
		if pp, err := ebpf.LoadPinnedProgram(filepath.Join(d.dir, variantPin(k, want.natMap)+"_pre"), nil); err == nil {
			p = pp
		}
	}
	if p == nil {
		spec, err := d.variantSpecNAT(want, natIngress)
		if err != nil {
			return err
		}
		var o struct {
			P *ebpf.Program `ebpf:"sluice_ingress_nat"`
		}
		if err = spec.LoadAndAssign(&o, &ebpf.CollectionOptions{MapReplacements: d.replacements(spec)}); err != nil {
			return wrapVerifier("loading the inline NAT prefix", err)
		}
		p = o.P
		if d.dir != "" {
			_ = pinOver(p, filepath.Join(d.dir, variantPin(k, want.natMap)+"_pre"))
		}
	}
	if d.natin.prefix == nil {
		d.natin.prefix = map[uint64]*ebpf.Program{}
	}
	d.natin.prefix[k] = p
	for _, l := range d.natin.links {
		if err := l.Update(p); err != nil {
			return fmt.Errorf("inline NAT: updating the prefix: %w", err)
		}
	}
	if d.dir != "" {
		pid, err := progID(p)
		if err != nil {
			return err
		}
		for _, pin := range d.prefixPins() {
			l, err := link.LoadPinnedLink(pin, nil)
			if err != nil {
				continue
			}
			cur := ebpf.ProgramID(0)
			if info, err := l.Info(); err == nil {
				cur = info.Program
			}
			if cur != pid {
				err = l.Update(p)
			}
			l.Close()
			if err != nil {
				return fmt.Errorf("inline NAT: updating the prefix of %s: %w", filepath.Base(pin), err)
			}
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
	ret, out, err := RunTC(prog, frame, ifindex)
	if err != nil {
		return 0, nil, fmt.Errorf("running the filter: %w", err)
	}
	return ret, out, nil
}

// RunTC runs a frame through a TC program by BPF_PROG_TEST_RUN, as if it
// came in (or went out) on interface ifindex (> 1; else the run's own
// default), and returns its raw TC verdict and the frame as it left (with
// room for 512 bytes more: a rewrite may grow it). The filter's and NAT's
// test runs share it.
func RunTC(prog *ebpf.Program, frame []byte, ifindex int) (int32, []byte, error) {
	opts := ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+512)}
	if ifindex > 1 {
		// struct __sk_buff up to ifindex (offset 40)
		ctx := make([]byte, 44)
		binary.NativeEndian.PutUint32(ctx[36:], uint32(ifindex)) // ingress_ifindex
		binary.NativeEndian.PutUint32(ctx[40:], uint32(ifindex))
		opts.Context = ctx
	}
	ret, err := prog.Run(&opts)
	if err != nil {
		return 0, nil, err
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

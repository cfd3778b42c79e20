//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
	gonat "sluice/internal/nat"
	"sluice/internal/rules/ipnat"
)

// ErrNotLoaded is returned by OpenPinned when no NAT datapath is pinned.
var ErrNotLoaded = errors.New("NAT datapath not loaded")

// Options tune Load.
type Options struct {
	// PinDir is the bpffs directory (DefaultPinDir when "").
	PinDir string
	// NoPin keeps everything in this process (tests, benchmarks).
	NoPin bool
	// ForceTC attaches with tc clsact filters as on kernels without TCX.
	ForceTC bool
	// stage stops the fast path early (benchmarks) or turns it off
	// (tests); 0 in normal use.
	stage uint32
	// alloc allocates the session tables otherwise than built
	// (benchmarks); allocAsBuilt in normal use.
	alloc allocMode
}

// allocMode is how the hash maps of sessions are allocated.
type allocMode uint32

const (
	allocAsBuilt  allocMode = iota // as c/nat.c declares them
	allocPrealloc                  // every entry allocated at load
	allocOnDemand                  // entries allocated as made (BPF_F_NO_PREALLOC)
)

// sessionTables are the hash maps an entry goes into or out of as
// sessions are made and end.
var sessionTables = []string{"sessions", "fast4", "fast6", "hostmaps"}

// setAlloc makes the session tables of spec allocated as mode says.
func setAlloc(spec *ebpf.CollectionSpec, mode allocMode) error {
	for _, name := range sessionTables {
		m, ok := spec.Maps[name]
		if !ok {
			return fmt.Errorf("setting the NAT maps' allocation: no map %s", name)
		}
		switch mode {
		case allocPrealloc:
			m.Flags &^= unix.BPF_F_NO_PREALLOC
		case allocOnDemand:
			m.Flags |= unix.BPF_F_NO_PREALLOC
		}
	}
	return nil
}

// Datapath is the NAT datapath: its maps, and its programs when it was
// loaded by this process (OpenPinned also finds the pinned programs).
type Datapath struct {
	dir     string
	objs    natObjects
	forceTC bool
	stage   uint32    // Options.stage: what every program of d is loaded with
	alloc   allocMode // Options.alloc
	mu      sync.Mutex
}

// pinned program names.
var progPins = []string{"prog_ingress", "prog_egress", "prog_flush", "prog_egress_pre"}

// Load loads the programs and maps. Maps already pinned in the directory
// are reused, so rules and sessions survive a reload. A verifier rejection
// comes back with its whole log under %+v.
func Load(opts Options) (*Datapath, error) {
	if err := bpf.CheckMemoryModel(); err != nil {
		return nil, err
	}
	spec, err := loadNat()
	if err != nil {
		return nil, fmt.Errorf("loading the NAT program spec: %w", err)
	}
	d := &Datapath{dir: opts.PinDir, forceTC: opts.ForceTC, stage: opts.stage, alloc: opts.alloc}
	if opts.stage != 0 {
		if err := setStage(spec, opts.stage); err != nil {
			return nil, err
		}
	}
	if opts.alloc != allocAsBuilt {
		if err := setAlloc(spec, opts.alloc); err != nil {
			return nil, err
		}
	}
	var copts ebpf.CollectionOptions
	created := false
	if !opts.NoPin {
		if d.dir == "" {
			d.dir = DefaultPinDir
		}
		if _, err := os.Stat(d.dir); os.IsNotExist(err) {
			created = true
		}
		if err := ensureBPFFS(d.dir); err != nil {
			return nil, err
		}
		for name, m := range spec.Maps {
			if !strings.HasPrefix(name, ".") {
				m.Pinning = ebpf.PinByName
			}
		}
		copts.Maps.PinPath = d.dir
		if err := olderLayout(d.dir); err != nil {
			return nil, err
		}
	}
	if err := spec.LoadAndAssign(&d.objs, &copts); err != nil {
		if created {
			os.RemoveAll(d.dir)
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("loading the NAT programs: %w", &verifierError{ve})
		}
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			// maps pinned by an older Sluice (the session tables were
			// not preallocated before nat12): they cannot be reused
			return nil, fmt.Errorf("%s holds the maps of a NAT datapath with another layout (an older Sluice): "+
				"remove that datapath first (ipf -D, or detach it and delete the directory), then load again: %w", d.dir, err)
		}
		return nil, fmt.Errorf("loading the NAT programs: %w", err)
	}
	if err := d.setSlow(); err != nil {
		d.objs.Close()
		return nil, err
	}
	if err := d.initConfig(); err != nil {
		d.objs.Close()
		return nil, err
	}
	if err := d.calibrate(); err != nil {
		d.objs.Close()
		return nil, err
	}
	if err := d.armSweeper(); err != nil {
		d.objs.Close()
		return nil, err
	}
	// the programs just loaded are general (they read the hot line); the
	// links keep the last load's until Attach updates them
	if err := d.objs.Config.Update(uint32(cfgPlain), uint64(0), ebpf.UpdateAny); err != nil {
		d.objs.Close()
		return nil, fmt.Errorf("NAT config %d: %w", cfgPlain, err)
	}
	if !opts.ForceTC {
		if err := d.plainIfCan(false); err != nil {
			d.objs.Close()
			return nil, err
		}
	}
	if !opts.NoPin {
		for i, p := range []*ebpf.Program{d.objs.NatIngress, d.objs.NatEgress, d.objs.NatFlush, d.objs.NatEgressPre} {
			path := filepath.Join(d.dir, progPins[i])
			_ = os.Remove(path)
			if err := p.Pin(path); err != nil {
				d.objs.Close()
				return nil, fmt.Errorf("pinning %s: %w", progPins[i], err)
			}
		}
	}
	return d, nil
}

// setSlow puts the slow programs where the programs tail-call them for
// the packets their fast path leaves (a reload replaces the last load's).
func (d *Datapath) setSlow() error {
	for i, p := range []*ebpf.Program{slowIn: d.objs.NatSlowIngress, slowOut: d.objs.NatSlowEgress, slowPre: d.objs.NatSlowEgressPre} {
		if err := d.objs.SlowProgs.Update(uint32(i), p, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("setting the NAT slow programs: %w", err)
		}
	}
	return nil
}

// Stage is where a probe's fast path stops (see LoadProbe).
type Stage uint32

// Stages of the fast path a probe can stop after.
const (
	StageEntry  Stage = stEntry  // nothing done
	StageParse  Stage = stParse  // headers read, key made
	StageLookup Stage = stLookup // the fast entry looked up
)

// LoadProbe loads, on the maps of the datapath pinned in dir, copies of
// the ingress and egress programs whose fast path stops after stage and
// returns (nothing is pinned). They translate nothing: attached in front
// of NAT's own programs they measure, with the kernel's run-time
// statistics, what the stages up to stage cost on live traffic (and warm
// the caches for the programs behind them). For measurements only.
func LoadProbe(dir string, stage Stage) (ingress, egress *ebpf.Program, err error) {
	if stage < StageEntry || stage > StageLookup {
		return nil, nil, fmt.Errorf("probe stage %d: not one of %d..%d", stage, StageEntry, StageLookup)
	}
	spec, err := loadNat()
	if err != nil {
		return nil, nil, err
	}
	if err := setStage(spec, uint32(stage)); err != nil {
		return nil, nil, err
	}
	if dir == "" {
		dir = DefaultPinDir
	}
	for name, m := range spec.Maps {
		if !strings.HasPrefix(name, ".") {
			m.Pinning = ebpf.PinByName
		}
	}
	var objs natObjects
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}); err != nil {
		return nil, nil, fmt.Errorf("loading the NAT probe: %w", err)
	}
	in, out := objs.NatIngress, objs.NatEgress
	objs.NatIngress, objs.NatEgress = nil, nil
	objs.Close()
	return in, out, nil
}

// stageMagic is the immediate of c/nat.c's bench_at markers.
const stageMagic = 0x57a9e000

// setStage rewrites the bench_at markers of the programs so that the fast
// path stops at stage (st* of layout.go).
func setStage(spec *ebpf.CollectionSpec, stage uint32) error {
	n := 0
	for _, ps := range spec.Programs {
		for i := range ps.Instructions {
			ins := &ps.Instructions[i]
			if ins.OpCode.Class().IsALU() && ins.OpCode.ALUOp() == asm.Mov && ins.OpCode.Source() == asm.ImmSource &&
				ins.Constant == stageMagic {
				ins.Constant = stageMagic + int64(stage)
				n++
			}
		}
	}
	if n == 0 {
		return errors.New("setting the NAT fast path stage: no stage markers in the programs")
	}
	return nil
}

// nspjMagic is the immediate of c/nat.c's k_nspj, which a plain program
// has rewritten to the length of a jiffy.
const nspjMagic = 0x57a9d000

// setNspj makes the programs of spec plain: k_nspj's immediates become
// nspj (ns a jiffy), so their fast path reads no hot line.
func setNspj(spec *ebpf.CollectionSpec, nspj uint64) error {
	if nspj == 0 || nspj >= 1<<31 {
		return fmt.Errorf("plain NAT programs: %d ns a jiffy", nspj)
	}
	n := 0
	for _, ps := range spec.Programs {
		for i := range ps.Instructions {
			ins := &ps.Instructions[i]
			if ins.OpCode.Class().IsALU() && ins.OpCode.ALUOp() == asm.Mov && ins.OpCode.Source() == asm.ImmSource &&
				ins.Constant == nspjMagic {
				ins.Constant = int64(nspj)
				n++
			}
		}
	}
	if n == 0 {
		return errors.New("plain NAT programs: no k_nspj in the programs")
	}
	return nil
}

// fastProgs are the programs the hooks run (the fast path, and a tail call
// to the slow programs for the rest).
type fastProgs struct {
	NatIngress   *ebpf.Program `ebpf:"nat_ingress"`
	NatEgress    *ebpf.Program `ebpf:"nat_egress"`
	NatEgressPre *ebpf.Program `ebpf:"nat_egress_pre"`
}

// fastInstances loads the hooks' programs again over d's maps, plain
// (see plainIfCan) or general (as built).
func (d *Datapath) fastInstances(plain bool) (*fastProgs, error) {
	spec, err := loadNat()
	if err != nil {
		return nil, err
	}
	if d.stage != 0 {
		if err := setStage(spec, d.stage); err != nil {
			return nil, err
		}
	}
	if d.alloc != allocAsBuilt {
		if err := setAlloc(spec, d.alloc); err != nil {
			return nil, err
		}
	}
	if plain {
		if err := setNspj(spec, d.cfg(cfgNsPerJif)); err != nil {
			return nil, err
		}
	}
	repl, err := d.ownMaps(spec)
	if err != nil {
		return nil, fmt.Errorf("loading the NAT programs again: %w", err)
	}
	var fp fastProgs
	if err := spec.LoadAndAssign(&fp, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, fmt.Errorf("loading the NAT programs again: %w", err)
	}
	return &fp, nil
}

// plainIfCan makes the hooks' programs plain when nothing on the hot line
// is for them: no clock offset (tests), no double-translation cookie (a
// move of the egress program, moveEgress) and no device without a
// link-layer header attached. A plain program has the length of a jiffy
// as an immediate and its fast path reaches no hot line, one memory page
// fewer for every packet it translates (docs/datapath-cost.md, "NAT,
// session 9"). setCfg makes them general again before it sets any of
// those. With links, the pinned links and programs are updated too.
// The tc fallback keeps general programs (its filters are not updated).
func (d *Datapath) plainIfCan(links bool) error {
	if d.forceTC || d.cfg(cfgPlain) == 1 || d.cfg(cfgNsPerJif) == 0 {
		return nil
	}
	if h := d.hot(); h.Clock != 0 || h.Cookie != 0 || h.L3dev != 0 {
		return nil
	}
	return d.swapFast(true, links)
}

// generalize makes the hooks' programs general (reading the hot line)
// if they are plain, the pinned links and programs included.
func (d *Datapath) generalize() error {
	if d.cfg(cfgPlain) == 0 {
		return nil
	}
	return d.swapFast(false, true)
}

// swapFast loads the hooks' programs plain or general and puts them
// where d's are: with links, in the links pinned in d's directory and
// the program pins too.
func (d *Datapath) swapFast(plain, links bool) error {
	fp, err := d.fastInstances(plain)
	if err != nil {
		return err
	}
	progs := map[string]*ebpf.Program{"ingress": fp.NatIngress, "egress": fp.NatEgress, "egresspre": fp.NatEgressPre}
	// the note says plain while any program may be: a swap that fails
	// half way is made general again by the next generalize
	if plain {
		if err := d.objs.Config.Update(uint32(cfgPlain), uint64(1), ebpf.UpdateAny); err != nil {
			fp.close()
			return fmt.Errorf("NAT config %d: %w", cfgPlain, err)
		}
	}
	if links && d.dir != "" {
		ents, err := os.ReadDir(d.dir)
		if err != nil && !os.IsNotExist(err) {
			fp.close()
			return err
		}
		for _, e := range ents {
			var idx int
			var which string
			if n, _ := fmt.Sscanf(strings.ReplaceAll(e.Name(), "_", " "), "link %d %s", &idx, &which); n != 2 || progs[which] == nil {
				continue
			}
			l, err := link.LoadPinnedLink(filepath.Join(d.dir, e.Name()), nil)
			if err != nil {
				continue
			}
			err = l.Update(progs[which])
			l.Close()
			if err != nil {
				fp.close()
				return fmt.Errorf("NAT %s link of interface %d: %w", which, idx, err)
			}
		}
		for i, p := range []*ebpf.Program{fp.NatIngress, fp.NatEgress, nil, fp.NatEgressPre} {
			if p == nil {
				continue
			}
			path := filepath.Join(d.dir, progPins[i])
			_ = os.Remove(path)
			if err := p.Pin(path); err != nil {
				fp.close()
				return fmt.Errorf("pinning %s: %w", progPins[i], err)
			}
		}
	}
	for _, p := range []*ebpf.Program{d.objs.NatIngress, d.objs.NatEgress, d.objs.NatEgressPre} {
		if p != nil {
			p.Close()
		}
	}
	d.objs.NatIngress, d.objs.NatEgress, d.objs.NatEgressPre = fp.NatIngress, fp.NatEgress, fp.NatEgressPre
	v := uint64(0)
	if plain {
		v = 1
	}
	if err := d.objs.Config.Update(uint32(cfgPlain), v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("NAT config %d: %w", cfgPlain, err)
	}
	return nil
}

func (fp *fastProgs) close() {
	for _, p := range []*ebpf.Program{fp.NatIngress, fp.NatEgress, fp.NatEgressPre} {
		if p != nil {
			p.Close()
		}
	}
}

// Plain reports whether the hooks' programs are plain (plainIfCan).
func (d *Datapath) Plain() bool { return d.cfg(cfgPlain) == 1 }

// fields are the places of the maps by their names in the object.
func (o *natMaps) fields() map[string]**ebpf.Map {
	return map[string]**ebpf.Map{
		"rules": &o.Rules, "rstates": &o.Rstates, "hits": &o.Hits, "orders": &o.Orders, "texts": &o.Texts,
		"config": &o.Config, "hot": &o.Hot, "stats": &o.Stats, "sessions": &o.Sessions, "fast4": &o.Fast4, "fast4dm": &o.Fast4dm, "fast6": &o.Fast6, "frags": &o.Frags, "hostmaps": &o.Hostmaps,
		"ftps": &o.Ftps, "ifaddrs": &o.Ifaddrs, "l2lens": &o.L2lens, "work_area": &o.WorkArea, "slow_progs": &o.SlowProgs,
		"sweeper": &o.Sweeper,
	}
}

// byName returns the maps by their names in the object (nil where not open).
func (o *natMaps) byName() map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	for name, p := range o.fields() {
		out[name] = *p
	}
	return out
}

// verifierError prints the verifier's whole log under %+v.
type verifierError struct{ ve *ebpf.VerifierError }

func (e *verifierError) Error() string { return e.ve.Error() }
func (e *verifierError) Unwrap() error { return e.ve }
func (e *verifierError) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('+') {
		fmt.Fprintf(f, "%+v", e.ve)
		return
	}
	fmt.Fprint(f, e.ve.Error())
}

// OpenPinned opens the datapath pinned in dir ("" = DefaultPinDir).
func OpenPinned(dir string) (*Datapath, error) {
	if dir == "" {
		dir = DefaultPinDir
	}
	if _, err := os.Stat(filepath.Join(dir, "config")); err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: %w", dir, ErrNotLoaded)
		}
		return nil, fmt.Errorf("opening the NAT datapath: %w", err)
	}
	if err := olderLayout(dir); err != nil {
		return nil, err
	}
	spec, err := loadNat()
	if err != nil {
		return nil, err
	}
	d := &Datapath{dir: dir}
	maps := map[string]**ebpf.Map{}
	for name := range spec.Maps {
		if strings.HasPrefix(name, ".") {
			continue
		}
		maps[name] = nil
	}
	opened := map[string]*ebpf.Map{}
	for name := range maps {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if name == "sweeper" && errors.Is(err, os.ErrNotExist) {
			// a datapath loaded before nat19: its next load makes it
			continue
		}
		if err != nil {
			for _, o := range opened {
				o.Close()
			}
			return nil, fmt.Errorf("opening the pinned NAT map %s: %w", name, err)
		}
		opened[name] = m
	}
	assign := d.objs.natMaps.fields()
	for name, m := range opened {
		if p, ok := assign[name]; ok {
			*p = m
		} else {
			m.Close()
		}
	}
	for i, p := range []**ebpf.Program{&d.objs.NatIngress, &d.objs.NatEgress, &d.objs.NatFlush, &d.objs.NatEgressPre} {
		if prog, err := ebpf.LoadPinnedProgram(filepath.Join(dir, progPins[i]), nil); err == nil {
			*p = prog
		}
	}
	return d, nil
}

// Close releases this process's handles; the pins stay.
func (d *Datapath) Close() error { return d.objs.Close() }

// Dir returns the pin directory ("" when not pinned).
func (d *Datapath) Dir() string { return d.dir }

// cfg reads config key k; the keys of struct nat_hot are read there.
func (d *Datapath) cfg(k uint32) uint64 {
	if isHot(k) {
		h := d.hot()
		switch k {
		case cfgL3Dev:
			return uint64(h.L3dev)
		case cfgCookie:
			return uint64(h.Cookie)
		case cfgNsPerJif:
			return h.Nspj
		}
		return h.Clock
	}
	var v uint64
	_ = d.objs.Config.Lookup(k, &v)
	return v
}

// setCfg writes config key k. A key of struct nat_hot is written by
// writing the whole value back with the field changed: the callers that
// change them (attaching, moving the egress program, loading, tests) run
// under ipfctl's transaction lock, one at a time.
func (d *Datapath) setCfg(k uint32, v uint64) error {
	if isHot(k) {
		// a plain program would not see it
		if v != 0 && k != cfgNsPerJif {
			if err := d.generalize(); err != nil {
				return err
			}
		}
		h := d.hot()
		switch k {
		case cfgL3Dev:
			h.L3dev = uint32(v)
		case cfgCookie:
			h.Cookie = uint32(v)
		case cfgNsPerJif:
			h.Nspj = v
		default:
			h.Clock = v
		}
		if err := d.objs.Hot.Update(uint32(0), h, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("NAT config %d: %w", k, err)
		}
		return nil
	}
	if err := d.objs.Config.Update(k, v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("NAT config %d: %w", k, err)
	}
	return nil
}

func isHot(k uint32) bool { return k >= cfgL3Dev && k <= cfgClock }

func (d *Datapath) hot() natNatHot {
	var h natNatHot
	_ = d.objs.Hot.Lookup(uint32(0), &h)
	return h
}

// initConfig gives a fresh datapath IPFilter's defaults.
func (d *Datapath) initConfig() error {
	if d.cfg(cfgNextID) != 0 {
		return nil
	}
	for k, v := range map[uint32]uint64{cfgMax: defaultMaxSes, cfgFTPForce: 1, cfgNextID: 1} {
		if err := d.setCfg(k, v); err != nil {
			return err
		}
	}
	return nil
}

// calibrate measures how long a jiffy is (the programs age sessions by
// jiffies, which they read inline) once per datapath: the kernel's HZ is
// 100, 250, 300 or 1000, so 60 ms of both clocks tell which.
func (d *Datapath) calibrate() error {
	if d.cfg(cfgNsPerJif) != 0 {
		return nil
	}
	read := func() (uint64, uint64, error) {
		if err := d.setCfg(cfgFlushMode, flClocks); err != nil {
			return 0, 0, err
		}
		frame := make([]byte, 64)
		frame[12] = 0x08
		if _, err := d.objs.NatFlush.Run(&ebpf.RunOptions{Data: frame}); err != nil {
			return 0, 0, fmt.Errorf("reading the kernel's clocks: %w", err)
		}
		return d.cfg(cfgFlushed), d.cfg(cfgFlushArg), nil
	}
	j0, n0, err := read()
	if err != nil {
		return err
	}
	time.Sleep(60 * time.Millisecond)
	j1, n1, err := read()
	if err != nil {
		return err
	}
	if j1 <= j0 || n1 <= n0 {
		return fmt.Errorf("measuring a jiffy: the clocks did not move (%d..%d, %d..%d)", j0, j1, n0, n1)
	}
	per := float64(n1-n0) / float64(j1-j0)
	best := uint64(0)
	for _, hz := range []uint64{100, 250, 300, 1000} {
		ns := uint64(1e9) / hz
		if best == 0 || absDiff(per, ns) < absDiff(per, best) {
			best = ns
		}
	}
	return d.setCfg(cfgNsPerJif, best)
}

func absDiff(a float64, b uint64) float64 {
	if d := a - float64(b); d > 0 {
		return d
	}
	return float64(b) - a
}

// lock serialises changes within and between processes.
func (d *Datapath) lock() (func(), error) {
	d.mu.Lock()
	if d.dir == "" {
		return d.mu.Unlock, nil
	}
	fd, err := unix.Open(d.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("locking %s: %w", d.dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		d.mu.Unlock()
		return nil, fmt.Errorf("locking %s: %w", d.dir, err)
	}
	return func() {
		unix.Flock(fd, unix.LOCK_UN)
		unix.Close(fd)
		d.mu.Unlock()
	}, nil
}

// Tunables of the NAT datapath.
type Tunables struct {
	// TableMax is nat_table_max: sessions beyond it are refused (the
	// packet that needed one is dropped, as IPFilter blocks it).
	TableMax uint64
	// FTP proxy tunables (ftp_insecure, ftp_pasvonly, ftp_forcepasv,
	// ftp_single_xfer).
	FTPInsecure, FTPPasvOnly, FTPForcePasv, FTPSingleXfer bool
}

// Tunables returns the current tunables.
func (d *Datapath) Tunables() Tunables {
	return Tunables{TableMax: d.cfg(cfgMax), FTPInsecure: d.cfg(cfgFTPInsec) != 0, FTPPasvOnly: d.cfg(cfgFTPPasv) != 0,
		FTPForcePasv: d.cfg(cfgFTPForce) != 0, FTPSingleXfer: d.cfg(cfgFTPSingle) != 0}
}

// SetTunables sets the tunables.
func (d *Datapath) SetTunables(t Tunables) error {
	b := func(v bool) uint64 {
		if v {
			return 1
		}
		return 0
	}
	if err := CheckTunable("nat_table_max", t.TableMax); err != nil {
		return err
	}
	for k, v := range map[uint32]uint64{cfgMax: t.TableMax, cfgFTPInsec: b(t.FTPInsecure), cfgFTPPasv: b(t.FTPPasvOnly),
		cfgFTPForce: b(t.FTPForcePasv), cfgFTPSingle: b(t.FTPSingleXfer)} {
		if err := d.setCfg(k, v); err != nil {
			return err
		}
	}
	return nil
}

// SetIPFTestMode makes the datapath behave as ipftest's NAT, for tests
// that compare it with the Go engine, or normally again: port allocation
// uses ipftest's deterministic ipf_random() sequence from its start, and
// sessions do not age.
func (d *Datapath) SetIPFTestMode(on bool) error {
	v := uint64(0)
	if on {
		v = 1
	}
	for k, x := range map[uint32]uint64{cfgRandMode: v, cfgRandCalls: 0, cfgRandLast: 0, cfgNoExpire: v} {
		if err := d.setCfg(k, x); err != nil {
			return err
		}
	}
	return nil
}

// AdvanceClock moves the datapath's clock forward: sessions look older
// to the flush program's expiry check (the timers keep real time). Tests
// only: no command calls it. A moved clock makes the programs general
// (Plain is false, InlineSlots not ok), but nothing here takes NAT's path
// out of the filter's programs, which it cannot reach: with that path on
// (the filter's SetNATInline), the filter's inline translation would go on
// stamping sessions with the real time, without this offset. A test that
// moves the clock under the filter's path turns the path off first, as
// ipnat does before it makes the programs general (ipfctl's natInlineOff);
// none does today (the package's tests run without the filter).
func (d *Datapath) AdvanceClock(by time.Duration) error {
	return d.setCfg(cfgClock, d.cfg(cfgClock)+uint64(by))
}

// SetIfAddr records an interface's addresses, for 0/32 targets. A zero
// address means none of that family.
func (d *Datapath) SetIfAddr(ifindex int, v4, v6 netip.Addr) error {
	var a natNatIfaddr
	if v4.Is4() {
		b := v4.As4()
		a.V4 = binary.NativeEndian.Uint32(b[:])
	}
	if v6.Is6() && !v6.Is4In6() {
		b := v6.As16()
		for i := range 4 {
			a.V6[i] = binary.NativeEndian.Uint32(b[4*i:])
		}
	}
	return d.objs.Ifaddrs.Update(uint32(ifindex), a, ebpf.UpdateAny)
}

// RetainIfAddrs forgets the addresses of every interface but those of
// keep (ifindexes), for interfaces that went away.
func (d *Datapath) RetainIfAddrs(keep []int) error {
	var k uint32
	var gone []uint32
	var v natNatIfaddr
	it := d.objs.Ifaddrs.Iterate()
	for it.Next(&k, &v) {
		if !slices.Contains(keep, int(k)) {
			gone = append(gone, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range gone {
		if err := d.objs.Ifaddrs.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// ClearIfAddrs forgets every interface address.
func (d *Datapath) ClearIfAddrs() error {
	var k uint32
	var keys []uint32
	var v natNatIfaddr
	it := d.objs.Ifaddrs.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	for _, k := range keys {
		_ = d.objs.Ifaddrs.Delete(k)
	}
	return it.Err()
}

// RuleInfo is a loaded rule as ipnat -l shows it.
type RuleInfo struct {
	ID   uint32
	Text string
	Hits uint64
}

// Rules returns the active rules in file order.
func (d *Datapath) Rules() ([]RuleInfo, error) {
	slot := uint32(d.cfg(cfgActive) & 1)
	return d.slotRules(slot)
}

func (d *Datapath) slotRules(slot uint32) ([]RuleInfo, error) {
	n := uint32(d.cfg(cfgNRules + slot))
	if n > MaxRules {
		return nil, fmt.Errorf("NAT rule count %d out of range", n)
	}
	out := make([]RuleInfo, 0, n)
	for i := range n {
		k := slot*MaxRules + i
		var t natNatText
		if err := d.objs.Texts.Lookup(k, &t); err != nil {
			return nil, fmt.Errorf("reading NAT rule %d: %w", i, err)
		}
		l := min(int(t.Len), len(t.Text))
		b := make([]byte, l)
		for j := range l {
			b[j] = byte(t.Text[j])
		}
		var hits []uint64
		if err := d.objs.Hits.Lookup(k, &hits); err != nil {
			return nil, fmt.Errorf("reading NAT rule %d hits: %w", i, err)
		}
		var h uint64
		for _, x := range hits {
			h += x
		}
		out = append(out, RuleInfo{ID: t.Id, Text: string(b), Hits: h})
	}
	return out, nil
}

// LoadRules makes im the active rule set in one step: it is written into
// the spare slot, then published by one config write. A rule whose text
// was already loaded keeps its identity, its allocation state (next
// address, next port) and its hit count, as IPFilter's rules do when
// rules are added or removed around them.
func (d *Datapath) LoadRules(im *Image) error {
	unlock, err := d.lock()
	if err != nil {
		return err
	}
	defer unlock()
	cur := uint32(d.cfg(cfgActive) & 1)
	nxt := cur ^ 1
	old, err := d.slotRules(cur)
	if err != nil {
		return err
	}
	used := make([]bool, len(old))
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	nextID := d.cfg(cfgNextID)
	if nextID == 0 {
		nextID = 1
	}
	for i, nr := range im.rules {
		st := im.state[i]
		hits := make([]uint64, ncpu)
		nr.Id = 0
		for j, o := range old {
			if !used[j] && o.Text == im.texts[i] {
				used[j] = true
				nr.Id = o.ID
				ok := cur*MaxRules + uint32(j)
				var ost natNatRstate
				if err := d.objs.Rstates.Lookup(ok, &ost); err == nil {
					st = ost
				}
				_ = d.objs.Hits.Lookup(ok, &hits)
				break
			}
		}
		if nr.Id == 0 {
			nr.Id = uint32(nextID)
			nextID++
		}
		k := nxt*MaxRules + uint32(i)
		if err := d.objs.Rules.Update(k, nr, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("writing NAT rule %d: %w", i, err)
		}
		if err := d.objs.Rstates.Update(k, st, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("writing NAT rule %d state: %w", i, err)
		}
		if err := d.objs.Hits.Update(k, hits, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("writing NAT rule %d hits: %w", i, err)
		}
		var t natNatText
		t.Id = nr.Id
		text := im.texts[i]
		if len(text) > len(t.Text) {
			text = text[:len(t.Text)]
		}
		t.Len = uint32(len(text))
		for j := range len(text) {
			t.Text[j] = int8(text[j])
		}
		if err := d.objs.Texts.Update(k, t, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("writing NAT rule %d text: %w", i, err)
		}
	}
	for dir := range 2 {
		var o natNatOrder
		o.N = uint32(len(im.order[dir]))
		copy(o.Idx[:], im.order[dir])
		copy(o.Bucket[:], im.bucket[dir])
		for f := range 2 {
			o.Nmasks[f] = uint8(len(im.masks[dir][f]))
			copy(o.Masks[f][:], im.masks[dir][f])
		}
		if err := d.objs.Orders.Update(nxt*2+uint32(dir), o, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("writing the NAT rule order: %w", err)
		}
	}
	if err := d.setCfg(cfgNextID, nextID); err != nil {
		return err
	}
	if err := d.setCfg(cfgNRules+nxt, uint64(len(im.rules))); err != nil {
		return err
	}
	ftp := uint64(0)
	for _, r := range im.rules {
		if r.Flags&rfFTP != 0 {
			ftp = 1
		}
	}
	if err := d.setCfg(cfgFTPRules, ftp); err != nil {
		return err
	}
	// the switch: from here on new sessions use the new rules
	return d.setCfg(cfgActive, uint64(nxt))
}

// RevertRules makes the rule set that was active before the last
// LoadRules active again (LoadRules writes the new set beside the old
// one, which stays intact until the next load), for a change that fails
// after loading its rules. Hit counts and allocation state are the old
// set's own. Only meaningful right after LoadRules, under the same lock
// (ipfctl's transaction lock).
func (d *Datapath) RevertRules() error {
	unlock, err := d.lock()
	if err != nil {
		return err
	}
	defer unlock()
	prev := uint32(d.cfg(cfgActive)&1) ^ 1
	ftp := uint64(0)
	n := uint32(d.cfg(cfgNRules + prev))
	for i := uint32(0); i < n && i < MaxRules; i++ {
		var r natNatRule
		if err := d.objs.Rules.Lookup(prev*MaxRules+i, &r); err != nil {
			return fmt.Errorf("reading NAT rule %d: %w", i, err)
		}
		if r.Flags&rfFTP != 0 {
			ftp = 1
		}
	}
	if err := d.setCfg(cfgFTPRules, ftp); err != nil {
		return err
	}
	return d.setCfg(cfgActive, uint64(prev))
}

// Session is one live session as the kernel holds it.
type Session struct {
	Out                            bool // made by an outbound packet
	Type                           uint8
	Proto                          uint8
	V6                             bool
	Ports                          bool // TCP/UDP ports translated
	ICMPQuery                      bool
	OSrc, ODst, NSrc, NDst         netip.Addr
	OSPort, ODPort, NSPort, NDPort uint16
	Proxy, Slave, Wild             bool
	RuleID                         uint32
	Seq                            uint64
	IfIn, IfOut                    uint32    // bound interfaces by direction, 0: not yet
	Pkts, Bytes                    [2]uint64 // forward, reply
	TCPFlags                       [2]uint8
	Last                           [2]time.Duration // since boot (monotonic), 0 = never
	Age                            [2]uint32
}

// fastKey is the fast path's key of entry key k (c/nat.c fkey_of); the
// zero key, which no entry has, when k can have no fast twin.
// olderLayout refuses a directory holding the maps of a datapath made
// before fast4dm (nat14): its programs, which may still be attached and
// whose timers end the sessions they armed, empty no slot when a session
// ends, so the slots the new programs fill could outlive their sessions.
func olderLayout(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "sessions")); err != nil {
		return nil // no datapath there
	}
	if _, err := os.Stat(filepath.Join(dir, "fast4dm")); err == nil {
		return nil
	}
	return fmt.Errorf("%s holds the maps of a NAT datapath with another layout (an older Sluice, without fast4dm): "+
		"remove that datapath first (ipf -D, or detach it and delete the directory), then load again: %w", dir, ebpf.ErrMapIncompatible)
}

// slotIdx is c/nat.c's slot_idx: the slot of fast4 key k in fast4dm.
func slotIdx(k natNatFkey) uint32 {
	w := [4]uint32{k.Src, k.Dst, uint32(k.Sport) | uint32(k.Dport)<<16, uint32(k.Proto) | uint32(k.Dir)<<8 | uint32(k.Pad)<<16}
	h := w[0] * 0x9e3779b1
	h = (h ^ h>>16 ^ w[1]) * 0x85ebca77
	h = (h ^ h>>16 ^ w[2]) * 0xc2b2ae3d
	h = (h ^ h>>16 ^ w[3]) * 0x27d4eb2f
	h ^= h >> 16
	return h & (dmSlots - 1)
}

// slotOf returns the per-packet fields counted in k's slot of fast4dm
// (what the fast path translated through it) if the slot holds k. The
// copy is made under the slot's lock (BPF_F_LOCK), as the kernel's
// writers hold it.
func (d *Datapath) slotOf(k natNatFkey) (natNatFast, bool, error) {
	var s natNatSlot
	if err := d.objs.Fast4dm.LookupWithFlags(slotIdx(k), &s, ebpf.LookupLock); err != nil {
		return natNatFast{}, false, fmt.Errorf("reading the slot of a NAT fast entry: %w", err)
	}
	if s.K.Proto == 0 || s.K != k {
		return natNatFast{}, false, nil
	}
	return s.F, true, nil
}

// withSlot adds to fast4 entry f (at key k) what went through its slot.
func (d *Datapath) withSlot(k natNatFkey, f natNatFast) (natNatFast, error) {
	c, ok, err := d.slotOf(k)
	if err != nil || !ok {
		return f, err
	}
	f.Pkts += c.Pkts
	f.Bytes += c.Bytes
	f.Tcpflags |= c.Tcpflags
	f.Last = max(f.Last, c.Last)
	return f, nil
}

func fastKey(k natNatKey) natNatFkey {
	if k.Family != 4 || k.Dir > dirOut || (k.Proto != 6 && k.Proto != 17) {
		return natNatFkey{}
	}
	return natNatFkey{Src: k.Src[0], Dst: k.Dst[0], Sport: k.Sport, Dport: k.Dport, Proto: k.Proto, Dir: k.Dir}
}

func addrOf(w [4]uint32, v6 bool) netip.Addr {
	var b [16]byte
	for i := range 4 {
		binary.NativeEndian.PutUint32(b[4*i:], w[i])
	}
	if !v6 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

func ntohs(v uint16) uint16 { return v>>8 | v<<8 }

// Sessions returns the live sessions, newest first (the order ipnat -l
// lists them in).
func (d *Datapath) Sessions() ([]Session, error) {
	var k natNatKey
	var v natNatSess
	type half struct {
		key natNatKey
		val natNatSess
	}
	var fwd []half
	rev := map[natNatKey]natNatSess{}
	it := d.objs.Sessions.Iterate()
	for it.Next(&k, &v) {
		if v.W == 0 {
			fwd = append(fwd, half{k, v})
		} else {
			rev[k] = v
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading NAT sessions: %w", err)
	}
	// the times and flags of entries with a fast twin are kept there,
	// and what it translated
	fast := map[natNatFkey]natNatFast{}
	var fk natNatFkey
	var fv natNatFast4
	fit := d.objs.Fast4.Iterate()
	for fit.Next(&fk, &fv) {
		fast[fk] = fv.F
	}
	if err := fit.Err(); err != nil {
		return nil, fmt.Errorf("reading NAT sessions: %w", err)
	}
	for k, f := range fast {
		f, err := d.withSlot(k, f)
		if err != nil {
			return nil, err
		}
		fast[k] = f
	}
	fast6 := map[natNatKey]natNatFast{}
	var f6 natNatFast6
	fit6 := d.objs.Fast6.Iterate()
	for fit6.Next(&k, &f6) {
		fast6[k] = f6.F
	}
	if err := fit6.Err(); err != nil {
		return nil, fmt.Errorf("reading NAT sessions: %w", err)
	}
	live := func(k natNatKey, v *natNatSess) {
		f, ok := fast[fastKey(k)]
		if k.Family == 6 {
			f, ok = fast6[k]
		}
		if ok {
			v.Pkts += f.Pkts
			v.Bytes += f.Bytes
			v.Tcpflags, v.Last = f.Tcpflags, f.Last
		}
	}
	out := make([]Session, 0, len(fwd))
	for _, h := range fwd {
		v := h.val
		live(h.key, &v)
		v6 := v.Family == 6
		s := Session{
			Out: v.Sdir == dirOut, Type: v.Rtype, Proto: v.Proto, V6: v6,
			Ports: v.Pflags&pfTCPUDP != 0, ICMPQuery: v.Pflags&pfICMPQ != 0,
			OSrc: addrOf(v.T.Osrc, v6), ODst: addrOf(v.T.Odst, v6), NSrc: addrOf(v.T.Nsrc, v6), NDst: addrOf(v.T.Ndst, v6),
			OSPort: ntohs(v.T.Osport), ODPort: ntohs(v.T.Odport), NSPort: ntohs(v.T.Nsport), NDPort: ntohs(v.T.Ndport),
			Proxy: v.Sflags&sfProxy != 0, Slave: v.Sflags&sfSlave != 0, Wild: v.Sflags&sfWild != 0,
			RuleID: v.RuleId, Seq: v.Seq, Age: v.Age,
		}
		s.Pkts[0], s.Bytes[0], s.TCPFlags[0], s.Last[0] = v.Pkts, v.Bytes, v.Tcpflags, time.Duration(v.Last)
		// the interfaces as bound now: each entry's own for its
		// direction (a `*` rule's are bound by their first lookup)
		s.IfIn, s.IfOut = v.Ifindex, 0
		if v.Sdir == dirOut {
			s.IfIn, s.IfOut = 0, v.Ifindex
		}
		if r, ok := rev[v.Peer]; ok {
			if v.Sdir == dirOut {
				s.IfIn = r.Ifindex
			} else {
				s.IfOut = r.Ifindex
			}
			live(v.Peer, &r)
			s.Pkts[1], s.Bytes[1], s.TCPFlags[1], s.Last[1] = r.Pkts, r.Bytes, r.Tcpflags, time.Duration(r.Last)
		}
		out = append(out, s)
	}
	// newest first, as IPFilter's list is kept
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Seq > out[j-1].Seq; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// Hostmap is a host map entry.
type Hostmap struct {
	RuleID     uint32
	Port       uint16
	OSrc, ODst netip.Addr
	NSrc, NDst netip.Addr
	Use        int64
	Seq        uint64
}

// Hostmaps returns the host map, newest first.
func (d *Datapath) Hostmaps() ([]Hostmap, error) {
	var k natNatHmKey
	var v natNatHm
	var out []Hostmap
	it := d.objs.Hostmaps.Iterate()
	for it.Next(&k, &v) {
		v6 := k.Family == 6
		out = append(out, Hostmap{RuleID: k.RuleId, Port: k.Port, OSrc: addrOf(k.Src, v6), ODst: addrOf(k.Dst, v6),
			NSrc: addrOf(v.Nsrc, v6), NDst: addrOf(v.Ndst, v6), Use: v.Ref, Seq: v.Seq})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the NAT host map: %w", err)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Seq > out[j-1].Seq; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// flush runs the flush program in the given mode.
func (d *Datapath) flush(mode uint32, arg uint64) (int, error) {
	unlock, err := d.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	if d.objs.NatFlush == nil {
		return 0, errors.New("the NAT flush program is not loaded")
	}
	if err := d.setCfg(cfgFlushMode, uint64(mode)); err != nil {
		return 0, err
	}
	if err := d.setCfg(cfgFlushArg, arg); err != nil {
		return 0, err
	}
	frame := make([]byte, 64)
	frame[12], frame[13] = 0x08, 0x00
	if _, err := d.objs.NatFlush.Run(&ebpf.RunOptions{Data: frame}); err != nil {
		return 0, fmt.Errorf("running the NAT flush: %w", err)
	}
	return int(d.cfg(cfgFlushed)), nil
}

// armSweeper starts the sweeper's timer (again after a reload: its
// callback becomes the new program's). Its allocation can fail as a
// session's can (sess_arm), so it is tried again for about 1.5 s, as the
// filter's sweeper is (bpf.RetryArm); a datapath whose sweeper cannot be
// started is not loaded: a session made without a timer would never end.
func (d *Datapath) armSweeper() error {
	return bpf.RetryArm(func() error {
		failed, err := d.flush(flArm, 0)
		if err != nil {
			return err
		}
		if failed != 0 {
			return errors.New("starting the NAT sweeper's timer: the kernel gave no memory for it")
		}
		return nil
	})
}

// Sweep runs the sweeper once now (tests; its timer does it every tick).
func (d *Datapath) Sweep() error {
	_, err := d.flush(flSweep, 0)
	return err
}

// SweeperStats are the sweeper's counters.
type SweeperStats struct {
	// Untimed counts the sessions made without a timer of their own
	// since the sweeper's last walk (a walk counts again those it left
	// without one). Walks counts its walks of the session table, Armed
	// the timers it set, Ended the sessions it ended.
	Untimed, Walks, Armed, Ended uint64
}

// Sweeper returns the sweeper's counters (zero for a datapath loaded
// before there was a sweeper).
func (d *Datapath) Sweeper() (SweeperStats, error) {
	var v natNatSweeper
	if d.objs.Sweeper == nil {
		return SweeperStats{}, nil
	}
	if err := d.objs.Sweeper.Lookup(uint32(0), &v); err != nil {
		return SweeperStats{}, fmt.Errorf("reading the NAT sweeper: %w", err)
	}
	return SweeperStats{Untimed: v.Untimed, Walks: v.Walks, Armed: v.Armed, Ended: v.Ended}, nil
}

// setTimerFault makes timer allocations fail (tests): swfPackets the
// packets', swfAll the sweeper's too, 0 none. The update stops the
// sweeper's timer (an array's update frees the value's timer): it is
// started again.
func (d *Datapath) setTimerFault(mode uint64) error {
	var v natNatSweeper
	if err := d.objs.Sweeper.Lookup(uint32(0), &v); err != nil {
		return err
	}
	v.Fault = mode
	if err := d.objs.Sweeper.Update(uint32(0), &v, ebpf.UpdateExist); err != nil {
		return err
	}
	return d.armSweeper()
}

// FlushSessions removes every session (ipnat -F) and returns how many.
func (d *Datapath) FlushSessions() (int, error) { return d.flush(flAll, 0) }

// FlushRuleSessions removes the sessions of one rule (ipnat -rp, purge).
func (d *Datapath) FlushRuleSessions(id uint32) (int, error) { return d.flush(flRule, uint64(id)) }

// ExpireSessions removes the sessions whose lifetime has passed at the
// datapath's clock (the timers do so by themselves; tests that move the
// clock use this).
func (d *Datapath) ExpireSessions() (int, error) { return d.flush(flExpired, 0) }

// Stats are the datapath's counters (ipnat -s).
type Stats struct {
	Side [2]SideStats // in, out
	// Expired and Flushed count sessions ended by their timers and by
	// flushes; HostmapNew and HostmapAdd host map entries made and reused.
	Expired, Flushed, HostmapNew, HostmapAdd, WildUsed uint64
	// NoSlow counts packets left alone for want of a slow program
	// (nothing in use: Load puts them in place).
	NoSlow uint64
	// NoTimer counts sessions (and proxy wildcards) made without a timer
	// of their own because the kernel's allocation failed: the sweeper
	// gives them one later (SweepArmed) or ends them (SweepEnded).
	NoTimer, SweepArmed, SweepEnded uint64
	Active, Wilds                   uint64 // now
	Rules, MapRules, RdrRules       int
	TableMax                        uint64
}

// SideStats are the counters of one direction. Fast counts the packets
// of Translated that the fast path (IPv4 or IPv6) did. Raced counts the
// first packets of a flow that found, while making their session, the
// one another CPU had just made for the same flow, and were translated
// by it (IPFilter's lock would have made them its next packets).
type SideStats struct {
	Translated, Ignored, BadNAT, Added, Miss, TableMax, Exists, ICMP, Frag,
	ProxyFail, InsertFail, Wrap, IfAddr, Fast, Raced uint64
}

// Active returns the number of live sessions.
func (d *Datapath) Active() uint64 { return d.cfg(cfgCount) }

// Stats reads the counters.
func (d *Datapath) Stats() (Stats, error) {
	var st Stats
	get := func(i uint32) (uint64, error) {
		var vs []uint64
		if err := d.objs.Stats.Lookup(i, &vs); err != nil {
			return 0, fmt.Errorf("reading NAT statistics: %w", err)
		}
		var s uint64
		for _, v := range vs {
			s += v
		}
		return s, nil
	}
	for side := range 2 {
		base := uint32(side * nsSide)
		ss := &st.Side[side]
		for i, p := range []*uint64{&ss.Translated, &ss.Ignored, &ss.BadNAT, &ss.Added, &ss.Miss, &ss.TableMax,
			&ss.Exists, &ss.ICMP, &ss.Frag, &ss.ProxyFail, &ss.InsertFail, &ss.Wrap, &ss.IfAddr, &ss.Fast, &ss.Raced} {
			v, err := get(base + uint32(i))
			if err != nil {
				return st, err
			}
			*p = v
		}
	}
	// what the fast path translated is counted by its entries (the
	// fast path writes no counter of its own) and, for those gone, in
	// nsFastGone (read into Fast above)
	var fk natNatFkey
	var fv natNatFast4
	var keys []natNatFkey
	it := d.objs.Fast4.Iterate()
	for it.Next(&fk, &fv) {
		st.Side[fk.Dir&1].Fast += fv.F.Pkts
		keys = append(keys, fk)
	}
	if err := it.Err(); err != nil {
		return st, fmt.Errorf("reading NAT statistics: %w", err)
	}
	// and what went through the entries' slots
	for _, k := range keys {
		c, ok, err := d.slotOf(k)
		if err != nil {
			return st, fmt.Errorf("reading NAT statistics: %w", err)
		}
		if ok {
			st.Side[k.Dir&1].Fast += c.Pkts
		}
	}
	var k6 natNatKey
	var f6 natNatFast6
	it6 := d.objs.Fast6.Iterate()
	for it6.Next(&k6, &f6) {
		st.Side[k6.Dir&1].Fast += f6.F.Pkts
	}
	if err := it6.Err(); err != nil {
		return st, fmt.Errorf("reading NAT statistics: %w", err)
	}
	for side := range 2 {
		st.Side[side].Translated += st.Side[side].Fast
	}
	for i, p := range map[uint32]*uint64{nsExpired: &st.Expired, nsFlushed: &st.Flushed, nsHMNew: &st.HostmapNew,
		nsHMAdd: &st.HostmapAdd, nsWildUsed: &st.WildUsed, nsNoSlow: &st.NoSlow, nsNoTimer: &st.NoTimer} {
		v, err := get(i)
		if err != nil {
			return st, err
		}
		*p = v
	}
	sw, err := d.Sweeper()
	if err != nil {
		return st, err
	}
	st.SweepArmed, st.SweepEnded = sw.Armed, sw.Ended
	st.Active = d.cfg(cfgCount)
	st.Wilds = d.cfg(cfgWilds)
	st.TableMax = d.cfg(cfgMax)
	rules, err := d.Rules()
	if err != nil {
		return st, err
	}
	st.Rules = len(rules)
	slot := uint32(d.cfg(cfgActive) & 1)
	for dir, p := range []*int{&st.RdrRules, &st.MapRules} {
		var o natNatOrder
		if err := d.objs.Orders.Lookup(slot*2+uint32(dir), &o); err == nil {
			*p = int(o.N)
		}
	}
	return st, nil
}

// ZeroStats zeroes the counters.
func (d *Datapath) ZeroStats() error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	zero := make([]uint64, ncpu)
	for i := range uint32(nsN) {
		if err := d.objs.Stats.Update(i, zero, ebpf.UpdateAny); err != nil {
			return err
		}
	}
	return nil
}

// ensureBPFFS makes sure dir lives on a bpf filesystem, mounting one on
// /sys/fs/bpf when the default location has none.
func ensureBPFFS(dir string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", parent, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", parent, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		if parent != "/sys/fs/bpf" {
			return fmt.Errorf("%s is not on a bpf filesystem", dir)
		}
		if err := unix.Mount("bpf", parent, "bpf", 0, "mode=0700"); err != nil {
			return fmt.Errorf("mounting bpffs on %s: %w", parent, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return nil
}

// Info describes the session for the engine's printer (ipnat -l).
func (s Session) Info() gonat.SessionInfo {
	return gonat.SessionInfo{Type: ipnat.Type(s.Type), Out: s.Out, Proto: s.Proto, Ports: s.Ports,
		OSrc: s.OSrc, ODst: s.ODst, NSrc: s.NSrc, NDst: s.NDst,
		OSPort: s.OSPort, ODPort: s.ODPort, NSPort: s.NSPort, NDPort: s.NDPort, Proxy: s.Proxy}
}

// InlineSlots returns the direct array of IPv4 fast entries (fast4dm) and
// the length of a jiffy the plain programs stamp times with, for the
// filter's programs to translate established flows through (nat15);
// ok is false when the programs are not plain.
func (d *Datapath) InlineSlots() (dm *ebpf.Map, nspj uint32, ok bool) {
	if !d.Plain() || d.objs.Fast4dm == nil {
		return nil, 0, false
	}
	return d.objs.Fast4dm, uint32(d.cfg(cfgNsPerJif)), true
}

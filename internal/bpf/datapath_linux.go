package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"sluice/internal/frag"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

var errNoPrograms = errors.New("datapath opened from pins without programs: use Load")

// ErrNotLoaded is returned by OpenPinned when nothing is pinned there.
var ErrNotLoaded = errors.New("filter datapath not loaded")

// Options configure Load.
type Options struct {
	// PinDir is the bpffs directory for the pins (DefaultPinDir when "").
	// Tests use a unique subdirectory.
	PinDir string
	// NoPin keeps everything in this process only (benchmarks, tests of
	// the program alone); Attach then fails.
	NoPin bool
	// ForceVerifierError replaces the ingress program with one the
	// verifier rejects: a hook for tests of the load-failure path (a
	// first load that fails must leave no pins behind).
	ForceVerifierError bool
	// Unpublished leaves a first load (no datapath pinned in PinDir yet)
	// in its staging directory: the caller writes its rules, then calls
	// Publish, so that the datapath appears with them. Attach needs a
	// published datapath. A reload is published as it is.
	Unpublished bool
}

// Datapath is the loaded filter: maps and programs, pinned under one
// directory. Methods may be called from several goroutines; mu serialises
// changes to the rule slots, and an flock on the pin directory serialises
// them between processes.
type Datapath struct {
	// dir is where the pins are: the pin directory, or the staging
	// directory of a first load not yet published to final.
	dir     string
	final   string
	objs    filterObjects
	mu      sync.Mutex
	forceTC bool       // tests: attach with clsact as on kernels without TCX
	cfgMu   sync.Mutex // serialises setCfg's read-modify-write in this process
	// ctlMu serialises control calls through an older Sluice's pinned
	// sluice_ctl (ctlShared), whose arguments are one shared map entry
	// (ctl_args) written, run and read back
	ctlMu sync.Mutex
	// ctl is sluice_control: objs.SluiceControl after Load, the pinned
	// program after OpenPinned (then ownCtl: Close closes it), which may
	// be an older Sluice's sluice_ctl (ctlShared: it reads ctl_args only).
	ctl       *ebpf.Program
	ownCtl    bool
	ctlShared bool
	// the programs' load-time specialisation (spec_linux.go): the ones
	// loaded by key, the key of objs' programs, and whether d came from
	// OpenPinned (then objs holds no programs)
	variants map[uint64]progPair
	progKey  uint64
	opened   bool
	// specMutate changes the spec of a specialised load (tests: a
	// verifier rejection); noSpecialise keeps the generic programs
	// (benchmarks of the generic program)
	specMutate   func(*ebpf.CollectionSpec)
	noSpecialise bool
	// NAT's established path inside the programs (natin_linux.go)
	natin natInline
	// missing are the maps added since an older Sluice loaded the
	// datapath (optionalMaps), which OpenPinned found unpinned: their
	// fields in objs are nil
	missing []string
}

// tick is IPFilter's timer tick (Tick): timeouts are counted in them.
const tick = Tick

// Load loads the filter programs and maps. Maps already pinned in the
// directory are reused (rules, state and counters survive a reload); a
// fresh directory gets the defaults: filter enabled, default pass, IPFilter
// timeouts. A verifier rejection is returned with its log (print with %+v).
func Load(opts Options) (*Datapath, error) {
	return load(opts, nil)
}

// load is Load with a hook that may change the spec first (tests use it to
// make the verifier reject a program).
func load(opts Options, mutate func(*ebpf.CollectionSpec)) (*Datapath, error) {
	if err := CheckMemoryModel(); err != nil {
		return nil, err
	}
	spec, err := filterSpec()
	if err != nil {
		return nil, fmt.Errorf("loading filter spec: %w", err)
	}
	if mutate != nil {
		mutate(spec)
	}
	if opts.ForceVerifierError {
		spec.Programs["sluice_ingress"].Instructions = asm.Instructions{
			asm.Mov.Reg(asm.R0, asm.R5), // R5 is not initialised
			asm.Return(),
		}
	}
	d := &Datapath{dir: opts.PinDir}
	// what the pin directory held before, so that a failed reload removes
	// exactly the pins it created
	var before map[string]bool
	var copts ebpf.CollectionOptions
	if !opts.NoPin {
		if d.dir == "" {
			d.dir = DefaultPinDir
		}
		d.dir = filepath.Clean(d.dir)
		if err := ensureBPFFS(d.dir); err != nil {
			return nil, err
		}
		if err := FinishInterrupted(d.dir); err != nil {
			return nil, fmt.Errorf("clearing what an interrupted load or removal left: %w", err)
		}
		if _, err := os.Stat(filepath.Join(d.dir, "config")); errors.Is(err, os.ErrNotExist) {
			// a first load: built aside, published whole (see
			// pindir_linux.go)
			staging, err := newStaging(d.dir)
			if err != nil {
				return nil, err
			}
			d.final, d.dir = d.dir, staging
		} else if err != nil {
			return nil, err
		} else {
			ents, err := os.ReadDir(d.dir)
			if err != nil {
				return nil, err
			}
			before = make(map[string]bool, len(ents))
			for _, e := range ents {
				before[e.Name()] = true
			}
		}
		for name, m := range spec.Maps {
			// .rodata/.bss belong to one program load, not to the pins
			if !strings.HasPrefix(name, ".") {
				m.Pinning = ebpf.PinByName
			}
		}
		copts.Maps.PinPath = d.dir
		// the large sets' array as ensureRunBig left it
		fitRunBig(spec, d.dir)
	}
	// the counters of a datapath of an older Sluice are moved to this
	// layout in place (statsupgrade_linux.go), pinned once the new
	// programs are attached
	var newStats *ebpf.Map
	if !opts.NoPin && d.final == "" {
		m, err := upgradeStats(spec, d.dir)
		if err != nil {
			return nil, err
		}
		if m != nil {
			defer m.Close() // the load takes a clone
			newStats = m
			copts.MapReplacements = map[string]*ebpf.Map{"stats": m}
		}
	}
	fail := func(err error) (*Datapath, error) {
		d.closeVariants()
		d.objs.Close()
		switch {
		case opts.NoPin:
		case d.final != "":
			_ = clearPinDir(d.dir, false)
		default:
			ents, _ := os.ReadDir(d.dir)
			for _, e := range ents {
				if !before[e.Name()] {
					_ = os.Remove(filepath.Join(d.dir, e.Name()))
				}
			}
		}
		return nil, err
	}
	// the programs specialised at once for the configuration pinned
	// here (a reload) or a new one's: one verifier run, not two
	first := initialSpec(d.dir, d.final != "" || opts.NoPin)
	if err := first.setVars(spec); err != nil {
		return fail(err)
	}
	foldRodata(spec)
	if err := spec.LoadAndAssign(&d.objs, &copts); err != nil {
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return fail(fmt.Errorf("%s holds the maps of a datapath with another layout (an older Sluice): "+
				"remove that datapath first (detach it and delete the directory), then load again: %w", d.dir, err))
		}
		return fail(wrapVerifier("loading filter objects", err))
	}
	d.ctl = d.objs.SluiceControl
	if err := d.initConfig(); err != nil {
		return fail(err)
	}
	// the sweeper reclaims expired entries from now on, with no process
	// around; a reload points it at the new program. Its timer's memory
	// may be refused for a moment (retry.go)
	if err := retry(armTries, armPause, time.Sleep, func() error {
		_, err := d.control(ctlArm, 0)
		return err
	}); err != nil {
		return fail(fmt.Errorf("starting the state sweeper: %w", err))
	}
	if !opts.NoPin {
		if err := pinOver(d.objs.SluiceControl, filepath.Join(d.dir, "prog_ctl")); err != nil {
			return fail(err)
		}
	}
	// the programs specialised for the configuration and sets pinned
	// here (loaded again if they changed meanwhile), attached where the
	// old ones were and pinned (prog_ingress, prog_egress)
	d.variants = map[uint64]progPair{first.key(): {d.objs.SluiceIngress, d.objs.SluiceEgress}}
	d.progKey = first.key()
	if !opts.NoPin {
		pinVariant(d.dir, variantPin(first.key(), first.natMap), d.variants[first.key()])
	}
	unlock := d.lockCfg()
	err = d.specialiseLocked(-1, true)
	unlock()
	if err != nil {
		return fail(err)
	}
	if newStats != nil {
		if err := pinStats(newStats, d.dir); err != nil {
			return fail(err)
		}
	}
	if opts.Unpublished || d.final == "" {
		return d, nil
	}
	if err := d.Publish(); err != nil {
		return fail(err)
	}
	return d, nil
}

// Publish makes a first load, built aside (Options.Unpublished), the
// datapath of its pin directory: one rename, so other processes see no
// datapath or the whole of it. It does nothing for a datapath that is
// published already.
func (d *Datapath) Publish() error {
	if d.final == "" {
		return nil
	}
	if err := publish(d.dir, d.final); err != nil {
		return err
	}
	d.dir, d.final = d.final, ""
	return nil
}

// Published reports whether the datapath is in its pin directory (false
// for a first load built aside and not published yet).
func (d *Datapath) Published() bool { return d.final == "" }

// OpenPinned opens the maps of a datapath another process loaded into
// dir, without loading the programs (no verifier run): enough for rules,
// counters, state and logs. Attach and Run need a Datapath from Load.
func OpenPinned(dir string) (*Datapath, error) {
	if dir == "" {
		dir = DefaultPinDir
	}
	if _, err := os.Stat(filepath.Join(dir, "config")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", dir, ErrNotLoaded)
		}
		// EACCES on a 0700 bpffs is not "nothing loaded": say so
		return nil, err
	}
	spec, err := filterSpec()
	if err != nil {
		return nil, fmt.Errorf("loading filter spec: %w", err)
	}
	// only what is pinned: never create a map (see pindir_linux.go); a
	// datapath of an older Sluice lacks the maps added since
	// (optionalMaps), read without them
	fitRunBig(spec, dir)
	pinned, missing, err := openPinnedMaps(spec, dir)
	if err != nil {
		return nil, err
	}
	if oldStats(pinned["stats"]) {
		// an older Sluice's counters, read as they are until a reload
		// moves them (statsupgrade_linux.go)
		ms, old := spec.Maps["stats"], pinned["stats"]
		ms.Type, ms.MaxEntries, ms.ValueSize = old.Type(), old.MaxEntries(), old.ValueSize()
	}
	d := &Datapath{dir: dir, opened: true, missing: missing}
	// assigned, not loaded with LoadAndAssign: that would create the
	// maps that are not pinned
	err = assignPinned(spec, &d.objs.filterMaps, pinned)
	for _, m := range pinned {
		m.Close() // those assignPinned did not take
	}
	if err != nil {
		d.objs.Close()
		return nil, fmt.Errorf("opening pinned maps in %s: %w", dir, err)
	}
	// the control program, for the table changes that must keep the
	// kernel's accounting (ipf -FS)
	if p, err := ebpf.LoadPinnedProgram(filepath.Join(dir, "prog_ctl"), nil); err == nil {
		d.ctl, d.ownCtl = p, true
		// an older Sluice's sluice_ctl takes its arguments from
		// ctl_args only: told by the name (the kernel's copy of it)
		if info, err := p.Info(); err == nil && info.Name != ctlProgName {
			d.ctlShared = true
		}
	}
	return d, nil
}

// Dir returns the pin directory ("" when not pinned).
func (d *Datapath) Dir() string { return d.dir }

// Close releases this process's handles; pinned objects stay.
func (d *Datapath) Close() error {
	if d.ownCtl {
		d.ctl.Close()
	}
	_ = d.closeNATLinks()
	if d.dir != "" && d.natin.dm != nil {
		// opened by syncNAT (InlineNAT's belongs to its caller)
		d.natin.dm.Close()
	}
	d.closeVariants()
	return d.objs.Close()
}

// ctlProgName is the name of the control program (sluice_control), which
// takes each call's arguments from the call's own packet; an older
// Sluice's sluice_ctl read them from ctl_args.
const ctlProgName = "sluice_control"

// control runs sluice_control with operation op over n entries of
// ctl_keys and returns what it removed. The operation, count and result
// travel in the test run's own packet (struct ctl_msg), so that control
// calls of several processes at once (a Load re-arming the sweeper, a
// Sweep, a FlushStates) cannot run or read each other's; ctl_keys is
// shared: its callers (FlushStates) hold the pin directory's lock.
func (d *Datapath) control(op, n uint32) (int, error) {
	if d.ctl == nil {
		return 0, fmt.Errorf("control program not loaded in %s (a datapath of an older Sluice?): %w", d.dir, errNoPrograms)
	}
	if d.ctlShared {
		return d.controlShared(op, n)
	}
	in, err := binary.Append(make([]byte, 14), binary.NativeEndian, ctlMsg{Magic: ctlMagic, Op: op, N: n})
	if err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	out := make([]byte, len(in))
	ret, err := d.ctl.Run(&ebpf.RunOptions{Data: in, DataOut: out})
	if err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	if int32(ret) < 0 {
		return 0, fmt.Errorf("control operation %d failed", op)
	}
	var m ctlMsg
	if _, err := binary.Decode(out[14:], binary.NativeEndian, &m); err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	if m.Magic != ctlDone {
		return 0, fmt.Errorf("control operation %d: the control program in %s did not answer", op, d.dir)
	}
	return int(m.Removed), nil
}

// controlShared is control through an older Sluice's sluice_ctl, which
// takes its arguments from ctl_args, one map entry every process shares:
// calls in this process are serialised (ctlMu), another process's are
// not (as before trust12) until a reload pins sluice_control.
func (d *Datapath) controlShared(op, n uint32) (int, error) {
	d.ctlMu.Lock()
	defer d.ctlMu.Unlock()
	if err := d.objs.CtlArgs.Put(uint32(0), filterCtlArgs{Op: op, N: n}); err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	ret, err := d.ctl.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
	if err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	if int32(ret) < 0 {
		return 0, fmt.Errorf("control operation %d failed", op)
	}
	var a filterCtlArgs
	if err := d.objs.CtlArgs.Lookup(uint32(0), &a); err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	return int(a.Removed), nil
}

func (d *Datapath) initConfig() error {
	var c filterConf
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	if c.V[cfgToTCP+4] != 0 {
		return nil // already initialised by an earlier Load
	}
	c = defaultConf()
	if err := d.objs.Config.Put(uint32(0), &c); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	return nil
}

// defaultConf is the configuration of a new datapath: filter enabled,
// default pass, IPFilter's timeouts, three empty slots.
func defaultConf() filterConf {
	var c filterConf
	def := state.DefaultConfig()
	set := map[uint32]uint64{
		cfgActive:    0,
		cfgInactive:  1,
		cfgEnabled:   1,
		cfgDefPass:   uint64(ruleset.FRPass | ruleset.FRNoMatch),
		cfgMinTTL:    4,
		cfgStateMax:  uint64(def.Max),
		cfgToUDP:     uint64(def.UDPTimeout),
		cfgToUDPAck:  uint64(def.UDPAckTimeout),
		cfgToICMP:    uint64(def.ICMPTimeout),
		cfgToICMPAck: uint64(def.ICMPAckTimeout),
		cfgToIP:      uint64(def.IPTimeout),
		cfgStateLog:  1,
		cfgFragTTL:   frag.DefaultTTL,
		cfgFragSize:  frag.DefaultSize,
		cfgStateSize: uint64(def.Size),
		cfgWMHigh:    uint64(def.WMHigh),
		cfgWMLow:     uint64(def.WMLow),
		cfgWMFreq:    uint64(def.WMFreq),
		cfgDCA:       1,
		// an empty slot is idle (FEAT_IDLE)
		cfgIndex0:     featIdle,
		cfgIndex0 + 1: featIdle,
		cfgIndex0 + 2: featIdle,
	}
	for st, t := range def.TCPTimeout {
		set[uint32(cfgToTCP+st)] = uint64(t)
	}
	for k, v := range set {
		if (k >= cfgToTCP && k <= cfgToIP) || k == cfgFragTTL || k == cfgWMFreq {
			v *= uint64(tick)
		}
		c.V[k] = v
	}
	return c
}

func (d *Datapath) cfg(key uint32) uint64 {
	var c filterConf
	if key >= cfgN || d.objs.Config.Lookup(uint32(0), &c) != nil {
		return 0
	}
	return c.V[key]
}

// setCfg changes one configuration value. The configuration is one map
// value (the program reads it with one lookup), so a change reads,
// modifies and writes it back: cfgMu, and between processes an flock on
// the pinned map, keep two changes from losing one. A key the programs
// are specialised on (specKeys) re-specialises them under the same lock.
func (d *Datapath) setCfg(key uint32, v uint64) error {
	if key >= cfgN {
		return fmt.Errorf("config key %d out of range", key)
	}
	unlock := d.lockCfg()
	defer unlock()
	return d.setCfgLocked(key, v)
}

// setCfgLocked is setCfg for a caller that holds lockCfg.
func (d *Datapath) setCfgLocked(key uint32, v uint64) error {
	var c filterConf
	if err := d.objs.Config.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	old := c.V[key]
	if specKeys[key] && old != v {
		if err := d.refuseOlder(); err != nil {
			return err
		}
	}
	if err := d.writeCfgRaw(&c, key, v); err != nil {
		return err
	}
	if !specKeys[key] || old == v {
		return nil
	}
	// the programs follow the value; if they cannot, the value goes back
	// and the old programs stay (they were made for it)
	if err := d.specialiseLocked(-1, false); err != nil {
		if rerr := d.objs.Config.Lookup(uint32(0), &c); rerr == nil {
			_ = d.writeCfgRaw(&c, key, old)
		}
		return err
	}
	return nil
}

// SetEnabled switches the filter on or off (ipf -E / -D); when off every
// packet passes untouched.
func (d *Datapath) SetEnabled(on bool) error {
	v := uint64(0)
	if on {
		v = 1
	}
	return d.setCfg(cfgEnabled, v)
}

// Enabled reports whether the filter is on.
func (d *Datapath) Enabled() bool { return d.cfg(cfgEnabled) != 0 }

// SetDefaultBlock makes packets no rule matches blocked (true) or passed.
func (d *Datapath) SetDefaultBlock(block bool) error {
	v := uint64(ruleset.FRPass | ruleset.FRNoMatch)
	if block {
		v = uint64(ruleset.FRBlock | ruleset.FRNoMatch)
	}
	return d.setCfg(cfgDefPass, v)
}

// LogFlags are ipf -l's global logging choices.
type LogFlags uint32

// The flags of SetLogFlags.
const (
	LogPass    LogFlags = LogFlags(ruleset.FRPass)
	LogBlock   LogFlags = LogFlags(ruleset.FRBlock)
	LogNomatch LogFlags = LogFlags(ruleset.FRNoMatch)
)

// SetLogFlags sets which verdicts are logged even without a log rule.
func (d *Datapath) SetLogFlags(f LogFlags) error { return d.setCfg(cfgLogFlags, uint64(f)) }

// LogFlags returns the current global logging flags.
func (d *Datapath) LogFlags() LogFlags { return LogFlags(d.cfg(cfgLogFlags)) }

// SetStateMax sets state_max (entries not created by a rule with a limit);
// the table holds at most StateCapacity entries.
func (d *Datapath) SetStateMax(n uint64) error {
	if n > stateCap {
		return fmt.Errorf("state_max %d: the kernel state table holds at most %d entries", n, stateCap)
	}
	return d.setCfg(cfgStateMax, n)
}

// StateCapacity is the most entries the kernel state table holds, and so
// the largest state_max.
const StateCapacity = stateCap

// SetDCA switches HP's DCA connection limits (keep limit) on or off:
// ipf -m e / -m d. Off, keep-limit rules pass what they match unlimited.
func (d *Datapath) SetDCA(on bool) error {
	v := uint64(0)
	if on {
		v = 1
	}
	return d.setCfg(cfgDCA, v)
}

// DCAEnabled reports whether keep limits are enforced (ipf -m q).
func (d *Datapath) DCAEnabled() bool { return d.cfg(cfgDCA) != 0 }

// DCACount is one source's (or, cumulative, one rule's) open connections
// under a keep limit.
type DCACount struct {
	Rule  RuleRef
	Src   netip.Addr // invalid for a cumulative limit
	Conns uint32
}

// RuleRef names a rule of the active or inactive set by list and number.
type RuleRef struct {
	Set    Set
	List   uint32 // list id (0 in, 1 out, 4+ groups)
	Number int    // 1-based within the list
}

// DCACounts lists the keep-limit counts of the rules loaded now (ipf -m t).
func (d *Datapath) DCACounts() ([]DCACount, error) {
	var (
		k   filterDcaKey
		v   uint32
		out []DCACount
	)
	slots := map[uint32]Set{d.slotOf(Active): Active, d.slotOf(Inactive): Inactive}
	it := d.objs.Dca.Iterate()
	for it.Next(&k, &v) {
		set, ok := slots[k.Slot]
		if !ok || v == 0 || k.Gen != uint32(d.cfg(cfgGen0+k.Slot)) {
			continue
		}
		r, err := d.ruleAt(k.Slot, k.Rule)
		if err != nil {
			continue
		}
		c := DCACount{Rule: RuleRef{Set: set, List: r.GroupNo, Number: int(r.RuleNo)}, Conns: v}
		if r.LimitCumul == 0 {
			c.Src = keyAddr(k.Src, addrFamily(k.Src, r.Family))
		}
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading keep-limit counts: %w", err)
	}
	return out, nil
}

// ruleAt reads rule idx of slot.
func (d *Datapath) ruleAt(slot, idx uint32) (filterRule, error) {
	var r filterRule
	sm, err := d.slotMaps(slot)
	if err != nil {
		return r, err
	}
	defer sm.close()
	return r, sm.rules.Lookup(idx, &r)
}

// addrFamily guesses an address's family from the rule's, and otherwise
// from whether anything but the first word is set.
func addrFamily(w [4]uint32, fam uint8) uint8 {
	if fam == 4 || fam == 6 {
		return fam
	}
	if w[1]|w[2]|w[3] != 0 {
		return 6
	}
	return 4
}

// AdvanceClock moves the datapath's clock forward (state timeouts); tests
// use it to expire entries without waiting.
func (d *Datapath) AdvanceClock(by time.Duration) error {
	return d.setCfg(cfgClock, d.cfg(cfgClock)+uint64(by))
}

// lock serialises rule changes within and between processes.
func (d *Datapath) lock() (func(), error) {
	d.mu.Lock()
	if d.dir == "" {
		return d.mu.Unlock, nil
	}
	fd, err := unix.Open(d.dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("locking %s: %w", d.dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		d.mu.Unlock()
		return nil, fmt.Errorf("locking %s: %w", d.dir, err)
	}
	unlock := func() {
		unix.Flock(fd, unix.LOCK_UN)
		unix.Close(fd)
		d.mu.Unlock()
	}
	if err := d.finishSwap(); err != nil {
		unlock()
		return nil, fmt.Errorf("finishing an interrupted swap: %w", err)
	}
	return unlock, nil
}

// ensureBPFFS makes sure dir lives on a bpf filesystem, mounting one on
// its parent when the parent is /sys/fs/bpf and nothing is mounted there.
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
	return nil
}

// Remove detaches the datapath from every interface and deletes all its
// pinned objects and the directory (RemovePinned); a first load not
// published yet only loses its staging directory.
func (d *Datapath) Remove() error {
	var errs []error
	switch {
	case d.dir == "":
		errs = append(errs, d.Detach())
	case d.final != "":
		errs = append(errs, clearPinDir(d.dir, false))
	default:
		errs = append(errs, RemovePinned(d.dir))
	}
	errs = append(errs, d.Close())
	return errors.Join(errs...)
}

// verifierError keeps the verifier log reachable through fmt: %+v prints
// the whole log, %v and Error() only the summary.
type verifierError struct {
	msg string
	ve  *ebpf.VerifierError
	err error
}

func wrapVerifier(msg string, err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return &verifierError{msg: msg, ve: ve, err: err}
	}
	return fmt.Errorf("%s: %w", msg, err)
}

func (e *verifierError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *verifierError) Unwrap() error { return e.err }

// Format prints the verifier log with %+v.
func (e *verifierError) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('+') {
		fmt.Fprintf(f, "%s: %+v", e.msg, e.ve)
		return
	}
	fmt.Fprint(f, e.Error())
}

// StateMax returns state_max.
func (d *Datapath) StateMax() uint64 { return d.cfg(cfgStateMax) }

// Verdict is what the program did with a frame given to Run.
type Verdict int

// The verdicts of Run.
const (
	VerdictPass  Verdict = iota // TC_ACT_UNSPEC: passed on
	VerdictBlock                // TC_ACT_SHOT
	VerdictReply                // a generated reply was redirected (return-rst/-icmp)
)

func (v Verdict) String() string {
	switch v {
	case VerdictPass:
		return "pass"
	case VerdictBlock:
		return "block"
	case VerdictReply:
		return "reply"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Run sends one Ethernet frame through the ingress (out=false) or egress
// program with BPF_PROG_TEST_RUN, exactly as if it had arrived on the
// loopback interface, and returns the verdict and the frame as the program
// left it (a generated reply replaces it). The datapath's state and
// counters change as for a real packet.
func (d *Datapath) Run(out bool, frame []byte) (Verdict, []byte, error) {
	prog := d.objs.SluiceIngress
	if out {
		prog = d.objs.SluiceEgress
	}
	if prog == nil {
		return 0, nil, errNoPrograms
	}
	buf := make([]byte, len(frame)+256)
	opts := ebpf.RunOptions{Data: frame, DataOut: buf}
	ret, err := prog.Run(&opts)
	if err != nil {
		return 0, nil, fmt.Errorf("running filter: %w", err)
	}
	buf = opts.DataOut
	switch int32(ret) {
	case -1, 0:
		return VerdictPass, buf, nil
	case 2:
		return VerdictBlock, buf, nil
	case 7:
		return VerdictReply, buf, nil
	}
	return Verdict(ret), buf, fmt.Errorf("unexpected program return %d", int32(ret))
}

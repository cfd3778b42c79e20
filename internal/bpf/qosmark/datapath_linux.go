//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
	"sluice/internal/qos"
	"sluice/internal/qos/tc"
)

// Options tune Load.
type Options struct {
	// PinDir is the bpffs directory holding the state (DefaultPinDir if empty).
	PinDir string
	// Continue skips an adapter that fails and loads the others; the
	// default (abort) restores the previous configuration on any error.
	Continue bool
	// Log receives progress messages (-verbose); nil discards them.
	Log io.Writer
	// LinkRate returns an adapter's speed in bits/s for percentage rates
	// and HTB ceilings; tc.LinkSpeed (sysfs) if nil.
	LinkRate func(ifname string) uint64

	// foreign is set for an unload of another network namespace's
	// configuration: its adapters' qdiscs and VLAN priorities are that
	// namespace's, and are left alone (netns_linux.go).
	foreign bool

	// failAt lets tests make the switch of an adapter fail after all of
	// its steps ran, to exercise the rollback.
	failAt func(ifname string) error
	// stepDone, when set, runs after each step of a load (tests: a
	// process killed there).
	stepDone func(step string)
}

func (o *Options) dir() string {
	if o.PinDir == "" {
		return DefaultPinDir
	}
	return o.PinDir
}

// step marks the end of a step of a load (stepDone).
func (o *Options) step(name string) {
	if o.stepDone != nil {
		o.stepDone(name)
	}
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Report tells what a successful Load did.
type Report struct {
	Attached []string // adapters now marking
	Skipped  []string // adapters left out under Continue, with the reason
}

// pins of the objects in cur/ and next/.
var mapNames = []string{"adapters", "rules", "policies", "policy_stats", "filter_stats", "conf", "drops_base"}

func objMaps(o *qosObjects) map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		"adapters": o.Adapters, "rules": o.Rules, "policies": o.Policies,
		"policy_stats": o.PolicyStats, "filter_stats": o.FilterStats, "conf": o.Conf, "drops_base": o.DropsBase,
	}
}

// pinned is the active configuration as read from bpffs.
type pinned struct {
	prog *ebpf.Program
	maps map[string]*ebpf.Map
	rs   *qos.Ruleset
	text string
}

func (p *pinned) Close() {
	if p == nil {
		return
	}
	if p.prog != nil {
		p.prog.Close()
	}
	for _, m := range p.maps {
		m.Close()
	}
}

// openPinned opens cur/; it returns nil, nil when nothing is loaded.
func openPinned(dir string) (*pinned, error) { return openPinnedAt(filepath.Join(dir, "cur")) }

// openPinnedAt opens a configuration pinned in cur (cur/ or next/); it
// returns nil, nil when there is none.
func openPinnedAt(cur string) (*pinned, error) {
	if _, err := os.Stat(filepath.Join(cur, "prog")); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	p := &pinned{maps: map[string]*ebpf.Map{}}
	var err error
	if p.prog, err = ebpf.LoadPinnedProgram(filepath.Join(cur, "prog"), nil); err != nil {
		return nil, fmt.Errorf("opening pinned program: %w", err)
	}
	for _, n := range mapNames {
		m, err := ebpf.LoadPinnedMap(filepath.Join(cur, n), nil)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("opening pinned map %s: %w", n, err)
		}
		p.maps[n] = m
	}
	if p.text, err = readConf(p.maps["conf"]); err != nil {
		p.Close()
		return nil, err
	}
	if p.rs, err = compileText(p.text); err != nil {
		p.Close()
		return nil, fmt.Errorf("stored configuration: %w", err)
	}
	return p, nil
}

// Enable creates the state directory and settings map (IPQoS enabled,
// nothing loaded yet).
func Enable(dir string) error {
	unlock, err := lockEnabled(dir)
	if err != nil {
		return err
	}
	unlock()
	return nil
}

// makeDir creates the state directory (and links/) on a bpffs.
func makeDir(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(dir), &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("%s is not on a bpffs (mount one with: mount -t bpf bpf %s)", dir, filepath.Dir(dir))
	}
	if err := os.MkdirAll(filepath.Join(dir, "links"), 0o700); err != nil {
		return fmt.Errorf("creating %s (is bpffs mounted?): %w", dir, err)
	}
	return nil
}

var settingsSpec = ebpf.MapSpec{Name: "settings", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}

// ensureSettings pins the settings map if it is not there; the caller
// holds the lock (two processes creating it at once would both pin).
func ensureSettings(dir string) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "settings"), nil)
	if err == nil {
		return m.Close()
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("settings map: %w", err)
	}
	spec := settingsSpec
	spec.Pinning = ebpf.PinByName
	m, err = ebpf.NewMapWithOptions(&spec, ebpf.MapOptions{PinPath: dir})
	if err != nil {
		return fmt.Errorf("settings map: %w", err)
	}
	return m.Close()
}

// settingsMap opens the pinned settings map; it never creates it.
func settingsMap(dir string) (*ebpf.Map, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "settings"), nil)
	if err != nil {
		return nil, fmt.Errorf("settings map: %w", err)
	}
	if err := settingsSpec.Compatible(m); err != nil {
		m.Close()
		return nil, fmt.Errorf("settings map: %w", err)
	}
	return m, nil
}

// SetLogLevel stores the log level (ipqosadmin -loglevel); it enables
// IPQoS if needed.
func SetLogLevel(dir string, level uint32) error {
	unlock, err := lockEnabled(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := CheckNetNS(dir); err != nil {
		return err
	}
	m, err := settingsMap(dir)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Put(uint32(0), level)
}

// LogLevel returns the stored log level (0 when IPQoS is disabled).
func LogLevel(dir string) (uint32, error) {
	m, err := settingsMap(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer m.Close()
	var v uint32
	err = m.Lookup(uint32(0), &v)
	return v, err
}

// lock takes an exclusive flock on the state directory so that
// ipqosadmin runs do not interleave their changes. It fails with
// errVanished when the directory was removed (Disable) while it waited:
// a lock on a removed directory guards nothing.
func lock(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	var held, now unix.Stat_t
	if err := unix.Fstat(fd, &held); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := unix.Stat(dir, &now); err != nil || now.Ino != held.Ino || now.Dev != held.Dev {
		unix.Close(fd)
		return nil, fmt.Errorf("locking %s: %w", dir, errVanished)
	}
	return func() { unix.Close(fd) }, nil
}

// live reports whether a pinned TCX link is still attached to ifindex.
func live(l link.Link, ifindex uint32) bool {
	here, _ := placeOn(l, ifindex, "")
	return here
}

// placeOn reports whether the pinned link l runs on the interface
// ifindex of this namespace, and returns an error when it runs on an
// interface of another network namespace (one pin directory used from
// two: the pin is named after the adapter, and that namespace may have
// an interface of that name too), which dropping as stale would take
// from that namespace. A link that cannot be read counts as stale.
func placeOn(l link.Link, ifindex uint32, name string) (here bool, err error) {
	place, err := bpf.PinnedLinkPlace(l, int(ifindex), ebpf.AttachTCXEgress)
	switch {
	case err != nil:
		return false, nil
	case place == bpf.LinkOther:
		return false, fmt.Errorf("adapter %s: the link pinned for it runs on an interface of another network namespace: "+
			"that namespace's IPQoS uses this pin directory (give each namespace its own with -pindir)", name)
	}
	return place == bpf.LinkHere, nil
}

// vlanMap is the egress QoS map an adapter's policies need.
func vlanMap(a *qos.Adapter) map[uint32]uint32 {
	m := map[uint32]uint32{}
	if a == nil {
		return m
	}
	for i := range a.Policies {
		p := &a.Policies[i]
		if p.VPR >= 0 {
			m[p.Priority()] = uint32(p.VPR)
		}
	}
	return m
}

// detach removes an adapter's link, HTB tree and VLAN mappings.
func detach(dir string, a *qos.Adapter, logf func(string, ...any)) {
	detachLink(filepath.Join(dir, "links", a.Name), logf)
	if err := tc.Remove(a.Name); err != nil {
		logf("adapter %s: %v", a.Name, err)
	}
	if m := vlanMap(a); len(m) > 0 && tc.IsVLAN(a.Name) {
		for k := range m {
			m[k] = 0
		}
		if err := tc.SetEgressQoS(a.Name, m); err != nil {
			logf("adapter %s: %v", a.Name, err)
		}
	}
	logf("adapter %s: detached", a.Name)
}

// detachLink detaches a pinned link at once and removes its pin; dropping
// only the pin would release the link later, from a workqueue.
func detachLink(path string, logf func(string, ...any)) {
	if l, err := link.LoadPinnedLink(path, nil); err == nil {
		if err := l.Detach(); err != nil {
			logf("%s: detaching: %v", path, err)
		}
		l.Close()
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		logf("%s: removing link pin: %v", path, err)
	}
}

// Unload removes the active configuration: links, qdiscs, VLAN mappings
// and pinned objects. IPQoS stays enabled (State Enabled).
func Unload(dir string, log io.Writer) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, err := lock(dir)
	if errors.Is(err, errVanished) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	return unloadAnywhere(dir, &Options{PinDir: dir, Log: log})
}

// unloadAnywhere is Unload under the lock, from any network namespace
// (netns_linux.go): from another one than the configuration's, the
// links are detached and the configuration removed, but no adapter of
// this namespace is touched (an interrupted load is not put back: its
// adapters are the other namespace's). No adapter is marked then, and
// the namespace record goes.
func unloadAnywhere(dir string, o *Options) error {
	err := CheckNetNS(dir)
	if errors.Is(err, bpf.ErrOtherNetNS) {
		o.logf("the configuration is another network namespace's: detaching its links, leaving its adapters' qdiscs")
		o.foreign = true
	} else if err != nil {
		return err
	} else if err := finishInterrupted(dir, o); err != nil {
		return err
	}
	if err := unloadLocked(dir, o); err != nil {
		return err
	}
	return bpf.ReleaseNetNSPin(filepath.Join(dir, netnsPin))
}

// unloadLocked is Unload under the lock. The unloading/ mark, made first
// and removed last, has the next ipqosadmin finish an unload that was
// killed half way.
func unloadLocked(dir string, o *Options) error {
	mark := filepath.Join(dir, "unloading")
	if err := os.Mkdir(mark, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	old, err := openPinned(dir)
	if err != nil {
		return err
	}
	if old != nil {
		for _, a := range old.rs.Adapters {
			if o.foreign {
				detachLink(filepath.Join(dir, "links", a.Name), o.logf)
			} else {
				detach(dir, a, o.logf)
			}
			o.step("unload detached " + a.Name)
		}
		old.Close()
	}
	// Links pinned without a readable configuration are removed too.
	if ents, err := os.ReadDir(filepath.Join(dir, "links")); err == nil {
		for _, e := range ents {
			detachLink(filepath.Join(dir, "links", e.Name()), o.logf)
		}
	}
	for _, d := range []string{"cur", "next", "prev", "staging"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return err
		}
	}
	return os.Remove(mark)
}

// Disable unloads and removes the whole state directory, under the lock:
// a load waiting for it then starts afresh.
func Disable(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, err := lock(dir)
	if errors.Is(err, errVanished) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	if err := unloadAnywhere(dir, &Options{PinDir: dir}); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// StateInfo describes the loaded state.
type StateInfo struct {
	State    State
	Attached []string // adapters whose link runs the active program
	Missing  []string // configured adapters not attached
}

// GetState reads the state from the pin directory.
func GetState(dir string) (StateInfo, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return StateInfo{State: Disabled}, nil
	}
	p, err := openPinned(dir)
	if err != nil {
		return StateInfo{State: Error}, err
	}
	if p == nil {
		return StateInfo{State: Enabled}, nil
	}
	defer p.Close()
	progInfo, err := p.prog.Info()
	if err != nil {
		return StateInfo{State: Error}, err
	}
	progID, _ := progInfo.ID()
	var si StateInfo
	for _, a := range p.rs.Adapters {
		l, err := link.LoadPinnedLink(filepath.Join(dir, "links", a.Name), nil)
		if err != nil {
			si.Missing = append(si.Missing, a.Name)
			continue
		}
		info, err := l.Info()
		l.Close()
		if err != nil || info.Program != progID {
			si.Missing = append(si.Missing, a.Name)
			continue
		}
		dev, err := netlink.LinkByName(a.Name)
		if tcx := info.TCX(); err != nil || tcx == nil || tcx.Ifindex != uint32(dev.Attrs().Index) {
			si.Missing = append(si.Missing, a.Name)
			continue
		}
		si.Attached = append(si.Attached, a.Name)
	}
	si.State = Enabled
	if len(si.Attached) > 0 && len(si.Missing) == 0 {
		si.State = Filtering
	}
	return si, nil
}

// ActiveConfig returns the normalized text of the active configuration,
// or "" when none is loaded.
func ActiveConfig(dir string) (string, error) {
	p, err := openPinned(dir)
	if err != nil || p == nil {
		return "", err
	}
	defer p.Close()
	return p.text, nil
}

// ReadStats returns the kernel counters of the active configuration.
// Dropped packets come from the HTB classes and their leaf qdiscs; the
// kernel does not count dropped bytes, so DroppedBytes stays 0.
func ReadStats(dir string) ([]qos.Stats, error) {
	p, err := openPinned(dir)
	if err != nil || p == nil {
		return nil, err
	}
	defer p.Close()
	l, err := layout(p.rs)
	if err != nil {
		return nil, err
	}
	var out []qos.Stats
	for ai, a := range p.rs.Adapters {
		drops, _ := tc.Drops(a.Name)
		s := qos.Stats{Adapter: a.Name}
		for pi := range a.Policies {
			pol := &a.Policies[pi]
			slot := l.policy[ai] + uint32(pi)
			ps := qos.PolicyStats{Name: pol.Name}
			if ps.Packets, ps.Bytes, err = sumCounter(p.maps["policy_stats"], slot); err != nil {
				return nil, fmt.Errorf("reading policy counters: %w", err)
			}
			if pol.Shapes() {
				var base uint64
				_ = p.maps["drops_base"].Lookup(slot, &base)
				if d := drops[pol.Class]; d >= base {
					ps.DroppedPackets = d - base
				}
			}
			for fi, f := range a.Filters {
				if int(f.Policy) != pi {
					continue
				}
				fs := qos.FilterStats{Name: f.Name}
				if fs.Packets, fs.Bytes, err = sumCounter(p.maps["filter_stats"], l.filter[ai]+uint32(fi)); err != nil {
					return nil, fmt.Errorf("reading filter counters: %w", err)
				}
				ps.Filters = append(ps.Filters, fs)
			}
			s.Policies = append(s.Policies, ps)
		}
		out = append(out, s)
	}
	return out, nil
}

// ResetStats zeroes the counters of the active configuration (of this
// network namespace: the drop bases are read from its qdiscs).
func ResetStats(dir string) error {
	if err := CheckNetNS(dir); err != nil {
		return err
	}
	p, err := openPinned(dir)
	if err != nil || p == nil {
		return err
	}
	defer p.Close()
	l, err := layout(p.rs)
	if err != nil {
		return err
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	zero := make([]qosQosCounter, ncpu)
	for _, name := range []string{"policy_stats", "filter_stats"} {
		m := p.maps[name]
		for k := uint32(0); k < m.MaxEntries(); k++ {
			if err := m.Put(k, zero); err != nil {
				return fmt.Errorf("resetting %s: %w", name, err)
			}
		}
	}
	for ai, a := range p.rs.Adapters {
		drops, _ := tc.Drops(a.Name)
		for pi := range a.Policies {
			d := drops[a.Policies[pi].Class]
			if err := p.maps["drops_base"].Put(l.policy[ai]+uint32(pi), d); err != nil {
				return err
			}
		}
	}
	return nil
}

package ipfctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"sluice/internal/pool"
	"sluice/internal/rules/ippool"
)

// PoolDirEnv names the environment variable that moves the pool store
// away from DefaultPoolDir (tests use a temporary directory).
const PoolDirEnv = "SLUICE_POOL_DIR"

// DefaultPoolDir is where the ippool tables of the live datapath are kept.
// bpffs holds only BPF objects, so the definitions cannot sit among the
// pins; /run is a tmpfs like bpffs, so the tables, like the pins, last
// until reboot and no longer.
const DefaultPoolDir = "/run/sluice/pools"

// poolFile is the store inside the pool directory: the parsed ippool.conf
// as JSON. JSON rather than the printed ippool.conf text because printing
// loses what does not re-parse (a hash-policy dstlist prints "policy ;").
const poolFile = "pools.json"

// PoolDir returns $SLUICE_POOL_DIR, or DefaultPoolDir.
func PoolDir() string {
	if d := os.Getenv(PoolDirEnv); d != "" {
		return d
	}
	return DefaultPoolDir
}

// PoolStore keeps the ippool tables the kernel rules are compiled with.
// Readers and writers serialise on a lock file beside the store, so an
// ippool edit and an ipf load cannot interleave.
type PoolStore struct {
	dir string
}

// NewPoolStore returns the store in dir ("" = PoolDir()).
func NewPoolStore(dir string) *PoolStore {
	if dir == "" {
		dir = PoolDir()
	}
	return &PoolStore{dir: dir}
}

// Dir returns the directory the store lives in.
func (s *PoolStore) Dir() string { return s.dir }

// lock takes the store's exclusive lock, creating the directory.
func (s *PoolStore) lock() (unlock func(), err error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("pool store: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pool store: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("pool store: locking: %w", err)
	}
	return func() { f.Close() }, nil
}

// Load returns the stored tables; no store yet means no tables.
func (s *PoolStore) Load() (*ippool.File, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, poolFile))
	if errors.Is(err, os.ErrNotExist) {
		return &ippool.File{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pool store: %w", err)
	}
	f := &ippool.File{}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("pool store %s: %w", filepath.Join(s.dir, poolFile), err)
	}
	if err := checkTables(f); err != nil {
		return nil, fmt.Errorf("pool store %s: %w", filepath.Join(s.dir, poolFile), err)
	}
	return f, nil
}

// checkTables rejects a table defined twice: pool.Set keys tables by
// role and name within trees, hashes (with group-maps) and dstlists, and
// would keep only one of them.
func checkTables(f *ippool.File) error {
	type key struct {
		role ippool.Role
		kind ippool.Type
		name string
	}
	seen := map[key]bool{}
	for _, t := range f.Tables {
		k := key{t.Role, t.Type, t.Name}
		if k.kind == ippool.GroupMap {
			k.kind = ippool.Hash
		}
		if seen[k] {
			return fmt.Errorf("%s table %s/%s defined twice", t.Type, t.Role, t.Name)
		}
		seen[k] = true
	}
	_, err := pool.NewSet(f, nil)
	return err
}

// pendingFile holds the tables of an ippool change between the moment
// they are checked and the moment the kernel's sets are compiled with
// them: a process killed in between leaves it, and the next change under
// the lock finishes the change (finishPools).
const pendingFile = "pools-pending.json"

// Save replaces the stored tables atomically (write and rename).
func (s *PoolStore) Save(f *ippool.File) error { return s.write(f, poolFile) }

// savePending writes the tables of a change in progress.
func (s *PoolStore) savePending(f *ippool.File) error { return s.write(f, pendingFile) }

// commitPending makes the pending tables the stored ones.
func (s *PoolStore) commitPending() error {
	if err := os.Rename(filepath.Join(s.dir, pendingFile), filepath.Join(s.dir, poolFile)); err != nil {
		return fmt.Errorf("pool store: %w", err)
	}
	return nil
}

// dropPending forgets the tables of a change that did not happen.
func (s *PoolStore) dropPending() error {
	if err := os.Remove(filepath.Join(s.dir, pendingFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pool store: %w", err)
	}
	return nil
}

// write replaces the file name of the store atomically: written aside,
// then renamed; the files a killed writer left aside go first.
func (s *PoolStore) write(f *ippool.File, name string) error {
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("pool store: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("pool store: %w", err)
	}
	if old, _ := filepath.Glob(filepath.Join(s.dir, name+".*")); len(old) > 0 {
		for _, p := range old {
			os.Remove(p)
		}
	}
	tmp, err := os.CreateTemp(s.dir, name+".*")
	if err != nil {
		return fmt.Errorf("pool store: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("pool store: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.dir, name)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("pool store: %w", err)
	}
	return nil
}

// poolSet returns the tables to compile rules with (nil when none).
func poolSet(f *ippool.File) (*pool.Set, error) {
	if len(f.Tables) == 0 {
		return nil, nil
	}
	return pool.NewSet(f, nil)
}

func (b *Kernel) poolStore() *PoolStore {
	if b.pools == nil {
		b.pools = NewPoolStore("")
	}
	return b.pools
}

// loadedPools locks the store and returns its tables as a compile-ready
// set; the caller must call unlock when the rules are loaded.
func (b *Kernel) loadedPools() (set *pool.Set, unlock func(), err error) {
	st := b.poolStore()
	if _, err := os.Stat(st.dir); errors.Is(err, os.ErrNotExist) {
		// ippool never ran: no tables, and no reason to make the
		// directory for every ipf load
		return nil, func() {}, nil
	}
	unlock, err = st.lock()
	if err != nil {
		return nil, nil, permissionHint(err)
	}
	f, err := st.Load()
	if err == nil {
		set, err = poolSet(f)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return set, unlock, nil
}

// Pools returns the stored pool tables (ippool -l, -s).
func (b *Kernel) Pools() (*ippool.File, error) {
	st := b.poolStore()
	if _, err := os.Stat(st.dir); errors.Is(err, os.ErrNotExist) {
		return &ippool.File{}, nil
	}
	if _, err := os.Stat(filepath.Join(st.dir, pendingFile)); err == nil {
		// an ippool change was killed half way: finish it first, so
		// that what is listed is what the kernel's sets use
		unlock, err := b.lock(false)
		if err != nil {
			return nil, err
		}
		unlock()
	}
	unlock, err := st.lock()
	if err != nil {
		return nil, permissionHint(err)
	}
	defer unlock()
	return st.Load()
}

// onBPFFS reports whether dir's parent is a bpffs already (without
// mounting one).
func onBPFFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(filepath.Dir(filepath.Clean(dir)), &st) == nil && st.Type == unix.BPF_FS_MAGIC
}

// UpdatePools applies edit to a copy of the stored tables, then stores
// the result and recompiles and reloads the rule sets that name tables.
// Nothing changes when edit fails, the tables are inconsistent (a name
// used twice) or a set does not compile or fit. It holds the lock beside
// the pins throughout, as ipf does, so an ipf load and an ippool edit
// never interleave. Each set is replaced atomically; the active set is
// written last so that a failure leaves the rules that filter traffic as
// they were. Killed half way, the change is finished by the next one
// (finishPools): the kernel's sets and the stored tables always end up
// agreeing, with the old tables or the new ones.
func (b *Kernel) UpdatePools(edit func(*ippool.File) error) error {
	unlock, err := b.lock(onBPFFS(b.dir))
	if err != nil {
		return err
	}
	defer unlock()
	defer b.Close()
	// the tables recompile the sets of the filter in force, which may be
	// another network namespace's (bpf/netns_linux.go)
	if d, err := b.openIfLoaded(); err != nil {
		return err
	} else if d != nil {
		if err := d.CheckNetNS(); err != nil {
			return err
		}
	}
	st := b.poolStore()
	unlockStore, err := st.lock()
	if err != nil {
		return permissionHint(err)
	}
	defer unlockStore()
	f, err := st.Load()
	if err != nil {
		return err
	}
	before := map[*ippool.Table]bool{}
	for _, t := range f.Tables {
		before[t] = true
	}
	if err := edit(f); err != nil {
		return err
	}
	return b.applyPools(st, f, before)
}

// applyPools makes f the stored tables and recompiles the sets that name
// tables with them; the caller holds both locks. The tables are written
// aside first (pendingFile), then the sets, then the tables take the
// stored ones' place.
func (b *Kernel) applyPools(st *PoolStore, f *ippool.File, before map[*ippool.Table]bool) error {
	if err := checkTables(f); err != nil {
		return err
	}
	set, err := poolSet(f)
	if err != nil {
		return err
	}
	t, err := b.newTx()
	if err != nil {
		return err
	}
	defer t.close()
	// the store is locked by the caller: compile with the edited tables
	t.pools, t.poolsRead = set, true
	if t.d != nil {
		for _, s := range []Set{SetInactive, SetActive} {
			rules, err := t.rules(s)
			if err != nil {
				return err
			}
			if usesPools(rules) {
				t.set(s, rules)
			}
		}
		if err := t.flushSets(); err != nil {
			var pe *PoolSpaceError
			if errors.As(err, &pe) && before != nil {
				pe.Table = largestNew(f, before)
			}
			return err
		}
	}
	if err := st.savePending(f); err != nil {
		return err
	}
	if b.hook != nil {
		b.hook("pools pending", "")
	}
	if _, err := t.commit(); err != nil {
		return errors.Join(err, st.dropPending())
	}
	if b.hook != nil {
		b.hook("pools committed", "")
	}
	return st.commitPending()
}

// finishPools finishes an ippool change that a killed process left half
// done (its tables in pendingFile): the sets that name tables are
// compiled with those tables, which then become the stored ones. If that
// cannot be done, the stored tables are put back in the kernel instead.
// The caller holds the lock beside the pins.
func (b *Kernel) finishPools() error {
	st := b.poolStore()
	if _, err := os.Stat(filepath.Join(st.dir, pendingFile)); err != nil {
		return nil
	}
	unlock, err := st.lock()
	if err != nil {
		return permissionHint(err)
	}
	defer unlock()
	defer b.Close()
	data, err := os.ReadFile(filepath.Join(st.dir, pendingFile))
	f := &ippool.File{}
	if err == nil {
		err = json.Unmarshal(data, f)
	}
	if err == nil {
		if err = b.applyPools(st, f, nil); err == nil {
			return nil
		}
	}
	// back to the stored tables
	if derr := st.dropPending(); derr != nil {
		return errors.Join(err, derr)
	}
	old, lerr := st.Load()
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	b.Close()
	return b.applyPools(st, old, nil)
}

// lock takes the lock beside the pins for a change (creating it with
// create, see lockTx) and finishes an ippool change a killed process
// left half done.
func (b *Kernel) lock(create bool) (func(), error) {
	unlock, err := lockTx(b.dir, true, create)
	if err != nil {
		return nil, err
	}
	if err := b.finishPools(); err != nil {
		unlock()
		return nil, fmt.Errorf("finishing an interrupted ippool change: %w", err)
	}
	return unlock, nil
}

// largestNew returns the table with the most entries among those the
// edit brought in (nil if none).
func largestNew(f *ippool.File, before map[*ippool.Table]bool) *ippool.Table {
	var best *ippool.Table
	for _, t := range f.Tables {
		if !before[t] && (best == nil || len(t.Entries) > len(best.Entries)) {
			best = t
		}
	}
	return best
}

// PoolBackend returns ippool's kernel device: the pool store in poolDir
// ("" = PoolDir()) applied to the datapath pinned in dir.
func PoolBackend(dir, poolDir string) PoolDevice { return NewKernelWithPools(dir, poolDir) }

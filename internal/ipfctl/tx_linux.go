package ipfctl

import (
	"errors"
	"fmt"
	"strings"

	"sluice/internal/bpf"
	"sluice/internal/pool"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ippool"
)

// A transaction runs in two phases. plan reads what it needs of the loaded
// rule sets, stages every operation in order on copies of them, checks
// everything that depends only on the input (rules to remove are loaded,
// tunables exist, the sets compile and fit) and turns the staged sets into
// compiled images. commit then runs the steps in order. Consecutive set
// edits (-F, -f, -r, -s, -y) are written together, each set once and
// atomically, before the next operation that reads or changes the kernel
// otherwise (-FS, -T, -z, -D, ...) and at the end. An error found by plan
// changes nothing; commit can only fail on the kernel itself.

// tx is one transaction on the datapath. The caller holds the lock.
type tx struct {
	k *Kernel
	// d is the datapath as opened when the transaction began (nil: not
	// loaded).
	d *bpf.Datapath
	// orig are the sets as loaded (read lazily: read[s] says whether),
	// cur as staged so far, kv as the kernel will have them after the
	// steps planned so far.
	orig, cur, kv [2]content
	read          [2]bool
	nextID        int
	setNo         int
	// gone is set once a planned step removes the datapath (-D); sets
	// written after it load it again.
	gone bool
	// pools are the stored tables, read at most once and only when a set
	// that is compiled names a table; unlockPools releases their lock.
	pools       *pool.Set
	poolsRead   bool
	unlockPools func()

	steps    []func(res []Result) error
	results  []Result
	warnings []string
	// poolRule is the first rule of the command line that names a pool
	// table: a load whose tables do not fit is reported there.
	poolRule *ipf.Rule
	// token is the rollback token of an armed transaction (0: none); it
	// is written as soon as the datapath exists.
	token uint64
	// warn receives the warnings of the commit (ApplyOptions.Warn).
	warn func(string)
	// natSync: -y, which NAT follows at the end (resyncNAT).
	natSync bool
}

// warnNow passes warnings found while committing to the caller.
func (t *tx) warnNow(warnings []string) {
	for _, w := range warnings {
		if t.warn != nil {
			t.warn(w)
		}
	}
}

func (b *Kernel) newTx() (*tx, error) {
	d, err := b.openIfLoaded()
	if err != nil {
		return nil, err
	}
	t := &tx{k: b, d: d, nextID: 3}
	// ids 1 and 2 are the loaded active and inactive sets
	t.orig[SetActive].id, t.orig[SetInactive].id = 1, 2
	if d == nil {
		// nothing loaded: both sets are empty and already "read"
		t.read = [2]bool{true, true}
	} else {
		t.setNo = d.ActiveSetNumber()
	}
	t.cur, t.kv = t.orig, t.orig
	return t, nil
}

func (t *tx) close() {
	if t.unlockPools != nil {
		t.unlockPools()
		t.unlockPools = nil
	}
}

// rules returns the staged rules of set s, reading the loaded set they
// come from the first time they are needed.
func (t *tx) rules(s Set) ([]*ipf.Rule, error) {
	c, err := t.resolve(t.cur[s])
	if err != nil {
		return nil, err
	}
	return c.rules, nil
}

// resolve returns c with its rules, reading the loaded set it stands for
// if it is one that was not read yet.
func (t *tx) resolve(c content) (content, error) {
	for _, s := range []Set{SetActive, SetInactive} {
		if c.id == t.orig[s].id {
			if err := t.readOrig(s); err != nil {
				return c, err
			}
			return t.orig[s], nil
		}
	}
	return c, nil
}

// readOrig reads the loaded set s into orig (and wherever its id is
// still staged or expected).
func (t *tx) readOrig(s Set) error {
	if t.read[s] {
		return nil
	}
	rules, err := currentRules(t.d, toBPF(s))
	if err != nil {
		return err
	}
	t.read[s] = true
	t.orig[s].rules = rules
	for _, c := range []*[2]content{&t.cur, &t.kv} {
		for i := range c {
			if c[i].id == t.orig[s].id {
				c[i].rules = rules
			}
		}
	}
	return nil
}

func (t *tx) set(s Set, rules []*ipf.Rule) {
	t.cur[s] = content{id: t.nextID, rules: rules}
	t.nextID++
}

// plan stages ops (see the comment at the top of this file).
func (t *tx) plan(ops []Op) error {
	t.results = make([]Result, len(ops))
	pending := false
	for i := range ops {
		op := &ops[i]
		if op.Kind.changesSets() {
			if err := t.stage(i, op); err != nil {
				return err
			}
			pending = true
			continue
		}
		if pending {
			if err := t.flushSets(); err != nil {
				return err
			}
			pending = false
		}
		if err := t.stageKernel(i, op); err != nil {
			return err
		}
	}
	if pending {
		if err := t.flushSets(); err != nil {
			return err
		}
	}
	if t.natSync {
		t.step(func([]Result) error { return resyncNAT(t.k.dir) })
	}
	return nil
}

// stage applies a set edit to the staged sets.
func (t *tx) stage(i int, op *Op) error {
	switch op.Kind {
	case OpAdd, OpRemove:
		cur, err := t.rules(op.Set)
		if err != nil {
			return err
		}
		if op.Kind == OpAdd {
			if err := t.checkNewRules(op); err != nil {
				return err
			}
		}
		rules, err := editRules(cur, op.Rules, op.Kind == OpRemove)
		if err != nil {
			return err
		}
		t.set(op.Set, rules)
	case OpFlush:
		if n, ok, err := t.countUnread(op); err != nil {
			return err
		} else if ok {
			// -Fa of a set as loaded: nothing of it stays, so it is
			// not read back (a million-rule set took seconds)
			if n > 0 {
				t.set(op.Set, nil)
			}
			t.results[i].Count = n
			break
		}
		cur, err := t.rules(op.Set)
		if err != nil {
			return err
		}
		rules, n := flushRules(cur, op.Which)
		if n > 0 {
			t.set(op.Set, rules)
		}
		t.results[i].Count = n
	case OpSwap:
		t.cur[SetActive], t.cur[SetInactive] = t.cur[SetInactive], t.cur[SetActive]
		t.results[i].SetNo = t.setNo
		t.setNo ^= 1
	case OpSync:
		// NAT follows its interfaces too (after the filter's sets)
		t.natSync = true
		if t.d == nil && !t.gone && natLoaded(t.k.dir) {
			return nil
		}
		// interface names are resolved when a set is compiled: recompile
		// both with the interfaces as they are now
		if t.d == nil && !t.gone {
			return fmt.Errorf("-y: %w", bpf.ErrNotLoaded)
		}
		for _, s := range []Set{SetActive, SetInactive} {
			cur, err := t.rules(s)
			if err != nil {
				return err
			}
			t.set(s, cur)
		}
	}
	return nil
}

// countUnread returns how many rules a flush of both directions removes
// when the set it flushes is a loaded one not read yet (ok false
// otherwise: the flush must see the rules).
func (t *tx) countUnread(op *Op) (n int, ok bool, err error) {
	if op.Which != FlushBoth || t.d == nil {
		return 0, false, nil
	}
	for _, s := range []Set{SetActive, SetInactive} {
		if t.cur[op.Set].id == t.orig[s].id && !t.read[s] {
			n, err := t.d.RuleCount(toBPF(s))
			return n, err == nil, err
		}
	}
	return 0, false, nil
}

// checkNewRules rejects rules of a load that name pool tables that do not
// exist (a reference to a missing table would silently match nothing).
func (t *tx) checkNewRules(op *Op) error {
	for _, r := range op.Rules {
		if t.poolRule == nil && usesPools([]*ipf.Rule{r}) {
			t.poolRule = r
		}
		for _, e := range []*ipf.Endpoint{&r.From, &r.To} {
			k := e.Addr.Kind
			if (k != ipf.AddrPool && k != ipf.AddrHash) || e.Addr.Inline != nil {
				continue
			}
			ps, err := t.poolSet()
			if err != nil {
				return err
			}
			if k == ipf.AddrPool && (ps == nil || ps.Tree(ippool.RoleIPF, e.Addr.Table) == nil) ||
				k == ipf.AddrHash && (ps == nil || ps.Hash(ippool.RoleIPF, e.Addr.Table) == nil) {
				kind := "pool"
				if k == ipf.AddrHash {
					kind = "hash"
				}
				return fmt.Errorf("%s:%d: %s/%s: no such ippool table (load it with ippool -f first)", r.Pos.File, r.Pos.Line, kind, e.Addr.Table)
			}
		}
		if r.Action == ipf.ActionCall && (r.Call.Func == "srcgrpmap" || r.Call.Func == "dstgrpmap") {
			ps, err := t.poolSet()
			if err != nil {
				return err
			}
			table := fmt.Sprint(r.Call.Arg)
			if h := (*pool.Hash)(nil); ps != nil {
				h = ps.Hash(ippool.RoleIPF, table)
				if h != nil && h.Def.Type == ippool.GroupMap {
					continue
				}
			}
			return fmt.Errorf("%s:%d: %s/%s: no such group-map (load it with ippool -f first)", r.Pos.File, r.Pos.Line, r.Call.Func, table)
		}
	}
	return nil
}

// usesPools reports whether a set names pool, hash or group-map tables,
// and so must be compiled with the store (and recompiled when it changes).
func usesPools(rules []*ipf.Rule) bool {
	for _, r := range rules {
		for _, e := range []*ipf.Endpoint{&r.From, &r.To} {
			if k := e.Addr.Kind; (k == ipf.AddrPool || k == ipf.AddrHash) && e.Addr.Inline == nil {
				return true
			}
		}
		if r.Action == ipf.ActionCall && (r.Call.Func == "srcgrpmap" || r.Call.Func == "dstgrpmap") {
			return true
		}
	}
	return false
}

// poolSet returns the stored tables, locking the store until the
// transaction ends. Only sets that name tables read the store: a store
// of many megabytes costs nothing to loads that do not use it.
func (t *tx) poolSet() (*pool.Set, error) {
	if t.poolsRead {
		return t.pools, nil
	}
	set, unlock, err := t.k.loadedPools()
	if err != nil {
		return nil, err
	}
	t.pools, t.unlockPools, t.poolsRead = set, unlock, true
	return set, nil
}

// compile compiles staged content for set s.
func (t *tx) compile(s Set, c content) (*bpf.Image, error) {
	if len(c.rules) > bpf.MaxRules {
		loaded := map[*ipf.Rule]bool{}
		for _, o := range t.orig {
			for _, r := range o.rules {
				loaded[r] = true
			}
		}
		kept := 0
		for _, r := range c.rules {
			if loaded[r] {
				kept++
			}
		}
		return nil, fmt.Errorf("%s set: %d rules (%d already loaded + %d from the command line) exceed the kernel datapath's limit of %d",
			s, len(c.rules), kept, len(c.rules)-kept, bpf.MaxRules)
	}
	var opts bpf.CompileOptions
	if usesPools(c.rules) {
		ps, err := t.poolSet()
		if err != nil {
			return nil, err
		}
		opts.Pools = ps
	}
	im, err := bpf.Compile(c.rules, opts)
	if err != nil {
		return nil, fmt.Errorf("%s set: %w", s, err)
	}
	if w := depthWarning(s, c.rules, bpf.MaxGroupDepth); w != "" {
		t.warnings = append(t.warnings, w)
	}
	return im, nil
}

// flushSets plans the writes that bring the kernel's sets (kv) to the
// staged ones (cur), compiling what must be written now.
func (t *tx) flushSets() error {
	var order []any // setWrite or "swap"
	for _, st := range writeOrder(t.cur, t.kv) {
		if st.swap {
			order = append(order, "swap")
			continue
		}
		c, err := t.resolve(st.c)
		if err != nil {
			return err
		}
		im, err := t.compile(st.set, c)
		if err != nil {
			return err
		}
		order = append(order, setWrite{st.set, im, everywhere(c.rules)})
	}
	if err := t.checkPoolSpace(order); err != nil {
		if r := t.poolRule; r != nil {
			return fmt.Errorf("%s:%d: %w", r.Pos.File, r.Pos.Line, err)
		}
		return err
	}
	t.kv = t.cur
	t.steps = append(t.steps, func([]Result) error {
		for _, o := range order {
			if w, ok := o.(setWrite); ok {
				d, warnings, err := t.k.load(w.im.Interfaces(), w.everywhere)
				if err != nil {
					return err
				}
				t.warnNow(warnings)
				if t.token != 0 && d.Token() != t.token {
					if err := d.SetToken(t.token); err != nil {
						return err
					}
				}
				if err := d.LoadRules(w.im, toBPF(w.s)); err != nil {
					return permissionHint(err)
				}
				continue
			}
			d, warnings, err := t.k.load(nil, false)
			if err != nil {
				return err
			}
			t.warnNow(warnings)
			if _, err := d.Swap(); err != nil {
				return fmt.Errorf("swapping rule sets: %w", err)
			}
		}
		return nil
	})
	return nil
}

// setWrite is the write of one compiled set.
type setWrite struct {
	s  Set
	im *bpf.Image
	// everywhere: a rule of the set applies on every interface (the
	// filter then belongs on all of them, see Kernel.load)
	everywhere bool
}

// checkPoolSpace refuses writes whose pool tables cannot fit the pool map
// (which would fail with ENOSPC half way). A write goes to the spare slot,
// whose old entries it clears first, while the active and the inactive
// set keep theirs: each write needs its entries free beside both.
func (t *tx) checkPoolSpace(order []any) error {
	var live [2]int
	if t.d != nil && !t.gone {
		a, i, err := t.d.PoolEntriesUsed()
		if err != nil {
			return err
		}
		live = [2]int{a, i}
	}
	for _, o := range order {
		w, ok := o.(setWrite)
		if !ok {
			live[SetActive], live[SetInactive] = live[SetInactive], live[SetActive]
			continue
		}
		need := w.im.PoolEntries()
		if need > 0 && live[0]+live[1]+need > bpf.MaxPoolEntries {
			return &PoolSpaceError{Need: need, Used: live[0] + live[1], Max: bpf.MaxPoolEntries}
		}
		live[w.s] = need
	}
	return nil
}

// stageKernel checks an operation that acts on the kernel directly and
// queues it.
func (t *tx) stageKernel(i int, op *Op) error {
	switch op.Kind {
	case OpFlushState:
		if op.Expr != nil {
			return fmt.Errorf("-m: state selection by expression: %w", errors.ErrUnsupported)
		}
		match, err := stateMatcher(op.Arg)
		if err != nil {
			return err
		}
		t.step(func(res []Result) error {
			d, err := t.live()
			if d == nil || err != nil {
				return err
			}
			if op.Arg == "S" {
				match = nil
			}
			n, err := d.FlushStates(match)
			res[i].Count = n
			if err != nil {
				return fmt.Errorf("flushing state: %w", err)
			}
			return nil
		})
	case OpEnable:
		t.gone = false
		t.step(func([]Result) error {
			if err := t.k.loadPrograms(); err != nil {
				return err
			}
			return t.k.d.SetEnabled(true)
		})
	case OpDisable:
		t.gone = true
		empty := content{id: t.nextID}
		t.nextID++
		t.cur = [2]content{empty, empty}
		t.kv = t.cur
		t.setNo = 0
		t.step(func([]Result) error {
			t.k.Close()
			if err := Remove(t.k.dir); err != nil {
				return fmt.Errorf("removing the datapath: %w", err)
			}
			return nil
		})
	case OpZeroRules:
		cur, err := t.rules(op.Set)
		if err != nil {
			return err
		}
		loaded := map[string]bool{}
		for _, r := range cur {
			loaded[ipf.FormatRule(r)] = true
		}
		for _, r := range op.Rules {
			if !loaded[ipf.FormatRule(r)] {
				return fmt.Errorf("%s:%d: rule not loaded: %s", r.Pos.File, r.Pos.Line, ipf.FormatRule(r))
			}
		}
		t.step(func(res []Result) error {
			d, err := t.liveOrFail()
			if err != nil {
				return err
			}
			infos, err := d.Rules(toBPF(op.Set))
			if err != nil {
				return err
			}
			for _, r := range op.Rules {
				text := ipf.FormatRule(r)
				for _, ri := range infos {
					if ri.Text == text {
						h, b, err := d.ZeroRule(toBPF(op.Set), ri.Index)
						if err != nil {
							return fmt.Errorf("zeroing counters: %w", err)
						}
						res[i].Counters = append(res[i].Counters, ZeroedRule{Rule: r, Hits: h, Bytes: b})
						break
					}
				}
			}
			return nil
		})
	case OpZeroStats:
		if err := t.needLoaded(op); err != nil {
			return err
		}
		t.step(func(res []Result) error {
			d, err := t.liveOrFail()
			if err != nil {
				return err
			}
			st, err := d.Stats()
			if err != nil {
				return err
			}
			res[i].Text = FormatZeroStats(st)
			if err := d.ZeroStats(); err != nil {
				return fmt.Errorf("zeroing statistics: %w", err)
			}
			return nil
		})
	case OpLogFlags:
		switch op.Arg {
		case "pass", "block", "nomatch", "none", "state":
		case "nat":
			return fmt.Errorf("-l nat: the kernel datapath has no NAT log: %w", errors.ErrUnsupported)
		default:
			return fmt.Errorf("-l %s: expected pass, block, nomatch, none, state or nat", op.Arg)
		}
		if err := t.needLoaded(op); err != nil {
			return err
		}
		t.step(func([]Result) error {
			d, err := t.liveOrFail()
			if err != nil {
				return err
			}
			return setLogFlags(d, op.Arg)
		})
	case OpTunables:
		if err := t.needLoaded(op); err != nil {
			return err
		}
		if t.d != nil && !t.gone {
			if err := checkTunables(allTunables(t.d, t.k.dir), op.Arg); err != nil {
				return fmt.Errorf("-T %s: %w", op.Arg, err)
			}
		}
		t.step(func(res []Result) error {
			d, err := t.liveOrFail()
			if err != nil {
				return err
			}
			s, err := tunables(d, t.k.dir, op.Arg)
			res[i].Text = s
			if err != nil {
				return fmt.Errorf("-T %s: %w", op.Arg, err)
			}
			if strings.Contains(op.Arg, "default_pass=") {
				// unmatched packets blocked: the filter belongs on
				// every interface (Kernel.load)
				_, warnings, err := t.k.load(nil, false)
				t.warnNow(warnings)
				return err
			}
			return nil
		})
	case OpDCA:
		if len(op.Arg) != 1 || !strings.Contains("edqt", op.Arg) {
			return fmt.Errorf("-m %s: expected e, d, q or t", op.Arg)
		}
		if err := t.needLoaded(op); err != nil {
			return err
		}
		t.step(func(res []Result) error {
			d, err := t.liveOrFail()
			if err != nil {
				return err
			}
			s, err := dca(d, op.Arg[0])
			res[i].Text = s
			if err != nil {
				return fmt.Errorf("-m %s: %w", op.Arg, err)
			}
			return nil
		})
	case OpStatus:
		t.step(func(res []Result) error {
			d, err := t.live()
			if err != nil {
				return err
			}
			var warnings []string
			res[i].Text, warnings = status(d)
			t.warnNow(warnings)
			return nil
		})
	default:
		return fmt.Errorf("ipfctl: unknown operation %v", op.Kind)
	}
	return nil
}

// needLoaded fails an operation that needs a loaded datapath when none is
// loaded and no earlier step of the command line loads one.
func (t *tx) needLoaded(op *Op) error {
	if t.d == nil && len(t.steps) == 0 || t.gone {
		return fmt.Errorf("%v: %w", op.Kind, bpf.ErrNotLoaded)
	}
	return nil
}

func (t *tx) step(f func(res []Result) error) { t.steps = append(t.steps, f) }

// live returns the datapath as it is now (nil, nil when not loaded).
func (t *tx) live() (*bpf.Datapath, error) {
	return t.k.openIfLoaded()
}

func (t *tx) liveOrFail() (*bpf.Datapath, error) {
	return t.k.open()
}

// commit runs the planned steps in order. A step that made the first
// load of the datapath publishes it when it is done, with its sets
// written (Kernel.publish).
func (t *tx) commit() ([]Result, error) {
	for _, s := range t.steps {
		if err := s(t.results); err != nil {
			return t.results, err
		}
		warnings, err := t.k.publish()
		t.warnNow(warnings)
		if err != nil {
			return t.results, err
		}
		if t.k.hook != nil {
			t.k.hook("step", "")
		}
	}
	return t.results, nil
}

// Apply implements Backend: the operations of one command line, checked
// and then applied under the lock beside the pins.
func (b *Kernel) Apply(ops []Op, opts ApplyOptions) ([]Result, error) {
	if readOnly(ops) && opts.ConfirmWithin == 0 {
		return b.applyReadOnly(ops, opts.Warn)
	}
	// ipf -y alone (what udev runs for a new interface) makes nothing,
	// not even the lock: without one nothing was ever loaded, and a first
	// load that takes it after this looked lists the interfaces after
	// this one appeared. With one, -y waits for a load in progress and
	// decides whether a filter is loaded once it has the lock.
	unlock, err := b.lock(!syncOnly(ops) || opts.ConfirmWithin > 0)
	if err != nil {
		return nil, err
	}
	defer unlock()
	defer b.Close()
	change := changesBeforeRemoval(ops)
	if change {
		// NAT's rules and interfaces may be another namespace's, loaded
		// alone or beside the filter (bpf/nat/netns_linux.go)
		if err := checkNATNetNS(b.dir); err != nil {
			return nil, err
		}
	}
	t, err := b.newTx()
	if err != nil {
		return nil, err
	}
	defer t.close()
	if change && t.d != nil {
		// another namespace's rules and interfaces: refused before
		// anything is planned or written (bpf/netns_linux.go; open
		// moved no older datapath of another namespace's)
		if err := t.d.CheckNetNS(); err != nil {
			return nil, err
		}
	}
	if err := t.plan(ops); err != nil {
		return nil, err
	}
	if opts.ConfirmWithin == 0 && t.d != nil && t.d.Token() != 0 && len(t.steps) > 0 {
		t.warnings = append(t.warnings, "a load made with ipf -W waits for confirmation: unless ipf -C confirms it, "+
			"its rollback will undo this change too")
	}
	if opts.Warn != nil {
		for _, w := range t.warnings {
			opts.Warn(w)
		}
	}
	t.warn = opts.Warn
	if opts.ConfirmWithin > 0 {
		if err := t.armRollback(opts.ConfirmWithin); err != nil {
			return nil, err
		}
	}
	return t.commit()
}

// syncOnly reports whether ops are only ipf -y.
func syncOnly(ops []Op) bool {
	for _, op := range ops {
		if op.Kind != OpSync {
			return false
		}
	}
	return len(ops) > 0
}

// changesBeforeRemoval reports whether ops change the loaded datapath
// before an ipf -D (if any) removes it: what follows a removal acts on a
// new datapath, and a removal is allowed from any network namespace.
func changesBeforeRemoval(ops []Op) bool {
	for _, op := range ops {
		switch op.Kind {
		case OpDisable:
			return false
		case OpStatus:
		default:
			return true
		}
	}
	return false
}

// readOnly reports whether ops only read (ipf -V): those need no lock and
// must not mount bpffs or create anything.
func readOnly(ops []Op) bool {
	for _, op := range ops {
		if op.Kind != OpStatus {
			return false
		}
	}
	return true
}

func (b *Kernel) applyReadOnly(ops []Op, warn func(string)) ([]Result, error) {
	defer b.Close()
	res := make([]Result, len(ops))
	// opened as it is: open would load this version's programs over a
	// datapath of an older Sluice (without the lock), and ipf -V is to
	// say that the datapath is one
	d, err := bpf.OpenPinned(b.dir)
	if err != nil {
		// "not loaded" only where it is so (a private /sys is not)
		err = explainNotLoaded(b.dir, err)
	}
	switch {
	case errors.Is(err, bpf.ErrNotLoaded):
		d = nil
	case err != nil:
		return res, permissionHint(err)
	default:
		defer d.Close()
	}
	for i := range ops {
		var warnings []string
		res[i].Text, warnings = status(d)
		for _, w := range warnings {
			if warn != nil {
				warn(w)
			}
		}
	}
	return res, nil
}

// Plan implements Backend's dry run.
func (b *Kernel) Plan(ops []Op) (*Diff, error) {
	unlock, err := lockTx(b.dir, false, false)
	if err != nil {
		if isPermission(err) {
			return nil, nil
		}
		return nil, err
	}
	defer unlock()
	defer b.Close()
	t, err := b.newTx()
	if err != nil {
		if isPermission(err) {
			return nil, nil
		}
		return nil, err
	}
	defer t.close()
	if t.d == nil {
		return nil, nil
	}
	if err := t.plan(ops); err != nil {
		return nil, err
	}
	for _, s := range []Set{SetActive, SetInactive} {
		if err := t.readOrig(s); err != nil {
			return nil, err
		}
	}
	d := diffSets(t.orig, t.cur)
	d.Warnings = t.warnings
	return d, nil
}

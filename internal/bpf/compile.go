package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"unsafe"

	"sluice/internal/pool"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ippool"
	"sluice/internal/ruleset"
)

// ErrUnsupported marks a rule the kernel datapath cannot evaluate; the whole
// load is refused so the running rules stay as they are.
var ErrUnsupported = errors.New("not supported by the kernel datapath")

// CompileOptions says how names in rules are resolved.
type CompileOptions struct {
	// Ifindex resolves an interface name; ok=false means the interface does
	// not exist, and rules naming it never match (IPFilter's "(!)").
	// nil uses the host's interfaces.
	Ifindex func(name string) (index int, ok bool)
	// Text prints a rule for ipfstat (the ipf printer); nil uses a short
	// built-in form.
	Text func(*ipf.Rule) string
	// IfNet describes an interface for the rules that take an address
	// from it (`(IF)`, `(IF)/BITS`, `IF/broadcast|network|netmasked|
	// peer`): ruleset.AddrMatch.IfaceTarget turns it into the prefix to
	// compare with. ok=false makes the rule never match, as IPFilter does
	// for an interface without such an address. nil uses the host's
	// interfaces as they are when the rules are compiled.
	IfNet func(name string, v6 bool) (ruleset.IfaceNet, bool)
	// Pools holds the ippool tables `pool/N` and `hash/N` name (role
	// ipf); their entries are copied into the image. A table that is not
	// there never matches, as in the Go engine. nil: no tables.
	Pools *pool.Set

	// anon holds the anonymous tables of inline pool=(...)/hash=(...)
	// operands (Compile makes them), by table name.
	anon map[string]*ippool.Table
}

// Image is a rule set compiled for one slot of the kernel datapath: rules in
// storage order, the lists (main in/out, accounting in/out, groups) that
// index them, and the candidate index. An Image is immutable once built.
type Image struct {
	rules  []filterRule
	texts  []string
	lists  []imageList
	ifaces []string        // interfaces named by `on`, in first-seen order
	pools  []poolEntry     // entries of the pool tables the rules name
	exprs  []filterExprVal // values of the exp rules, flattened
	runs   []runEntry      // the runs' table (findRuns)
	// the runs bitmap's shift (64 - log2 of its bits; 0: no IPv4 run)
	runShift uint32
	// runFlat: the IPv4 runs are few enough (runFlatMax) for the small
	// sets' bitmap too (run_flat, RUN_FLAT in the runs' shift word)
	runFlat bool
	// runBig: the IPv4 runs are too many for that and few enough
	// (runBigMax) for the large sets' array (run_flat_big, RUN_BIG)
	runBig bool
	// index entries; nil when the set is too small to benefit
	dst    map[prefixKey]filterBlocks
	ports  map[uint32]filterBlocks
	src    map[prefixKey]filterBlocks // nil: no rule tests a source prefix
	sports map[uint32]filterBlocks    // nil: no rule tests a source port with =
}

// poolEntry is one prefix of a pool table in an image.
type poolEntry struct {
	table  uint32
	family uint8
	addr   [16]byte
	bits   int
	neg    bool
	group  uint32 // group-map entries: list id of the group, 0 none
}

// poolTables numbers the tables an image uses (ids from 1).
type poolTables struct {
	ids map[string]uint16
}

type imageList struct {
	start, count int
	dir          ipf.Direction
	acct         bool
	name         string
}

type prefixKey struct {
	family uint8
	addr   [16]byte
	bits   int
}

// Interfaces returns the interface names the rules filter on (`on IF`),
// in first-seen order: what Attach should hook when the caller has no
// list of its own ("-" and "*" are not names).
func (im *Image) Interfaces() []string { return append([]string(nil), im.ifaces...) }

// Len returns the number of rules in the image.
func (im *Image) Len() int { return len(im.rules) }

// PoolEntries returns the number of pool-map entries the image writes (the
// entries of every table its rules name, group-maps included).
func (im *Image) PoolEntries() int { return len(im.pools) }

// indexThreshold is the rule count from which an index is built: below a
// few blocks the linear scan is as fast as the lookups.
const indexThreshold = 4 << blockBits

// Compile builds an Image from parsed ipf.conf rules (in file order): it
// compiles them with ruleset.Compile, as the Go engine does, and then
// CompileSet. It fails on rules the kernel cannot evaluate.
func Compile(rules []*ipf.Rule, opts CompileOptions) (*Image, error) {
	// inline tables become anonymous tables as ipf creates them; their
	// entries go into the image with the named tables'
	rules, anon, err := ruleset.InlineTables(rules)
	if err != nil {
		return nil, err
	}
	if len(rules) >= streamMin {
		if im, ok := compileStream(rules, opts.withAnon(anon), streamWindow); ok {
			return im, nil
		}
	}
	// the image is all the kernel needs: no Go engine prefilters
	set, err := ruleset.CompileLean(rules)
	if err != nil {
		return nil, err
	}
	return CompileSet(set, opts.withAnon(anon))
}

// CompileSet builds an Image from a compiled rule set, keeping its lists,
// their order (collections, @N) and its groups: list 0 is In, 1 Out, 2
// AcctIn, 3 AcctOut, then the filter groups in creation order and the
// accounting groups by name.
func CompileSet(set *ruleset.Set, opts CompileOptions) (*Image, error) {
	opts = opts.withHostLookups()
	type src struct {
		l    *ruleset.List
		dir  ipf.Direction
		acct bool
	}
	lists := []src{{&set.In, ipf.DirIn, false}, {&set.Out, ipf.DirOut, false}, {&set.AcctIn, ipf.DirIn, true}, {&set.AcctOut, ipf.DirOut, true}}
	ids := map[*ruleset.List]int{}
	for _, name := range set.GroupOrder {
		if g := set.Groups[name]; g != nil {
			lists = append(lists, src{g, groupDir(g), false})
		}
	}
	anames := make([]string, 0, len(set.AcctGroups))
	for name := range set.AcctGroups {
		anames = append(anames, name)
	}
	sort.Strings(anames)
	for _, name := range anames {
		g := set.AcctGroups[name]
		lists = append(lists, src{g, groupDir(g), true})
	}
	if len(lists) > MaxLists {
		return nil, fmt.Errorf("%d groups: the kernel datapath holds at most %d", len(lists)-listGroup0, MaxLists-listGroup0)
	}
	for i, s := range lists {
		ids[s.l] = i
	}
	total := 0
	for _, s := range lists {
		total += len(s.l.Rules)
	}
	if total > 100000 {
		// a blocklist of a million rules: the heap grows by gigabytes,
		// collections every few hundred megabytes would double the time
		defer gcAtLeast(400)()
	}
	im := &Image{lists: make([]imageList, len(lists)), rules: make([]filterRule, 0, total)}
	srcs := make([]*ipf.Rule, 0, total) // by position: texts, errors
	pt := &poolTables{ids: map[string]uint16{}}
	seen := map[string]bool{}
	for id, s := range lists {
		n := len(s.l.Rules)
		if len(im.rules)+n > MaxRules {
			return nil, fmt.Errorf("%d rules: the kernel datapath holds at most %d in a set", len(im.rules)+n, MaxRules)
		}
		im.lists[id] = imageList{start: len(im.rules), count: n, dir: s.dir, acct: s.acct, name: s.l.Name}
		for i, cr := range s.l.Rules {
			// laid out in place: a filterRule is 272 bytes, and a
			// million-rule load copied each one twice on its way
			im.rules = append(im.rules, filterRule{})
			raw := &im.rules[len(im.rules)-1]
			if err := im.compileRule(cr, raw, opts, pt, set, ids); err != nil {
				return nil, fmt.Errorf("%s:%d:%d: %w", cr.Pos.File, cr.Pos.Line, cr.Pos.Col, err)
			}
			for _, n := range cr.IfNames[:2] {
				if n != "" && n != "-" && n != "*" && !seen[n] {
					seen[n] = true
					im.ifaces = append(im.ifaces, n)
				}
			}
			raw.RuleNo = uint32(i + 1)
			raw.GroupNo = uint32(id)
			srcs = appendToPrint(srcs, cr.Src)
		}
	}
	if err := im.finish(srcs, opts); err != nil {
		return nil, err
	}
	return im, nil
}

// gcAtLeast makes the collector run no more often than GOGC pct (the
// caller's setting stays if it collects less: ipf turns it off for a
// big file) and returns what restores the setting.
func gcAtLeast(pct int) (restore func()) {
	old := debug.SetGCPercent(pct)
	if old < 0 || old > pct {
		debug.SetGCPercent(old)
	}
	return func() { debug.SetGCPercent(old) }
}

// appendToPrint keeps a rule's parse, by position, for its printed text
// (and where it is, for errors).
func appendToPrint(srcs []*ipf.Rule, r *ipf.Rule) []*ipf.Rule { return append(srcs, r) }

// withHostLookups fills in the host's interfaces for the lookups opts
// leaves nil. They are looked up once per name and compile (a lookup
// reads every interface from the kernel: a blocklist of a million rules
// `on eth0` took minutes), which also makes every rule of the set see
// the same interfaces.
func (opts CompileOptions) withHostLookups() CompileOptions {
	if opts.Ifindex == nil {
		opts.Ifindex = memo(hostIfindex)
	}
	if opts.IfNet == nil {
		type key struct {
			name string
			v6   bool
		}
		nets := map[key]ruleset.IfaceNet{}
		found := map[key]bool{}
		opts.IfNet = func(name string, v6 bool) (ruleset.IfaceNet, bool) {
			k := key{name, v6}
			if n, ok := nets[k]; ok || found[k] {
				return n, ok
			}
			n, ok := hostIfNet(name, v6)
			if ok {
				nets[k] = n
			}
			found[k] = true
			return n, ok
		}
	}
	return opts
}

// finish completes an image whose rules are laid out, srcs being their
// parsed rules by position: the texts, the scan budget, runs and index.
func (im *Image) finish(srcs []*ipf.Rule, opts CompileOptions) error {
	im.texts = formatTexts(srcs, opts.Text)
	if err := im.checkScanSteps(srcs); err != nil {
		return err
	}
	im.findRuns()
	if im.scanLength() >= indexThreshold && len(im.rules) <= idxRules {
		im.buildIndex()
	}
	return nil
}

// formatTexts prints the rules for ipfstat with formatText (ipf.FormatRule
// when nil), on every CPU when there are many.
func formatTexts(rules []*ipf.Rule, formatText func(*ipf.Rule) string) []string {
	out := make([]string, len(rules))
	workers := 1
	if len(rules) > 10000 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	per := (len(rules) + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min((w+1)*per, len(rules))
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if formatText != nil {
				for i := lo; i < hi; i++ {
					out[i] = formatText(rules[i])
				}
				return
			}
			// ipf.FormatRule's texts, printed into one reused buffer
			// and kept in shared arenas: a text of its own was 128
			// bytes (the printer's first allocation) for ~45 of text
			var buf bytes.Buffer
			var arena []byte
			for i := lo; i < hi; i++ {
				buf.Reset()
				ipf.FormatTo(&buf, rules[i], ipf.PrintOptions{NoResolve: true})
				n := buf.Len()
				if n == 0 {
					continue
				}
				if cap(arena)-len(arena) < n {
					arena = make([]byte, 0, max(n, textArena))
				}
				arena = append(arena, buf.Bytes()...)
				// the arena's bytes are never written again
				out[i] = unsafe.String(&arena[len(arena)-n], n)
			}
		}()
	}
	wg.Wait()
	return out
}

// textArena is the size of the blocks formatTexts keeps texts in.
const textArena = 256 << 10

// groupDir is the direction of a group's first rule (groups hold the rules
// of one direction in practice; each rule still checks its own).
func groupDir(l *ruleset.List) ipf.Direction {
	if len(l.Rules) > 0 && l.Rules[0].Out {
		return ipf.DirOut
	}
	return ipf.DirIn
}

// memo returns lookup with its answers kept, one per name (not safe for
// concurrent use: CompileSet lays out its rules one at a time).
func memo(lookup func(string) (int, bool)) func(string) (int, bool) {
	type answer struct {
		idx int
		ok  bool
	}
	seen := map[string]answer{}
	return func(name string) (int, bool) {
		a, hit := seen[name]
		if !hit {
			a.idx, a.ok = lookup(name)
			seen[name] = a
		}
		return a.idx, a.ok
	}
}

func hostIfindex(name string) (int, bool) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return 0, false
	}
	return ifc.Index, true
}

// compileRule lays out one compiled rule for the program: a field-by-field
// translation of ruleset.Rule, which both datapaths read.
func (im *Image) compileRule(cr *ruleset.Rule, raw *filterRule, opts CompileOptions, pt *poolTables, set *ruleset.Set, ids map[*ruleset.List]int) error {
	if err := compileAction(cr, raw); err != nil {
		return err
	}
	if err := compileRoute(cr, raw, opts); err != nil {
		return err
	}
	compileIfaces(cr, raw, opts)
	if err := compileTests(cr, raw, opts); err != nil {
		return err
	}
	if err := im.compilePools(cr, raw, pt, opts); err != nil {
		return err
	}
	if cr.Call.Func != "" {
		if err := im.compileCall(cr, raw, opts, pt, set, ids); err != nil {
			return err
		}
	}
	if cr.Tests&ruleset.TestExpr != 0 {
		if err := im.compileExpr(cr.Expr, raw); err != nil {
			return err
		}
	}
	if cr.HeadList != nil {
		hid, ok := ids[cr.HeadList]
		if !ok {
			return fmt.Errorf("head %s: group not in the set", cr.Head)
		}
		raw.Head = uint16(hid)
	}
	return nil
}

// compileAction takes the FR_* flags as they are (the program uses
// IPFilter's values) and the values of the action and its keep options.
func compileAction(cr *ruleset.Rule, raw *filterRule) error {
	if cr.Flags&ruleset.FRCmdMask == ruleset.FRDecap {
		// the engine re-parses the inner IP-in-IP/GRE packet and scans
		// the head group with it; the program holds one parsed packet
		// per CPU and its scan reads it implicitly, so a nested scan
		// would need a second packet context throughout
		return fmt.Errorf("decapsulate (inner packet scan): %w", ErrUnsupported)
	}
	raw.Action = cr.Flags
	raw.RetCode = cr.ICMPCode
	raw.Skip = uint32(cr.Skip)
	if cr.KeepState != nil && cr.KeepState.ICMPHead != "" {
		// IPFilter runs the group over each ICMP error its entry
		// finds, before no-icmp-err and the error count (the engine's
		// state lookup); the program has no such scan, so it would pass
		// errors the group blocks: refused, never silently different
		return fmt.Errorf("keep state (icmp-head %s): the kernel filter does not run a group over a state entry's ICMP errors: %w",
			cr.KeepState.ICMPHead, ErrUnsupported)
	}
	if cr.KeepState != nil {
		if ks := cr.KeepState; ks.MaxSrcs != 0 {
			// IPFilter tracks sources only for a rule with max-srcs (a
			// lone max-per-src, which ipf -Rnvf drops, limits nothing),
			// by its default /32 without max-per-src, IPv6 addresses
			// included (the engine's stateAdd). The program counts them
			// in srcs (c/lib/srcs.h); src_bits 0 would mean no
			// tracking, so a whole address is 128 (clamped to the
			// family's length there, as the engine's 0 is).
			if ks.MaxPerSrc > 0xffff {
				// the rule keeps it in 16 bits, in what was padding
				return fmt.Errorf("keep state (max-per-src %d): the kernel filter counts at most 65535 entries a source: %w",
					ks.MaxPerSrc, ErrUnsupported)
			}
			bits := ks.MaxPerSrcBits
			if ks.MaxPerSrc == 0 {
				bits = 32
			}
			if bits == 0 || bits > 128 {
				bits = 128
			}
			raw.SrcBits = uint8(bits)
			raw.MaxSrcs = ks.MaxSrcs
			raw.MaxPerSrc = uint16(ks.MaxPerSrc)
		}
		raw.StateLimit = cr.KeepState.Limit
	}
	// the program counts ages in seconds, the rule in ticks of 0.5 s
	raw.AgeFwd, raw.AgeRev = cr.Age[0]/2, cr.Age[1]/2
	raw.KeepLimit = cr.KeepLimit
	if cr.LimitCumulative {
		raw.LimitCumul = 1
	}
	raw.LimitRet = cr.LimitReturn
	raw.Pps = cr.PPS
	raw.Logtag = cr.LogTag
	switch {
	case cr.NATTag != "" && cr.Out:
		// The engine hands an outbound rule's nat tag to NAT, where
		// only rules of that tag apply (and untagged rules no longer
		// do); the kernel NAT, a program of its own, never sees the
		// filter's rule: refused rather than translated otherwise.
		return fmt.Errorf("set-tag(nat=%s) on an outbound rule: the kernel filter does not hand nat tags to NAT: %w",
			cr.NATTag, ErrUnsupported)
	case cr.NATTag != "":
		// An inbound rule with a nat tag (match-tag) matches only
		// packets that inbound NAT tagged so (the engine's match); the
		// kernel NAT refuses tagged rules, so no packet carries a tag.
		raw.Match |= mNever
	}
	return nil
}

// compileIfaces resolves the names of `on`. An unresolved name never
// matches (IPFilter keeps the rule but shows "(!)"); the other name of a
// pair may still match.
func compileIfaces(cr *ruleset.Rule, raw *filterRule, opts CompileOptions) {
	names := cr.IfNames[:2]
	if names[0] == "" {
		return
	}
	if names[1] == "" {
		names = names[:1]
	}
	any := false
	for i, name := range names {
		if name == "-" || name == "*" {
			any = true
			continue
		}
		idx, ok := opts.Ifindex(name)
		if !ok {
			raw.Ifindex[i] = 0xffffffff
			continue
		}
		raw.Ifindex[i] = uint32(idx)
	}
	if len(names) == 1 {
		raw.Ifindex[1] = raw.Ifindex[0]
	}
	if !any {
		raw.Match |= mIface
		if raw.Ifindex[0] == 0xffffffff && raw.Ifindex[1] == 0xffffffff {
			raw.Match |= mNever
		}
	}
}

// compileTests turns the rule's tests into M_* bits and values.
func compileTests(cr *ruleset.Rule, raw *filterRule, opts CompileOptions) error {
	raw.Family = cr.Family
	if cr.Tests&ruleset.TestTos != 0 {
		raw.Match |= mTos
		raw.Tos = cr.Tos
	}
	if cr.Tests&ruleset.TestTTL != 0 {
		raw.Match |= mTTL
		raw.Ttl = cr.TTL
	}
	if cr.TCPUDP {
		raw.Match |= mTCPUDP
	} else if cr.HasProto {
		raw.Match |= mProto
		raw.Proto = cr.Proto
	}
	if err := compileAddr(&cr.Src4, cr.Family, raw, true, opts); err != nil {
		return err
	}
	if err := compileAddr(&cr.Dst4, cr.Family, raw, false, opts); err != nil {
		return err
	}
	if cr.Tests&ruleset.TestSrcPort != 0 {
		raw.Match |= mSport
		raw.SportOp, raw.SportLo, raw.SportHi = uint8(cr.SrcPort.Op), cr.SrcPort.Lo, cr.SrcPort.Hi
	}
	if cr.Tests&ruleset.TestDstPort != 0 {
		raw.Match |= mDport
		raw.DportOp, raw.DportLo, raw.DportHi = uint8(cr.DstPort.Op), cr.DstPort.Lo, cr.DstPort.Hi
	}
	if cr.Tests&ruleset.TestFlags != 0 {
		raw.Match |= mFlags
		// not ANDed: IPFilter's `flags S/APU` can never match (S is outside the mask)
		raw.Tcpf, raw.TcpfMask = cr.TCPFlags, cr.TCPFlagsMask
	}
	if cr.Tests&ruleset.TestICMP != 0 {
		raw.Match |= mICMP
		raw.IcmpVal, raw.IcmpMask = cr.ICMPValue, cr.ICMPMask
	}
	if cr.Tests&ruleset.TestWith != 0 {
		raw.Match |= mWith
		raw.WithMask, raw.WithWant = cr.WithMask, cr.With&cr.WithMask
	}
	if cr.OptMask != 0 || cr.SecMask != 0 {
		// IPv4 options and security classes are tested on IPv4 packets
		// only (the engine's TestOpt, as IPFilter: `with not opt rr`
		// matches no IPv6 packet): the rule is inet, and never matches
		// in an inet6 rule. Without this an IPv6 packet's extension
		// header bits, in the same word, were tested as options.
		if raw.Family == 6 {
			raw.Match |= mNever
		}
		raw.Family = 4
	}
	if cr.OptMask != 0 {
		raw.Match |= mOpt
		raw.OptMask, raw.OptWant = cr.OptMask, cr.Opt&cr.OptMask
	}
	if cr.V6Mask != 0 {
		// the extension header bits share the option word with the IPv4
		// options; only IPv6 packets carry them, and any IPv4 `opt`
		// would make the rule inet
		if cr.OptMask != 0 || raw.Family == 4 {
			raw.Match |= mNever
		}
		raw.Family = 6
		raw.Match |= mOpt
		raw.OptMask, raw.OptWant = cr.V6Mask, cr.V6
	}
	if cr.SecMask != 0 {
		raw.Match |= mSec
		raw.SecMask, raw.SecWant = uint8(cr.SecMask), uint8(cr.Sec&cr.SecMask)
	}
	return nil
}

// compileAddr lays out a host or interface address test; pool tests are
// compilePools'. An interface address is resolved now, in the rule's
// family (IPv4 when it has none).
func compileAddr(m *ruleset.AddrMatch, family uint8, raw *filterRule, src bool, opts CompileOptions) error {
	var ip, mask netip.Addr
	switch m.Kind {
	case ipf.AddrAny:
		// `!any` never matches; IPFilter stores it as mask 0 inverted
		if m.Not {
			raw.Match |= mNever
		}
		return nil
	case ipf.AddrHost:
		ip, mask = addrOf(m.IP[:m.Len]), addrOf(m.Mask[:m.Len])
	case ipf.AddrIface:
		n, ok := opts.IfNet(m.Iface, family == 6)
		pfx, ok2 := m.IfaceTarget(n)
		if !ok || !ok2 {
			raw.Match |= mNever
			return nil
		}
		ip, mask = pfx.Addr(), prefixMask(pfx.Addr().Is4(), pfx.Bits())
	case ipf.AddrPool, ipf.AddrHash:
		return nil // compilePools
	default:
		return fmt.Errorf("address form %d: %w", m.Kind, ErrUnsupported)
	}
	if !ip.IsValid() || !mask.IsValid() || ip.Is4() != mask.Is4() {
		return fmt.Errorf("address %v/%v: mixed or missing family", ip, mask)
	}
	var a, mw [4]uint32
	addrWords(ip, &a)
	addrWords(mask, &mw)
	for i := range a {
		a[i] &= mw[i]
	}
	fam := uint8(6)
	if ip.Is4() {
		fam = 4
	}
	if raw.Family == 0 {
		raw.Family = fam
	} else if raw.Family != fam {
		raw.Match |= mNever
	}
	if src {
		raw.Src, raw.Smask = a, mw
		raw.Match |= mSrc
		if m.Not {
			raw.Match |= mNotSrc
		}
	} else {
		raw.Dst, raw.Dmask = a, mw
		raw.Match |= mDst
		if m.Not {
			raw.Match |= mNotDst
		}
	}
	return nil
}

// addrOf is the address of 4 or 16 bytes.
func addrOf(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a
}

// addrWords stores an address the way the C program holds it: the network
// order bytes read as native-endian words.
func addrWords(ip netip.Addr, w *[4]uint32) {
	var b [16]byte
	if ip.Is4() {
		a := ip.As4()
		copy(b[:], a[:])
	} else {
		b = ip.As16()
	}
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
}

func wordsBytes(w [4]uint32) [16]byte {
	var b [16]byte
	for i := range w {
		binary.NativeEndian.PutUint32(b[4*i:], w[i])
	}
	return b
}

// prefixBits returns the prefix length of a contiguous mask, or -1.
func prefixBits(m [4]uint32, fam uint8) int {
	b := wordsBytes(m)
	n := 4
	if fam == 6 {
		n = 16
	}
	total, zero := 0, false
	for _, x := range b[:n] {
		if zero && x != 0 {
			return -1
		}
		ones := bits.LeadingZeros8(^x)
		if x<<ones != 0 {
			return -1
		}
		total += ones
		if ones < 8 {
			zero = true
		}
	}
	return total
}

func (b *filterBlocks) set(pos int) {
	blk := pos >> blockBits
	b.W[blk/64] |= 1 << (blk % 64)
}

func (b *filterBlocks) or(o filterBlocks) {
	for i := range b.W {
		b.W[i] |= o.W[i]
	}
}

// buildIndex fills the candidate index: for the destination and source
// addresses (LPM) and ports (hash), the blocks that hold a rule which could
// match. A rule that does not constrain a field is in every entry of that
// field, so the AND of the lookups is a superset of the blocks with
// matching rules. The source dimensions are left out (nil) when no rule
// constrains them: their lookups would then select every block.
func (im *Image) buildIndex() {
	var srcUsed, sportUsed bool
	im.dst = prefixIndex(im.rules, func(r *filterRule) ([4]uint32, int, bool) {
		return r.Dst, prefixBits(r.Dmask, r.Family), r.Match&(mDst|mNotDst) == mDst
	})
	im.ports = portIndex(im.rules, func(r *filterRule) (uint16, bool) {
		return r.DportLo, r.Match&mDport != 0 && r.DportOp == portEq
	})
	src := prefixIndex(im.rules, func(r *filterRule) ([4]uint32, int, bool) {
		ok := r.Match&(mSrc|mNotSrc) == mSrc
		srcUsed = srcUsed || ok
		return r.Src, prefixBits(r.Smask, r.Family), ok
	})
	sports := portIndex(im.rules, func(r *filterRule) (uint16, bool) {
		ok := r.Match&mSport != 0 && r.SportOp == portEq
		sportUsed = sportUsed || ok
		return r.SportLo, ok
	})
	im.src, im.sports = nil, nil
	if srcUsed {
		im.src = src
	}
	if sportUsed {
		im.sports = sports
	}
}

// prefixIndex builds one address dimension of the index: an entry per
// prefix a rule tests, holding that prefix's rules, the rules of every
// shorter prefix covering it and the rules that do not test the address
// (of the family), plus a /0 entry per family for addresses no prefix
// covers. field gives a rule's address, prefix length (-1: a mask the trie
// cannot hold) and whether the rule tests the address positively; negated,
// pool and exp tests count as wildcards.
func prefixIndex(rules []filterRule, field func(*filterRule) ([4]uint32, int, bool)) map[prefixKey]filterBlocks {
	var wild4, wild6 filterBlocks
	prefixes := map[prefixKey]filterBlocks{}
	for pos := range rules {
		r := &rules[pos]
		addr, bitsN, ok := field(r)
		if !ok || bitsN < 0 || r.Match&mExpr != 0 || (r.Family != 4 && r.Family != 6) {
			addWild(r, pos, &wild4, &wild6)
			continue
		}
		k := prefixKey{family: r.Family, addr: maskBytes(wordsBytes(addr), bitsN), bits: bitsN}
		b := prefixes[k]
		b.set(pos)
		prefixes[k] = b
	}
	idx := make(map[prefixKey]filterBlocks, len(prefixes)+2)
	for k, b := range prefixes {
		v := b
		if k.family == 4 {
			v.or(wild4)
		} else {
			v.or(wild6)
		}
		// add every shorter prefix that covers this one
		for l := k.bits - 1; l >= 0; l-- {
			pk := prefixKey{family: k.family, addr: maskBytes(k.addr, l), bits: l}
			if pb, ok := prefixes[pk]; ok {
				v.or(pb)
			}
		}
		idx[k] = v
	}
	for _, fam := range []uint8{4, 6} {
		k := prefixKey{family: fam, bits: 0}
		v := wild4
		if fam == 6 {
			v = wild6
		}
		if pb, ok := prefixes[k]; ok {
			v.or(pb)
		}
		idx[k] = v
	}
	return idx
}

// portIndex builds one port dimension of the index: an entry per port a
// rule tests for equality, holding those rules and every rule that does not
// test the port that way. The datapath looks up 0x10000 for a packet
// without testable ports and 0x20000 for a port with no entry.
func portIndex(rules []filterRule, field func(*filterRule) (uint16, bool)) map[uint32]filterBlocks {
	var wild filterBlocks
	exact := map[uint32]filterBlocks{}
	for pos := range rules {
		r := &rules[pos]
		if port, ok := field(r); ok && r.Match&mExpr == 0 {
			b := exact[uint32(port)]
			b.set(pos)
			exact[uint32(port)] = b
		} else {
			wild.set(pos)
		}
	}
	idx := make(map[uint32]filterBlocks, len(exact)+2)
	for p, b := range exact {
		b.or(wild)
		idx[p] = b
	}
	idx[0x10000] = wild
	idx[0x20000] = wild
	return idx
}

func addWild(r *filterRule, pos int, w4, w6 *filterBlocks) {
	if r.Family != 6 {
		w4.set(pos)
	}
	if r.Family != 4 {
		w6.set(pos)
	}
}

func maskBytes(a [16]byte, n int) [16]byte {
	var out [16]byte
	for i := range out {
		switch {
		case n >= 8:
			out[i] = a[i]
			n -= 8
		case n > 0:
			out[i] = a[i] & ^byte(0xff>>n)
			n = 0
		}
	}
	return out
}

func nativeWord(b []byte) uint32 { return binary.NativeEndian.Uint32(b) }

// compilePools turns `pool/N` and `hash/N` addresses into table lookups,
// copying each table's entries into the image once. Tree entries keep
// their "!"; a hash table has none, and its most specific matching entry
// is its longest matching prefix, so one LPM trie serves both.
func (im *Image) compilePools(cr *ruleset.Rule, raw *filterRule, pt *poolTables, opts CompileOptions) error {
	pools := opts.Pools
	for i, m := range []*ruleset.AddrMatch{&cr.Src4, &cr.Dst4} {
		k := m.Kind
		if k != ipf.AddrPool && k != ipf.AddrHash {
			continue
		}
		// Accounting rules find hash tables of role count
		// (ruleset.AddrMatch.Count); tree pools any role.
		role := ippool.RoleIPF
		if m.Count && k == ipf.AddrHash {
			role = ippool.RoleCount
		}
		name := fmt.Sprintf("%d/%d/%s", k, role, m.Table)
		id, ok := pt.ids[name]
		if !ok {
			if len(pt.ids) >= 0xffff {
				return fmt.Errorf("more than %d pool tables", 0xffff)
			}
			id = uint16(len(pt.ids) + 1)
			pt.ids[name] = id
			def := opts.anon[fmt.Sprintf("%d/%s", k, m.Table)]
			if def != nil && k == ipf.AddrHash && def.Role != role {
				// an accounting rule does not find an inline (ipf) hash
				def = nil
			}
			if def == nil && pools != nil {
				if k == ipf.AddrPool {
					if t := pools.Tree(role, m.Table); t != nil {
						def = t.Def
					}
				} else if h := pools.Hash(role, m.Table); h != nil {
					def = h.Def
				}
			}
			if def != nil {
				for _, en := range def.Entries {
					pe := poolEntry{table: uint32(id), family: uint8(en.Fam), bits: en.Bits, neg: en.Not && k == ipf.AddrPool}
					pe.addr = maskBytes(en.Addr, en.Bits)
					im.pools = append(im.pools, pe)
				}
			}
		}
		if i == 0 {
			raw.Match |= mSrcPool
			raw.SrcPool = id
			if m.Not {
				raw.Match |= mNotSrc
			}
		} else {
			raw.Match |= mDstPool
			raw.DstPool = id
			if m.Not {
				raw.Match |= mNotDst
			}
		}
	}
	return nil
}

// compileCall compiles a `call [now] srcgrpmap/N` or `dstgrpmap/N` rule:
// the group-map's entries go into the pool tables with the list id of the
// filter group each names (0 when the set has no such group: the call then
// finds nothing, as in the Go engine).
func (im *Image) compileCall(cr *ruleset.Rule, raw *filterRule, opts CompileOptions, pt *poolTables, set *ruleset.Set, ids map[*ruleset.List]int) error {
	table := cr.CallTable
	name := "grpmap/" + table
	id, ok := pt.ids[name]
	if !ok {
		if len(pt.ids) >= 0xffff {
			return fmt.Errorf("more than %d pool tables", 0xffff)
		}
		id = uint16(len(pt.ids) + 1)
		pt.ids[name] = id
		if opts.Pools != nil {
			if h := opts.Pools.Hash(ippool.RoleIPF, table); h != nil && h.Def.Type == ippool.GroupMap {
				for _, en := range h.Def.Entries {
					pe := poolEntry{table: uint32(id), family: uint8(en.Fam), bits: en.Bits}
					if g := set.Groups[en.Group]; g != nil {
						pe.group = uint32(ids[g])
					}
					pe.addr = maskBytes(en.Addr, en.Bits)
					im.pools = append(im.pools, pe)
				}
			}
		}
	}
	raw.CallTable = id
	raw.Call = callSrcGrpmap
	if cr.Call.Func == "dstgrpmap" {
		raw.Call = callDstGrpmap
	}
	return nil
}

// compileRoute resolves the interfaces of to, dup-to, reply-to and
// fastroute. A target interface that does not exist leaves that action
// out: IPFilter keeps such a rule and sends nothing until the interface
// appears.
func compileRoute(cr *ruleset.Rule, raw *filterRule, opts CompileOptions) error {
	target := func(t *ipf.RouteTarget, what string) (uint32, uint8, [4]uint32, bool, error) {
		var nh [4]uint32
		if t.DstList != "" {
			return 0, 0, nh, false, fmt.Errorf("%s dstlist/%s: %w", what, t.DstList, ErrUnsupported)
		}
		if t.Iface == "" || t.Iface == "-" {
			return 0, 0, nh, false, nil
		}
		idx, ok := opts.Ifindex(t.Iface)
		if !ok {
			return 0, 0, nh, false, nil
		}
		var fam uint8
		if t.NextHop.IsValid() {
			fam = 6
			if t.NextHop.Is4() {
				fam = 4
			}
			addrWords(t.NextHop, &nh)
		}
		return uint32(idx), fam, nh, true, nil
	}
	// the three targets fill fields of the same shape
	for _, r := range []struct {
		t    *ipf.RouteTarget
		what string
		bit  uint8
		idx  *uint32
		fam  *uint8
		nh   *[4]uint32
	}{
		{cr.DupTo, "dup-to", rtDup, &raw.DupIfindex, &raw.DupNhFam, &raw.DupNh},
		{cr.RouteTo, "to", rtTo, &raw.ToIfindex, &raw.ToNhFam, &raw.ToNh},
		{cr.ReplyTo, "reply-to", rtReply, &raw.ReplyIfindex, &raw.ReplyNhFam, &raw.ReplyNh},
	} {
		if r.t == nil {
			continue
		}
		idx, fam, nh, ok, err := target(r.t, r.what)
		if err != nil {
			return err
		}
		if ok {
			raw.Route |= r.bit
			*r.idx, *r.fam, *r.nh = idx, fam, nh
		}
	}
	if cr.Flags&ruleset.FRFastroute != 0 {
		raw.Route |= rtFast
	}
	return nil
}

// exprOps maps the engine's exp fields to EXPR_* (filter.h).
var exprOps = [...]uint8{
	ruleset.ExprNone: 0, ruleset.ExprProto: 1, ruleset.ExprAddr: 2, ruleset.ExprSrc: 3, ruleset.ExprDst: 4,
	ruleset.ExprAddr6: 5, ruleset.ExprSrc6: 6, ruleset.ExprDst6: 7, ruleset.ExprPort: 8,
	ruleset.ExprSport: 9, ruleset.ExprDport: 10, ruleset.ExprFlags: 11,
}

// compileExpr appends the values of an exp rule's clauses to the image and
// points raw at them. A clause without values still takes one entry (that
// never matches) so that its protocol and negation are evaluated.
func (im *Image) compileExpr(x []ruleset.ExprTest, raw *filterRule) error {
	start := len(im.exprs)
	for _, c := range x {
		if int(c.Op) >= len(exprOps) {
			return fmt.Errorf("exp: field %d: %w", c.Op, ErrUnsupported)
		}
		n := len(c.Vals)
		if n == 0 {
			n = 1
		}
		for i := 0; i < n; i++ {
			e := filterExprVal{Op: exprOps[c.Op], Proto: c.Proto}
			if i < len(c.Vals) {
				v := &c.Vals[i]
				e.Num, e.Mask = v.Num, v.Mask
				switch c.Op {
				case ruleset.ExprAddr, ruleset.ExprSrc, ruleset.ExprDst:
					var b [4]byte
					binary.BigEndian.PutUint32(b[:], uint32(v.W[0]))
					e.W[0] = nativeWord(b[:])
					binary.BigEndian.PutUint32(b[:], uint32(v.M[0]))
					e.M[0] = nativeWord(b[:])
				case ruleset.ExprAddr6, ruleset.ExprSrc6, ruleset.ExprDst6:
					var b [16]byte
					binary.BigEndian.PutUint64(b[:8], v.W[0])
					binary.BigEndian.PutUint64(b[8:], v.W[1])
					var m [16]byte
					binary.BigEndian.PutUint64(m[:8], v.M[0])
					binary.BigEndian.PutUint64(m[8:], v.M[1])
					for j := range e.W {
						e.W[j] = nativeWord(b[4*j:]) & nativeWord(m[4*j:])
						e.M[j] = nativeWord(m[4*j:])
					}
				}
				if c.Op == ruleset.ExprAddr || c.Op == ruleset.ExprSrc || c.Op == ruleset.ExprDst {
					e.W[0] &= e.M[0]
				}
			}
			if c.Not {
				e.Not = 1
			}
			if i == n-1 {
				e.End = 1
			}
			im.exprs = append(im.exprs, e)
		}
	}
	if n := len(im.exprs) - start; n > maxExprVals {
		return fmt.Errorf("exp: %d values: the kernel datapath takes at most %d per rule", n, maxExprVals)
	}
	if len(im.exprs) > maxExprs {
		return fmt.Errorf("exp: %d values: the kernel datapath holds at most %d per set", len(im.exprs), maxExprs)
	}
	raw.Match |= mExpr
	raw.ExprStart, raw.ExprCount = uint32(start), uint32(len(im.exprs)-start)
	return nil
}

// tableKind is the address kind that names a table of t's type.
func tableKind(t *ippool.Table) ipf.AddrKind {
	if t.Type == ippool.Hash {
		return ipf.AddrHash
	}
	return ipf.AddrPool
}

// withAnon returns opts with the anonymous tables of inline operands.
func (opts CompileOptions) withAnon(anon []*ippool.Table) CompileOptions {
	if len(anon) > 0 {
		opts.anon = make(map[string]*ippool.Table, len(anon))
		for _, t := range anon {
			opts.anon[fmt.Sprintf("%d/%s", tableKind(t), t.Name)] = t
		}
	}
	return opts
}

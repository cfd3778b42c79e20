// Package ruleset compiles parsed ipf.conf rules (sluice/internal/rules/ipf)
// once into an immutable Set: per-direction filter and accounting lists,
// groups, and everything a matcher needs as plain values. The Go engine
// and the eBPF compiler both read a Set; neither re-interprets rule text.
//
// A Set never changes after Compile, except for its per-rule counters
// (Rule.Stats), which are updated atomically. Active/inactive sets are
// held by Sets and swapped with an atomic pointer, so a failed load
// changes nothing.
package ruleset

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"sluice/internal/rules/ipf"
)

// IPFilter's FR_* rule flag bits (ip_fil.h). Rule.Flags holds them so that
// dumps print the same hexadecimal values IPFilter prints.
const (
	FRCall       uint32 = 0x0
	FRBlock      uint32 = 0x1
	FRPass       uint32 = 0x2
	FRAuth       uint32 = 0x3
	FRPreauth    uint32 = 0x4
	FRAccount    uint32 = 0x5
	FRSkip       uint32 = 0x6
	FRDecap      uint32 = 0x8
	FRCmdMask    uint32 = 0xf
	FRLog        uint32 = 0x10
	FRLogMask    uint32 = FRLog | FRCmdMask
	FRCallNow    uint32 = 0x20
	FRNotSrcIP   uint32 = 0x40
	FRNotDstIP   uint32 = 0x80
	FRQuick      uint32 = 0x100
	FRKeepFrag   uint32 = 0x200
	FRKeepState  uint32 = 0x400
	FRFastroute  uint32 = 0x800
	FRRetRST     uint32 = 0x1000
	FRRetICMP    uint32 = 0x2000
	FRFakeICMP   uint32 = 0x3000
	FRRetMask    uint32 = 0x3000
	FROutQue     uint32 = 0x4000
	FRInQue      uint32 = 0x8000
	FRLogBody    uint32 = 0x10000
	FRLogFirst   uint32 = 0x20000
	FRLogOrBlock uint32 = 0x40000
	FRStLoose    uint32 = 0x80000
	FRFragStrict uint32 = 0x100000
	FRStStrict   uint32 = 0x200000
	FRNewISN     uint32 = 0x400000
	FRNoICMPErr  uint32 = 0x800000
	FRStateSync  uint32 = 0x1000000
	FRCopied     uint32 = 0x2000000
	FRInactive   uint32 = 0x4000000
	FRNoMatch    uint32 = 0x8000000
)

// AddrMatch is a compiled address test.
type AddrMatch struct {
	Kind ipf.AddrKind
	// IP and Mask for AddrHost, both 16 bytes (IPv4 in the first 4) so the
	// test is a masked compare of Len bytes. Len is 4 or 16.
	IP, Mask [16]byte
	Len      uint8
	Not      bool
	// W and M are IP and Mask as two big-endian 64-bit words (IPv4 in
	// the low 32 bits of W[0]), for a two-instruction match.
	W, M [2]uint64
	// Table names the ippool table for AddrPool/AddrHash. Count is set
	// for accounting rules, which find hash tables of role count.
	Table string
	Count bool
	// Iface and IfaceMode are for AddrIface (resolved by the engine).
	Iface     string
	IfaceMode ipf.IfaceAddrMode
	IfaceBits uint8
}

// Match reports whether a (4 or 16 bytes) passes the test, ignoring Not
// and non-host kinds.
func (m *AddrMatch) Match(a []byte) bool {
	if int(m.Len) != len(a) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i]&m.Mask[i] != m.IP[i] {
			return false
		}
	}
	return true
}

// Stats are the per-rule counters; they are the only mutable part of a
// Set and are updated atomically.
type Stats struct {
	Hits  atomic.Uint64
	Bytes atomic.Uint64
	// PPS window state (pps N).
	PPSStart atomic.Uint32
	PPSCount atomic.Uint32
	// Log-limit window state (HP's log limit [freq N]).
	LogStart atomic.Uint32
	LogCount atomic.Uint32
}

// Rule is one compiled rule: everything the Go engine and the eBPF
// compiler need, as plain values. Neither reads Src except to print the
// rule (a test in this package checks both packages for that). All fields
// are read-only after Compile.
type Rule struct {
	// ID is unique across every rule compiled by this process; state
	// limits are keyed by it.
	ID uint32
	// Src is the parsed rule, for printing only.
	Src *ipf.Rule
	// Pos is where the rule starts in its file (for error messages).
	Pos ipf.Pos
	// Collection and InsertAt place the rule in its list: the leading
	// collection number and `@N` (InsertAt < 0 when none).
	Collection uint32
	InsertAt   int
	// Flags are the FR_* bits: command, quick, log options, keep
	// state/frags options, return-*, direction, fastroute.
	Flags uint32
	Out   bool
	// Family is 0 (any), 4 or 6.
	Family uint8
	// IfName is the interface of `on` ("" = any).
	IfName string
	// IfNames are the four state slots: on[0], on[1], via[0], via[1]
	// ("" when not given; "*" and "-" mean any).
	IfNames [4]string
	// Proto: HasProto with Proto, or TCPUDP.
	HasProto bool
	Proto    uint8
	TCPUDP   bool
	// Tests tells which tests the rule has (bit set below).
	Tests    uint32
	Src4     AddrMatch
	Dst4     AddrMatch
	SrcPort  ipf.Port
	DstPort  ipf.Port
	Tos, TTL uint8
	// TCP flags test: (pkt & FlagsMask) == Flags.
	TCPFlags, TCPFlagsMask uint8
	// ICMP test: (type<<8|code) & ICMPMask == ICMPValue.
	ICMPValue, ICMPMask uint16
	// With test on FI_* bits, options, security classes, v6 headers.
	With, WithMask uint32
	Opt, OptMask   uint32
	Sec, SecMask   uint16
	V6, V6Mask     uint32
	// Head is the group a match recurses into; Group is where the rule lives.
	Head, Group string
	HeadList    *List
	Skip        int
	// ICMPCode is the code of return-icmp replies.
	ICMPCode uint8
	// KeepState holds the keep state options (a copy; nil without keep
	// state).
	KeepState *ipf.KeepState
	Age       [2]uint32 // ticks
	// KeepLimit is HP's DCA `keep limit N` (0 = none), per source unless
	// LimitCumulative.
	KeepLimit       uint32
	LimitCumulative bool
	// LogLimit and LogLimitFreq are HP's `log limit [freq N]`.
	LogLimit     bool
	LogLimitFreq uint32
	LogTag       uint32
	// NATTag is the rule's nat tag; NATTagMatch says it came from
	// match-tag (an inbound rule then matches only packets the NAT rule
	// tagged so).
	NATTag      string
	NATTagMatch bool
	PPS         uint32
	Call        ipf.Call
	// LimitReturn holds the return-* bits of a pass rule with HP's
	// `keep limit`: they apply to the connections over the limit.
	LimitReturn uint32
	// CallTable is Call.Arg as text: the group-map table name.
	CallTable string
	// RouteTo, DupTo and ReplyTo are the rule's `to`, `dup-to` and
	// `reply-to` targets (copies; nil when absent). FRFastroute in Flags
	// is `fastroute`.
	RouteTo, DupTo, ReplyTo *ipf.RouteTarget
	// Expr holds the clauses of an `exp { "..." }` rule, ANDed.
	Expr  []ExprTest
	Stats *Stats
}

// Test bits for Rule.Tests.
const (
	TestSrc uint32 = 1 << iota
	TestDst
	TestSrcPort
	TestDstPort
	TestTos
	TestTTL
	TestFlags
	TestICMP
	TestWith
	TestOpt
	TestV6Hdr
	TestProto
	// TestExpr: the rule is an `exp { "..." }` rule (Rule.Expr).
	TestExpr
)

// List is an ordered rule list (a direction's main list, an accounting
// list or a group).
type List struct {
	Name  string // group name; "" for main lists
	Rules []*Rule
	// Hot mirrors Rules (same index) with the fields that reject most
	// packets, packed contiguously so a long scan stays in cache. It is
	// built by Set.Link; a scanner must ignore it when its length differs
	// from len(Rules).
	Hot []Hot
}

// Hot is the prefilter form of a rule: direction, family, protocol and
// host address tests. A packet that fails it fails the rule; one that
// passes must still be checked against the whole Rule.
type Hot struct {
	Out      bool
	Family   uint8
	Proto    uint8
	HasProto bool
	// SrcLen/DstLen are 4 or 16 for a host address test (0 = none);
	// the packet address words masked with SrcM must equal SrcW,
	// inverted by SrcNot.
	SrcLen, DstLen uint8
	SrcNot, DstNot bool
	SrcW, SrcM     [2]uint64
	DstW, DstM     [2]uint64
}

// index (re)builds l.Hot.
func (l *List) index() {
	l.Hot = make([]Hot, len(l.Rules))
	for i, r := range l.Rules {
		h := &l.Hot[i]
		h.Out, h.Family, h.Proto, h.HasProto = r.Out, r.Family, r.Proto, r.HasProto && r.Tests&TestProto != 0
		if r.Tests&TestSrc != 0 && r.Src4.Kind == ipf.AddrHost {
			h.SrcLen, h.SrcNot, h.SrcW, h.SrcM = r.Src4.Len, r.Src4.Not, r.Src4.W, r.Src4.M
		}
		if r.Tests&TestDst != 0 && r.Dst4.Kind == ipf.AddrHost {
			h.DstLen, h.DstNot, h.DstW, h.DstM = r.Dst4.Len, r.Dst4.Not, r.Dst4.W, r.Dst4.M
		}
	}
}

// Set is one compiled rule set (IPFilter's set 0 or set 1).
type Set struct {
	// In and Out are the main filter lists.
	In, Out List
	// AcctIn and AcctOut are the accounting (count) lists.
	AcctIn, AcctOut List
	// Groups holds filter groups by name, in creation order in GroupOrder.
	Groups     map[string]*List
	GroupOrder []string
	// AcctGroups holds accounting groups by name.
	AcctGroups map[string]*List
}

var nextID atomic.Uint32

// Options control compilation.
type Options struct {
	// Resolve is unused by the compiler itself but recorded for printers.
	Resolve bool
}

// ErrUnsupported is returned for rules whose features the engine cannot
// run (call functions with no group-map, bpf, unknown exp fields).
type ErrUnsupported struct {
	Pos    ipf.Pos
	Reason string
}

func (e *ErrUnsupported) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.Pos.File, e.Pos.Line, e.Pos.Col, e.Reason)
}

// ErrRule is a rule the compiler refuses: valid syntax, but a combination
// the filter does not allow.
type ErrRule struct {
	Pos    ipf.Pos
	Reason string
}

func (e *ErrRule) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.Pos.File, e.Pos.Line, e.Pos.Col, e.Reason)
}

// NewSet returns an empty set.
func NewSet() *Set {
	return &Set{Groups: map[string]*List{}, AcctGroups: map[string]*List{}}
}

// Add compiles r and inserts it into s, honouring collections and @N. It
// is used while building a set; once the set is published it must not
// be called again.
func (s *Set) Add(r *ipf.Rule) (*Rule, error) {
	cr := &Rule{Stats: &Stats{}}
	if err := compileInto(cr, r, nextID.Add(1)); err != nil {
		return nil, err
	}
	s.place(r, cr)
	return cr, nil
}

// place inserts cr, compiled from r, into its list.
func (s *Set) place(r *ipf.Rule, cr *Rule) {
	var l *List
	acct := r.Action == ipf.ActionCount
	switch {
	case r.Group != "":
		gm := s.Groups
		if acct {
			gm = s.AcctGroups
		}
		l = gm[r.Group]
		if l == nil {
			l = &List{Name: r.Group}
			gm[r.Group] = l
			if !acct {
				s.GroupOrder = append(s.GroupOrder, r.Group)
			}
		}
	case acct && r.Dir == ipf.DirOut:
		l = &s.AcctOut
	case acct:
		l = &s.AcctIn
	case r.Dir == ipf.DirOut:
		l = &s.Out
	default:
		l = &s.In
	}
	insert(l, cr)
}

// insert places r after all rules of lower or equal collection, or at
// position @N among the rules of its collection.
func insert(l *List, r *Rule) {
	coll := r.Collection
	if n := len(l.Rules); r.InsertAt < 0 && (n == 0 || l.Rules[n-1].Collection <= coll) {
		// the common case, a file read in order: the rule goes last
		// (no searches: a million-rule file spent 4% of its load here)
		l.Rules = append(l.Rules, r)
		return
	}
	start := sort.Search(len(l.Rules), func(i int) bool { return l.Rules[i].Collection >= coll })
	end := sort.Search(len(l.Rules), func(i int) bool { return l.Rules[i].Collection > coll })
	pos := end
	if r.InsertAt >= 0 && start+r.InsertAt < end {
		pos = start + r.InsertAt
	}
	l.Rules = append(l.Rules, nil)
	copy(l.Rules[pos+1:], l.Rules[pos:])
	l.Rules[pos] = r
}

// Link resolves head references to group lists; call it after the last
// Add.
func (s *Set) Link() {
	s.link()
	s.index()
}

// link resolves the head groups (Link without the prefilters).
func (s *Set) link() {
	link := func(l *List, groups map[string]*List, filter bool) {
		for _, r := range l.Rules {
			if r.Head != "" {
				g := groups[r.Head]
				if g == nil {
					g = &List{Name: r.Head}
					groups[r.Head] = g
					if filter {
						s.GroupOrder = append(s.GroupOrder, r.Head)
					}
				}
				r.HeadList = g
			}
		}
	}
	for _, l := range []*List{&s.In, &s.Out} {
		link(l, s.Groups, true)
	}
	for _, l := range []*List{&s.AcctIn, &s.AcctOut} {
		link(l, s.AcctGroups, false)
	}
	for _, name := range append([]string(nil), s.GroupOrder...) {
		link(s.Groups[name], s.Groups, true)
	}
	for _, g := range s.AcctGroups {
		link(g, s.AcctGroups, false)
	}
}

// index builds every list's Hot prefilter.
func (s *Set) index() {
	for _, l := range []*List{&s.In, &s.Out, &s.AcctIn, &s.AcctOut} {
		l.index()
	}
	for _, g := range s.Groups {
		g.index()
	}
	for _, g := range s.AcctGroups {
		g.index()
	}
}

// Compile builds a set from rules.
func Compile(rules []*ipf.Rule) (*Set, error) { return compile(rules, true) }

// CompileLean is Compile without the lists' Hot prefilters, which only
// the Go engine's scan reads: for a compiler that reads the set once
// (the kernel datapath's). A million rules take 72 MB less.
func CompileLean(rules []*ipf.Rule) (*Set, error) { return compile(rules, false) }

func compile(rules []*ipf.Rule, hot bool) (*Set, error) {
	s := NewSet()
	if len(rules) < parallelCompile || runtime.GOMAXPROCS(0) == 1 {
		for _, r := range rules {
			if _, err := s.Add(r); err != nil {
				return nil, err
			}
		}
	} else {
		crs, err := compileAll(rules, runtime.GOMAXPROCS(0))
		if err != nil {
			return nil, err
		}
		s.presize(rules)
		for i, r := range rules {
			s.place(r, &crs[i])
		}
	}
	s.link()
	if hot {
		s.index()
	}
	return s, nil
}

// presize makes the main and accounting lists the size the rules give
// them (a million rules' lists grown by doubling were 42 MB, over half
// of it copies).
func (s *Set) presize(rules []*ipf.Rule) {
	var n [4]int
	for _, r := range rules {
		if r.Group != "" {
			continue
		}
		i := 0
		if r.Dir == ipf.DirOut {
			i = 1
		}
		if r.Action == ipf.ActionCount {
			i += 2
		}
		n[i]++
	}
	for i, l := range []*List{&s.In, &s.Out, &s.AcctIn, &s.AcctOut} {
		if n[i] > 0 {
			l.Rules = make([]*Rule, 0, n[i])
		}
	}
}

// parallelCompile is the size of a set from which Compile compiles its
// rules on every core (each rule compiles on its own; only placing them
// in their lists is done in order).
const parallelCompile = 10000

// compileAll compiles rules in workers pieces at once, into one array of
// Rules and one of Stats (a million rules: two allocations instead of
// two million). IDs are in rule order, as Add gives them; the error is
// the first rule's that fails, the one Add would stop at.
func compileAll(rules []*ipf.Rule, workers int) ([]Rule, error) {
	n := len(rules)
	crs := make([]Rule, n)
	stats := make([]Stats, n)
	for i := range crs {
		crs[i].Stats = &stats[i]
	}
	if err := compileRules(crs, rules, workers); err != nil {
		return nil, err
	}
	return crs, nil
}

// CompileRules compiles rules into dst (as long) on workers goroutines,
// each as Compile would before placing it in its list, with IDs of their
// own in rule order and dst's Stats kept. It is for a compiler that lays
// each rule out elsewhere and then reuses dst for the next rules (the
// kernel image of a million rules), so it makes no Set: a rule's list,
// its head group and calls are the caller's. The error is the first
// failing rule's, as Compile's.
func CompileRules(dst []Rule, rules []*ipf.Rule, workers int) error {
	if len(dst) != len(rules) {
		return fmt.Errorf("ruleset: %d rules into %d places", len(rules), len(dst))
	}
	return compileRules(dst, rules, max(workers, 1))
}

func compileRules(crs []Rule, rules []*ipf.Rule, workers int) error {
	n := len(rules)
	base := nextID.Add(uint32(n)) - uint32(n)
	errs := make([]error, workers)
	per := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min((w+1)*per, n)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				if err := compileInto(&crs[i], rules[i], base+uint32(i)+1); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// compileInto turns a parsed rule into cr (whose Stats it keeps), one
// step per part of the rule: action, options, interfaces, tests, keep
// options, tags.
func compileInto(cr *Rule, r *ipf.Rule, id uint32) error {
	*cr = Rule{ID: id, Src: r, Pos: r.Pos, Collection: r.Collection, InsertAt: -1, Stats: cr.Stats}
	if r.HasInsertAt {
		cr.InsertAt = int(r.InsertAt)
	}
	if err := cr.compileAction(r); err != nil {
		return err
	}
	if r.KeepState != nil && r.With&ipf.FI_OOW != 0 {
		// ipf_rule_ioctl refuses it: state never follows a packet
		// that is out of its window.
		return fmt.Errorf("%s:%d:%d: 'keep state' rule included 'with oow'", r.Pos.File, r.Pos.Line, r.Pos.Col)
	}
	cr.compileLog(r)
	if err := cr.compileKeep(r); err != nil {
		return err
	}
	cr.compileInterfaces(r)
	if err := cr.compileTests(r); err != nil {
		return err
	}
	cr.Head, cr.Group = r.Head, r.Group
	if r.Tag.HasLog {
		cr.LogTag = r.Tag.Log
	}
	cr.NATTag, cr.NATTagMatch = r.Tag.NAT, r.TagFromMatch
	cr.PPS = r.PPS
	return nil
}

// compileAction sets the command, return-*, direction, quick and routing
// parts of Flags and the action's own fields.
func (cr *Rule) compileAction(r *ipf.Rule) error {
	switch r.Action {
	case ipf.ActionPass:
		cr.Flags = FRPass
	case ipf.ActionBlock:
		cr.Flags = FRBlock
	case ipf.ActionLog:
		cr.Flags = FRLog
	case ipf.ActionCount:
		cr.Flags = FRAccount
	case ipf.ActionAuth:
		cr.Flags = FRAuth
	case ipf.ActionPreauth:
		cr.Flags = FRPreauth
	case ipf.ActionNomatch:
		cr.Flags = FRNoMatch
	case ipf.ActionSkip:
		cr.Flags = FRSkip
		cr.Skip = int(r.Skip)
	case ipf.ActionCall:
		cr.Flags = FRCall
		if r.Call.Now {
			cr.Flags |= FRCallNow
		}
		cr.Call = r.Call
		cr.CallTable = strconv.FormatUint(uint64(r.Call.Arg), 10)
		switch r.Call.Func {
		case "srcgrpmap", "dstgrpmap":
		default:
			return &ErrUnsupported{r.Pos, fmt.Sprintf("call %s: unknown function", r.Call.Func)}
		}
	case ipf.ActionDecapsulate:
		cr.Flags = FRDecap
	}
	if r.BPF != "" {
		return &ErrUnsupported{r.Pos, "bpf rules are not supported"}
	}
	switch r.Return {
	case ipf.ReturnRST:
		cr.Flags |= FRRetRST
	case ipf.ReturnICMP:
		cr.Flags |= FRRetICMP
	case ipf.ReturnICMPAsDest:
		cr.Flags |= FRFakeICMP
	}
	if r.Action == ipf.ActionPass && r.KeepLimit > 0 {
		// HP DCA: "pass return-rst ... keep limit N" resets only the
		// connections over the limit.
		cr.LimitReturn = cr.Flags & FRRetMask
		cr.Flags &^= FRRetMask
	}
	cr.ICMPCode = r.ICMPCode
	if r.Dir == ipf.DirOut {
		cr.Out = true
		cr.Flags |= FROutQue
	} else {
		cr.Flags |= FRInQue
	}
	if r.Quick {
		cr.Flags |= FRQuick
	}
	if r.FastRoute {
		cr.Flags |= FRFastroute
	}
	cr.RouteTo, cr.DupTo, cr.ReplyTo = copyRoute(r.RouteTo), copyRoute(r.DupTo), copyRoute(r.ReplyTo)
	// IPFilter marks every rule loaded from user space.
	cr.Flags |= FRCopied
	return nil
}

func copyRoute(t *ipf.RouteTarget) *ipf.RouteTarget {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// compileLog sets the log flags and HP's log limit.
func (cr *Rule) compileLog(r *ipf.Rule) {
	if !r.HasLog {
		return
	}
	if r.Action != ipf.ActionLog {
		cr.Flags |= FRLog
	}
	if r.Log.Body {
		cr.Flags |= FRLogBody
	}
	if r.Log.First {
		cr.Flags |= FRLogFirst
	}
	if r.Log.OrBlock {
		cr.Flags |= FRLogOrBlock
	}
	cr.LogLimit, cr.LogLimitFreq = r.Log.Limit, r.Log.LimitFreq
}

// compileKeep sets keep state, keep frags and keep limit.
func (cr *Rule) compileKeep(r *ipf.Rule) error {
	if ks := r.KeepState; ks != nil {
		c := *ks
		cr.KeepState = &c
		cr.Flags |= FRKeepState
		if ks.Strict {
			cr.Flags |= FRStStrict
		}
		if ks.Loose {
			cr.Flags |= FRStLoose
		}
		if ks.NewISN {
			cr.Flags |= FRNewISN
		}
		if ks.NoICMPErr {
			cr.Flags |= FRNoICMPErr
		}
		if ks.Sync {
			cr.Flags |= FRStateSync
		}
	}
	if r.KeepFrags {
		cr.Flags |= FRKeepFrag
		if r.KeepFragsStrict {
			cr.Flags |= FRFragStrict
		}
	}
	cr.KeepLimit, cr.LimitCumulative = r.KeepLimit, r.KeepLimitCumulative
	cr.Age = [2]uint32{r.Age[0] * 2, r.Age[1] * 2}
	if r.KeepLimit > 0 {
		// HP's DCA applies only to quick inbound TCP rules, and such a
		// rule may not keep state (ipf-reference §7)
		var why string
		switch {
		case !r.Quick:
			why = "is not quick"
		case r.Dir != ipf.DirIn:
			why = "is not inbound"
		case !r.HasProto || r.TCPUDP || r.Proto != 6:
			why = "is not proto tcp"
		case r.KeepState != nil:
			why = "also keeps state"
		}
		if why != "" {
			return &ErrRule{r.Pos, "keep limit: HP-UX allows it only on quick inbound proto tcp rules without keep state; this rule " + why}
		}
	}
	return nil
}

// compileInterfaces sets the family and the `on` and `via` names.
func (cr *Rule) compileInterfaces(r *ipf.Rule) {
	cr.Family = uint8(r.Family)
	if r.TestsNothing() {
		// A rule that prints as `all` has no IP part (FR_T_NONE):
		// IPFilter never compares its family, so `pass in inet6 all`
		// (or `pass in all` under -6) matches IPv4 packets too.
		cr.Family = 0
	}
	if len(r.On) > 0 {
		cr.IfNames[0] = r.On[0]
		if r.On[0] != "*" && r.On[0] != "-" {
			cr.IfName = r.On[0]
		}
	}
	if len(r.On) > 1 {
		cr.IfNames[1] = r.On[1]
	}
	if len(r.Via) > 0 {
		cr.IfNames[2] = r.Via[0]
	}
	if len(r.Via) > 1 {
		cr.IfNames[3] = r.Via[1]
	}
}

// compileTests sets Tests and the values each test compares with.
func (cr *Rule) compileTests(r *ipf.Rule) error {
	if r.From.Not {
		cr.Flags |= FRNotSrcIP
	}
	if r.To.Not {
		cr.Flags |= FRNotDstIP
	}
	if r.Expr != nil {
		x, err := compileExpr(r)
		if err != nil {
			return err
		}
		cr.Expr = x
		cr.Tests |= TestExpr
	}
	if r.HasProto || r.TCPUDP {
		cr.Tests |= TestProto
		cr.HasProto, cr.Proto, cr.TCPUDP = r.HasProto && !r.TCPUDP, r.Proto, r.TCPUDP
	}
	var err error
	if cr.Src4, err = compileAddr(&r.From, r); err != nil {
		return err
	}
	if cr.Dst4, err = compileAddr(&r.To, r); err != nil {
		return err
	}
	if r.From.Addr.Kind != ipf.AddrAny || r.From.Not {
		cr.Tests |= TestSrc
	}
	if r.To.Addr.Kind != ipf.AddrAny || r.To.Not {
		cr.Tests |= TestDst
	}
	if r.From.Port.Op != ipf.PortNone {
		cr.Tests |= TestSrcPort
		cr.SrcPort = r.From.Port
	}
	if r.To.Port.Op != ipf.PortNone {
		cr.Tests |= TestDstPort
		cr.DstPort = r.To.Port
	}
	if r.HasTos {
		cr.Tests |= TestTos
		cr.Tos = r.Tos
	}
	if r.HasTTL {
		cr.Tests |= TestTTL
		cr.TTL = r.TTL
	}
	if r.HasFlags {
		cr.Tests |= TestFlags
		cr.TCPFlags, cr.TCPFlagsMask = r.Flags, r.FlagsMask
	}
	if r.HasICMPType {
		cr.Tests |= TestICMP
		cr.ICMPValue, cr.ICMPMask = uint16(r.ICMPType)<<8, 0xff00
		if r.HasICMPCode {
			cr.ICMPValue |= uint16(r.ICMPCodeMatch)
			cr.ICMPMask = 0xffff
		}
	}
	if r.WithMask != 0 {
		cr.Tests |= TestWith
		cr.With, cr.WithMask = r.With, r.WithMask
	}
	if r.OptMask != 0 || r.SecMask != 0 {
		cr.Tests |= TestOpt
		cr.Opt, cr.OptMask = r.OptBits, r.OptMask
		cr.Sec, cr.SecMask = uint16(r.SecBits), uint16(r.SecMask)
	}
	if r.V6HdrsMask != 0 {
		cr.Tests |= TestV6Hdr
		cr.V6, cr.V6Mask = r.V6Hdrs, r.V6HdrsMask
	}
	return nil
}

func compileAddr(ep *ipf.Endpoint, r *ipf.Rule) (AddrMatch, error) {
	m := AddrMatch{Kind: ep.Addr.Kind, Not: ep.Not}
	switch ep.Addr.Kind {
	case ipf.AddrHost:
		ip, mask := ep.Addr.IP, ep.Addr.Mask
		if !ip.IsValid() || !mask.IsValid() || ip.BitLen() != mask.BitLen() {
			return m, &ErrUnsupported{r.Pos, "address and mask of different families"}
		}
		fill(&m.IP, ip)
		fill(&m.Mask, mask)
		m.Len = uint8(ip.BitLen() / 8)
		m.W, m.M = Words(ip), Words(mask)
	case ipf.AddrPool, ipf.AddrHash:
		m.Table = ep.Addr.Table
		m.Count = r.Action == ipf.ActionCount
		if ep.Addr.Inline != nil {
			return m, &ErrUnsupported{r.Pos, "inline pool tables are not supported"}
		}
	case ipf.AddrIface:
		m.Iface, m.IfaceMode, m.IfaceBits = ep.Addr.Iface, ep.Addr.IfaceMode, ep.Addr.IfaceBits
	}
	return m, nil
}

// Words returns a as the two words AddrMatch.W uses.
func Words(a netip.Addr) [2]uint64 {
	if a.Is4() {
		b := a.As4()
		return [2]uint64{uint64(binary.BigEndian.Uint32(b[:])), 0}
	}
	b := a.As16()
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// MatchWords tests an address given as Words with its byte length.
func (m *AddrMatch) MatchWords(w [2]uint64, n uint8) bool {
	return n == m.Len && w[0]&m.M[0] == m.W[0] && w[1]&m.M[1] == m.W[1]
}

func fill(dst *[16]byte, a netip.Addr) {
	if a.Is4() {
		b := a.As4()
		copy(dst[:], b[:])
		return
	}
	b := a.As16()
	*dst = b
}

// Sets holds the active and inactive rule sets (IPFilter's sets 0 and 1)
// behind atomic pointers. Readers load a *Set once per packet.
type Sets struct {
	sets   [2]atomic.Pointer[Set]
	active atomic.Uint32
}

// NewSets returns two empty sets with set 0 active.
func NewSets() *Sets {
	s := &Sets{}
	for i := range s.sets {
		e := NewSet()
		s.sets[i].Store(e)
	}
	return s
}

// Active returns the active set.
func (s *Sets) Active() *Set { return s.sets[s.active.Load()&1].Load() }

// ActiveIndex returns 0 or 1.
func (s *Sets) ActiveIndex() int { return int(s.active.Load() & 1) }

// Get returns set i (0 or 1).
func (s *Sets) Get(i int) *Set { return s.sets[i&1].Load() }

// Store publishes set as set i.
func (s *Sets) Store(i int, set *Set) { s.sets[i&1].Store(set) }

// Swap makes the inactive set active and returns the new active index.
func (s *Sets) Swap() int {
	n := (s.active.Load() + 1) & 1
	s.active.Store(n)
	return int(n)
}

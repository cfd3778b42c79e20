package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"sort"
	"strconv"

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
	// IfAddr resolves an address taken from an interface (`(IF)`,
	// `(IF)/BITS`, `IF/broadcast|network|netmasked|peer`): the address
	// and mask to compare the packet with ((pkt & mask) == addr). ok=false
	// makes the rule never match, as IPFilter does for an interface
	// without such an address. nil uses the host's interfaces as they are
	// when the rules are compiled.
	IfAddr func(name string, mode ipf.IfaceAddrMode, v6 bool) (addr, mask netip.Addr, ok bool)
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
	rules  []rawRule
	texts  []string
	lists  []imageList
	ifaces []string    // interfaces named by `on`, in first-seen order
	pools  []poolEntry // entries of the pool tables the rules name
	exprs  []rawExpr   // values of the exp rules, flattened
	// index entries; nil when the set is too small to benefit
	dst    map[prefixKey]rawBlocks
	ports  map[uint32]rawBlocks
	src    map[prefixKey]rawBlocks // nil: no rule tests a source prefix
	sports map[uint32]rawBlocks    // nil: no rule tests a source port with =
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
	set, err := ruleset.Compile(rules)
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
	if opts.Ifindex == nil {
		opts.Ifindex = hostIfindex
	}
	if opts.IfAddr == nil {
		opts.IfAddr = hostIfAddr
	}
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
	im := &Image{lists: make([]imageList, len(lists))}
	pt := &poolTables{ids: map[string]uint16{}}
	seen := map[string]bool{}
	for id, s := range lists {
		n := len(s.l.Rules)
		if len(im.rules)+n > MaxRules {
			return nil, fmt.Errorf("%d rules: the kernel datapath holds at most %d", len(im.rules)+n, MaxRules)
		}
		im.lists[id] = imageList{start: len(im.rules), count: n, dir: s.dir, acct: s.acct, name: s.l.Name}
		for i, cr := range s.l.Rules {
			r := cr.Src
			raw, err := compileRule(cr, opts)
			if err == nil {
				err = im.compilePools(r, &raw, opts, pt)
			}
			if err == nil && r.Action == ipf.ActionCall {
				err = im.compileCall(r, &raw, opts, pt, set, ids)
			}
			if err == nil && cr.Tests&ruleset.TestExpr != 0 {
				err = im.compileExpr(cr.Expr, &raw)
			}
			if err != nil {
				return nil, fmt.Errorf("%s:%d:%d: %w", r.Pos.File, r.Pos.Line, r.Pos.Col, err)
			}
			for _, n := range r.On {
				if n != "-" && n != "*" && !seen[n] {
					seen[n] = true
					im.ifaces = append(im.ifaces, n)
				}
			}
			if cr.HeadList != nil {
				hid, ok := ids[cr.HeadList]
				if !ok {
					return nil, fmt.Errorf("%s:%d:%d: head %s: group not in the set", r.Pos.File, r.Pos.Line, r.Pos.Col, r.Head)
				}
				raw.Head = uint16(hid)
			}
			raw.RuleNo = uint32(i + 1)
			raw.GroupNo = uint32(id)
			im.rules = append(im.rules, raw)
			if opts.Text != nil {
				im.texts = append(im.texts, opts.Text(r))
			} else {
				im.texts = append(im.texts, ipf.FormatRule(r))
			}
		}
	}
	if len(im.rules) >= indexThreshold {
		im.buildIndex()
	}
	return im, nil
}

// groupDir is the direction of a group's first rule (groups hold the rules
// of one direction in practice; each rule still checks its own).
func groupDir(l *ruleset.List) ipf.Direction {
	if len(l.Rules) > 0 && l.Rules[0].Out {
		return ipf.DirOut
	}
	return ipf.DirIn
}

func hostIfindex(name string) (int, bool) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return 0, false
	}
	return ifc.Index, true
}

// compileRule lays out one rule for the program. Tests the reference engine
// has already compiled (tos, ttl, protocol, flags, ICMP, with) are taken from
// cr, so both datapaths match on the same values; the rest comes from the
// parsed rule.
func compileRule(cr *ruleset.Rule, opts CompileOptions) (rawRule, error) {
	r := cr.Src
	var raw rawRule
	switch r.Action {
	case ipf.ActionPass:
		raw.Action = frPass
	case ipf.ActionBlock:
		raw.Action = frBlock
	case ipf.ActionLog:
		raw.Action = frLogOnly
	case ipf.ActionCount:
		raw.Action = frAccount
	case ipf.ActionAuth:
		raw.Action = frAuth
	case ipf.ActionPreauth:
		raw.Action = frPreauth
	case ipf.ActionNomatch:
		raw.Action = frNomatchCmd | frNomatch
	case ipf.ActionSkip:
		raw.Action = frSkip
		raw.Skip = r.Skip
	case ipf.ActionCall:
		// call rules have command 0 (IPFilter's FR_CALL); the call
		// itself is compiled by compileCall
		raw.Action = frLogOnly
		if r.Call.Now {
			raw.Action |= frCallNow
		}
	case ipf.ActionDecapsulate:
		// the engine re-parses the inner IP-in-IP/GRE packet and scans
		// the head group with it; the program holds one parsed packet
		// per CPU and its scan reads it implicitly, so a nested scan
		// would need a second packet context throughout
		return raw, fmt.Errorf("decapsulate (inner packet scan): %w", ErrUnsupported)
	default:
		return raw, fmt.Errorf("action %s: %w", r.Action, ErrUnsupported)
	}
	switch r.Return {
	case ipf.ReturnRST:
		raw.Action |= frRetRST
	case ipf.ReturnICMP:
		raw.Action |= frRetICMP
	case ipf.ReturnICMPAsDest:
		raw.Action |= frFakeICMP
	}
	raw.RetCode = r.ICMPCode
	if r.Dir == ipf.DirOut {
		raw.Action |= frOutQue
	} else {
		raw.Action |= frInQue
	}
	if r.Quick {
		raw.Action |= frQuick
	}
	if r.HasLog {
		raw.Action |= frLog
		if r.Log.Body {
			raw.Action |= frLogBody
		}
		if r.Log.First {
			raw.Action |= frLogFirst
		}
		if r.Log.OrBlock {
			raw.Action |= frLogOrBlock
		}
	}
	switch {
	case r.Action == ipf.ActionCall && r.Call.Func != "srcgrpmap" && r.Call.Func != "dstgrpmap":
		return raw, fmt.Errorf("call %s: only srcgrpmap and dstgrpmap calls: %w", r.Call.Func, ErrUnsupported)
	case r.Action != ipf.ActionCall && r.Call.Func != "":
		return raw, fmt.Errorf("call %s without a call action: %w", r.Call.Func, ErrUnsupported)
	case r.BPF != "":
		return raw, fmt.Errorf("bpf-v4/bpf-v6: %w", ErrUnsupported)
	}
	if err := compileRoute(r, &raw, opts); err != nil {
		return raw, err
	}
	if len(r.On) > 0 {
		any := false
		for i, name := range r.On {
			if i > 1 {
				break
			}
			if name == "-" || name == "*" {
				any = true
				continue
			}
			idx, ok := opts.Ifindex(name)
			if !ok {
				// unresolved: IPFilter keeps the rule but it never matches
				// that name; the other name of the pair may still match
				raw.Ifindex[i] = 0xffffffff
				continue
			}
			raw.Ifindex[i] = uint32(idx)
		}
		if len(r.On) == 1 {
			raw.Ifindex[1] = raw.Ifindex[0]
		}
		if !any {
			raw.Match |= mIface
			if raw.Ifindex[0] == 0xffffffff && raw.Ifindex[1] == 0xffffffff {
				raw.Match |= mNever
			}
		}
	}
	raw.Family = cr.Family
	if cr.Tests&ruleset.TestTos != 0 {
		raw.Match |= mTos
		raw.Tos = cr.Tos
	}
	if cr.Tests&ruleset.TestTTL != 0 {
		raw.Match |= mTTL
		raw.TTL = cr.TTL
	}
	if cr.TCPUDP {
		raw.Match |= mTCPUDP
	} else if cr.HasProto {
		raw.Match |= mProto
		raw.Proto = cr.Proto
	}
	from, to := r.From, r.To
	for _, e := range []*ipf.Endpoint{&from, &to} {
		if e.Addr.Kind != ipf.AddrIface {
			continue
		}
		// the family is the rule's; an interface address is IPv4 otherwise
		ip, mask, ok := opts.IfAddr(e.Addr.Iface, e.Addr.IfaceMode, r.Family == 6)
		if e.Addr.IfaceMode == ipf.IfaceDynamic && ok {
			mask = prefixMask(ip.Is4(), int(e.Addr.IfaceBits))
		}
		if !ok || !ip.IsValid() || !mask.IsValid() || ip.Is4() != mask.Is4() {
			raw.Match |= mNever
			e.Addr = ipf.Addr{Kind: ipf.AddrAny}
			continue
		}
		e.Addr = ipf.Addr{Kind: ipf.AddrHost, IP: ip, Mask: mask}
	}
	if err := compileAddr(&from, &raw, true); err != nil {
		return raw, err
	}
	if err := compileAddr(&to, &raw, false); err != nil {
		return raw, err
	}
	if r.From.Port.Op != ipf.PortNone {
		raw.Match |= mSport
		raw.SportOp, raw.SportLo, raw.SportHi = uint8(r.From.Port.Op), r.From.Port.Lo, r.From.Port.Hi
	}
	if r.To.Port.Op != ipf.PortNone {
		raw.Match |= mDport
		raw.DportOp, raw.DportLo, raw.DportHi = uint8(r.To.Port.Op), r.To.Port.Lo, r.To.Port.Hi
	}
	if cr.Tests&ruleset.TestFlags != 0 {
		raw.Match |= mFlags
		// not ANDed: IPFilter's `flags S/APU` can never match (S is outside the mask)
		raw.Tcpf, raw.TcpfMask = cr.TCPFlags, cr.TCPFlagsMask
	}
	if cr.Tests&ruleset.TestICMP != 0 {
		raw.Match |= mICMP
		raw.ICMPVal, raw.ICMPMask = cr.ICMPValue, cr.ICMPMask
	}
	if cr.Tests&ruleset.TestWith != 0 {
		raw.Match |= mWith
		raw.WithMask, raw.WithWant = cr.WithMask, cr.With&cr.WithMask
	}
	if r.OptMask != 0 {
		raw.Match |= mOpt
		raw.OptMask, raw.OptWant = r.OptMask, r.OptBits&r.OptMask
	}
	if r.V6HdrsMask != 0 {
		// the extension header bits share the option word with the IPv4
		// options; only IPv6 packets carry them, and any IPv4 `opt`
		// would make the rule inet
		if r.OptMask != 0 || raw.Family == 4 {
			raw.Match |= mNever
		}
		raw.Family = 6
		raw.Match |= mOpt
		raw.OptMask, raw.OptWant = r.V6HdrsMask, r.V6Hdrs
	}
	if r.SecMask != 0 {
		raw.Match |= mSec
		raw.SecMask, raw.SecWant = r.SecMask, r.SecBits&r.SecMask
	}
	if r.KeepState != nil {
		raw.Action |= frKeepState
		raw.StateLimit = r.KeepState.Limit
		if r.KeepState.Strict {
			raw.Action |= frStStrict
		}
		if r.KeepState.Loose {
			raw.Action |= frStLoose
		}
		if r.KeepState.NoICMPErr {
			raw.Action |= frNoICMPErr
		}
	}
	raw.AgeFwd, raw.AgeRev = r.Age[0], r.Age[1]
	if r.KeepFrags {
		raw.Action |= frKeepFrag
		if r.KeepFragsStrict {
			raw.Action |= frFragStrict
		}
	}
	if r.KeepLimit != 0 {
		raw.Action |= frKeepLimit
		raw.KeepLimit = r.KeepLimit
		if r.KeepLimitCumulative {
			raw.Action |= frLimitCumul
		}
	}
	raw.PPS = r.PPS
	if r.Tag.HasLog {
		raw.Logtag = r.Tag.Log
	}
	if r.Tag.NAT != "" && r.TagFromMatch && r.Dir == ipf.DirIn {
		// the kernel datapath does no NAT, so no packet carries a NAT tag
		raw.Match |= mNever
	}
	return raw, nil
}

func compileAddr(e *ipf.Endpoint, raw *rawRule, src bool) error {
	switch e.Addr.Kind {
	case ipf.AddrAny:
		// `!any` never matches; IPFilter stores it as mask 0 inverted
		if e.Not && e.Addr.Iface == "" {
			raw.Match |= mNever
		}
		return nil
	case ipf.AddrHost:
	case ipf.AddrPool, ipf.AddrHash:
		return nil // compilePools
	default:
		return fmt.Errorf("address form %d: %w", e.Addr.Kind, ErrUnsupported)
	}
	ip, mask := e.Addr.IP, e.Addr.Mask
	if !ip.IsValid() || !mask.IsValid() || ip.Is4() != mask.Is4() {
		return fmt.Errorf("address %v/%v: mixed or missing family", ip, mask)
	}
	var a, m [4]uint32
	addrWords(ip, &a)
	addrWords(mask, &m)
	for i := range a {
		a[i] &= m[i]
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
		raw.Src, raw.Smask = a, m
		raw.Match |= mSrc
		if e.Not {
			raw.Match |= mNotSrc
		}
	} else {
		raw.Dst, raw.Dmask = a, m
		raw.Match |= mDst
		if e.Not {
			raw.Match |= mNotDst
		}
	}
	return nil
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

func (b *rawBlocks) set(pos int) {
	blk := pos >> blockBits
	b.W[blk/64] |= 1 << (blk % 64)
}

func (b *rawBlocks) or(o rawBlocks) {
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
	im.dst = prefixIndex(im.rules, func(r *rawRule) ([4]uint32, int, bool) {
		return r.Dst, prefixBits(r.Dmask, r.Family), r.Match&(mDst|mNotDst) == mDst
	})
	im.ports = portIndex(im.rules, func(r *rawRule) (uint16, bool) {
		return r.DportLo, r.Match&mDport != 0 && r.DportOp == portEq
	})
	src := prefixIndex(im.rules, func(r *rawRule) ([4]uint32, int, bool) {
		ok := r.Match&(mSrc|mNotSrc) == mSrc
		srcUsed = srcUsed || ok
		return r.Src, prefixBits(r.Smask, r.Family), ok
	})
	sports := portIndex(im.rules, func(r *rawRule) (uint16, bool) {
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
func prefixIndex(rules []rawRule, field func(*rawRule) ([4]uint32, int, bool)) map[prefixKey]rawBlocks {
	var wild4, wild6 rawBlocks
	prefixes := map[prefixKey]rawBlocks{}
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
	idx := make(map[prefixKey]rawBlocks, len(prefixes)+2)
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
func portIndex(rules []rawRule, field func(*rawRule) (uint16, bool)) map[uint32]rawBlocks {
	var wild rawBlocks
	exact := map[uint32]rawBlocks{}
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
	idx := make(map[uint32]rawBlocks, len(exact)+2)
	for p, b := range exact {
		b.or(wild)
		idx[p] = b
	}
	idx[0x10000] = wild
	idx[0x20000] = wild
	return idx
}

func addWild(r *rawRule, pos int, w4, w6 *rawBlocks) {
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
func (im *Image) compilePools(r *ipf.Rule, raw *rawRule, opts CompileOptions, pt *poolTables) error {
	pools := opts.Pools
	for i, e := range []*ipf.Endpoint{&r.From, &r.To} {
		k := e.Addr.Kind
		if k != ipf.AddrPool && k != ipf.AddrHash {
			continue
		}
		if e.Addr.Inline != nil {
			// CompileSet of a set built elsewhere: the tables are unknown
			return fmt.Errorf("inline pool table (use Compile): %w", ErrUnsupported)
		}
		// Accounting rules find hash tables of role count (the Go
		// engine's ruleset.AddrMatch.Count); tree pools any role.
		role := ippool.RoleIPF
		if r.Action == ipf.ActionCount && k == ipf.AddrHash {
			role = ippool.RoleCount
		}
		name := fmt.Sprintf("%d/%d/%s", k, role, e.Addr.Table)
		id, ok := pt.ids[name]
		if !ok {
			if len(pt.ids) >= 0xffff {
				return fmt.Errorf("more than %d pool tables", 0xffff)
			}
			id = uint16(len(pt.ids) + 1)
			pt.ids[name] = id
			def := opts.anon[fmt.Sprintf("%d/%s", k, e.Addr.Table)]
			if def == nil && pools != nil {
				if k == ipf.AddrPool {
					if t := pools.Tree(role, e.Addr.Table); t != nil {
						def = t.Def
					}
				} else if h := pools.Hash(role, e.Addr.Table); h != nil {
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
			if e.Not {
				raw.Match |= mNotSrc
			}
		} else {
			raw.Match |= mDstPool
			raw.DstPool = id
			if e.Not {
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
func (im *Image) compileCall(r *ipf.Rule, raw *rawRule, opts CompileOptions, pt *poolTables, set *ruleset.Set, ids map[*ruleset.List]int) error {
	table := strconv.FormatUint(uint64(r.Call.Arg), 10)
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
	if r.Call.Func == "dstgrpmap" {
		raw.Call = callDstGrpmap
	}
	return nil
}

// compileRoute resolves the interfaces of to, dup-to and fastroute. A
// target interface that does not exist leaves that action out: IPFilter
// keeps such a rule and sends nothing until the interface appears.
func compileRoute(r *ipf.Rule, raw *rawRule, opts CompileOptions) error {
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
	if r.DupTo != nil {
		idx, fam, nh, ok, err := target(r.DupTo, "dup-to")
		if err != nil {
			return err
		}
		if ok {
			raw.Route |= rtDup
			raw.DupIfindex, raw.DupNHFam, raw.DupNH = idx, fam, nh
		}
	}
	if r.RouteTo != nil {
		idx, fam, nh, ok, err := target(r.RouteTo, "to")
		if err != nil {
			return err
		}
		if ok {
			raw.Route |= rtTo
			raw.ToIfindex, raw.ToNHFam, raw.ToNH = idx, fam, nh
		}
	}
	if r.FastRoute {
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
func (im *Image) compileExpr(x []ruleset.ExprTest, raw *rawRule) error {
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
			e := rawExpr{Op: exprOps[c.Op], Proto: c.Proto}
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

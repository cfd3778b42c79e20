// Package pool holds the lookup tables of IPFilter's ippool: prefix
// trees (longest match, with "!" entries), hash tables, group-maps and
// destination lists, built from parsed ippool.conf definitions. Lookups
// are safe for concurrent use and do not allocate.
package pool

import (
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	"sluice/internal/rules/ippool"
)

// Tree is a tree (radix) pool: an address matches when its longest
// matching prefix is a positive entry.
type Tree struct {
	Def    *ippool.Table
	v4, v6 trie
}

// NewTree builds a tree pool from its definition.
func NewTree(def *ippool.Table) *Tree {
	t := &Tree{Def: def}
	for i, e := range def.Entries {
		if e.Fam == 6 {
			t.v6.insert(e.Addr, e.Bits, e.Not, i)
		} else {
			t.v4.insert(e.Addr, e.Bits, e.Not, i)
		}
	}
	return t
}

// Contains reports whether a is in the pool.
func (t *Tree) Contains(a netip.Addr) bool {
	b, n := addrBytes(a)
	var nd *trieNode
	var ok bool
	if n == 32 {
		nd, ok = t.v4.lookup(&b, 32)
	} else {
		nd, ok = t.v6.lookup(&b, 128)
	}
	return ok && !nd.not
}

type hashKey struct {
	a    [16]byte
	bits uint8
	v6   bool
}

// Hash is a hash table or group-map: an address matches an entry when
// it equals the entry's address under the entry's mask. The most
// specific mask in use is tried first.
type Hash struct {
	Def      *ippool.Table
	entries  map[hashKey]int
	v4masks  []int // distinct prefix lengths, longest first
	v6masks  []int
	groupMap bool
}

// NewHash builds a hash table or group-map from its definition.
func NewHash(def *ippool.Table) *Hash {
	h := &Hash{Def: def, entries: make(map[hashKey]int, len(def.Entries)), groupMap: def.Type == ippool.GroupMap}
	seen4, seen6 := map[int]bool{}, map[int]bool{}
	for i, e := range def.Entries {
		k := hashKey{a: e.Addr, bits: uint8(e.Bits), v6: e.Fam == 6}
		if _, dup := h.entries[k]; !dup {
			h.entries[k] = i
		}
		if e.Fam == 6 {
			if !seen6[e.Bits] {
				seen6[e.Bits] = true
				h.v6masks = append(h.v6masks, e.Bits)
			}
		} else if !seen4[e.Bits] {
			seen4[e.Bits] = true
			h.v4masks = append(h.v4masks, e.Bits)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(h.v4masks)))
	sort.Sort(sort.Reverse(sort.IntSlice(h.v6masks)))
	return h
}

// find returns the index of the matching entry, or -1.
func (h *Hash) find(a netip.Addr) int {
	b, n := addrBytes(a)
	masks := h.v4masks
	if n == 128 {
		masks = h.v6masks
	}
	for _, bits := range masks {
		k := hashKey{bits: uint8(bits), v6: n == 128}
		full := bits / 8
		copy(k.a[:full], b[:full])
		if r := bits % 8; r != 0 {
			k.a[full] = b[full] & byte(0xff<<(8-r))
		}
		if i, ok := h.entries[k]; ok {
			return i
		}
	}
	return -1
}

// Contains reports whether a matches an entry.
func (h *Hash) Contains(a netip.Addr) bool { return h.find(a) >= 0 }

// Group returns the group name a group-map assigns to a.
func (h *Hash) Group(a netip.Addr) (string, bool) {
	i := h.find(a)
	if i < 0 {
		return "", false
	}
	return h.Def.Entries[i].Group, true
}

type tableKey struct {
	role ippool.Role
	name string
}

// Set is every table of one loaded configuration.
type Set struct {
	trees    map[tableKey]*Tree
	hashes   map[tableKey]*Hash
	dstlists map[tableKey]*DstList
	order    []*ippool.Table
}

// NewSet builds the tables of a parsed ippool.conf. rnd picks members of
// random dstlists (nil = a fixed deterministic sequence).
func NewSet(f *ippool.File, rnd func() uint32) (*Set, error) {
	s := &Set{trees: map[tableKey]*Tree{}, hashes: map[tableKey]*Hash{}, dstlists: map[tableKey]*DstList{}}
	if f == nil {
		return s, nil
	}
	if err := s.Add(f, rnd); err != nil {
		return nil, err
	}
	return s, nil
}

// Add loads more tables into s (ipftest -P may be given several files).
// A table whose role and name are already in use is an error, and
// nothing is added then.
func (s *Set) Add(f *ippool.File, rnd func() uint32) error {
	for _, t := range f.Tables {
		k := tableKey{t.Role, t.Name}
		var dup bool
		switch t.Type {
		case ippool.Tree:
			_, dup = s.trees[k]
		case ippool.Hash, ippool.GroupMap:
			_, dup = s.hashes[k]
		case ippool.DstList:
			_, dup = s.dstlists[k]
		}
		if dup {
			return fmt.Errorf("%s table %s/%s already exists", t.Type, t.Role, t.Name)
		}
	}
	for _, t := range f.Tables {
		k := tableKey{t.Role, t.Name}
		t = WithoutDuplicates(t)
		switch t.Type {
		case ippool.Tree:
			s.trees[k] = NewTree(t)
		case ippool.Hash, ippool.GroupMap:
			s.hashes[k] = NewHash(t)
		case ippool.DstList:
			s.dstlists[k] = NewDstList(t, rnd)
		}
		s.order = append(s.order, t)
	}
	return nil
}

// WithoutDuplicates returns t without the entries that repeat an earlier
// one's address and prefix length (whatever their "!" or group): IPFilter
// refuses to add such a node ("node already exists") and keeps the first.
func WithoutDuplicates(t *ippool.Table) *ippool.Table {
	type key struct {
		fam, bits int
		a         [16]byte
	}
	seen := make(map[key]bool, len(t.Entries))
	var keep []ippool.Entry
	for i, e := range t.Entries {
		k := key{e.Fam, e.Bits, e.Addr}
		if !seen[k] {
			seen[k] = true
			if keep != nil {
				keep = append(keep, e)
			}
			continue
		}
		if keep == nil {
			keep = append(make([]ippool.Entry, 0, len(t.Entries)), t.Entries[:i]...)
		}
	}
	if keep == nil {
		return t
	}
	c := *t
	c.Entries = keep
	return &c
}

// roleOrder is the order of IPFilter's per-unit table lists: "all"
// (IPL_LOGALL, -1) first, then the units by number.
var roleOrder = [...]ippool.Role{ippool.RoleAll, ippool.RoleIPF, ippool.RoleNAT, ippool.RoleState,
	ippool.RoleAuth, ippool.RoleSync, ippool.RoleScan, ippool.RoleLookup, ippool.RoleCount}

// Tree returns the tree pool with the given name. A rule finds a tree
// pool whatever its role (IPFilter's ipf_pool_exists looks through
// every unit's list, "all" first, then ipf, nat, ...), so role only
// breaks ties in favour of its own table.
func (s *Set) Tree(role ippool.Role, name string) *Tree {
	if t := s.trees[tableKey{role, name}]; t != nil {
		return t
	}
	for _, r := range roleOrder {
		if t := s.trees[tableKey{r, name}]; t != nil {
			return t
		}
	}
	return nil
}

// Hash returns the hash table or group-map of exactly that role and
// name: unlike tree pools, IPFilter's ipf_htable_find matches the unit,
// so a role = all or role = nat hash table is not found by an ipf rule.
func (s *Set) Hash(role ippool.Role, name string) *Hash {
	return s.hashes[tableKey{role, name}]
}

// DstList returns the destination list used by role with that name.
func (s *Set) DstList(role ippool.Role, name string) *DstList {
	if t := s.dstlists[tableKey{role, name}]; t != nil {
		return t
	}
	return s.dstlists[tableKey{ippool.RoleAll, name}]
}

// Contains is ContainsRole for role ipf: pool/N looks in the tree table N
// (hash false), hash/N in the ipf hash table N. Unknown tables never
// match.
func (s *Set) Contains(hash bool, table string, addr netip.Addr) bool {
	return s.ContainsRole(ippool.RoleIPF, hash, table, addr)
}

// ContainsRole tests addr against the tree (hash=false) or hash table of
// the given role, as a rule of that role finds it; it implements the
// filter engine's pool test (engine.Pools). NAT rules use RoleNAT.
func (s *Set) ContainsRole(role ippool.Role, hash bool, table string, addr netip.Addr) bool {
	if hash {
		if h := s.Hash(role, table); h != nil {
			return h.Contains(addr)
		}
		return false
	}
	if t := s.Tree(role, table); t != nil {
		return t.Contains(addr)
	}
	return false
}

// GroupFor looks addr up in the ipf group-map named table and returns
// the rule group it names (call srcgrpmap/dstgrpmap).
func (s *Set) GroupFor(table string, addr netip.Addr) (string, bool) {
	h := s.Hash(ippool.RoleIPF, table)
	if h == nil || !h.groupMap {
		return "", false
	}
	return h.Group(addr)
}

// DumpPools writes the tree pools as ipftest -D lists them: by role
// (all, ipf, nat, ...), most recently loaded first within a role.
func (s *Set) DumpPools(w io.Writer) error {
	return s.dump(w, func(t *ippool.Table) bool { return t.Type == ippool.Tree }, nil)
}

// DumpHashes writes the hash tables and group-maps as ipftest -D lists
// them, in DumpPools' order. IPFilter's listing leaves out the hash
// tables of role count (which accounting rules still find).
func (s *Set) DumpHashes(w io.Writer) error { return s.DumpHashesWith(w, nil) }

// DumpHashesWith is DumpHashes calling atIPF (if not nil) where the ipf
// role's tables begin: ipftest lists the anonymous tables of inline
// operands, the newest ipf tables, there.
func (s *Set) DumpHashesWith(w io.Writer, atIPF func(io.Writer)) error {
	return s.dump(w, func(t *ippool.Table) bool {
		return (t.Type == ippool.Hash || t.Type == ippool.GroupMap) && t.Role != ippool.RoleCount
	}, atIPF)
}

func (s *Set) dump(w io.Writer, want func(*ippool.Table) bool, atIPF func(io.Writer)) error {
	var b strings.Builder
	for _, role := range roleOrder {
		if role == ippool.RoleIPF && atIPF != nil {
			atIPF(&b)
		}
		for i := len(s.order) - 1; i >= 0; i-- {
			if t := s.order[i]; t.Role == role && want(t) {
				t.Format(&b)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// SelectDst picks a member of the ipf destination list name for a flow
// (to/dup-to/reply-to dstlist/NAME); it implements engine.DstLists.
func (s *Set) SelectDst(name string, src, dst netip.Addr) (iface string, addr netip.Addr, ok bool) {
	l := s.DstList(ippool.RoleIPF, name)
	if l == nil {
		return "", netip.Addr{}, false
	}
	d, _, ok := l.Select(src, dst)
	return d.Iface, d.Addr, ok
}

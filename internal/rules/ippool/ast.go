// Package ippool parses and prints the ippool.conf language: address
// trees, hash tables, group-maps and destination lists (IPFilter 4.1 and
// 5.x syntaxes).
package ippool

import (
	"net/netip"

	"sluice/internal/rules/netfmt"
)

// Role is the subsystem a table serves.
type Role int

// Roles, numbered as IPFilter's IPL_LOG* units so printing matches.
const (
	RoleIPF Role = iota
	RoleNAT
	RoleState
	RoleAuth
	RoleSync
	RoleScan
	RoleLookup
	RoleCount
	RoleAll
)

var roleNames = [...]string{"ipf", "nat", "state", "auth", "sync", "scan", "lookup", "count", "all"}

// String returns the role's keyword.
func (r Role) String() string {
	if r >= 0 && int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "unknown"
}

// Type is the kind of lookup table.
type Type int

// Table types.
const (
	Tree Type = iota
	Hash
	GroupMap
	DstList
)

// String names the type as ippool prints it.
func (t Type) String() string {
	return [...]string{"tree", "hash", "group-map", "dstlist"}[t]
}

// Policy selects a dstlist member.
type Policy int

// Dstlist policies.
const (
	PolicyNone Policy = iota
	PolicyRoundRobin
	PolicyRandom
	PolicyHash
	PolicySrcHash
	PolicyDstHash
	PolicyWeighted
)

// Entry is one address (with mask) of a tree, hash table or group-map.
type Entry struct {
	Pos   netfmt.Pos
	Not   bool // "!": a tree match on this prefix means no match
	Fam   int  // 4 or 6
	Addr  [16]byte
	Bits  int    // prefix length
	Group string // group-map only
}

// Prefix returns the entry as a netip.Prefix.
func (e Entry) Prefix() netip.Prefix {
	if e.Fam == 6 {
		return netip.PrefixFrom(netip.AddrFrom16(e.Addr), e.Bits)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{e.Addr[0], e.Addr[1], e.Addr[2], e.Addr[3]}), e.Bits)
}

// Dest is one member of a destination list.
type Dest struct {
	Pos   netfmt.Pos
	Iface string
	Addr  netip.Addr
}

// Table is one ippool.conf definition.
type Table struct {
	Pos     netfmt.Pos
	Type    Type
	Role    Role
	Name    string // numeric names print as number=
	Size    int    // hash/group-map size as loaded (explicit or 2n-1)
	Seed    uint32
	Out     bool   // group-map direction
	Policy  Policy // dstlist
	Entries []Entry
	Dests   []Dest
}

// File is a parsed ippool.conf.
type File struct {
	Tables []*Table
}

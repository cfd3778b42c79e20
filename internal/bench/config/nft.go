package config

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"sluice/internal/bench/topo"
)

// NFTTable is the name of the inet table the nftables configurations
// create (and delete) on the system under test.
const NFTTable = "sluice_bench"

// NFTSpec describes an nftables rule set equivalent to one of the Sluice
// configurations. The zero value is the table with its base chains and
// no rules (the cost of being hooked in).
type NFTSpec struct {
	// Stateless accepts tcp, udp and icmp in input and output.
	Stateless bool
	// Stateful accepts established/related by conntrack, and new
	// tcp, udp and icmp.
	Stateful bool
	// NoMatch puts this many never-matching rules (ip saddr/daddr in
	// 198.18.0.0/15, drop) before the accepting rules, split between the
	// chains as NoMatchSplit says.
	NoMatch int
	// Blocklist puts this many never-matching addresses in two sets
	// (blk_in of source addresses, blk_out of destination addresses,
	// split as NoMatchSplit says) looked up by one rule each before the
	// accepting rules: nftables' own form of a blocklist, which a
	// million rules would be (nft takes minutes to load that many).
	Blocklist int
	// Mark rewrites the DSCP of every outgoing IPv4 TCP packet to DSCP
	// (in a postrouting chain).
	Mark bool
	DSCP int
	// MarkAny marks every outgoing IPv4 packet, not only TCP; MarkNoMatch
	// marks only packets to an address the test bed never uses
	// (198.18.0.1), so every packet is tested and none matches.
	MarkAny, MarkNoMatch bool
}

func (s NFTSpec) markMatch() string {
	switch {
	case s.MarkNoMatch:
		return "meta nfproto ipv4 ip daddr 198.18.0.1"
	case s.MarkAny:
		return "meta nfproto ipv4"
	}
	return "meta nfproto ipv4 meta l4proto tcp"
}

// String renders the rule set in nft syntax, with the non-matching
// rules summarised.
func (s NFTSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", NFTTable)
	in, out := NoMatchSplit(s.NoMatch)
	bin, bout := NoMatchSplit(s.Blocklist)
	for _, dir := range []struct {
		set, chain, match string
		n, blk            int
	}{{"blk_in", "input", "saddr", in, bin}, {"blk_out", "output", "daddr", out, bout}} {
		if dir.blk > 0 {
			fmt.Fprintf(&b, "  set %s {\n    type ipv4_addr\n    elements = { 198.18.0.0, … }  # %d addresses\n  }\n", dir.set, dir.blk)
		}
	}
	for _, dir := range []struct {
		set, chain, match string
		n, blk            int
	}{{"blk_in", "input", "saddr", in, bin}, {"blk_out", "output", "daddr", out, bout}} {
		fmt.Fprintf(&b, "  chain %s {\n    type filter hook %s priority filter; policy accept;\n", dir.chain, dir.chain)
		if dir.blk > 0 {
			fmt.Fprintf(&b, "    ip %s @%s drop\n", dir.match, dir.set)
		}
		if dir.n > 0 {
			fmt.Fprintf(&b, "    ip %s 198.18.0.0 drop\n    # … %d such rules, one address each\n", dir.match, dir.n)
		}
		if s.Stateful {
			b.WriteString("    ct state established,related accept\n")
		}
		for _, p := range []string{"tcp", "udp", "icmp"} {
			switch {
			case s.Stateful:
				fmt.Fprintf(&b, "    meta l4proto %s ct state new accept\n", p)
			case s.Stateless:
				fmt.Fprintf(&b, "    meta l4proto %s accept\n", p)
			}
		}
		b.WriteString("  }\n")
	}
	if s.Mark {
		fmt.Fprintf(&b, "  chain postrouting {\n    type filter hook postrouting priority filter; policy accept;\n    %s ip dscp set %d\n  }\n", s.markMatch(), s.DSCP)
	}
	b.WriteString("}\n")
	return b.String()
}

// NFT applies an NFTSpec with google/nftables (no nft binary) in the
// host's namespace.
type NFT struct {
	spec NFTSpec
	// dial, if set, replaces the kernel (tests).
	dial nltest.Func

	conn  *nftables.Conn
	nsfd  int
	table *nftables.Table
}

// NewNFT returns an Applier for spec.
func NewNFT(spec NFTSpec) *NFT { return &NFT{spec: spec, nsfd: -1} }

// Apply implements Applier.
func (n *NFT) Apply(_ context.Context, h *topo.Host) error {
	if n.conn != nil {
		return errors.New("nftables: already applied")
	}
	if n.spec.Mark && (n.spec.DSCP < 0 || n.spec.DSCP > 63) {
		return fmt.Errorf("nftables: DSCP %d out of range 0..63", n.spec.DSCP)
	}
	var opts []nftables.ConnOption
	if n.dial != nil {
		opts = append(opts, nftables.WithTestDial(n.dial))
	} else if h.NetNS != "" {
		fd, err := unix.Open(h.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("nftables: opening namespace %s: %w", h.NetNS, err)
		}
		n.nsfd = fd
		opts = append(opts, nftables.WithNetNSFd(fd))
	}
	// Without CapAcknowledge every ack echoes its whole request, and the
	// acks of a large batch overflow the receive buffer (ENOBUFS).
	if n.dial == nil {
		opts = append(opts, nftables.WithSockOptions(func(c *netlink.Conn) error {
			if err := c.SetOption(netlink.CapAcknowledge, true); err != nil {
				return err
			}
			return c.SetReadBuffer(4 << 20)
		}))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		n.closeNS()
		return fmt.Errorf("nftables: %w", err)
	}
	if n.dial == nil {
		// A run killed before Remove (remote mode, where the table is
		// in a namespace that outlives the run) leaves its table; start
		// from nothing so the batch below cannot fail on it.
		if ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet); err == nil {
			for _, t := range ts {
				if t.Name == NFTTable {
					c.DelTable(t)
				}
			}
		}
	}
	n.conn = c
	if err := n.build(c); err != nil {
		// Later batches may have failed after the table went in.
		n.conn.DelTable(n.table)
		_ = n.conn.Flush()
		n.conn = nil
		n.closeNS()
		return fmt.Errorf("nftables: loading %s: %w", NFTTable, err)
	}
	return nil
}

// Remove implements Applier.
func (n *NFT) Remove() error {
	if n.conn == nil {
		return nil
	}
	n.conn.DelTable(n.table)
	err := n.conn.Flush()
	n.conn = nil
	n.closeNS()
	if err != nil {
		return fmt.Errorf("nftables: deleting %s: %w", NFTTable, err)
	}
	return nil
}

func (n *NFT) closeNS() {
	if n.nsfd >= 0 {
		unix.Close(n.nsfd)
		n.nsfd = -1
	}
}

// batchRules bounds the rules per netlink batch: one sendmsg of 20 000
// rules exceeds the socket send buffer (EMSGSIZE); 500 rules are ~90 KB.
const batchRules = 500

// batchElements bounds the set elements per netlink message: an IPv4
// address is 16 bytes of attributes, and the elements are one nested
// attribute, whose length is 16 bits (4096 overflowed it: the kernel
// then finds no set, ENOENT).
const batchElements = 2048

// build loads the table, chains and rules through c. A small rule set
// goes in as one atomic batch; a large one in several.
func (n *NFT) build(c *nftables.Conn) error {
	s := n.spec
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: NFTTable})
	n.table = t
	queued := 0
	var ferr error
	addRule := func(r *nftables.Rule) {
		c.AddRule(r)
		if queued++; queued%batchRules == 0 && ferr == nil {
			ferr = c.Flush()
		}
	}
	accept := nftables.ChainPolicyAccept
	in, out := NoMatchSplit(s.NoMatch)
	bin, bout := NoMatchSplit(s.Blocklist)
	var sets [2]*nftables.Set
	for i, b := range []struct {
		name string
		n    int
	}{{"blk_in", bin}, {"blk_out", bout}} {
		if b.n == 0 {
			continue
		}
		set, err := addBlocklist(c, t, b.name, b.n)
		if err != nil {
			return err
		}
		sets[i] = set
	}
	for i, dir := range []struct {
		name    string
		hook    *nftables.ChainHook
		off     uint32 // source or destination address
		noMatch int
	}{{"input", nftables.ChainHookInput, 12, in}, {"output", nftables.ChainHookOutput, 16, out}} {
		ch := c.AddChain(&nftables.Chain{
			Name: dir.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: dir.hook, Priority: nftables.ChainPriorityFilter, Policy: &accept,
		})
		if set := sets[i]; set != nil {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(nfproto(unix.NFPROTO_IPV4),
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: dir.off, Len: 4},
				&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
				&expr.Verdict{Kind: expr.VerdictDrop})})
		}
		for i := 0; i < dir.noMatch; i++ {
			a := noMatchAddr(i)
			addRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(ipv4Addr(dir.off, a),
				&expr.Verdict{Kind: expr.VerdictDrop})})
		}
		if s.Stateful {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(ctState(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED),
				&expr.Verdict{Kind: expr.VerdictAccept})})
		}
		for _, p := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_ICMP} {
			var ex []expr.Any
			switch {
			case s.Stateful:
				ex = append(l4proto(p), ctState(expr.CtStateBitNEW)...)
			case s.Stateless:
				ex = l4proto(p)
			default:
				continue
			}
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(ex, &expr.Verdict{Kind: expr.VerdictAccept})})
		}
	}
	if s.Mark {
		ch := c.AddChain(&nftables.Chain{
			Name: "postrouting", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityFilter, Policy: &accept,
		})
		var ex []expr.Any
		switch {
		case s.MarkNoMatch:
			ex = ipv4Addr(16, noMatchAddr(1))
		case s.MarkAny:
			ex = nfproto(unix.NFPROTO_IPV4)
		default:
			ex = append(nfproto(unix.NFPROTO_IPV4), l4proto(unix.IPPROTO_TCP)...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(ex, dscpSet(byte(s.DSCP))...)})
	}
	if ferr != nil {
		return ferr
	}
	return c.Flush()
}

// addBlocklist makes set name of n never-matching IPv4 addresses
// (noMatchAddr 0..n-1) in table t, in batches of batchElements: the set
// is in the kernel when it returns, so rules name it by its name.
func addBlocklist(c *nftables.Conn, t *nftables.Table, name string, n int) (*nftables.Set, error) {
	set := &nftables.Set{Table: t, Name: name, KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(set, nil); err != nil {
		return nil, err
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("set %s: %w", name, err)
	}
	elems := make([]nftables.SetElement, 0, batchElements)
	keys := make([][4]byte, batchElements)
	for i := 0; i < n; i += batchElements {
		elems = elems[:0]
		for j := i; j < min(i+batchElements, n); j++ {
			keys[j-i] = noMatchAddr(j)
			elems = append(elems, nftables.SetElement{Key: keys[j-i][:]})
		}
		if err := c.SetAddElements(set, elems); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
		if err := c.Flush(); err != nil {
			return nil, fmt.Errorf("set %s: elements %d..: %w", name, i, err)
		}
	}
	return set, nil
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

func ctState(mask uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// ipv4Addr matches the IPv4 address at header offset off (12 source, 16
// destination); the nfproto test is what nft itself emits for "ip saddr"
// in an inet table.
func ipv4Addr(off uint32, a [4]byte) []expr.Any {
	return append(nfproto(unix.NFPROTO_IPV4),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]},
	)
}

// dscpSet is what nft emits for "ip dscp set D": a 2-byte read-modify-write
// of version/IHL and TOS (keeping ECN) so the checksum update stays
// 16-bit aligned.
func dscpSet(dscp byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 2},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: []byte{0xff, 0x03}, Xor: []byte{0x00, dscp << 2}},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseNetworkHeader,
			Offset: 0, Len: 2, CsumType: expr.CsumTypeInet, CsumOffset: 10},
	}
}

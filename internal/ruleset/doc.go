// How a compiled Set is meant to be read (for the Go engine and the eBPF
// compiler alike).
//
// Lists. Set.In and Set.Out are the filter lists of each direction,
// Set.AcctIn/AcctOut the `count` lists. A rule with `group G` lives only
// in Set.Groups[G] (AcctGroups for count rules); a rule with `head G` has
// HeadList pointing at that list. Rules are already ordered: by
// collection number, then by file order, with `@N` insertions applied.
//
// Scan (ipf-reference §2.3). pass starts at default_pass (PASS|NOMATCH).
// For each rule that matches (see below): a pure log rule
// (Flags&FRLogMask == FRLog) only logs; a skip rule (FRCmdMask == FRSkip)
// ignores the next Skip rules; any other rule sets pass = Flags. Then, if
// HeadList != nil, the group is scanned the same way starting from pass;
// if something matched there its result replaces pass. If pass has
// FRQuick the scan stops (after creating state for a keep-state rule; if
// that fails the rule counts as not matched and the scan goes on).
//
// Matching a rule against a packet, in this order:
//   - Out must equal the packet's direction; IfName ("" = any) the
//     interface; Family (0 = any) the IP version.
//   - Tests is a bit set of the remaining tests; a clear bit means "no
//     test". TestProto: Proto (or TCP/UDP when TCPUDP). TestTos/TestTTL:
//     exact byte. TestOpt: (pkt options & OptMask) == Opt and (security
//     class & SecMask) == Sec, IPv4 only. TestV6Hdr: (pkt extension
//     header bits & V6Mask) == V6, IPv6 only. TestSrc/TestDst: see
//     AddrMatch (Not inverts). TestWith: (pkt FI_* flags & WithMask) ==
//     With.
//   - Ports and TCP flags are tested only on a first fragment carrying
//     TCP/UDP with more than 3 bytes of L4 data; then the destination port,
//     the source port (ipf.Port: Op with Lo/Hi) and, for TCP, (flags &
//     TCPFlagsMask) == TCPFlags must hold (a short TCP packet matches only
//     rules without a flags test). Any other packet fails a rule with
//     TestSrcPort, TestDstPort or TestFlags.
//   - TestICMP: the packet is ICMP/ICMPv6, not a fragment body, and
//     ((type<<8)|code) & ICMPMask == ICMPValue; not tested for a packet
//     whose ports are compared (above), which an icmp-type rule without
//     a protocol then matches, as IPFilter's does.
//   - In rules with NATTag match only packets the inbound NAT rule tagged
//     so.
//
// List.Hot is a packed prefilter (direction, family, protocol, host
// address tests) in the same order as List.Rules: a scanner may skip a
// rule whose Hot entry rejects the packet without reading the Rule.
//
// Flags carries IPFilter's FR_* bits unchanged (FRPass, FRBlock, FRQuick,
// FRKeepState, FRRetRST, ...), so a datapath can return them as its
// result word and ipfstat/ipmon print the same values as IPFilter.
package ruleset

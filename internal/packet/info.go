package packet

import "net/netip"

// Flags holds IPFilter's per-packet attribute bits (fr_info.fin_flx).
// The values are IPFilter's own (ip_fil.h), so they can be compared with
// rule "with"/"not" masks and printed in dumps unchanged.
type Flags uint32

// IPFilter's FI_* attribute bits.
const (
	FlagTCPUDP    Flags = 0x00000001 // FI_TCPUDP: TCP or UDP
	FlagOptions   Flags = 0x00000002 // FI_OPTIONS: IPv4 header has options
	FlagFrag      Flags = 0x00000004 // FI_FRAG: MF set or offset non-zero (v6: fragment header)
	FlagShort     Flags = 0x00000008 // FI_SHORT: too short for its L4 header
	FlagNATed     Flags = 0x00000010 // FI_NATED: set by NAT
	FlagMulticast Flags = 0x00000020 // FI_MULTICAST
	FlagBroadcast Flags = 0x00000040 // FI_BROADCAST
	FlagMBCast    Flags = 0x00000080 // FI_MBCAST: multicast or broadcast
	FlagState     Flags = 0x00000100 // FI_STATE: matched a state entry
	FlagBadNAT    Flags = 0x00000200 // FI_BADNAT: NAT failed
	FlagBad       Flags = 0x00000400 // FI_BAD: malformed
	FlagOOW       Flags = 0x00000800 // FI_OOW: outside the state window
	FlagICMPErr   Flags = 0x00001000 // FI_ICMPERR: ICMP error type
	FlagFragBody  Flags = 0x00002000 // FI_FRAGBODY: fragment with non-zero offset
	FlagBadSrc    Flags = 0x00004000 // FI_BADSRC: set by the engine (bad-src check)
	FlagLowTTL    Flags = 0x00008000 // FI_LOWTTL: set by the engine (minttl check)
	FlagV6ExtHdr  Flags = 0x00010000 // FI_V6EXTHDR: an IPv6 extension header was walked
	FlagCoalesce  Flags = 0x00020000 // FI_COALESCE
	FlagNewNAT    Flags = 0x00040000 // FI_NEWNAT
	FlagICMPQuery Flags = 0x00080000 // FI_ICMPQUERY: ICMP informational/query type
	FlagEncap     Flags = 0x00100000 // FI_ENCAP
	FlagAH        Flags = 0x00200000 // FI_AH: an AH header was skipped
	FlagDoCksum   Flags = 0x10000000 // FI_DOCKSUM
	FlagNoCksum   Flags = 0x20000000 // FI_NOCKSUM: skip checksum verification
	FlagNoWild    Flags = 0x40000000 // FI_NOWILD
	FlagIgnore    Flags = 0x80000000 // FI_IGNORE

	// FlagWithMask is FI_WITH: the bits a rule's with/not clause may test.
	FlagWithMask Flags = 0x5effe
	// FlagCmpMask is FI_CMP: the bits compared by a rule's fi_flx match.
	FlagCmpMask Flags = 0x5cfe3
	// FlagICMPCmpMask is FI_ICMPCMP: the bits compared for embedded ICMP error headers.
	FlagICMPCmpMask Flags = 0x0003
)

// TCP header flag bits (th_flags).
const (
	TCPFlagFin = 0x01
	TCPFlagSyn = 0x02
	TCPFlagRst = 0x04
	TCPFlagPsh = 0x08
	TCPFlagAck = 0x10
	TCPFlagUrg = 0x20
	TCPFlagEce = 0x40
	TCPFlagCwr = 0x80
)

// IPv4 option bits as recorded in Info.OptMask (IPFilter's ipopts table,
// fil.c; the same values the ipf rule parser uses for "with opt NAME").
// The ipf rule AST did not exist when these were written; they are
// IPFilter's values, so the two agree by construction.
const (
	OptNOP      uint32 = 0x000001
	OptRR       uint32 = 0x000002
	OptZSU      uint32 = 0x000004
	OptMTUP     uint32 = 0x000008
	OptMTUR     uint32 = 0x000010
	OptEncode   uint32 = 0x000020
	OptTS       uint32 = 0x000040
	OptTR       uint32 = 0x000080
	OptSecurity uint32 = 0x000100
	OptLSRR     uint32 = 0x000200
	OptESec     uint32 = 0x000400
	OptCIPSO    uint32 = 0x000800
	OptSATID    uint32 = 0x001000
	OptSSRR     uint32 = 0x002000
	OptAddExt   uint32 = 0x004000
	OptVISA     uint32 = 0x008000
	OptIMITD    uint32 = 0x010000
	OptEIP      uint32 = 0x020000
	OptFINN     uint32 = 0x040000
)

// IPv4 option type numbers (RFC 791 and the IANA registry).
const (
	IPOptEOL      = 0
	IPOptNOP      = 1
	IPOptRR       = 7
	IPOptZSU      = 10
	IPOptMTUP     = 11
	IPOptMTUR     = 12
	IPOptEncode   = 15
	IPOptTS       = 68
	IPOptTR       = 82
	IPOptSecurity = 130
	IPOptLSRR     = 131
	IPOptESec     = 133
	IPOptCIPSO    = 134
	IPOptSATID    = 136
	IPOptSSRR     = 137
	IPOptVISA     = 142
	IPOptIMITD    = 144
	IPOptEIP      = 145
	IPOptAddExt   = 147
	IPOptFINN     = 205
)

// Security (RIPSO, RFC 1108) classification bits as recorded in
// Info.SecMask (IPFilter's secopt table); "with opt sec-class NAME" tests them.
const (
	SecReserv4      uint16 = 0x01 // classification byte 0x01
	SecTopSecret    uint16 = 0x02 // 0x3d
	SecSecret       uint16 = 0x04 // 0x5a
	SecReserv3      uint16 = 0x08 // 0x66
	SecConfidential uint16 = 0x10 // 0x96
	SecUnclass      uint16 = 0x20 // 0xab
	SecReserv2      uint16 = 0x40 // 0xcc
	SecReserv1      uint16 = 0x80 // 0xf1
)

// IPv6 extension header bits as recorded in Info.OptMask for IPv6 packets
// (IPFilter's ip6exthdr table; "with v6hdrs NAME" tests them).
const (
	ExtHopOpts  uint32 = 0x000001
	ExtIPv6     uint32 = 0x000002
	ExtRouting  uint32 = 0x000004
	ExtFragment uint32 = 0x000008
	ExtESP      uint32 = 0x000010
	ExtAH       uint32 = 0x000020
	ExtNone     uint32 = 0x000040
	ExtDstOpts  uint32 = 0x000080
	ExtMobility uint32 = 0x000100
)

// IP protocol numbers used by the parser.
const (
	ProtoHopOpts  = 0
	ProtoICMP     = 1
	ProtoIGMP     = 2
	ProtoIPIP     = 4
	ProtoTCP      = 6
	ProtoUDP      = 17
	ProtoIPv6     = 41
	ProtoRouting  = 43
	ProtoFragment = 44
	ProtoGRE      = 47
	ProtoESP      = 50
	ProtoAH       = 51
	ProtoICMPv6   = 58
	ProtoNone     = 59
	ProtoDstOpts  = 60
	ProtoMobility = 135
)

// Info is the parsed-once description of a packet: IPFilter's fr_info_t
// reduced to what matching, state, NAT and logging read. It holds no
// reference to the packet bytes; offsets index the slice given to Parse.
// Parse fills every field (it resets the struct first), so one Info can be
// reused for every packet without allocating.
//
// Fields the parser cannot know (FlagBadSrc, FlagLowTTL, Out, interface)
// are left for the engine to set after Parse.
type Info struct {
	// Version is 4 or 6.
	Version uint8
	// Proto is fi_p: for IPv4 the header's protocol field (51 when AH
	// precedes the transport header, as in IPFilter), for IPv6 the
	// next-header value where the extension-header walk stopped.
	Proto uint8
	// L4Proto is the protocol whose header starts at L4Off (after AH for
	// IPv4); equal to Proto except behind IPv4 AH.
	L4Proto uint8
	// TOS is the IPv4 type of service (0 for IPv6, as in IPFilter).
	TOS uint8
	// TTL is the IPv4 TTL or the IPv6 hop limit.
	TTL uint8
	// TCPFlags is th_flags (fin_tcpf); zero unless a TCP header was read.
	TCPFlags uint8
	// ICMPType and ICMPCode are the ICMP/ICMPv6 type and code when an ICMP
	// header was read (HasICMP).
	ICMPType, ICMPCode uint8
	// HasICMP reports that ICMPType/ICMPCode/ICMPID are valid.
	HasICMP bool
	// MoreFrags is the IPv4 MF bit or the IPv6 fragment header M bit.
	MoreFrags bool

	// Flags are the FI_* bits (fin_flx).
	Flags Flags
	// OptMask is fi_optmsk: IPv4 option bits (Opt*) or IPv6 extension
	// header bits (Ext*).
	OptMask uint32
	// SecMask is fi_secmsk, the RIPSO/CIPSO classification bits (Sec*).
	SecMask uint16
	// Auth is fi_auth, the RIPSO protection authority bits.
	Auth uint16

	// Src and Dst are the IP source and destination addresses.
	Src, Dst netip.Addr

	// SrcPort and DstPort are the TCP/UDP ports (fin_sport/fin_dport);
	// zero when not read (fragment body, too short).
	SrcPort, DstPort uint16
	// ICMPID is the echo identifier for ICMP/ICMPv6 echo and echo reply.
	ICMPID uint16

	// ID is the IPv4 identification or the IPv6 fragment identification.
	ID uint32
	// Seq, Ack, Win and Urp are the TCP header fields (host order).
	Seq, Ack uint32
	Win, Urp uint16
	// TCPHdrLen is the TCP data offset in bytes (doff*4).
	TCPHdrLen int

	// PLen is fin_plen: the IP total length (IPv6: payload length + 40).
	PLen int
	// HLen is fin_hlen: the IP header length (IPv4 with options; 40 for IPv6).
	HLen int
	// DLen is fin_dlen: the bytes from L4Off to the end of the IP packet
	// (after AH and IPv6 extension headers are skipped).
	DLen int
	// Off is fin_off: the fragment offset in bytes.
	Off int
	// L4Off is the offset of the transport header (fin_dp) in the packet.
	L4Off int
	// FragHdrOff is the offset of the IPv6 fragment header, or 0.
	FragHdrOff int

	pulledOut bool // a pullup failed: Parse returns ErrPullup
}

// TCPDataLen is the TCP payload length (fin_dlen minus the TCP header),
// or 0 when no TCP header was read.
func (i *Info) TCPDataLen() int {
	if i.TCPHdrLen == 0 || i.DLen < i.TCPHdrLen {
		return 0
	}
	return i.DLen - i.TCPHdrLen
}

// Has reports whether all of f are set.
func (i *Info) Has(f Flags) bool { return i.Flags&f == f }

// Package packet holds header views over packet bytes and the parsed-once
// packet information the filter engine matches on.
//
// Header views (IPv4, IPv6, TCP, UDP, ICMPv4, ICMPv6, the IPv6 extension
// headers, AH, ESP) are named byte slices with getters named after the
// RFC fields, setters, and SetXWithChecksumUpdate variants that patch the
// checksum incrementally (RFC 1624). They do not check bounds beyond what
// slicing does: callers validate lengths first (Info.Parse does).
//
// Info.Parse fills an Info exactly as IPFilter's ipf_makefrip and its
// ipf_pr_* dissectors fill fr_info_t (ipf-reference §2.1), including the
// FI_* flag bits, without allocating.
package packet

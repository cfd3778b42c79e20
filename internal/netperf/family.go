package netperf

import "strings"

// ParseFamily is netperf's parse_address_family, for the -4/-6/-H/-L
// style options of both netperf and netserver: "6" anywhere in the first
// ten characters means IPv6, "inet" or "4" IPv4, anything else
// unspecified (0).
func ParseFamily(s string) int {
	if len(s) > 10 {
		s = s[:10]
	}
	switch {
	case strings.Contains(s, "6"):
		return 6
	case strings.Contains(s, "inet") || strings.Contains(s, "4"):
		return 4
	}
	return 0
}

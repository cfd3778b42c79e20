package config

import (
	"fmt"
	"strconv"
	"strings"
)

// IPFStateless returns HP's stateless rule set from the IPFilter white
// paper: pass in|out proto tcp|udp|icmp from any to any.
func IPFStateless() string { return ipfSet("") }

// IPFStateful returns the same set with keep state.
func IPFStateful() string { return ipfSet(" keep state") }

func ipfSet(suffix string) string {
	var b strings.Builder
	for _, dir := range []string{"in", "out"} {
		for _, p := range []string{"tcp", "udp", "icmp"} {
			fmt.Fprintf(&b, "pass %s proto %s from any to any%s\n", dir, p, suffix)
		}
	}
	return b.String()
}

// noMatchAddr returns the i-th address of 198.18.0.0/15 (RFC 2544's
// benchmarking range), which the test bed never uses, so a rule on it
// never matches but is still evaluated. Past that range's 131 072
// addresses (a blocklist of a million) it goes on in 240.0.0.0/4
// (reserved, never assigned), so no two addresses are alike up to
// maxNoMatch.
func noMatchAddr(i int) [4]byte {
	if i < 1<<17 {
		return [4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)}
	}
	i -= 1 << 17
	return [4]byte{240 | byte(i>>24&15), byte(i >> 16), byte(i >> 8), byte(i)}
}

// maxNoMatch is how many distinct addresses noMatchAddr has.
const maxNoMatch = 1<<17 + 1<<28

// NoMatchSplit divides n non-matching rules between the directions: the
// rule sets hold n in all, half inbound and half outbound (the odd one
// inbound). In all, not per direction: the sizes are the white paper's
// "rules loaded", and both families are given the same. (The split
// once also kept Sluice under a 16 384-rule limit that is gone: a set
// now holds bpf.MaxRules.)
func NoMatchSplit(n int) (in, out int) { return n - n/2, n / 2 }

// IPFNoMatch returns n non-matching rules (NoMatchSplit) followed by the
// stateless set, so every packet walks about n/2 rules of its direction
// before the one it matches (or, from a few rules up, looks its address
// up once: the rules of a direction differ only in their address, a run
// the kernel datapath turns into a lookup, as for a real blocklist).
func IPFNoMatch(n int) string {
	var b strings.Builder
	in, out := NoMatchSplit(n)
	b.Grow(n * 38)
	line := make([]byte, 0, 64)
	for i := 0; i < in; i++ {
		a := noMatchAddr(i)
		line = appendAddr(append(line[:0], "block in from "...), a)
		b.Write(append(line, "/32 to any\n"...))
		if i < out {
			line = appendAddr(append(line[:0], "block out from any to "...), a)
			b.Write(append(line, "/32\n"...))
		}
	}
	b.WriteString(IPFStateless())
	return b.String()
}

func appendAddr(b []byte, a [4]byte) []byte {
	for i, x := range a {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, uint64(x), 10)
	}
	return b
}

// IPFNoMatchSummary is IPFNoMatch(n) for the record, its non-matching
// rules summarised (a million rules are 38 MB of text).
func IPFNoMatchSummary(n int) string {
	in, out := NoMatchSplit(n)
	return fmt.Sprintf("block in from 198.18.0.0/32 to any\n# … %d such rules, one address each\n"+
		"block out from any to 198.18.0.0/32\n# … %d such rules, one address each\n%s", in, out, IPFStateless())
}

// QoSMax returns the marking configuration with its policy capped at
// pct % of the adapter's speed, which the adapter declares as @SPEED@
// (the `speed` extension; config.SubstQoS fills in the link profile's
// rate). On an unshaped link the interface's reported speed applies.
func QoSMax(dscp, pct int) string {
	return fmt.Sprintf(`filter tcp_all {
    protocol 6
}
policy mark_tcp {
    uses tcp_all
    dscp %d
    max %d%%
}
adapter @LINK@ {
    speed @SPEED@
    uses mark_tcp
}
`, dscp, pct)
}

// QoSMarkAny returns a configuration whose one filter matches every
// IPv4 packet (UDP and fragments included), marked DSCP dscp.
func QoSMarkAny(dscp int) string {
	return fmt.Sprintf(`filter ipv4_all {
    netproto 0x800
}
policy mark_all {
    uses ipv4_all
    dscp %d
}
adapter @LINK@ {
    uses mark_all
}
`, dscp)
}

// QoSNoMatch returns a configuration whose filter matches only packets
// to 198.18.0.1, an address the test bed never uses: every packet is
// classified and none is marked (the IPQoS paper's "filters that do not
// match").
func QoSNoMatch(dscp int) string {
	return fmt.Sprintf(`filter nomatch {
    dstaddr 198.18.0.1
}
policy mark_none {
    uses nomatch
    dscp %d
}
adapter @LINK@ {
    uses mark_none
}
`, dscp)
}

// QoSMarkTCP returns the IPQoS white paper's configuration: one filter
// matching every TCP packet and one policy rewriting its DSCP, on the
// SUT's adapter (@LINK@).
func QoSMarkTCP(dscp int) string {
	return fmt.Sprintf(`filter tcp_all {
    protocol 6
}
policy mark_tcp {
    uses tcp_all
    dscp %d
}
adapter @LINK@ {
    uses mark_tcp
}
`, dscp)
}

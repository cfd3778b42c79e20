package config

import (
	"fmt"
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
// never matches but is still evaluated.
func noMatchAddr(i int) [4]byte {
	return [4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)}
}

// NoMatchSplit divides n non-matching rules between the directions: the
// rule sets hold n in all, half inbound and half outbound (the odd one
// inbound). In all, not per direction: the sizes are the white paper's
// "rules loaded", and both families are given the same. (The split
// once also kept Sluice under a 16 384-rule limit that is gone: a set
// now holds bpf.MaxRules.)
func NoMatchSplit(n int) (in, out int) { return n - n/2, n / 2 }

// IPFNoMatch returns n non-matching rules (NoMatchSplit) followed by the
// stateless set, so every packet walks about n/2 rules of its direction
// before the one it matches.
func IPFNoMatch(n int) string {
	var b strings.Builder
	in, out := NoMatchSplit(n)
	for i := 0; i < in; i++ {
		a := noMatchAddr(i)
		fmt.Fprintf(&b, "block in from %d.%d.%d.%d/32 to any\n", a[0], a[1], a[2], a[3])
		if i < out {
			fmt.Fprintf(&b, "block out from any to %d.%d.%d.%d/32\n", a[0], a[1], a[2], a[3])
		}
	}
	b.WriteString(IPFStateless())
	return b.String()
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

package ipqos

import (
	"fmt"
	"net"
	"strings"
)

// Format prints the configuration in normalized form: canonical attribute
// names (`srcaddr`, `protocol`, `priority`, …), shortcuts expanded, rates in
// bits per second with k/m suffixes, four-space indents and one blank line
// between blocks. Parsing the output yields an equal Config.
func Format(c *Config) string {
	var b strings.Builder
	sep := ""
	for _, f := range c.Filters {
		b.WriteString(sep)
		sep = "\n"
		formatFilter(&b, f)
	}
	for _, p := range c.Policies {
		b.WriteString(sep)
		sep = "\n"
		fmt.Fprintf(&b, "policy %s {\n", p.Name)
		for _, u := range p.Uses {
			fmt.Fprintf(&b, "    uses %s\n", u.Name)
		}
		if p.Res.Set {
			fmt.Fprintf(&b, "    res %s\n", formatRate(p.Res))
		}
		if p.Max.Set {
			fmt.Fprintf(&b, "    max %s\n", formatRate(p.Max))
		}
		if p.DSCP >= 0 {
			fmt.Fprintf(&b, "    dscp %d\n", p.DSCP)
		}
		if p.VPR >= 0 {
			fmt.Fprintf(&b, "    vpr %d\n", p.VPR)
		}
		b.WriteString("}\n")
	}
	for _, a := range c.Adapters {
		b.WriteString(sep)
		sep = "\n"
		fmt.Fprintf(&b, "adapter %s {\n", a.Name)
		if a.Speed != 0 {
			fmt.Fprintf(&b, "    speed %s\n", formatRate(Rate{Set: true, Value: a.Speed}))
		}
		for _, u := range a.Uses {
			fmt.Fprintf(&b, "    uses %s\n", u.Name)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func formatFilter(b *strings.Builder, f *Filter) {
	fmt.Fprintf(b, "filter %s {\n", f.Name)
	for s := Src; s < numSides; s++ {
		a := f.Addr[s]
		if !a.IsSet() {
			continue
		}
		name := sideNames[s] + "addr"
		switch {
		case a.Prefix.IsValid() && a.Prefix.IsSingleIP():
			fmt.Fprintf(b, "    %s %s\n", name, a.Prefix.Addr())
		case a.Prefix.IsValid():
			fmt.Fprintf(b, "    %s %s\n", name, a.Prefix)
		default:
			fmt.Fprintf(b, "    %slo %s\n    %shi %s\n", name, a.Lo, name, a.Hi)
		}
	}
	for s := Src; s < numSides; s++ {
		r := f.Port[s]
		formatRange(b, sideNames[s]+"port", r)
	}
	if f.Protocol >= 0 {
		fmt.Fprintf(b, "    protocol %d\n", f.Protocol)
	}
	if f.NetProto != 0 {
		fmt.Fprintf(b, "    net 0x%X\n", f.NetProto)
	}
	formatRange(b, "dscp", f.DSCP)
	if f.HasMAC {
		fmt.Fprintf(b, "    dstphysaddr %s\n", net.HardwareAddr(f.DstMAC[:]))
	}
	if f.Priority != NoPriority {
		fmt.Fprintf(b, "    priority %d\n", f.Priority)
	}
	b.WriteString("}\n")
}

func formatRange(b *strings.Builder, name string, r Range) {
	switch {
	case !r.Set:
	case r.Lo == r.Hi:
		fmt.Fprintf(b, "    %s %d\n", name, r.Lo)
	default:
		fmt.Fprintf(b, "    %slo %d\n    %shi %d\n", name, r.Lo, name, r.Hi)
	}
}

func formatRate(r Rate) string {
	switch {
	case r.Percent:
		return fmt.Sprintf("%d%%", r.Value)
	case r.Value%1000000 == 0:
		return fmt.Sprintf("%dm", r.Value/1000000)
	case r.Value%1000 == 0:
		return fmt.Sprintf("%dk", r.Value/1000)
	}
	return fmt.Sprint(r.Value)
}

// String formats a rate the way Format prints it.
func (r Rate) String() string { return formatRate(r) }

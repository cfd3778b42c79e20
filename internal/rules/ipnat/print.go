package ipnat

import (
	"io"
	"strconv"
	"strings"

	"sluice/internal/rules/netfmt"
)

// Print writes every rule in ipnat's normalised form (ipnat -nv).
func (f *File) Print(w io.Writer) error {
	var b strings.Builder
	for _, r := range f.Rules {
		b.WriteString(r.String())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String returns the file's normalised text.
func (f *File) String() string {
	var b strings.Builder
	f.Print(&b)
	return b.String()
}

// ProtoString prints the rule's protocol as printproto does.
func (r *Rule) ProtoString() string {
	switch {
	case r.TCP && r.UDP:
		return "tcp/udp"
	case r.TCP:
		return "tcp"
	case r.UDP:
		return "udp"
	case r.ICMPQuery:
		return "icmp"
	case r.Proto == 0:
		return "ip"
	}
	if n := netfmt.ProtoName(r.Proto); n != "" {
		return n
	}
	return strconv.Itoa(r.Proto)
}

// FormatAddr prints an address operand as printnataddr does for a rule
// of the given family (4 or 6).
func FormatAddr(fam int, a Addr) string {
	switch a.Kind {
	case AddrLookup:
		return a.Table + "/" + a.Name
	case AddrRange:
		// IPFilter's printer writes a zero end as "any" (which its
		// parser then refuses; ParsePrinted takes it).
		return rangeEnd(fam, a.A) + "-" + rangeEnd(fam, a.M)
	case AddrSplit:
		return hostString(fam, a.A) + "," + hostString(fam, a.M)
	}
	if fam == 6 {
		if a.V4() == 0 && a.M4() == 0 {
			return "any"
		}
		return netfmt.NtopV6(a.A) + "/" + strconv.Itoa(netfmt.Count6Bits(a.M))
	}
	s := netfmt.NtopV4([4]byte(a.A[:4]))
	if a.V4() == 0 {
		s = "0"
	}
	if n := netfmt.Count4Bits(a.M4()); n >= 0 {
		return s + "/" + strconv.Itoa(n)
	}
	return s + "/" + netfmt.NtopV4([4]byte(a.M[:4]))
}

func rangeEnd(fam int, a [16]byte) string {
	if a == ([16]byte{}) {
		return "any"
	}
	return hostString(fam, a)
}

func hostString(fam int, a [16]byte) string {
	if fam == 6 {
		return netfmt.NtopV6(a)
	}
	return netfmt.NtopV4([4]byte(a[:4]))
}

func portCmpString(c PortCmp) string {
	switch c.Op {
	case "":
		return ""
	case "><", "<>":
		return " port " + strconv.Itoa(c.P1) + " " + c.Op + " " + strconv.Itoa(c.P2)
	case ":":
		return " port " + strconv.Itoa(c.P1) + ":" + strconv.Itoa(c.P2)
	}
	return " port " + c.Op + " " + strconv.Itoa(c.P1)
}

// String returns the rule's normalised text, newline included.
func (r *Rule) String() string {
	var b strings.Builder
	if r.No {
		b.WriteString("no ")
	}
	b.WriteString([...]string{"map", "bimap", "map-block", "rdr", "rewrite in on", "rewrite out on", "divert in on", "divert out on"}[r.Type])
	b.WriteString(" " + r.Ifs[0])
	if r.Ifs[1] != "" && r.Ifs[1] != r.Ifs[0] {
		b.WriteString("," + r.Ifs[1])
	}
	b.WriteByte(' ')
	if r.Family == 6 {
		b.WriteString("inet6 ")
	}
	if r.Type.IsRewrite() && (r.Proto != 0 || r.IsTCPUDP()) {
		b.WriteString("proto " + r.ProtoString() + " ")
	}
	if r.Filter && !r.icmpIDMapShort() {
		if r.NotSrc {
			b.WriteString("! ")
		}
		b.WriteString("from " + FormatAddr(r.Family, r.Src) + portCmpString(r.SrcPort))
		if r.NotDst {
			b.WriteString(" !")
		}
		b.WriteString(" to " + FormatAddr(r.Family, r.Dst) + portCmpString(r.DstPort))
	}
	switch {
	case r.Type == DivertIn || r.Type == DivertOut:
		b.WriteString(" -> src " + FormatAddr(r.Family, r.NewSrc) + "," + strconv.Itoa(r.SPMin))
		b.WriteString(" dst " + FormatAddr(r.Family, r.NewDst) + "," + strconv.Itoa(r.DPMin) + " udp")
		if r.Purge {
			b.WriteString(" purge")
		}
		b.WriteString(";\n")
	case r.Type.IsRewrite():
		b.WriteString(" -> src " + FormatAddr(r.Family, r.NewSrc))
		b.WriteString(rewritePorts(r, r.SPMin, r.SPMax, r.FixedSPort))
		b.WriteString(" dst " + FormatAddr(r.Family, r.NewDst))
		b.WriteString(rewritePorts(r, r.DPMin, r.DPMax, r.FixedDPort))
		if r.Purge {
			b.WriteString(" purge")
		}
		b.WriteString(";\n")
	case r.Type == Rdr:
		r.rdrString(&b)
	default:
		r.mapString(&b)
	}
	return b.String()
}

func rewritePorts(r *Rule, lo, hi int, fixed bool) string {
	if !r.IsTCPUDP() || lo == 0 {
		return ""
	}
	if fixed {
		return ",port = " + strconv.Itoa(lo)
	}
	s := "," + strconv.Itoa(lo)
	if hi != lo {
		s += "-" + strconv.Itoa(hi)
	}
	return s
}

func (r *Rule) rdrString(b *strings.Builder) {
	if !r.Filter {
		b.WriteString(FormatAddr(r.Family, r.Orig))
		if r.IsTCPUDP() {
			b.WriteString(" port " + strconv.Itoa(r.OPortMin))
			if r.OPortMax != r.OPortMin {
				b.WriteString("-" + strconv.Itoa(r.OPortMax))
			}
		}
	}
	if r.No {
		b.WriteString(" " + r.ProtoString() + ";\n")
		return
	}
	b.WriteString(" -> " + FormatAddr(r.Family, r.New))
	if r.IsTCPUDP() {
		if r.FixedDPort {
			b.WriteString(" port = " + strconv.Itoa(r.DPMin))
		} else {
			b.WriteString(" port " + strconv.Itoa(r.DPMin))
			if r.DPMax != r.DPMin {
				b.WriteString("-" + strconv.Itoa(r.DPMax))
			}
		}
	}
	b.WriteString(" " + r.ProtoString())
	if r.RoundRobin {
		b.WriteString(" round-robin")
	}
	if r.Frag {
		b.WriteString(" frag")
	}
	if r.Age[0] != 0 || r.Age[1] != 0 {
		b.WriteString(" age " + strconv.Itoa(r.Age[0]) + "/" + strconv.Itoa(r.Age[1]))
	}
	if r.Sticky {
		b.WriteString(" sticky")
	}
	if r.MSSClamp != 0 {
		b.WriteString(" mssclamp " + strconv.Itoa(r.MSSClamp))
	}
	if r.ProxyName != "" {
		b.WriteString(" proxy " + r.ProxyName)
	}
	if r.Tag != "" {
		b.WriteString(" tag " + r.Tag)
	}
	if r.Purge {
		b.WriteString(" purge")
	}
	b.WriteByte('\n')
}

// icmpIDMapShort reports whether printnat shows a map rule in its short
// form although it was written with from/to: for icmpidmap it prints the
// source address only (and never the word range).
func (r *Rule) icmpIDMapShort() bool {
	return r.ICMPIDMap && r.Type != Rdr && !r.Type.IsRewrite()
}

func (r *Rule) mapString(b *strings.Builder) {
	switch {
	case !r.Filter:
		b.WriteString(FormatAddr(r.Family, r.Orig))
	case r.icmpIDMapShort():
		b.WriteString(FormatAddr(r.Family, r.Src))
	}
	if r.No {
		b.WriteString(" " + r.ProtoString() + ";\n")
		return
	}
	b.WriteString(" -> ")
	if r.Range && !r.ICMPIDMap {
		b.WriteString("range ")
	}
	b.WriteString(FormatAddr(r.Family, r.New))
	protoPrinted := false
	switch {
	case r.ProxyName != "":
		b.WriteString(" proxy port " + strconv.Itoa(r.ProxyPort) + " " + r.ProxyName + "/" + r.ProtoString())
		protoPrinted = true
	case r.Type == MapBlock:
		if r.PortAuto {
			b.WriteString(" ports auto")
		} else {
			b.WriteString(" ports " + strconv.Itoa(r.SPMin))
		}
	case r.Portmap:
		b.WriteString(" portmap " + r.ProtoString())
		protoPrinted = true
		if r.PortAuto {
			b.WriteString(" auto")
		} else {
			b.WriteString(" " + strconv.Itoa(r.SPMin) + ":" + strconv.Itoa(r.SPMax))
		}
		if r.Sequential {
			b.WriteString(" sequential")
		}
	case r.ICMPIDMap:
		proto := r.ProtoString()
		if r.portTest {
			// ipnat_y.y makes a rule with a port test tcp/udp, and
			// printnat shows that protocol after icmpidmap.
			proto = "tcp/udp"
		}
		b.WriteString(" icmpidmap " + proto + " " + strconv.Itoa(r.SPMin) + ":" + strconv.Itoa(r.SPMax))
		protoPrinted = true
	}
	// ipnat_y.y's mapoptions take round-robin, but printnat.c prints it
	// for rdr rules only: a map rule's is never shown.
	if r.Frag {
		b.WriteString(" frag")
	}
	if r.Age[0] != 0 || r.Age[1] != 0 {
		b.WriteString(" age " + strconv.Itoa(r.Age[0]) + "/" + strconv.Itoa(r.Age[1]))
	}
	if r.MSSClamp != 0 {
		b.WriteString(" mssclamp " + strconv.Itoa(r.MSSClamp))
	}
	if r.Tag != "" {
		b.WriteString(" tag " + r.Tag)
	}
	if !protoPrinted && (r.IsTCPUDP() || r.Proto != 0) {
		b.WriteString(" " + r.ProtoString())
	}
	if r.Purge {
		b.WriteString(" purge")
	}
	b.WriteByte('\n')
}

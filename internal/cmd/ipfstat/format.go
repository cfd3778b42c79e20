//go:build linux

package ipfstat

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"sluice/internal/ipfctl"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// The formatting here is a pure function of what the datapath returned, so
// it is tested without a kernel.

// writeStats prints the default (IPFilter 4.1 "classic") statistics.
func writeStats(w io.Writer, s ipfctl.Stats, logFlags ipfctl.LogFlags, ticks uint64, v6 bool) {
	fmt.Fprintf(w, "bad packets:\t\tin %d\tout %d\n", s.In.Bad, s.Out.Bad)
	if v6 {
		fmt.Fprintf(w, " IPv6 packets:\t\tin %d out %d\n", s.In.IPv6, s.Out.IPv6)
	}
	fmt.Fprintf(w, " input packets:\t\tblocked %d passed %d nomatch %d counted %d short %d\n",
		s.In.Block, s.In.Pass, s.In.Nomatch, s.In.Acct, s.In.Short)
	fmt.Fprintf(w, "output packets:\t\tblocked %d passed %d nomatch %d counted %d short %d\n",
		s.Out.Block, s.Out.Pass, s.Out.Nomatch, s.Out.Acct, s.Out.Short)
	fmt.Fprintf(w, " input packets logged:\tblocked %d passed %d\n", s.In.LogBlock, s.In.LogPass)
	fmt.Fprintf(w, "output packets logged:\tblocked %d passed %d\n", s.Out.LogBlock, s.Out.LogPass)
	fmt.Fprintf(w, " packets logged:\tinput %d output %d\n", s.In.Logged, s.Out.Logged)
	fmt.Fprintf(w, " log failures:\t\tinput %d output %d\n", s.In.LogFail, s.Out.LogFail)
	// no fragment cache in the kernel datapath: fragments are counted only
	fmt.Fprintf(w, "fragment state(in):\tkept %d\tlost %d\tnot fragmented %d\n", 0, 0, 0)
	fmt.Fprintf(w, "fragment state(out):\tkept %d\tlost %d\tnot fragmented %d\n", 0, 0, 0)
	fmt.Fprintf(w, "packet state(in):\tkept %d\tlost %d\n", s.In.StateKept, s.In.StateLost)
	fmt.Fprintf(w, "packet state(out):\tkept %d\tlost %d\n", s.Out.StateKept, s.Out.StateLost)
	fmt.Fprintf(w, "ICMP replies:\t%d\tTCP RSTs sent:\t%d\n", s.ICMPSent, s.RSTSent)
	fmt.Fprintf(w, "Invalid source(in):\t%d\n", 0)
	fmt.Fprintf(w, "Result cache hits(in):\t%d\t(out):\t%d\n", 0, 0)
	fmt.Fprintf(w, "IN Pullups succeeded:\t%d\tfailed:\t%d\n", 0, 0)
	fmt.Fprintf(w, "OUT Pullups succeeded:\t%d\tfailed:\t%d\n", 0, 0)
	fmt.Fprintf(w, "Fastroute successes:\t%d\tfailures:\t%d\n", 0, 0)
	fmt.Fprintf(w, "TCP cksum fails(in):\t%d\t(out):\t%d\n", 0, 0)
	fmt.Fprintf(w, "IPF Ticks:\t%d\n", ticks)
	fmt.Fprintf(w, "Packet log flags set: (%#x)\n", uint32(logFlags))
	names := ipfctl.LogFlagNames(logFlags, true)
	if len(names) == 0 {
		names = []string{"none"}
	}
	for _, n := range names {
		fmt.Fprintf(w, "\t%s\n", n)
	}
}

// listOpts select what writeRules prints.
type listOpts struct {
	hits, bytes, numbers bool
	inactive             bool
}

// writeRules prints the filter (or accounting) rules of one direction the
// way ipfstat -i/-o (-a) does: main list, then each group of that
// direction under "# Group NAME". It returns false when nothing was
// printed (the caller reports the empty list).
func writeRules(w io.Writer, rules []ipfctl.RuleInfo, out, acct bool, o listOpts) bool {
	printed := false
	emit := func(r ipfctl.RuleInfo) {
		var b strings.Builder
		if o.hits {
			fmt.Fprintf(&b, "%d ", r.Hits)
		}
		if o.bytes {
			fmt.Fprintf(&b, "%d ", r.Bytes)
		}
		if o.numbers {
			fmt.Fprintf(&b, "@%d ", r.Number)
		}
		b.WriteString(r.Text)
		fmt.Fprintln(w, b.String())
		printed = true
	}
	match := func(r ipfctl.RuleInfo) bool {
		return (r.Dir == dirOf(out)) && r.Acct == acct
	}
	for _, r := range rules {
		if r.Group == "" && match(r) {
			emit(r)
		}
	}
	var groups []string
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Group != "" && match(r) && !seen[r.Group] {
			seen[r.Group] = true
			groups = append(groups, r.Group)
		}
	}
	for _, g := range groups {
		fmt.Fprintf(w, "# Group %s\n", g)
		for _, r := range rules {
			if r.Group == g && match(r) {
				emit(r)
			}
		}
	}
	return printed
}

// writeGroups prints ipfstat -g.
func writeGroups(w io.Writer, rules []ipfctl.RuleInfo, set int) {
	var filt, acct []string
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Group == "" || seen[fmt.Sprint(r.Acct, r.Group)] {
			continue
		}
		seen[fmt.Sprint(r.Acct, r.Group)] = true
		if r.Acct {
			acct = append(acct, r.Group)
		} else {
			filt = append(filt, r.Group)
		}
	}
	fmt.Fprintf(w, "ipf groups (set %d):\n", set)
	for _, g := range filt {
		fmt.Fprintf(w, "%s\n", g)
	}
	fmt.Fprintf(w, "count groups (set %d):\n", set)
	for _, g := range acct {
		fmt.Fprintf(w, "%s\n", g)
	}
	fmt.Fprintf(w, "auth groups (set %d):\n", set)
}

// writeStateStats prints ipfstat -s (4.1 layout).
func writeStateStats(w io.Writer, s ipfctl.Stats, states []ipfctl.State, stateMax uint64, logging bool) {
	fmt.Fprintf(w, "IP states added:\n\t%d TCP\n\t%d UDP\n\t%d ICMP\n", s.StateAdded[0], s.StateAdded[1], s.StateAdded[2])
	fmt.Fprintf(w, "\t%d hits\n\t%d misses\n\t%d bucket full\n", s.StateHits, s.StateMiss, 0)
	fmt.Fprintf(w, "\t%d maximum rule references\n\t%d maximum\n\t%d no memory\n", 0, s.StateMaxRefused, 0)
	fmt.Fprintf(w, "\t%d bkts in use\n\t%d active\n\t%d expired\n\t%d closed\n", len(states), len(states), s.StateExpired, s.StateClosed)
	// Sluice: new entries refused because a kernel table was full: the
	// sources of max-srcs rules (IPFilter's host tracking allocates
	// instead), and keep limit's connections (HP's DCA)
	fmt.Fprintf(w, "\t%d max-srcs table full\n\t%d keep limit table full\n", s.SrcFull, s.DCAFull)
	if logging {
		fmt.Fprintf(w, "State logging enabled\n")
	} else {
		fmt.Fprintf(w, "State logging disabled\n")
	}
	// an LRU hash has no visible buckets: every entry is its own
	fmt.Fprintf(w, "\nState table bucket statistics:\n")
	eff := 0
	if len(states) > 0 {
		eff = 100
	}
	usage := 0.0
	if stateMax > 0 {
		usage = float64(len(states)) * 100 / float64(stateMax)
	}
	minl, maxl, avg := 0, 0, 0.0
	if len(states) > 0 {
		minl, maxl, avg = 1, 1, 1
	}
	fmt.Fprintf(w, "\t%d in use\t\n\t%d%% hash efficiency\n\t%2.2f%% bucket usage\n\t%d minimal length\n\t%d maximal length\n\t%.3f average length\n",
		len(states), eff, usage, minl, maxl, avg)
	fmt.Fprintf(w, "\nTCP Entries per state\n")
	var per [12]int
	for _, st := range states {
		if st.Proto == 6 {
			for _, x := range st.TCPState {
				if int(x) < len(per) {
					per[x]++
				}
			}
		}
	}
	for i := range per {
		fmt.Fprintf(w, " %5d", i)
	}
	fmt.Fprintln(w)
	for _, n := range per {
		fmt.Fprintf(w, " %5d", n)
	}
	fmt.Fprintln(w)
}

// writeStateList prints ipfstat -sl (4.1 layout).
func writeStateList(w io.Writer, states []ipfctl.State) {
	for _, s := range states {
		fmt.Fprintf(w, "%s -> %s pass %#x pr %d state %d/%d\n", s.Src, s.Dst, s.Pass, s.Proto, s.TCPState[0], s.TCPState[1])
		fmt.Fprintf(w, "\ttag %d ttl %d", s.Tag, uint64(s.TTL/ipfctl.Tick))
		switch s.Proto {
		case 6:
			fmt.Fprintf(w, "\n\t%d -> %d %x:%x %d<<%d:%d<<%d\n", s.SrcPort, s.DstPort, s.End[0], s.End[1],
				s.MaxWin[0], s.WScale[0], s.MaxWin[1], s.WScale[1])
		case 17:
			fmt.Fprintf(w, " %d -> %d\n", s.SrcPort, s.DstPort)
		case 1, 58:
			fmt.Fprintf(w, " id %d type %d\n", s.SrcPort, s.DstPort)
		default:
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "\tforward: pkts in %d bytes in %d pkts out %d bytes out %d\n", s.Pkts[0], s.Bytes[0], s.Pkts[1], s.Bytes[1])
		fmt.Fprintf(w, "\tbackward: pkts in %d bytes in %d pkts out %d bytes out %d\n", s.Pkts[2], s.Bytes[2], s.Pkts[3], s.Bytes[3])
		fam := "IPv4"
		if s.Src.Is6() {
			fam = "IPv6"
		}
		fmt.Fprintf(w, "\t%s\t%s\n", passText(s.Pass), fam)
	}
}

// passText renders FR_* verdict flags the way IPFilter's printflags does.
func passText(p uint32) string {
	var b strings.Builder
	switch p & ruleset.FRCmdMask {
	case ruleset.FRBlock:
		b.WriteString("block")
	case ruleset.FRPass:
		b.WriteString("pass")
	case ruleset.FRAccount:
		b.WriteString("count")
	default:
		b.WriteString("nomatch")
	}
	if p&ruleset.FRInQue != 0 {
		b.WriteString(" in")
	} else if p&ruleset.FROutQue != 0 {
		b.WriteString(" out")
	}
	if p&ruleset.FRLog != 0 {
		b.WriteString(" log")
	}
	if p&ruleset.FRQuick != 0 {
		b.WriteString(" quick")
	}
	if p&ruleset.FRKeepState != 0 {
		b.WriteString(" keep state")
	}
	return b.String()
}

// writeFrags prints ipfstat -f: the kernel datapath keeps no fragment
// cache, so every figure is zero and the table is empty.
func writeFrags(w io.Writer) {
	fmt.Fprintf(w, "IP fragment states:\n%d\tnew\n%d\texpired\n%d\thits\n%d\tretrans\n%d\ttoo short\n", 0, 0, 0, 0, 0)
	fmt.Fprintf(w, "%d\tno memory\n%d\talready exist\n%d\tinuse\n", 0, 0, 0)
}

// writeTop prints one screen of ipfstat -t: the header, then one line per
// state entry, most bytes first; closed TCP entries only with closed.
func writeTop(w io.Writer, host string, states []ipfctl.State, closed bool) {
	fmt.Fprintf(w, "%s - %s - state top\n", host, ipfctl.Version)
	fmt.Fprintf(w, "Src: 0.0.0.0, Dest: 0.0.0.0, Proto: any, Sorted by: # bytes\n\n")
	fmt.Fprintf(w, "%-21s %-21s %-5s %-4s %8s %10s %8s\n", "Source IP", "Destination IP", "ST", "PR", "#pkts", "#bytes", "ttl")
	type row struct {
		s            ipfctl.State
		pkts, nbytes uint64
	}
	var rows []row
	for _, s := range states {
		// 11 is CLOSED in IPFilter's TCP state numbering
		if !closed && s.Proto == 6 && (s.TCPState[0] == 11 || s.TCPState[1] == 11) {
			continue
		}
		r := row{s: s}
		for i := range s.Pkts {
			r.pkts += s.Pkts[i]
			r.nbytes += s.Bytes[i]
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].nbytes > rows[j].nbytes })
	for _, r := range rows {
		s := r.s
		src, dst := s.Src.String(), s.Dst.String()
		if s.Proto == 6 || s.Proto == 17 {
			src = fmt.Sprintf("%s,%d", src, s.SrcPort)
			dst = fmt.Sprintf("%s,%d", dst, s.DstPort)
		}
		pr := ipf.ProtoName(s.Proto)
		if pr == "" {
			pr = fmt.Sprint(s.Proto)
		}
		secs := int(s.TTL / time.Second)
		ttl := fmt.Sprintf("%d:%02d", secs/60, secs%60)
		if secs >= 3600 {
			ttl = fmt.Sprintf("%d:%02d:%02d", secs/3600, secs/60%60, secs%60)
		}
		fmt.Fprintf(w, "%-21s %-21s %-5s %-4s %8d %10d %8s\n", src, dst,
			fmt.Sprintf("%X/%X", s.TCPState[0], s.TCPState[1]), pr, r.pkts, r.nbytes, ttl)
	}
}

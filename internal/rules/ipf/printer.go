package ipf

import (
	"bytes"
	"fmt"
	"net/netip"
	"sluice/internal/ipnames"
	"strconv"
	"strings"
)

// PrintOptions select the variant of IPFilter's printfr output.
type PrintOptions struct {
	// NoResolve (-R) prints ports as numbers. Otherwise single ports of
	// tcp, udp and tcp/udp rules print as service names where the
	// embedded table has one (tcp/udp only when both names agree).
	NoResolve bool
	// Verbose (-v) appends ` # count N` to keep-state rules, N being
	// StateCount (always 0 under ipf -n).
	Verbose    bool
	StateCount uint32
	// Unresolved reports whether an interface name should be marked
	// `(!)`. nil marks none (ipftest resolves every interface); ipf -n
	// marks all (see MarkAllUnresolved). "-" and "*" are never marked in
	// `on`; in route targets they are (print_toif).
	Unresolved func(name string) bool
	// Debug (-d) appends ` ref N` with N = Ref.
	Debug bool
	Ref   int
}

// MarkAllUnresolved is the PrintOptions.Unresolved of `ipf -n`, where no
// interface is looked up.
func MarkAllUnresolved(string) bool { return true }

// FormatRule returns the rule as ipftest -D and ipfstat -io print it
// (without the hit count): ports numeric, no `(!)` marks, no `# count`.
func FormatRule(r *Rule) string {
	return Format(r, PrintOptions{NoResolve: true})
}

// Format returns the rule in IPFilter's normalised form (printfr, 5.x),
// without a trailing newline.
func Format(r *Rule, o PrintOptions) string {
	var b strings.Builder
	// a rule prints in well under 128 bytes as a rule: one allocation
	// instead of the builder's doublings (a million-rule load prints
	// every rule)
	b.Grow(128)
	pr := &printer{sb: &b, o: o, r: r}
	pr.rule()
	return b.String()
}

// FormatTo writes Format(r, o) to b: a caller printing many rules reuses
// one buffer rather than allocating each rule's text (a million-rule
// load prints every rule).
func FormatTo(b *bytes.Buffer, r *Rule, o PrintOptions) {
	pr := printer{bb: b, o: o, r: r}
	pr.rule()
}

// printer writes to sb (Format) or bb (FormatTo): two concrete types
// rather than an interface, through which every buffer written would
// escape (allocations in every rule).
type printer struct {
	sb *strings.Builder
	bb *bytes.Buffer
	o  PrintOptions
	r  *Rule
}

func (p *printer) s(s string) {
	if p.bb != nil {
		p.bb.WriteString(s)
		return
	}
	p.sb.WriteString(s)
}

func (p *printer) write(b []byte) {
	if p.bb != nil {
		p.bb.Write(b)
		return
	}
	p.sb.Write(b)
}

func (p *printer) f(format string, args ...any) {
	if p.bb != nil {
		fmt.Fprintf(p.bb, format, args...)
		return
	}
	fmt.Fprintf(p.sb, format, args...)
}

func (p *printer) ifname(prefix, name string) {
	p.s(prefix)
	p.s(escName(name))
	if name != "-" && name != "*" && p.o.Unresolved != nil && p.o.Unresolved(name) {
		p.s("(!)")
	}
}

func (p *printer) log() {
	r := p.r
	p.s("log")
	if r.Log.Body {
		p.s(" body")
	}
	if r.Log.First {
		p.s(" first")
	}
	if r.Log.OrBlock {
		p.s(" or-block")
	}
	if r.Log.HasLevel {
		p.f(" level %s.%s", FacilityName(r.Log.Facility), PriorityName(r.Log.Priority))
	}
	if r.Log.Limit {
		p.s(" limit")
		if r.Log.LimitFreq != 0 {
			p.f(" freq %d", r.Log.LimitFreq)
		}
	}
}

func (p *printer) toif(tag string, d *RouteTarget) {
	if d == nil {
		return
	}
	if d.DstList != "" {
		p.f("%s dstlist/%s ", tag, escName(d.DstList))
		return
	}
	p.s(tag)
	p.s(" ")
	p.s(escName(d.Iface))
	if d.NextHop.IsValid() && !d.NextHop.IsUnspecified() {
		p.s(":")
		p.s(d.NextHop.String())
	} else if !d.NextHop.IsValid() && p.o.Unresolved != nil && p.o.Unresolved(d.Iface) {
		// IPFilter marks an unknown interface only when the target
		// names no address (not even 0.0.0.0); print_toif marks `-`
		// and `*` too (no interface looked up: ipf -n, ipftest -v),
		// where printifname (`on`) leaves them.
		p.s("(!)")
	}
	p.s(" ")
}

func (p *printer) rule() {
	p.action()
	p.options()
	ipf := p.ipfPart()
	p.keep(ipf)
	p.tail()
}

// action prints the collection, the action and its return-* reply.
func (p *printer) action() {
	r := p.r
	if r.Collection != 0 {
		p.f("%d ", r.Collection)
	}
	switch r.Action {
	case ActionCall:
		p.s("call")
		if r.Call.Now {
			p.s(" now")
		}
		p.f(" %s/%d", escName(r.Call.Func), r.Call.Arg)
	case ActionLog:
		p.log()
	case ActionNomatch:
		// IPFilter's nomatch command is 0 with FR_NOMATCH: with `log`
		// its flags read as a log rule's, and its printer writes one
		// (`nomatch in log body all` is `log body in all`).
		if r.HasLog {
			p.log()
		} else {
			p.s("nomatch")
		}
	case ActionSkip:
		p.f("skip %d", r.Skip)
	default:
		p.s(r.Action.String())
	}
	switch r.Return {
	case ReturnICMP, ReturnICMPAsDest:
		if r.Return == ReturnICMP {
			p.s(" return-icmp")
		} else {
			p.s(" return-icmp-as-dest")
		}
		if r.ICMPCode != 0 {
			if int(r.ICMPCode) < len(ipnames.ICMPCodes) {
				p.f("(%s)", ipnames.ICMPCodes[r.ICMPCode])
			} else {
				p.f("(%d)", r.ICMPCode)
			}
		}
	case ReturnRST:
		p.s(" return-rst")
	}
}

// options prints the direction, log, quick, on, the routes and the via interfaces.
func (p *printer) options() {
	r := p.r
	p.s(" ")
	p.s(r.Dir.String())
	p.s(" ")
	// IPFilter's printer writes the log options of pass, block, count
	// and auth rules (`auth in log quick all`); preauth, call, skip,
	// nomatch and decapsulate rules print none.
	if r.HasLog && (r.Action == ActionPass || r.Action == ActionBlock || r.Action == ActionCount || r.Action == ActionAuth) {
		p.log()
		p.s(" ")
	}
	if r.Quick {
		p.s("quick ")
	}
	if len(r.On) > 0 {
		p.ifname("on ", r.On[0])
		if len(r.On) > 1 && r.On[1] != "*" {
			p.ifname(",", r.On[1])
		}
		p.s(" ")
	}
	p.toif("to", r.RouteTo)
	p.toif("dup-to", r.DupTo)
	p.toif("reply-to", r.ReplyTo)
	if r.FastRoute {
		p.s("fastroute ")
	}
	if (len(r.Via) > 0 && r.Via[0] != "*") || (len(r.Via) > 1 && r.Via[1] != "*") {
		if r.Dir == DirOut {
			p.s("in-via ")
		} else {
			p.s("out-via ")
		}
		p.ifname("", r.Via[0])
		if len(r.Via) > 1 {
			p.ifname(",", r.Via[1])
		}
		p.s(" ")
	}
}

// ipfPart prints the family, tos/ttl/proto and the packet tests (exp, bpf, `all`
// or from/to with ports, icmp-type and flags), and reports whether the rule
// is of the classic kind.
func (p *printer) ipfPart() bool {
	r := p.r
	switch {
	case r.Family == FamilyInet || r.Family == FamilyAny && r.hasMasklessIface():
		// An interface's address written without a mask (`from A` with
		// A one of the rule's interfaces, or `(A)`) prints as A/32,
		// which reads back as an IPv4 address: say so, or printing
		// would not be a fixed point.
		p.s("inet ")
	case r.Family == FamilyInet6:
		p.s("inet6 ")
	}
	ipf := r.isIPFType()
	if ipf {
		if r.HasTos {
			if r.Tos == 0 {
				p.s("tos 0 ")
			} else {
				p.f("tos %#x ", r.Tos)
			}
		}
		if r.HasTTL {
			p.f("ttl %d ", r.TTL)
		}
		if r.TCPUDP {
			p.s("proto tcp/udp ")
		} else if r.HasProto {
			if n := ProtoName(r.Proto); n != "" {
				p.s("proto ")
				p.s(n)
				p.s(" ")
			} else {
				p.f("proto %d ", r.Proto)
			}
		}
	}
	switch {
	case r.Expr != nil:
		p.f("exp { \"%s\" } ", FormatExpr(r.Expr))
	case r.BPF != "":
		v := 4
		if r.BPFFamily == FamilyInet6 {
			v = 6
		}
		p.f("bpf-v%d { %s } ", v, quote(r.BPF))
	case !ipf:
		p.s("all")
	default:
		p.s("from ")
		if r.From.Not {
			p.s("!")
		}
		p.addr(&r.From.Addr)
		p.port(&r.From.Port)
		p.s(" to ")
		if r.To.Not {
			p.s("!")
		}
		p.addr(&r.To.Addr)
		p.port(&r.To.Port)
		if r.HasProto && (r.Proto == 1 || r.Proto == 58) && r.HasICMPType {
			if n := ICMPTypeName(r.Family, r.ICMPType); n != "" {
				p.f(" icmp-type %s", n)
			} else {
				p.f(" icmp-type %d", r.ICMPType)
			}
			if r.HasICMPCode {
				p.f(" code %d", r.ICMPCodeMatch)
			}
		}
		if r.HasProto && r.Proto == 6 && (r.Flags != 0 || r.FlagsMask != 0) {
			p.s(" flags ")
			p.s(formatFlags(r.Flags, r.FlagsMask))
		}
	}
	return ipf
}

// keep prints the with clause and the keep state/frags/limit options.
func (p *printer) keep(ipf bool) {
	r := p.r
	// `with ah` is read but never printed: IPFilter's printer has no
	// name for FI_AH (`with ipopts,ah` prints `with ipopts`, `with ah`
	// no with clause), and no packet matches by it.
	if ipf && (r.With&FI_WITH != 0 || r.WithMask&FI_WITH != 0 || r.OptBits != 0 ||
		r.OptMask != 0 || r.SecBits != 0 || r.SecMask != 0 || r.V6HdrsMask != 0) {
		p.with()
	}
	if k := r.KeepState; k != nil {
		p.s(" keep state")
		if k.Strict || k.NewISN || k.NoICMPErr || k.Sync || k.Limit != 0 || r.Age[0] != 0 || k.MaxSrcs != 0 {
			var items []string
			if k.Limit != 0 {
				items = append(items, fmt.Sprintf("limit %d", k.Limit))
			}
			if k.MaxSrcs != 0 {
				s := fmt.Sprintf("max-nodes %d", k.MaxSrcs)
				if k.MaxPerSrc != 0 {
					s += fmt.Sprintf(", max-per-src %d/%d", k.MaxPerSrc, k.MaxPerSrcBits)
				}
				items = append(items, s)
			}
			for _, o := range []struct {
				on   bool
				name string
			}{{k.Strict, "strict"}, {k.Loose, "loose"}, {k.NewISN, "newisn"}, {k.NoICMPErr, "no-icmp-err"}, {k.Sync, "sync"}} {
				if o.on {
					items = append(items, o.name)
				}
			}
			if r.Age[0] != 0 || r.Age[1] != 0 {
				items = append(items, fmt.Sprintf("age %d/%d", r.Age[0], r.Age[1]))
			}
			p.f(" (%s)", strings.Join(items, ","))
		}
	}
	if r.KeepFrags {
		p.s(" keep frags")
		if r.KeepFragsStrict {
			p.s(" (strict)")
		}
	}
	if r.KeepLimit != 0 {
		p.f(" keep limit %d", r.KeepLimit)
		if r.KeepLimitCumulative {
			p.s(" cumulative")
		}
	}
}

// tail prints the group, tags, pps, comment and the -v/-d trailer.
func (p *printer) tail() {
	r := p.r
	if r.Head != "" {
		p.s(" head ")
		p.s(escName(r.Head))
	}
	if r.Group != "" {
		p.s(" group ")
		p.s(escName(r.Group))
	}
	if (r.Tag.HasLog && r.Tag.Log != 0) || r.Tag.NAT != "" {
		p.s(" set-tag(")
		sep := ""
		if r.Tag.HasLog && r.Tag.Log != 0 {
			p.f("log=%d", r.Tag.Log)
			sep = ", "
		}
		if r.Tag.NAT != "" {
			p.f("%snat=%s", sep, escName(r.Tag.NAT))
		}
		p.s(")")
	}
	if r.PPS != 0 {
		p.f(" pps %d", r.PPS)
	}
	if r.Comment != "" {
		p.s(" comment " + quote(r.Comment))
	}
	hash := false
	if r.KeepState != nil && p.o.Verbose {
		p.f(" # count %d", p.o.StateCount)
		if r.RuleTTL != 0 {
			p.f(" rule-ttl %d", r.RuleTTL)
		}
		hash = true
	} else if r.RuleTTL != 0 {
		p.f(" # rule-ttl %d", r.RuleTTL)
		hash = true
	}
	if p.o.Debug {
		if !hash {
			p.s("#")
		}
		p.f(" ref %d", p.o.Ref)
	}
}

// formatFlags prints X/Y in the order FSRPAUEC (printtcpflags).
func formatFlags(f, m uint8) string {
	const letters = "FSRPAUEC"
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if f&(1<<i) != 0 {
			b.WriteByte(letters[i])
		}
	}
	if m != 0 {
		b.WriteByte('/')
		for i := 0; i < 8; i++ {
			if m&(1<<i) != 0 {
				b.WriteByte(letters[i])
			}
		}
	}
	return b.String()
}

func writeMask(b *strings.Builder, m netip.Addr) {
	var buf [48]byte
	b.Write(appendMask(buf[:0], m))
}

// appendMask appends a mask as the printer writes it: /BITS, or the
// address of an IPv4 mask that is not a prefix.
func appendMask(dst []byte, m netip.Addr) []byte {
	n := MaskBits(m)
	dst = append(dst, '/')
	if m.Is4() && n < 0 {
		return m.AppendTo(dst) // an IPv4 mask is valid: the text of String
	}
	return strconv.AppendInt(dst, int64(n), 10)
}

func (p *printer) addr(a *Addr) {
	switch a.Kind {
	case AddrHost:
		if p.r.Family == FamilyAny || (a.IP.IsUnspecified() && a.Mask.IsUnspecified()) {
			p.s("any")
			return
		}
		if a.IP.IsValid() {
			// String's text without its allocation (AppendTo differs
			// only for the zero Addr)
			var buf [48]byte
			p.write(a.IP.AppendTo(buf[:0]))
		} else {
			p.s(a.IP.String())
		}
		var buf [48]byte
		p.write(appendMask(buf[:0], a.Mask))
	case AddrIface:
		switch a.IfaceMode {
		case IfaceBroadcast:
			p.s(escName(a.Iface) + "/bcast")
		case IfaceNetwork:
			p.s(escName(a.Iface) + "/net")
		case IfaceNetmasked:
			p.s(escName(a.Iface) + "/netmasked")
		case IfacePeer:
			p.s(escName(a.Iface) + "/peer")
		default:
			p.f("%s/%d", escName(a.Iface), a.IfaceBits)
		}
	case AddrPool, AddrHash:
		if a.Kind == AddrPool {
			p.s("pool/")
		} else {
			p.s("hash/")
		}
		if a.Table == "" {
			p.s("0")
		} else {
			p.s(escName(a.Table))
		}
	default:
		p.s("any")
	}
}

var portOpText = [...]string{"*", "=", "!=", "<", ">", "<=", ">=", "<>", "><", ":"}

func (p *printer) port(pt *Port) {
	switch pt.Op {
	case PortNone:
		return
	case PortInRange, PortOutRange:
		p.f(" port %d %s %d", pt.Lo, portOpText[pt.Op], pt.Hi)
	case PortRange:
		p.f(" port %d:%d", pt.Lo, pt.Hi)
	default:
		p.s(" port ")
		p.s(portOpText[pt.Op])
		p.s(" ")
		p.s(p.portName(pt.Lo))
	}
}

func (p *printer) portName(port uint16) string {
	r := p.r
	if !p.o.NoResolve && (r.TCPUDP || (r.HasProto && (r.Proto == 6 || r.Proto == 17))) {
		if n, ok := serviceName(port, r.Proto, r.TCPUDP); ok {
			return n
		}
	}
	return strconv.Itoa(int(port))
}

func (p *printer) with() {
	r := p.r
	p.s(" with")
	comma := " "
	if r.OptBits != 0 || r.OptMask != 0 || r.SecBits != 0 || r.SecMask != 0 || r.V6HdrsMask != 0 {
		if r.V6HdrsMask != 0 {
			p.optList(" v6hdr ", " not v6hdrs ", v6Hdrs, r.V6Hdrs, r.V6HdrsMask)
		}
		if r.OptMask != 0 || r.SecMask != 0 {
			p.optPrint()
		}
	} else if r.WithMask&FI_OPTIONS != 0 {
		p.s(comma)
		if r.With&FI_OPTIONS == 0 {
			p.s("not ")
		}
		p.s("ipopts")
		comma = ","
	}
	for _, a := range withPrintOrder {
		if r.WithMask&a.bit == 0 {
			continue
		}
		p.s(comma)
		if r.With&a.bit == 0 {
			p.s("not ")
		}
		p.s(a.name)
		comma = ","
	}
}

// optList prints set bits after pos and cleared-but-masked bits after neg.
func (p *printer) optList(pos, neg string, t []nameBit, bits, mask uint32) {
	s := pos
	for _, e := range t {
		if e.bit&mask != 0 && e.bit&bits != 0 {
			p.s(s + e.name)
			s = ","
		}
	}
	s = neg
	for _, e := range t {
		if e.bit&mask != 0 && e.bit&bits == 0 {
			p.s(s + e.name)
			s = ","
		}
	}
}

// optPrint is IPFilter's optprint: positive options, sec-class, then
// ` not opt ...` and ` sec-class ...` for the negated ones.
func (p *printer) optPrint() {
	r := p.r
	secm, secb := uint32(r.SecMask), uint32(r.SecBits)
	s := " opt "
	for _, e := range ipOptions {
		if e.bit&r.OptMask != 0 && e.bit&r.OptBits != 0 {
			if e.bit == OptSEC && (secm != 0 || secb != 0) {
				continue
			}
			p.s(s + e.name)
			s = ","
		}
	}
	if secm&secb != 0 {
		p.s(s + "sec-class")
		s = " "
		for _, e := range secClasses {
			if e.bit&secm != 0 && e.bit&secb != 0 {
				p.s(s + e.name)
				s = ","
			}
		}
	}
	if (r.OptMask != 0 && r.OptMask != r.OptBits) || (secm != 0 && secm != secb) {
		p.s(" not opt")
		s = " "
		if r.OptMask != r.OptBits {
			for _, e := range ipOptions {
				if e.bit&r.OptMask != 0 && e.bit&r.OptBits == 0 {
					// As above: sec-class stands for the sec option.
					if e.bit == OptSEC && (secm != 0 || secb != 0) {
						continue
					}
					p.s(s + e.name)
					s = ","
				}
			}
		}
		if secm != secb {
			p.s(s + "sec-class")
			s = " "
			for _, e := range secClasses {
				if e.bit&secm != 0 && e.bit&secb == 0 {
					p.s(s + e.name)
					s = ","
				}
			}
		}
	}
}

// FormatInlineTables returns what `ipf -v` prints for the anonymous
// tables of a rule's `pool=(...)`/`hash=(...)` addresses, before the rule
// itself (one "table ..." header line and one "\t{ ... };" line per
// table, each newline-terminated). It is "" for rules without them.
func FormatInlineTables(r *Rule) string {
	var b strings.Builder
	for _, a := range []*Addr{&r.From.Addr, &r.To.Addr} {
		if a.Inline == nil {
			continue
		}
		if a.Kind == AddrHash {
			size := 2*len(a.Inline) - 1
			fmt.Fprintf(&b, "table role=ipf type=hash number=%s size=%d\n\t{", a.Table, size)
		} else {
			fmt.Fprintf(&b, "table role=ipf type=tree number=%s\n\t{", a.Table)
		}
		for i := len(a.Inline) - 1; i >= 0; i-- {
			e := a.Inline[i]
			b.WriteByte(' ')
			if e.Negate && a.Kind == AddrPool {
				b.WriteString("! ")
			}
			b.WriteString(poolAddr(e.IP))
			writeMask(&b, e.Mask)
			b.WriteByte(';')
		}
		if len(a.Inline) == 0 {
			b.WriteByte(';')
		}
		b.WriteString(" };\n")
	}
	return b.String()
}

// poolAddr prints a table address as ippool does: an IPv4 address below
// 256 is printed as a bare number.
func poolAddr(a netip.Addr) string {
	if a.Is4() {
		v := a.As4()
		if v[0] == 0 && v[1] == 0 && v[2] == 0 {
			return strconv.Itoa(int(v[3]))
		}
	}
	return a.String()
}

// quote double-quotes s, escaping `"` and `\` as the lexer reads them.
func quote(s string) string {
	if !strings.ContainsAny(s, `"\`) {
		return `"` + s + `"`
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// name prints a word-valued field (interface, group, table, tag) so that
// the lexer reads it back as one word: delimiters are backslash-escaped.
// Ordinary names are printed unchanged, as IPFilter prints them.
func escName(s string) string {
	esc := false
	for i := 0; i < len(s); i++ {
		if isDelim(int(s[i])) || s[i] == '\\' {
			esc = true
			break
		}
	}
	if !esc {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if isDelim(int(s[i])) || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hasMasklessIface reports whether an endpoint is an interface's address
// with no mask and no family of its own, which prints as IF/32.
func (r *Rule) hasMasklessIface() bool {
	for _, a := range []*Addr{&r.From.Addr, &r.To.Addr} {
		if a.Kind == AddrIface && a.IfaceMode == IfaceDynamic && a.Family == FamilyAny && a.IfaceBits == 32 {
			return true
		}
	}
	return false
}

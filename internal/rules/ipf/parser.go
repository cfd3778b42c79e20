package ipf

import (
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// ParseOptions control parsing, mirroring ipf's command-line flags.
type ParseOptions struct {
	// NoResolve is ipf -R. Parsing still resolves host, service and
	// protocol names through the embedded tables (IPFilter does too); the
	// flag is recorded so callers can pass it on to the printer.
	NoResolve bool
	// Inet6 is ipf -6: rules without an address family become inet6, and
	// host names resolve to their IPv6 address.
	Inet6 bool
	// Inet4 is ipf -4 [5.x]: rules without an address family become inet.
	Inet4 bool
	// Vars are predefined variables (IPF_PREDEFINED), name to value.
	Vars map[string]string
	// Hosts adds host names to the embedded table (localhost,
	// test.host.dots). The host's /etc/hosts is never read.
	Hosts map[string]netip.Addr
}

// Setting is a `set NAME VALUE;` statement [5.x], applied before the rules.
type Setting struct {
	Pos   Pos
	Name  string
	Value string // as written: a number, 0x hex, "true" or "false"
}

// Config is a parsed ipf.conf file.
type Config struct {
	Settings []Setting
	Rules    []*Rule
	// Warnings are what IPFilter's parser reports and goes on after
	// (a logical interface in `on`), in file order.
	Warnings []Warning
}

// Warning is a positioned note about a rule that was loaded anyway.
type Warning struct {
	Pos Pos
	Msg string
}

// String is the warning as IPFilter's ipf prints it: "LINE: message".
func (w Warning) String() string { return strconv.Itoa(w.Pos.Line) + ": " + w.Msg }

// Error is one positioned parse error.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.Pos.File, e.Pos.Line, e.Pos.Col, e.Msg)
}

// ErrorList is every error of a parse (at most maxErrors), in order.
type ErrorList []*Error

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// maxErrors is where parsing gives up, like Go's own parsers.
const maxErrors = 10

// maxExpansion caps the rules one LIST-expanded rule may produce.
const maxExpansion = 65536

// groupLen is FR_GROUPLEN-1, the longest group name. IPFilter cuts longer
// names, which can merge two groups into one; here they are an error.
const groupLen = 15

// natTagLen is IPFTAG_LEN: NAT tags are cut to this length.
const natTagLen = 16

// Parse parses an ipf.conf file and returns its rules (LIST-expanded, in
// file order). On error it returns the rules that did parse together with
// an ErrorList.
func Parse(filename string, src []byte, opts ParseOptions) ([]*Rule, error) {
	c, err := ParseConfig(filename, src, opts)
	return c.Rules, err
}

// ParseConfig is Parse that also returns the `set` statements.
func ParseConfig(filename string, src []byte, opts ParseOptions) (*Config, error) {
	if len(src) > bigFile {
		// read in place rather than copied (38 MB for a million rules):
		// no token keeps a piece of the text (each is a copy of its
		// own), so nothing refers to src once Parse returns
		text := unsafe.String(unsafe.SliceData(src), len(src))
		if k := runtime.GOMAXPROCS(0); k > 1 {
			if c, ok := parseSplit(filename, text, opts, splitPoints(text, k)); ok {
				return c, nil
			}
		}
		return parseSerial(filename, text, opts)
	}
	return parseSerial(filename, string(src), opts)
}

// parseSerial parses the whole file in one pass.
func parseSerial(filename, src string, opts ParseOptions) (*Config, error) {
	p := &parser{lx: newLexerAt(filename, src, 1, opts.Vars), opts: opts}
	if len(src) > bigFile {
		// a blocklist of a million rules: a rule a line at most, short
		// of list expansion, rather than a slice grown by doublings.
		// (The collector is left as it is: slowing it here only moved
		// a collection of the whole heap into ruleset.Compile.)
		p.rules = make([]*Rule, 0, strings.Count(src, "\n")+1)
		p.big = true
	}
	p.parseFile()
	fillGroups(p.rules)
	c := &Config{Settings: p.settings, Rules: p.rules, Warnings: p.warns}
	if len(p.errs) > 0 {
		return c, p.errs
	}
	return c, nil
}

// splitPoints returns up to k-1 offsets that cut src into pieces of about
// equal size for parseSplit: each is the start of a line that begins
// with a letter (a statement's first word, if the cut is good) after a
// line that does not end in a continuation.
func splitPoints(src string, k int) []int {
	var cuts []int
	for j := 1; j < k; j++ {
		from := j * len(src) / k
		if len(cuts) > 0 {
			from = max(from, cuts[len(cuts)-1]+1)
		}
		for from < len(src) {
			i := strings.IndexByte(src[from:], '\n')
			if i < 0 {
				return cuts
			}
			m := from + i + 1
			from = m
			if m < len(src) && isLetter(src[m]) && !continued(src[:m]) {
				cuts = append(cuts, m)
				break
			}
		}
	}
	return cuts
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// continued reports whether text (ending in a newline) ends in a
// backslash continuation.
func continued(text string) bool {
	text = strings.TrimSuffix(text[:len(text)-1], "\r")
	return strings.HasSuffix(text, "\\")
}

// parseSplit parses the pieces of src between cuts at once, one
// goroutine each (a blocklist's million lines are independent), and
// returns what a single pass would, or ok false when it cannot be sure
// of that: then the caller parses the file in one pass, so errors (and
// which comes first) are always the single pass's own. A piece's parse
// is the single pass's when the piece before it stopped, cleanly, at a
// statement that starts exactly at the cut (a statement running over
// the cut makes that piece stop elsewhere), and when the piece uses no
// variables or no piece before it defines any.
func parseSplit(filename, src string, opts ParseOptions, cuts []int) (*Config, bool) {
	if len(cuts) == 0 {
		return nil, false
	}
	starts := append([]int{0}, cuts...)
	ps := make([]*parser, len(starts))
	var wg sync.WaitGroup
	line := 1
	for i, start := range starts {
		end := len(src)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		if i > 0 {
			line += strings.Count(src[starts[i-1]:start], "\n")
		}
		p := &parser{lx: newLexerAt(filename, src[start:], line, opts.Vars), opts: opts}
		p.rules = make([]*Rule, 0, strings.Count(src[start:end], "\n")+1)
		p.big = true
		if i+1 < len(starts) {
			p.stopAt = Pos{File: filename, Line: line + strings.Count(src[start:end], "\n"), Col: 1}
		}
		ps[i] = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.parseFile()
		}()
	}
	wg.Wait()
	n, assigned, expansions := 0, false, 0
	for i, p := range ps {
		if len(p.errs) > 0 {
			return nil, false
		}
		if i+1 < len(ps) && p.stopped != p.stopAt {
			return nil, false
		}
		expansions += p.lx.expansions
		if i > 0 && p.lx.expansions > 0 && assigned || expansions > maxExpansions {
			return nil, false
		}
		assigned = assigned || p.assigned
		n += len(p.rules)
	}
	c := &Config{Rules: make([]*Rule, 0, n)}
	for _, p := range ps {
		c.Rules = append(c.Rules, p.rules...)
		c.Settings = append(c.Settings, p.settings...)
		c.Warnings = append(c.Warnings, p.warns...)
	}
	fillGroups(c.Rules)
	return c, true
}

// bigFile is the size from which ParseConfig prepares for a rule file of
// hundreds of thousands of rules (a blocklist).
const bigFile = 4 << 20

type parser struct {
	lx       *lexer
	buf      []token
	last     token
	opts     ParseOptions
	errs     ErrorList
	rules    []*Rule
	settings []Setting
	warns    []Warning
	// stopAt (parseSplit) ends the parse before the first statement
	// that starts at or after its line; stopped is where that statement
	// starts (zero: the parse did not stop so).
	stopAt, stopped Pos
	// assigned is set once a variable is defined.
	assigned bool
	// slab holds zeroed Rules newRule hands out, for a big file (nil:
	// one allocation a rule).
	slab []Rule
	big  bool
	// slow turns fastRule off (tests compare the two parsers); fast
	// counts the rules it read.
	slow bool
	fast int
}

// newRule returns a zeroed Rule. A big file's come from arrays of
// slabRules: a million 704-byte objects, each with its own type header
// to set, were a tenth of a blocklist's parse.
func (p *parser) newRule() *Rule {
	if !p.big {
		return &Rule{}
	}
	if len(p.slab) == 0 {
		p.slab = make([]Rule, slabRules)
	}
	r := &p.slab[0]
	p.slab = p.slab[1:]
	return r
}

// slabRules is how many Rules newRule allocates at once for a big file.
const slabRules = 512

func (p *parser) peekN(n int) token {
	for len(p.buf) <= n {
		p.buf = append(p.buf, p.lx.next())
	}
	return p.buf[n]
}

func (p *parser) peek() token { return p.peekN(0) }

func (p *parser) next() token {
	t := p.peek()
	// shift in place: re-slicing from the front would make peekN's
	// append reallocate the buffer every few tokens (a million-rule file
	// spent a third of its parse in growslice)
	n := copy(p.buf, p.buf[1:])
	p.buf = p.buf[:n]
	p.last = t
	return t
}

func isWord(t token, kw string) bool { return t.kind == tWord && strings.EqualFold(t.text, kw) }

func isPunct(t token, s string) bool { return t.kind == tPunct && t.text == s }

// errorf makes a positioned error at token t.
func errorf(t token, format string, args ...any) *Error {
	return &Error{Pos: t.pos, Msg: fmt.Sprintf(format, args...)}
}

// expected makes the standard "expected X, found Y" error at token t.
func expected(what string, t token) *Error {
	if t.kind == tError {
		return &Error{Pos: t.pos, Msg: t.text}
	}
	return &Error{Pos: t.pos, Msg: "expected " + what + ", found " + t.String()}
}

func (p *parser) addErr(e *Error) {
	if len(p.errs) < maxErrors {
		p.errs = append(p.errs, e)
	}
}

// sync skips to the first token after line (the end of the erroneous line).
func (p *parser) sync(line int) {
	for {
		t := p.peek()
		if t.kind == tEOF || t.line > line {
			return
		}
		p.next()
	}
}

func (p *parser) parseFile() {
	for len(p.errs) < maxErrors {
		if p.fastRule() {
			continue
		}
		t := p.peek()
		if t.kind == tEOF {
			return
		}
		if p.stopAt.Line > 0 && t.line >= p.stopAt.Line {
			if t.kind == tWord && t.pos == p.stopAt {
				p.stopped = t.pos
			}
			return
		}
		var err *Error
		switch {
		case t.kind == tError:
			err = expected("rule", t)
		case isPunct(t, ";"):
			p.next()
			continue
		case t.kind == tWord && isPunct(p.peekN(1), "="):
			err = p.parseAssign()
		case isWord(t, "set") && p.peekN(1).kind == tWord:
			err = p.parseSet()
		default:
			err = p.parseRuleStmt()
		}
		if err != nil {
			p.addErr(err)
			line := err.Pos.Line
			if p.last.line > line {
				line = p.last.line
			}
			if e := p.peek(); e.kind != tEOF && e.pos == err.Pos {
				line = e.line
			}
			p.sync(line)
		}
	}
}

// parseAssign parses `name = "value" [;]`.
func (p *parser) parseAssign() *Error {
	name := p.next()
	p.next() // =
	v := p.next()
	if v.kind != tWord && v.kind != tString {
		return expected("variable value", v)
	}
	p.lx.vars[name.text] = v.text
	p.assigned = true
	if isPunct(p.peek(), ";") {
		p.next()
	}
	return nil
}

// parseSet parses `set NAME VALUE ;`.
func (p *parser) parseSet() *Error {
	kw := p.next()
	name := p.next()
	v := p.next()
	if v.kind != tWord {
		return expected("setting value", v)
	}
	if _, err := parseUint(v.text, 32); err != nil && !strings.EqualFold(v.text, "true") && !strings.EqualFold(v.text, "false") {
		return expected("number, true or false", v)
	}
	p.settings = append(p.settings, Setting{Pos: kw.pos, Name: name.text, Value: v.text})
	if isPunct(p.peek(), ";") {
		p.next()
	}
	return nil
}

// builder accumulates one rule and its LIST sites.
type builder struct {
	r     *Rule
	sites []site
	// explicitFamily is set when the rule said family/inet/inet6.
	explicitFamily bool
}

// site is one LIST in a rule: n alternatives and how to apply one.
type site struct {
	n   int
	set func(r *Rule, i int)
}

// list records a LIST and applies its first element to the base rule, so
// that later parsing sees it as context (a proto for a port name, ...).
func (b *builder) list(n int, set func(r *Rule, i int)) {
	b.sites = append(b.sites, site{n: n, set: set})
	set(b.r, 0)
}

func (p *parser) parseRuleStmt() *Error {
	first := p.peek()
	b := &builder{r: p.newRule()}
	b.r.Pos = first.pos
	r := b.r
	switch {
	case p.opts.Inet6:
		r.Family = FamilyInet6
	case p.opts.Inet4:
		r.Family = FamilyInet
	}
	if isPunct(p.peek(), "@") {
		p.next()
		n, err := p.number("rule number", 32)
		if err != nil {
			return err
		}
		r.HasInsertAt, r.InsertAt = true, n
	}
	if t := p.peek(); t.kind == tWord && isDigit(t.text) {
		if err := p.numberTo(&r.Collection, "collection number"); err != nil {
			return err
		}
	}
	if err := p.parseAction(r); err != nil {
		return err
	}
	switch t := p.next(); {
	case isWord(t, "in"):
		r.Dir = DirIn
	case isWord(t, "out"):
		r.Dir = DirOut
	default:
		return expected("in or out", t)
	}
	if err := p.parseOpts(b); err != nil {
		return err
	}
	if err := p.parseRuleMain(b); err != nil {
		return err
	}
	if err := p.parseTail(b); err != nil {
		return err
	}
	// The rule must end here: at a `;`, the end of the line or the file.
	end := p.peek()
	switch {
	case isPunct(end, ";"):
		p.next()
	case end.kind == tEOF || end.line > p.last.line:
	default:
		return expected("end of rule", end)
	}

	total := 1
	for _, s := range b.sites {
		total *= s.n
		if total > maxExpansion {
			return errorf(first, "lists expand to more than %d rules", maxExpansion)
		}
	}
	for idx := 0; idx < total; idx++ {
		c := r
		if len(b.sites) > 0 {
			c = r.Clone()
			rem := idx
			for _, s := range b.sites {
				s.set(c, rem%s.n)
				rem /= s.n
			}
		}
		if err := p.finish(b, c, first); err != nil {
			return err
		}
		p.rules = append(p.rules, c)
	}
	return nil
}

// v6Before reports whether the rule parsed so far is an IPv6 one: its
// family (inet6, or -6) or an IPv6 address in from/to.
func (r *Rule) v6Before() bool {
	if r.Family == FamilyInet6 {
		return true
	}
	for _, ep := range []*Endpoint{&r.From, &r.To} {
		if ep.Addr.Kind == AddrHost && ep.Addr.IP.IsValid() && !ep.Addr.IP.Is4() {
			return true
		}
		if ep.Addr.Family == FamilyInet6 {
			return true
		}
	}
	return false
}

// finish applies the parse-time normalisations of IPFilter's grammar to
// one expanded rule.
func (p *parser) finish(b *builder, r *Rule, first token) *Error {
	fam := Family(0)
	note := func(a netip.Addr) *Error {
		if !a.IsValid() {
			return nil
		}
		f := FamilyInet
		if !a.Is4() {
			f = FamilyInet6
		}
		if fam != 0 && fam != f {
			return errorf(first, "rule mixes IPv4 and IPv6 addresses")
		}
		fam = f
		return nil
	}
	hint := Family(0)
	for _, ep := range []*Endpoint{&r.From, &r.To} {
		switch {
		case ep.Addr.Kind == AddrHost:
			if err := note(ep.Addr.IP); err != nil {
				return err
			}
		case ep.Addr.Kind == AddrAny && ep.Addr.Family == FamilyInet:
			if err := note(netip.IPv4Unspecified()); err != nil {
				return err
			}
		case ep.Addr.Family != FamilyAny:
			hint = ep.Addr.Family
		}
	}
	for _, rt := range []*RouteTarget{r.RouteTo, r.DupTo, r.ReplyTo} {
		if rt != nil {
			if err := note(rt.NextHop); err != nil {
				return err
			}
		}
	}
	if fam != 0 {
		if (b.explicitFamily || p.opts.Inet6 || p.opts.Inet4) && r.Family != fam {
			return errorf(first, "address family does not match the rule's family")
		}
		r.Family = fam
	}
	if r.Family == FamilyAny && hint != FamilyAny {
		r.Family = hint
	}
	if r.Family == FamilyAny && r.HasICMPType {
		if r.HasProto && r.Proto == 58 {
			r.Family = FamilyInet6
		} else {
			r.Family = FamilyInet
		}
	}
	if r.Family == FamilyAny && (r.OptMask != 0 || r.SecMask != 0) {
		r.Family = FamilyInet
	}
	if k := r.KeepState; k != nil && (k.Strict || k.Loose || k.NewISN) && (r.HasProto && r.Proto != 6 || r.TCPUDP) {
		// ipf_y.y takes strict, loose and newisn in a proto tcp rule
		// only (without a protocol its ipf crashes)
		return errorf(first, "keep state (strict, loose, newisn) needs proto tcp")
	}
	if r.KeepState != nil && r.KeepState.MaxPerSrc != 0 && r.KeepState.MaxPerSrcBits == 0 {
		// IPFilter's default is the full length of the rule's family,
		// 128 bits unless the rule is inet.
		r.KeepState.MaxPerSrcBits = 128
		if r.Family == FamilyInet {
			r.KeepState.MaxPerSrcBits = 32
		}
	}
	return nil
}

// fillGroups copies family and protocol from each group's head into the
// members that have none (IPFilter's fillgroup, as each rule is parsed):
// the first earlier rule with `head G` counts, and only when both rules
// are ordinary ipf rules. It runs once over the file's rules, in order,
// so that a file parsed in pieces fills as one parsed whole (and a
// million members find their head without a scan each).
func fillGroups(rules []*Rule) {
	var heads map[string]*Rule
	for _, r := range rules {
		if r.Group != "" {
			if h := heads[r.Group]; h != nil {
				fillGroup(h, r)
			}
		}
		if r.Head != "" {
			if heads == nil {
				heads = map[string]*Rule{}
			}
			if heads[r.Head] == nil {
				heads[r.Head] = r
			}
		}
	}
}

// fillGroup fills member r from its group's head h.
func fillGroup(h, r *Rule) {
	if !h.isIPFType() || !r.isIPFType() {
		return
	}
	if r.Family == FamilyAny && h.Family != FamilyAny {
		r.Family = h.Family
	}
	if !r.HasProto && !r.TCPUDP {
		if h.HasProto {
			r.HasProto, r.Proto = true, h.Proto
		} else if h.TCPUDP {
			r.TCPUDP = true
		}
	}
}

// isIPFType reports whether the rule has any packet test of the classic
// kind (IPFilter's FR_T_IPF, as opposed to a bare `all`, exp or bpf).
func (r *Rule) isIPFType() bool {
	return !r.TestsNothing() && r.Expr == nil && r.BPF == ""
}

// TestsNothing reports whether the rule prints as `all`: it has no IP
// part (IPFilter's FR_T_NONE), so not even its family is compared.
func (r *Rule) TestsNothing() bool {
	return !r.HasFromTo && !r.HasProto && !r.TCPUDP && !r.HasTos && !r.HasTTL &&
		!r.HasFlags && !r.HasICMPType && r.With == 0 && r.WithMask == 0 &&
		r.OptMask == 0 && r.OptBits == 0 && r.SecMask == 0 && r.SecBits == 0 &&
		r.V6HdrsMask == 0 && r.Expr == nil && r.BPF == ""
}

// Clone returns a deep copy of the rule.
func (r *Rule) Clone() *Rule {
	c := *r
	c.On = append([]string(nil), r.On...)
	c.Via = append([]string(nil), r.Via...)
	if r.On == nil {
		c.On = nil
	}
	if r.Via == nil {
		c.Via = nil
	}
	for _, pp := range []**RouteTarget{&c.RouteTo, &c.DupTo, &c.ReplyTo} {
		if *pp != nil {
			v := **pp
			*pp = &v
		}
	}
	if r.KeepState != nil {
		k := *r.KeepState
		c.KeepState = &k
	}
	if r.Expr != nil {
		c.Expr = make([]ExprClause, len(r.Expr))
		for i, e := range r.Expr {
			e.Values = append([]ExprValue(nil), e.Values...)
			c.Expr[i] = e
		}
	}
	if r.From.Addr.Inline != nil {
		c.From.Addr.Inline = append([]PoolEntry(nil), r.From.Addr.Inline...)
	}
	if r.To.Addr.Inline != nil {
		c.To.Addr.Inline = append([]PoolEntry(nil), r.To.Addr.Inline...)
	}
	return &c
}

func isDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

// parseUint parses a decimal or 0x-hex number that fits in bits.
func parseUint(s string, bits int) (uint64, error) {
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		return strconv.ParseUint(s[2:], 16, bits)
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseUint(s, 10, bits)
}

// number reads a word holding a number of at most bits bits.
func (p *parser) number(what string, bits int) (uint32, *Error) {
	t := p.peek()
	if t.kind != tWord {
		return 0, expected(what, t)
	}
	v, err := parseUint(t.text, bits)
	if err != nil {
		return 0, expected(what, t)
	}
	p.next()
	return uint32(v), nil
}

// numberTo reads a 32-bit number into *dst.
func (p *parser) numberTo(dst *uint32, what string) *Error {
	n, err := p.number(what, 32)
	if err == nil {
		*dst = n
	}
	return err
}

func (p *parser) expectPunct(s string) *Error {
	t := p.peek()
	if !isPunct(t, s) {
		return expected(fmt.Sprintf("%q", s), t)
	}
	p.next()
	return nil
}

func (p *parser) word(what string) (token, *Error) {
	t := p.peek()
	if t.kind != tWord {
		return t, expected(what, t)
	}
	return p.next(), nil
}

func (p *parser) parseAction(r *Rule) *Error {
	t := p.next()
	switch strings.ToLower(t.text) {
	case "pass":
		r.Action = ActionPass
		return p.parseReturn(r) // HP accepts `pass return-rst ...`
	case "block":
		r.Action = ActionBlock
		return p.parseReturn(r)
	case "auth":
		r.Action = ActionAuth
		return p.parseReturn(r)
	case "log":
		r.Action, r.HasLog = ActionLog, true
		return p.parseLogOpts(r)
	case "count":
		r.Action = ActionCount
	case "nomatch":
		r.Action = ActionNomatch
	case "preauth":
		r.Action = ActionPreauth
	case "call":
		r.Action = ActionCall
		if isWord(p.peek(), "now") {
			p.next()
			r.Call.Now = true
		}
		f, err := p.word("function name")
		if err != nil {
			return err
		}
		r.Call.Func = strings.ToLower(f.text)
		if err := p.expectPunct("/"); err != nil {
			return err
		}
		if err := p.numberTo(&r.Call.Arg, "function argument"); err != nil {
			return err
		}
	case "skip":
		r.Action = ActionSkip
		if err := p.numberTo(&r.Skip, "number of rules to skip"); err != nil {
			return err
		}
	case "decapsulate":
		r.Action = ActionDecapsulate
		if isWord(p.peek(), "l5-as") {
			p.next()
			if err := p.expectPunct("("); err != nil {
				return err
			}
			n, err := p.word("name")
			if err != nil {
				return err
			}
			r.DecapL5As = n.text
			if err := p.expectPunct(")"); err != nil {
				return err
			}
		}
	default:
		if t.kind != tWord {
			return expected("action", t)
		}
		return expected("action (pass, block, log, count, ...)", t)
	}
	return nil
}

func (p *parser) parseReturn(r *Rule) *Error {
	t := p.peek()
	switch {
	case isWord(t, "return-rst"):
		p.next()
		r.Return = ReturnRST
		return nil
	case isWord(t, "return-icmp"):
		r.Return = ReturnICMP
	case isWord(t, "return-icmp-as-dest"):
		r.Return = ReturnICMPAsDest
	default:
		return nil
	}
	p.next()
	if !isPunct(p.peek(), "(") {
		return nil
	}
	p.next()
	c, err := p.word("ICMP code")
	if err != nil {
		return err
	}
	if v, e := parseUint(c.text, 8); e == nil {
		r.ICMPCode = uint8(v)
	} else if v, ok := lookupICMPCode(c.text); ok {
		r.ICMPCode = v
	} else {
		return expected("ICMP code", c)
	}
	return p.expectPunct(")")
}

func (p *parser) parseLogOpts(r *Rule) *Error {
	for {
		t := p.peek()
		switch {
		case isWord(t, "body"):
			r.Log.Body = true
		case isWord(t, "first"):
			r.Log.First = true
		case isWord(t, "or-block"):
			r.Log.OrBlock = true
		case isWord(t, "level"):
			p.next()
			lv, err := p.word("log level")
			if err != nil {
				return err
			}
			fac, pri, ok := strings.Cut(lv.text, ".")
			if !ok {
				fac, pri = "local0", lv.text
			}
			f, ok := facilities[strings.ToLower(fac)]
			if !ok {
				return expected("syslog facility", lv)
			}
			pr, ok := lookupPriority(pri)
			if !ok {
				return expected("syslog priority", lv)
			}
			r.Log.HasLevel, r.Log.Facility, r.Log.Priority = true, f, pr
			continue
		case isWord(t, "limit"):
			p.next()
			r.Log.Limit = true
			if isWord(p.peek(), "freq") {
				p.next()
				if err := p.numberTo(&r.Log.LimitFreq, "log frequency"); err != nil {
					return err
				}
			}
			continue
		default:
			return nil
		}
		p.next()
	}
}

// routeKeywords are the words that may follow `to IF[:ip]` when `to` is
// the routing option and not the start of a from/to clause.
var routeKeywords = map[string]bool{
	"from": true, "all": true, "proto": true, "tos": true, "ttl": true, "inet": true,
	"inet6": true, "family": true, "dup-to": true, "reply-to": true, "to": true,
	"route-to": true, "fastroute": true, "on": true, "quick": true, "log": true,
	"exp": true, "bpf-v4": true, "bpf-v6": true, "in-via": true, "out-via": true,
}

func (p *parser) parseOpts(b *builder) *Error {
	r := b.r
	// IPFilter's grammar takes one via, right after the on clause
	// (`on nic0 quick out-via nic1` and a second via are syntax errors).
	afterOn := false
	for {
		t := p.peek()
		if t.kind != tWord {
			return nil
		}
		kw := strings.ToLower(t.text)
		wasOn := afterOn
		afterOn = kw == "on"
		switch kw {
		case "log":
			p.next()
			r.HasLog = true
			if err := p.parseLogOpts(r); err != nil {
				return err
			}
		case "quick":
			p.next()
			r.Quick = true
		case "on":
			p.next()
			if err := p.parseOn(b); err != nil {
				return err
			}
		case "in-via", "out-via":
			if len(r.On) == 0 {
				// IPFilter's grammar takes a via only after on.
				return expected("on before "+strings.ToLower(t.text), t)
			}
			if !wasOn {
				return expected("in-via or out-via right after the on clause, once", t)
			}
			p.next()
			names, err := p.ifPair()
			if err != nil {
				return err
			}
			r.Via = names
		case "dup-to", "reply-to", "route-to":
			p.next()
			d, err := p.parseDest()
			if err != nil {
				return err
			}
			switch strings.ToLower(t.text) {
			case "dup-to":
				r.DupTo = d
			case "reply-to":
				r.ReplyTo = d
			default:
				r.RouteTo = d
			}
		case "to":
			n1, n2 := p.peekN(1), p.peekN(2)
			marked := isPunct(n2, "(") && isPunct(p.peekN(3), "!")
			if !(isWord(n1, "dstlist") || (n1.kind == tWord && (marked || n2.kind == tWord && routeKeywords[strings.ToLower(n2.text)]))) {
				return nil // a from/to clause
			}
			p.next()
			d, err := p.parseDest()
			if err != nil {
				return err
			}
			r.RouteTo = d
		case "fastroute":
			p.next()
			r.FastRoute = true
		default:
			return nil
		}
	}
}

// ifPair reads IF[,IF2].
func (p *parser) ifPair() ([]string, *Error) {
	a, err := p.ifName()
	if err != nil {
		return nil, err
	}
	names := []string{a.text}
	if isPunct(p.peek(), ",") {
		p.next()
		c, err := p.ifName()
		if err != nil {
			return nil, err
		}
		names = append(names, c.text)
	}
	return names, nil
}

// ifName reads an interface name, skipping the `(!)` that ipf -v and
// ipfstat print after unresolved names, so their output parses again.
func (p *parser) ifName() (token, *Error) {
	t, err := p.word("interface name")
	if err != nil {
		return t, err
	}
	if err := checkIfName(t, t.text); err != nil {
		return t, err
	}
	p.skipUnresolvedMark()
	return t, nil
}

// ifNameMax is the kernel's IFNAMSIZ-1: a longer name can never match an
// interface, so it is an error rather than a rule that never fires.
const ifNameMax = 15

func checkIfName(t token, name string) *Error {
	// IPFilter's lexer reads a name of digits as a number, which no
	// interface rule takes (and `from 0` could then name either)
	if name != "" && strings.Trim(name, "0123456789") == "" {
		return expected("interface name", t)
	}
	if len(name) > ifNameMax {
		return errorf(t, "interface name %q is longer than %d characters (IFNAMSIZ)", name, ifNameMax)
	}
	return nil
}

func (p *parser) skipUnresolvedMark() {
	if isPunct(p.peek(), "(") && isPunct(p.peekN(1), "!") && isPunct(p.peekN(2), ")") {
		p.next()
		p.next()
		p.next()
	}
}

func (p *parser) parseOn(b *builder) *Error {
	t := p.peek()
	if isPunct(t, "{") || isPunct(t, "(") {
		items, err := p.listOfWords("interface name")
		if err != nil {
			return err
		}
		names := make([]string, len(items))
		for i, it := range items {
			if err := checkIfName(it, it.text); err != nil {
				return err
			}
			names[i] = p.physical(it)
		}
		b.list(len(names), func(r *Rule, i int) { r.On = []string{names[i]} })
		return nil
	}
	t0 := p.peek()
	names, err := p.ifPair()
	if err != nil {
		return err
	}
	for i, n := range names {
		names[i] = p.physical(token{kind: tWord, text: n, pos: t0.pos})
	}
	b.r.On = names
	return nil
}

// physical is the interface an `on` name stands for: IPFilter takes a
// Solaris logical interface (`nic0:1`) as its physical one and warns
// ("Logical interface nic0:1 unsupported, use the physical interface
// nic0 instead."), so a packet on nic0 matches the rule.
func (p *parser) physical(t token) string {
	name, unit, ok := strings.Cut(t.text, ":")
	if !ok || name == "" || unit == "" || strings.Trim(unit, "0123456789") != "" {
		return t.text
	}
	p.warns = append(p.warns, Warning{Pos: t.pos, Msg: "Logical interface " + t.text +
		" unsupported, use the physical interface " + name + " instead."})
	return name
}

// listOfWords reads `{ w [,] w ... }` or the 4.1 `( w, w )`.
func (p *parser) listOfWords(what string) ([]token, *Error) {
	var items []token
	err := p.braceList(func(t token) *Error {
		if t.kind != tWord {
			return expected(what, t)
		}
		items = append(items, p.next())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// braceList reads `{ x [,] x ... }` or the 4.1 `( x, x )`.
func (p *parser) braceList(item func(t token) *Error) *Error {
	closeP := "}"
	if p.next().text == "(" {
		closeP = ")"
	}
	return p.listUntil(closeP, item)
}

// listUntil reads a non-empty `x [,] x ... closeP`, calling item with the
// first token of each x, still unread.
func (p *parser) listUntil(closeP string, item func(t token) *Error) *Error {
	for first := true; ; first = false {
		t := p.peek()
		if isPunct(t, closeP) && !first {
			p.next()
			return nil
		}
		if isPunct(t, ",") && !first {
			p.next()
			t = p.peek()
		}
		if err := item(t); err != nil {
			return err
		}
	}
}

// wordOrList reads WORD or a list of words.
func (p *parser) wordOrList(what string) ([]token, *Error) {
	t := p.peek()
	if isPunct(t, "{") || isPunct(t, "(") {
		return p.listOfWords(what)
	}
	w, err := p.word(what)
	if err != nil {
		return nil, err
	}
	return []token{w}, nil
}

// parseDest reads IF[:ADDR] or dstlist/NAME.
func (p *parser) parseDest() (*RouteTarget, *Error) {
	t, err := p.word("interface name")
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(t.text, "dstlist") && isPunct(p.peek(), "/") {
		p.next()
		n, err := p.word("dstlist name")
		if err != nil {
			return nil, err
		}
		return &RouteTarget{DstList: n.text}, nil
	}
	p.skipUnresolvedMark()
	name, addr, ok := strings.Cut(t.text, ":")
	d := &RouteTarget{Iface: name}
	if ok {
		a, err := p.hostAddr(addr, t)
		if err != nil {
			return nil, err
		}
		d.NextHop = a
	}
	if d.Iface == "" {
		return nil, expected("interface name", t)
	}
	if err := checkIfName(t, d.Iface); err != nil {
		return nil, err
	}
	return d, nil
}

// hostAddr resolves an address or host name from the embedded tables.
func (p *parser) hostAddr(s string, t token) (netip.Addr, *Error) {
	if a, ok := parseIPv4(s); ok {
		return a, nil
	}
	if strings.Contains(s, ":") {
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			return a.Unmap(), nil
		}
		return netip.Addr{}, errorf(t, "invalid IPv6 address %q", s)
	}
	if a, ok := p.lookupHost(s); ok {
		return a, nil
	}
	return netip.Addr{}, errorf(t, "unknown host %q", s)
}

func (p *parser) lookupHost(s string) (netip.Addr, bool) {
	if a, ok := p.opts.Hosts[s]; ok {
		return a, true
	}
	n := strings.ToLower(s)
	if p.opts.Inet6 {
		if a, ok := hosts6[n]; ok {
			return a, true
		}
	}
	a, ok := hosts4[n]
	return a, ok
}

// parseIPv4 parses IPFilter's IPv4 forms: a.b.c.d, the short a.b.c and
// a.b (missing octets are zero on the right), and a bare decimal or hex
// number (a 32-bit address).
func parseIPv4(s string) (netip.Addr, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return netip.Addr{}, false
	}
	if !strings.Contains(s, ".") {
		v, err := parseUint(s, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
	}
	// up to four dot-separated decimal octets (0-255, leading zeros
	// allowed: what strconv.ParseUint(x, 10, 8) takes), read in place
	var b [4]byte
	for i := 0; ; i++ {
		if i == 4 {
			return netip.Addr{}, false
		}
		x, rest, more := strings.Cut(s, ".")
		v, ok := octet(x)
		if !ok {
			return netip.Addr{}, false
		}
		b[i] = v
		if !more {
			break
		}
		s = rest
	}
	return netip.AddrFrom4(b), true
}

// octet parses a decimal number 0-255 (digits only, at least one).
func octet(x string) (byte, bool) {
	if x == "" {
		return 0, false
	}
	v := 0
	for i := 0; i < len(x); i++ {
		c := x[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v = v*10 + int(c-'0'); v > 255 {
			return 0, false
		}
	}
	return byte(v), true
}

// mainRank is the place of a rule's family, tos, ttl and proto in
// IPFilter's grammar (ipf_y.y: ipfrule `family tos ttl proto ip`; an exp
// or bpf rule has none of them): each once, in that order. `ttl 4 tos 3`
// or `proto tcp tos 3` are syntax errors there. A family before exp or
// bpf-v4/v6 is refused there too, but IPFilter prints one (`ipf -6`:
// `pass in inet6 exp {…}`), so Sluice reads it back.
var mainRank = map[string]int{"family": 1, "inet": 1, "inet6": 1, "tos": 2, "ttl": 3, "proto": 4,
	"exp": 5, "bpf-v4": 5, "bpf-v6": 5}

func (p *parser) parseRuleMain(b *builder) *Error {
	r := b.r
	last := 0
	for {
		t := p.peek()
		if rank, ok := mainRank[strings.ToLower(t.text)]; ok && t.kind == tWord {
			if rank <= last || rank == 5 && last > 1 {
				return errorf(t, "%q out of place: IPFilter's grammar takes a rule's family, tos, ttl and proto once each, in that order (an exp or bpf rule no tos, ttl or proto)", t.text)
			}
			last = rank
		}
		switch {
		case isWord(t, "family"):
			p.next()
			f := p.next()
			switch {
			case isWord(f, "inet"):
				r.Family = FamilyInet
			case isWord(f, "inet6"):
				r.Family = FamilyInet6
			default:
				return expected("inet or inet6", f)
			}
			b.explicitFamily = true
		case isWord(t, "inet"):
			p.next()
			r.Family, b.explicitFamily = FamilyInet, true
		case isWord(t, "inet6"):
			p.next()
			r.Family, b.explicitFamily = FamilyInet6, true
		case isWord(t, "tos"), isWord(t, "ttl"):
			p.next()
			vals, err := p.numberOrList(strings.ToLower(t.text)+" value", 8)
			if err != nil {
				return err
			}
			if isWord(t, "tos") {
				b.list(len(vals), func(r *Rule, i int) { r.HasTos, r.Tos = true, uint8(vals[i]) })
			} else {
				b.list(len(vals), func(r *Rule, i int) { r.HasTTL, r.TTL = true, uint8(vals[i]) })
			}
		case isWord(t, "proto"):
			p.next()
			if err := p.parseProto(r); err != nil {
				return err
			}
		case isWord(t, "exp"):
			p.next()
			return p.parseExp(r)
		case isWord(t, "bpf-v4"), isWord(t, "bpf-v6"):
			p.next()
			r.BPFFamily = FamilyInet
			if isWord(t, "bpf-v6") {
				r.BPFFamily = FamilyInet6
			}
			if err := p.expectPunct("{"); err != nil {
				return err
			}
			s := p.next()
			if s.kind != tString {
				return expected("BPF program string", s)
			}
			r.BPF = s.text
			return p.expectPunct("}")
		default:
			return p.parseIP(b)
		}
	}
}

// numberOrList reads NUMBER or LIST(NUMBER).
func (p *parser) numberOrList(what string, bits int) ([]uint64, *Error) {
	items, err := p.wordOrList(what)
	if err != nil {
		return nil, err
	}
	vals := make([]uint64, len(items))
	for i, it := range items {
		v, e := parseUint(it.text, bits)
		if e != nil {
			return nil, expected(what, it)
		}
		vals[i] = v
	}
	return vals, nil
}

func (p *parser) parseProto(r *Rule) *Error {
	t, err := p.word("protocol")
	if err != nil {
		return err
	}
	name := strings.ToLower(t.text)
	if name == "tcp" && isPunct(p.peek(), "/") && isWord(p.peekN(1), "udp") {
		p.next()
		p.next()
		name = "tcp/udp"
	}
	switch name {
	case "tcp/udp", "tcp-udp":
		r.TCPUDP, r.HasProto, r.Proto = true, false, 0
		return nil
	}
	if v, e := parseUint(t.text, 8); e == nil {
		r.HasProto, r.Proto = true, uint8(v)
		return nil
	}
	if v, ok := LookupProto(name); ok {
		r.HasProto, r.Proto = true, v
		return nil
	}
	return errorf(t, "unknown protocol %q", t.text)
}

func (p *parser) parseIP(b *builder) *Error {
	r := b.r
	t := p.peek()
	switch {
	case isWord(t, "all"):
		p.next()
		r.All = true
	case isWord(t, "from"):
		p.next()
		r.HasFromTo = true
		if err := p.parseObj(b, func(r *Rule) *Endpoint { return &r.From }); err != nil {
			return err
		}
		if isWord(p.peek(), "to") {
			p.next()
			if err := p.parseObj(b, func(r *Rule) *Endpoint { return &r.To }); err != nil {
				return err
			}
		}
	case isWord(t, "to"):
		p.next()
		r.HasFromTo = true
		if err := p.parseObj(b, func(r *Rule) *Endpoint { return &r.To }); err != nil {
			return err
		}
	}
	for {
		t := p.peek()
		switch {
		case isWord(t, "flags"):
			// IPFilter's grammar takes flags only on a proto tcp rule.
			switch {
			case r.TestsNothing():
				return errorf(t, "flags with non-ipf type rule")
			case !r.HasProto || r.Proto != 6:
				return errorf(t, "flags with non-TCP rule")
			}
			p.next()
			if err := p.parseFlags(r); err != nil {
				return err
			}
		case isWord(t, "icmp-type"):
			// icmp-type needs the family's ICMP as the protocol, or no
			// protocol after `all` (IPFilter's listing then drops the
			// test, which the rule still makes: ruleset TestICMP);
			// after from/to IPFilter's parser refuses it without one.
			switch v6 := r.familySoFar() == FamilyInet6; {
			case v6 && (r.TCPUDP || r.HasProto && r.Proto != 58 || !r.HasProto && !r.All):
				return errorf(t, "proto not ipv6-icmp")
			case !v6 && (r.TCPUDP || r.HasProto && r.Proto != 1 || !r.HasProto && !r.All):
				return errorf(t, "proto not icmp")
			}
			p.next()
			if err := p.parseICMP(b); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// familySoFar is the rule's family as IPFilter's parser knows it while
// it reads the rule: the one written (or -6), else that of an address
// already read.
func (r *Rule) familySoFar() Family {
	if r.Family != FamilyAny {
		return r.Family
	}
	for _, a := range []*Addr{&r.From.Addr, &r.To.Addr} {
		if a.Kind == AddrHost && a.IP.IsValid() {
			if a.IP.Is4() {
				return FamilyInet
			}
			return FamilyInet6
		}
	}
	return FamilyAny
}

// parseObj reads [!] (addr | LIST(addr)) [port] | port.
func (p *parser) parseObj(b *builder, sel func(*Rule) *Endpoint) *Error {
	if isPunct(p.peek(), "!") {
		p.next()
		sel(b.r).Not = true
	}
	t := p.peek()
	if isWord(t, "port") {
		return p.parsePort(b, sel)
	}
	if isPunct(t, "{") || (isPunct(t, "(") && p.parenIsList()) {
		addrs, err := p.addrList(b.r)
		if err != nil {
			return err
		}
		b.list(len(addrs), func(r *Rule, i int) { sel(r).Addr = addrs[i] })
	} else {
		a, err := p.parseAddr(b.r)
		if err != nil {
			return err
		}
		sel(b.r).Addr = a
	}
	if isWord(p.peek(), "port") {
		return p.parsePort(b, sel)
	}
	return nil
}

// parenIsList tells the 4.1 address LIST `(a,b)` from the dynamic
// interface address `(IF)`.
func (p *parser) parenIsList() bool {
	t1, t2 := p.peekN(1), p.peekN(2)
	if isPunct(t2, ",") {
		return true
	}
	if t1.kind == tWord && isPunct(t2, ")") {
		_, ok := parseIPv4(t1.text)
		return ok || strings.Count(t1.text, ":") > 1
	}
	return false
}

func (p *parser) addrList(r *Rule) ([]Addr, *Error) {
	var addrs []Addr
	err := p.braceList(func(token) *Error {
		a, err := p.parseAddr(r)
		if err != nil {
			return err
		}
		addrs = append(addrs, a)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return addrs, nil
}

var ifMasks = map[string]IfaceAddrMode{
	"broadcast": IfaceBroadcast, "bcast": IfaceBroadcast, "network": IfaceNetwork,
	"net": IfaceNetwork, "netmasked": IfaceNetmasked, "peer": IfacePeer,
}

// parseAddr reads one address (see the grammar's addr production). r is
// the rule for context (its `on` names), nil inside lists.
func (p *parser) parseAddr(r *Rule) (Addr, *Error) {
	t := p.peek()
	switch {
	case isWord(t, "any"):
		p.next()
		return Addr{Kind: AddrAny}, nil
	case isWord(t, "pool") || isWord(t, "hash"):
		n1 := p.peekN(1)
		if isPunct(n1, "/") || isPunct(n1, "=") {
			return p.parseTableRef()
		}
	case isPunct(t, "("):
		return p.parseDynamic()
	}
	if t.kind != tWord {
		return Addr{}, expected("address", t)
	}
	p.next()
	// A name that is one of the rule's interfaces means that
	// interface's address (IPFilter's lookuphost), before any host name.
	if r != nil && (contains(r.On, t.text) || contains(r.Via, t.text)) && !isPunct(p.peek(), "/") {
		bits := uint8(32)
		if r.Family == FamilyInet6 {
			bits = 128
		}
		return Addr{Kind: AddrIface, Iface: t.text, IfaceMode: IfaceDynamic, IfaceBits: bits}, nil
	}
	// IF/ifmask and IF/BITS for interfaces.
	if isPunct(p.peek(), "/") {
		m := p.peekN(1)
		if mode, ok := ifMasks[strings.ToLower(m.text)]; ok && m.kind == tWord {
			if _, isIP := parseIPv4(t.text); !isIP {
				p.next()
				p.next()
				return Addr{Kind: AddrIface, Iface: t.text, IfaceMode: mode, Family: FamilyInet}, nil
			}
		}
	}
	ip, err := p.hostAddr(t.text, t)
	if r != nil && (contains(r.On, t.text) || contains(r.Via, t.text)) {
		err = errorf(t, "%s is an interface", t.text)
	}
	if err != nil {
		// An unresolvable name with /BITS is the IF/BITS form of a
		// dynamic interface address (how printfr shows `(IF)/BITS`).
		onName := r != nil && (contains(r.On, t.text) || contains(r.Via, t.text))
		if _, isIP := parseIPv4(t.text); (onName || !isIP && !strings.Contains(t.text, ":")) && isPunct(p.peek(), "/") {
			m := p.peekN(1)
			if v, e := strconv.ParseUint(m.text, 10, 8); e == nil && m.kind == tWord && v <= 128 {
				p.next()
				p.next()
				return Addr{Kind: AddrIface, Iface: t.text, IfaceMode: IfaceDynamic, IfaceBits: uint8(v), Family: FamilyInet}, nil
			}
		}
		return Addr{}, err
	}
	mask, merr := p.parseMask(ip)
	if merr != nil {
		return Addr{}, merr
	}
	if mask.Is4() && MaskBits(mask) < 0 {
		// IPFilter keeps only contiguous IPv4 masks: a rule written
		// with 255.0.255.0 loads (and prints, and matches) as `any`.
		return Addr{Kind: AddrAny, Family: FamilyInet}, nil
	}
	return Addr{Kind: AddrHost, IP: andMask(ip, mask), Mask: mask}, nil
}

// parseMask reads an optional /BITS, /A.B.C.D, /0xHEX, /V6MASK or
// mask A.B.C.D|HEX; with none it returns the full-length mask.
func (p *parser) parseMask(ip netip.Addr) (netip.Addr, *Error) {
	bitsLen := ip.BitLen()
	t := p.peek()
	var m token
	switch {
	case isPunct(t, "/"):
		p.next()
		w, err := p.word("mask")
		if err != nil {
			return netip.Addr{}, err
		}
		m = w
		if !strings.Contains(m.text, ".") && !strings.Contains(m.text, ":") && !strings.HasPrefix(strings.ToLower(m.text), "0x") {
			v, e := strconv.ParseUint(m.text, 10, 8)
			if e != nil || int(v) > bitsLen {
				return netip.Addr{}, expected(fmt.Sprintf("prefix length 0-%d", bitsLen), m)
			}
			return prefixMask(bitsLen, int(v)), nil
		}
	case isWord(t, "mask"):
		p.next()
		w, err := p.word("mask")
		if err != nil {
			return netip.Addr{}, err
		}
		m = w
	default:
		return prefixMask(bitsLen, bitsLen), nil
	}
	if strings.Contains(m.text, ":") {
		a, err := netip.ParseAddr(m.text)
		if err != nil || !a.Is6() || bitsLen != 128 {
			return netip.Addr{}, expected("mask", m)
		}
		return a, nil
	}
	if bitsLen != 32 {
		return netip.Addr{}, expected("IPv6 prefix length", m)
	}
	if strings.HasPrefix(strings.ToLower(m.text), "0x") {
		v, err := parseUint(m.text, 32)
		if err != nil {
			return netip.Addr{}, expected("mask", m)
		}
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
	}
	a, err := netip.ParseAddr(m.text)
	if err != nil || !a.Is4() {
		return netip.Addr{}, expected("mask", m)
	}
	return a, nil
}

// prefixMask returns the mask of n leading ones in an address of bitsLen bits.
func prefixMask(bitsLen, n int) netip.Addr {
	if bitsLen == 32 {
		return masks4[n]
	}
	return makeMask(bitsLen, n)
}

// masks4 are the IPv4 prefix masks by length (every rule has one).
var masks4 = func() (m [33]netip.Addr) {
	for n := range m {
		m[n] = makeMask(32, n)
	}
	return m
}()

func makeMask(bitsLen, n int) netip.Addr {
	var b [16]byte
	for i := 0; i < n; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	if bitsLen == 32 {
		return netip.AddrFrom4([4]byte{b[0], b[1], b[2], b[3]})
	}
	return netip.AddrFrom16(b)
}

func andMask(ip, mask netip.Addr) netip.Addr {
	if ip.Is4() && mask.Is4() {
		a, m := ip.As4(), mask.As4()
		for i := range a {
			a[i] &= m[i]
		}
		return netip.AddrFrom4(a)
	}
	a, m := ip.As16(), mask.As16()
	for i := range a {
		a[i] &= m[i]
	}
	return netip.AddrFrom16(a)
}

// MaskBits returns the prefix length of a contiguous mask, or -1.
func MaskBits(mask netip.Addr) int {
	b := mask.AsSlice()
	n, zero := 0, false
	for _, x := range b {
		for i := 7; i >= 0; i-- {
			if x&(1<<i) != 0 {
				if zero {
					return -1
				}
				n++
			} else {
				zero = true
			}
		}
	}
	return n
}

// parseTableRef reads pool/N, hash/NAME, pool=(...) or hash=(...).
func (p *parser) parseTableRef() (Addr, *Error) {
	kw := p.next()
	a := Addr{Kind: AddrPool}
	if isWord(kw, "hash") {
		a.Kind = AddrHash
	}
	if isPunct(p.next(), "/") {
		n, err := p.word("table number or name")
		if err != nil {
			return Addr{}, err
		}
		a.Table = n.text
		return a, nil
	}
	if err := p.expectPunct("("); err != nil {
		return Addr{}, err
	}
	a.Inline = []PoolEntry{}
	for {
		t := p.peek()
		if isPunct(t, ")") && len(a.Inline) > 0 {
			p.next()
			return a, nil
		}
		if isPunct(t, ",") && len(a.Inline) > 0 {
			p.next()
		}
		var e PoolEntry
		if isPunct(p.peek(), "!") {
			p.next()
			e.Negate = true
		}
		w, err := p.word("address")
		if err != nil {
			return Addr{}, err
		}
		ip, err := p.hostAddr(w.text, w)
		if err != nil {
			return Addr{}, err
		}
		m, err := p.parseMask(ip)
		if err != nil {
			return Addr{}, err
		}
		e.IP, e.Mask = andMask(ip, m), m
		a.Inline = append(a.Inline, e)
	}
}

// parseDynamic reads (IF[:N])[/BITS|/ifmask].
func (p *parser) parseDynamic() (Addr, *Error) {
	p.next() // (
	w, err := p.word("interface name")
	if err != nil {
		return Addr{}, err
	}
	a := Addr{Kind: AddrIface, IfaceMode: IfaceDynamic, IfaceBits: 32}
	name, idx, ok := strings.Cut(w.text, ":")
	a.Iface = name
	if ok {
		v, e := strconv.ParseUint(idx, 10, 16)
		if e != nil {
			return Addr{}, expected("interface address number", w)
		}
		a.IfaceIndex = uint16(v)
	}
	if err := p.expectPunct(")"); err != nil {
		return Addr{}, err
	}
	if isPunct(p.peek(), "/") {
		p.next()
		m, err := p.word("mask")
		if err != nil {
			return Addr{}, err
		}
		a.Family = FamilyInet
		if mode, ok := ifMasks[strings.ToLower(m.text)]; ok {
			a.IfaceMode = mode
		} else if v, e := strconv.ParseUint(m.text, 10, 8); e == nil && v <= 128 {
			a.IfaceBits = uint8(v)
		} else {
			return Addr{}, expected("prefix length or broadcast/network/netmasked/peer", m)
		}
	}
	if p.opts.Inet6 && a.IfaceMode == IfaceDynamic && a.IfaceBits == 32 {
		a.IfaceBits = 128
	}
	return a, nil
}

var portOps = map[string]PortOp{
	"=": PortEq, "eq": PortEq, "!=": PortNe, "ne": PortNe, "<": PortLt, "lt": PortLt,
	">": PortGt, "gt": PortGt, "<=": PortLe, "le": PortLe, ">=": PortGe, "ge": PortGe,
}

// parsePort reads `port` and its comparison or range.
func (p *parser) parsePort(b *builder, sel func(*Rule) *Endpoint) *Error {
	p.next() // port
	r := b.r
	t := p.peek()
	if _, op := portOps[strings.ToLower(t.text)]; op && (t.kind == tPunct || t.kind == tWord) &&
		r.HasProto && !r.TCPUDP && r.Proto != 6 && r.Proto != 17 {
		// ipf_y.y: a port comparison in a rule of another protocol
		// (ranges are taken)
		return errorf(t, "port use incorrect: a port comparison needs proto tcp, udp or tcp/udp")
	}
	if isPunct(t, "=") && (isPunct(p.peekN(1), "{") || isPunct(p.peekN(1), "(")) {
		p.next()
		open := p.next()
		closeP := "}"
		if open.text == "(" {
			closeP = ")"
		}
		var ports []Port
		for {
			t := p.peek()
			if isPunct(t, closeP) && len(ports) > 0 {
				p.next()
				break
			}
			if isPunct(t, ",") && len(ports) > 0 {
				p.next()
			}
			pt, err := p.portSpec(r, true)
			if err != nil {
				return err
			}
			ports = append(ports, pt)
		}
		b.list(len(ports), func(r *Rule, i int) { sel(r).Port = ports[i] })
		return nil
	}
	if op, ok := portOps[strings.ToLower(t.text)]; ok && (t.kind == tPunct || t.kind == tWord) {
		p.next()
		w, err := p.word("port")
		if err != nil {
			return err
		}
		v, err := p.portValue(r, w.text, w)
		if err != nil {
			return err
		}
		sel(r).Port = Port{Op: op, Lo: v}
		return nil
	}
	pt, err := p.portSpec(r, false)
	if err != nil {
		return err
	}
	sel(r).Port = pt
	return nil
}

// portSpec reads PORT (":"|"<>"|"><") PORT, or (inList) also a single PORT.
func (p *parser) portSpec(r *Rule, inList bool) (Port, *Error) {
	w, err := p.word("port")
	if err != nil {
		return Port{}, err
	}
	if lo, hi, ok := strings.Cut(w.text, ":"); ok && lo != "" {
		a, err := p.portValue(r, lo, w)
		if err != nil {
			return Port{}, err
		}
		if hi == "" {
			h, err := p.word("port")
			if err != nil {
				return Port{}, err
			}
			hi = h.text
		}
		c, err := p.portValue(r, hi, w)
		if err != nil {
			return Port{}, err
		}
		return Port{Op: PortRange, Lo: a, Hi: c}, nil
	}
	lo, err := p.portValue(r, w.text, w)
	if err != nil {
		return Port{}, err
	}
	t := p.peek()
	var op PortOp
	switch {
	case isPunct(t, "<>"):
		op = PortOutRange
	case isPunct(t, "><"):
		op = PortInRange
	case t.kind == tWord && strings.HasPrefix(t.text, ":"):
		op = PortRange
	default:
		if inList {
			return Port{Op: PortEq, Lo: lo}, nil
		}
		return Port{}, expected("port comparison or range", t)
	}
	p.next()
	var hw token
	if op == PortRange && t.text != ":" {
		hw = t
		hw.text = t.text[1:]
	} else {
		hw, err = p.word("port")
		if err != nil {
			return Port{}, err
		}
	}
	hi, err := p.portValue(r, hw.text, hw)
	if err != nil {
		return Port{}, err
	}
	return Port{Op: op, Lo: lo, Hi: hi}, nil
}

func (p *parser) portValue(r *Rule, s string, t token) (uint16, *Error) {
	if isDigit(s) {
		v, err := parseUint(s, 16)
		if err != nil {
			return 0, expected("port number 0-65535", t)
		}
		return uint16(v), nil
	}
	if v, ok := lookupService(s, r.Proto, r.HasProto, r.TCPUDP); ok {
		return v, nil
	}
	return 0, errorf(t, "unknown service %q", s)
}

// parseFlagSet reads FLAGSET or a number.
func parseFlagSet(s string) (uint8, bool) {
	if isDigit(s) {
		v, err := parseUint(s, 8)
		return uint8(v), err == nil
	}
	var v uint8
	for _, c := range strings.ToUpper(s) {
		i := strings.IndexRune("FSRPAUEC", c)
		if c == 'W' {
			i = 7
		}
		if i < 0 {
			return 0, false
		}
		v |= 1 << i
	}
	return v, s != ""
}

func (p *parser) parseFlags(r *Rule) *Error {
	r.HasFlags = true
	if isPunct(p.peek(), "/") {
		p.next()
		_, v, err := p.flagSet()
		if err != nil {
			return err
		}
		r.Flags, r.FlagsMask = 0, v
		return nil
	}
	w, v, err := p.flagSet()
	if err != nil {
		return err
	}
	r.Flags, r.FlagsMask = v, TCPFlagsDefaultMask
	if isPunct(p.peek(), "/") {
		p.next()
		m, mv, err := p.flagSet()
		if err != nil {
			return err
		}
		if mv == 0 && v != 0 {
			// (flags & 0) == X never holds, and printfr cannot show it.
			return errorf(m, "flags %s/%s can never match", w.text, m.text)
		}
		r.FlagsMask = mv
	}
	return nil
}

// flagSet reads one set of TCP flag letters.
func (p *parser) flagSet() (token, uint8, *Error) {
	w, err := p.word("TCP flags")
	if err != nil {
		return w, 0, err
	}
	v, ok := parseFlagSet(w.text)
	if !ok {
		return w, 0, expected("TCP flags", w)
	}
	return w, v, nil
}

func (p *parser) parseICMP(b *builder) *Error {
	r := b.r
	v6 := r.Family == FamilyInet6 || (r.HasProto && r.Proto == 58)
	types, err := p.nameOrList("ICMP type", func(s string) (uint8, bool) { return lookupICMPType(s, v6) })
	if err != nil {
		return err
	}
	b.list(len(types), func(r *Rule, i int) { r.HasICMPType, r.ICMPType = true, types[i] })
	if isWord(p.peek(), "code") {
		p.next()
		codes, err := p.nameOrList("ICMP code", lookupICMPCode)
		if err != nil {
			return err
		}
		b.list(len(codes), func(r *Rule, i int) { r.HasICMPCode, r.ICMPCodeMatch = true, codes[i] })
	}
	return nil
}

// nameOrList reads a number or name (via lookup), or a LIST of them.
func (p *parser) nameOrList(what string, lookup func(string) (uint8, bool)) ([]uint8, *Error) {
	items, err := p.wordOrList(what)
	if err != nil {
		return nil, err
	}
	vals := make([]uint8, len(items))
	for i, it := range items {
		if v, err := parseUint(it.text, 8); err == nil {
			vals[i] = uint8(v)
		} else if v, ok := lookup(it.text); ok {
			vals[i] = v
		} else {
			return nil, expected(what, it)
		}
	}
	return vals, nil
}

// withStarts reports whether t can start a `with` item.
func withStarts(t token) bool {
	if t.kind != tWord {
		return false
	}
	n := strings.ToLower(t.text)
	if _, ok := withAttrs[n]; ok {
		return true
	}
	switch n {
	case "not", "no", "opt", "v6hdr":
		return true
	}
	return false
}

func (p *parser) parseWith(r *Rule) *Error {
	for first := true; ; first = false {
		t := p.peek()
		if !first {
			if isPunct(t, ",") {
				p.next()
				t = p.peek()
				if !withStarts(t) {
					return expected("with attribute", t)
				}
			} else if !withStarts(t) {
				return nil
			}
		}
		not := false
		if isWord(t, "not") || isWord(t, "no") {
			p.next()
			not = true
			t = p.peek()
		}
		n := strings.ToLower(t.text)
		switch {
		case t.kind == tWord && n == "opt":
			p.next()
			if err := p.parseOptList(r, not); err != nil {
				return err
			}
		case t.kind == tWord && n == "v6hdr":
			// `v6hdr` takes a list of header names; `v6hdrs` is always
			// the attribute. (`not v6hdr LIST`, which IPFilter's
			// grammar lacks, is kept as a Sluice extension.)
			// IPFilter takes it in an IPv6 rule only: one that says
			// inet6 or has an IPv6 address before it, or under -6
			// (`pass in all with v6hdr frag`: "only available with
			// IPv6").
			if !r.v6Before() {
				return errorf(t, "v6hdr only available with IPv6 (an inet6 rule, an IPv6 address or -6)")
			}
			p.next()
			for {
				w, err := p.word("IPv6 extension header name")
				if err != nil {
					return err
				}
				bit, ok := findBit(v6Hdrs, w.text)
				if !ok {
					return expected("IPv6 extension header name", w)
				}
				r.V6HdrsMask |= bit
				if !not {
					r.V6Hdrs |= bit
				}
				if !(isPunct(p.peek(), ",") && p.isV6HdrName(p.peekN(1))) {
					break
				}
				p.next()
			}
		default:
			bit, ok := withAttrs[n]
			if !ok || t.kind != tWord {
				return expected("with attribute", t)
			}
			p.next()
			// A `not` only adds the bit to the mask: after `short,not
			// short` the rule still wants short, as IPFilter's does.
			r.WithMask |= bit
			if !not {
				r.With |= bit
			}
		}
	}
}

func (p *parser) isV6HdrName(t token) bool {
	_, ok := findBit(v6Hdrs, t.text)
	return ok && t.kind == tWord
}

func isOptName(t token) bool {
	if t.kind != tWord {
		return false
	}
	n := strings.ToLower(t.text)
	_, ok := findBit(ipOptions, n)
	return ok || n == "sec-class"
}

// parseOptList reads optname {"," optname} including sec-class lists.
func (p *parser) parseOptList(r *Rule, not bool) *Error {
	for {
		w, err := p.word("IP option name")
		if err != nil {
			return err
		}
		n := strings.ToLower(w.text)
		if n == "sec-class" {
			for {
				c, err := p.word("security class")
				if err != nil {
					return err
				}
				bit, ok := findBit(secClasses, c.text)
				if !ok {
					return expected("security class", c)
				}
				r.SecMask |= uint8(bit)
				if !not {
					r.SecBits |= uint8(bit)
				}
				nt := p.peekN(1)
				if !(isPunct(p.peek(), ",") && nt.kind == tWord) {
					break
				}
				if _, ok := findBit(secClasses, nt.text); !ok {
					break
				}
				p.next()
			}
			if !not {
				// `not opt sec-class X` tests the classes only: a
				// packet with another class still matches.
				r.OptMask |= OptSEC
				r.OptBits |= OptSEC
			}
		} else {
			bit, ok := findBit(ipOptions, n)
			if !ok {
				return expected("IP option name", w)
			}
			r.OptMask |= bit
			if !not {
				r.OptBits |= bit
			}
			if n == "cipso" && isWord(p.peek(), "doi") {
				p.next()
				if _, err := p.number("CIPSO DOI", 32); err != nil {
					return err
				}
			}
		}
		if isPunct(p.peek(), ",") && isWord(p.peekN(1), "not") {
			// IPFilter's grammar ends an option list at the comma:
			// `opt mtur,not ipopts` is refused, not read as two tests.
			return expected("IP option name", p.peekN(1))
		}
		if !(isPunct(p.peek(), ",") && isOptName(p.peekN(1))) {
			return nil
		}
		p.next()
	}
}

func (p *parser) groupName(what string) (string, *Error) {
	w, err := p.word(what)
	if err != nil {
		return "", err
	}
	// The grammar reads a numeric group as a number and keeps it as its
	// decimal string: `group 0x10` is group "16".
	s := w.text
	if v, err := parseUint(s, 32); err == nil {
		s = strconv.FormatUint(v, 10)
	}
	if len(s) > groupLen {
		return "", errorf(w, "%s %q is longer than %d characters (IPFilter's FR_GROUPLEN); it would merge with any group of the same first %d", what, s, groupLen, groupLen)
	}
	return s, nil
}

// tailRank is the place of each part of a rule's tail in IPFilter's
// grammar (ipf_y.y: ruletail `with keep head group`, then the tags
// `settagin matchtagin`, then ruletail2 `pps age rulettl comment`). Its
// parser takes the parts in that order only, each once but `keep`
// (`keep state keep frags`): `keep state with ipopts`, `group 1 head 2`,
// `age 3 pps 4` or `with ipopts with short` are syntax errors there.
var tailRank = map[string]int{
	"with": 1, "and": 1, "keep": 2, "head": 3, "group": 4, "set-tag": 5,
	"match-tag": 6, "pps": 7, "age": 8, "rule-ttl": 9, "comment": 10,
}

func (p *parser) parseTail(b *builder) *Error {
	r := b.r
	last := 0
	for {
		t := p.peek()
		if t.kind != tWord {
			return nil
		}
		if rank, ok := tailRank[strings.ToLower(t.text)]; ok {
			if rank < last || rank == last && rank != tailRank["keep"] {
				return errorf(t, "%q out of place: IPFilter's grammar takes the end of a rule in the order with, keep, head, group, set-tag, match-tag, pps, age, rule-ttl, comment, each once (keep may repeat)", t.text)
			}
			last = rank
		}
		switch strings.ToLower(t.text) {
		case "with", "and":
			p.next()
			if err := p.parseWith(r); err != nil {
				return err
			}
		case "keep":
			p.next()
			if err := p.parseKeep(r); err != nil {
				return err
			}
		case "head", "group":
			p.next()
			g, err := p.groupName("group name")
			if err != nil {
				return err
			}
			if strings.EqualFold(t.text, "head") {
				r.Head = g
			} else {
				r.Group = g
			}
		case "set-tag", "match-tag":
			p.next()
			match := strings.EqualFold(t.text, "match-tag")
			// set-tag(nat=) is for out rules, match-tag(nat=) for in
			// rules (NAT tags are set on the way out and matched on the
			// way in); log= is allowed everywhere.
			natOK := (r.Dir == DirOut) != match
			if err := p.parseTags(r, natOK); err != nil {
				return err
			}
			r.TagFromMatch = match
		case "pps":
			p.next()
			if err := p.numberTo(&r.PPS, "packets per second"); err != nil {
				return err
			}
		case "age":
			p.next()
			if err := p.parseAge(r); err != nil {
				return err
			}
		case "rule-ttl":
			p.next()
			if err := p.numberTo(&r.RuleTTL, "rule TTL"); err != nil {
				return err
			}
		case "comment":
			p.next()
			s := p.next()
			if s.kind != tString && s.kind != tWord {
				return expected("comment string", s)
			}
			r.Comment = s.text
		default:
			return nil
		}
	}
}

func (p *parser) parseAge(r *Rule) *Error {
	a, err := p.number("age", 32)
	if err != nil {
		return err
	}
	r.Age = [2]uint32{a, a}
	if isPunct(p.peek(), "/") {
		p.next()
		if err := p.numberTo(&r.Age[1], "age"); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) parseKeep(r *Rule) *Error {
	t := p.next()
	switch {
	case isWord(t, "state"):
		if r.KeepState == nil {
			r.KeepState = &KeepState{}
		}
		if isPunct(p.peek(), "(") {
			p.next()
			return p.parseStateOpts(r)
		}
	case isWord(t, "frags"), isWord(t, "frag"):
		r.KeepFrags = true
		if isPunct(p.peek(), "(") {
			p.next()
			if s := p.next(); !isWord(s, "strict") {
				return expected("strict", s)
			}
			r.KeepFragsStrict = true
			return p.expectPunct(")")
		}
	case isWord(t, "limit"):
		if err := p.numberTo(&r.KeepLimit, "connection limit"); err != nil {
			return err
		}
		if isWord(p.peek(), "cumulative") {
			p.next()
			r.KeepLimitCumulative = true
		}
	default:
		return expected("state, frags or limit", t)
	}
	return nil
}

func (p *parser) parseStateOpts(r *Rule) *Error {
	k := r.KeepState
	return p.listUntil(")", func(t token) *Error {
		if t.kind != tWord {
			return expected("state option", t)
		}
		p.next()
		var err *Error
		switch strings.ToLower(t.text) {
		case "limit":
			k.Limit, err = p.number("state limit", 32)
		case "strict":
			if k.Loose {
				// IPFilter's grammar takes one of strict and loose.
				return expected("state option other than strict", t)
			}
			k.Strict = true
		case "loose":
			if k.Strict {
				return expected("state option other than loose", t)
			}
			k.Loose = true
		case "newisn":
			k.NewISN = true
		case "no-icmp-err":
			k.NoICMPErr = true
		case "sync":
			k.Sync = true
		case "nolog":
			k.NoLog = true
		case "age":
			err = p.parseAge(r)
		case "icmp-head":
			k.ICMPHead, err = p.groupName("group name")
		case "max-srcs", "max-nodes":
			k.MaxSrcs, err = p.number("source limit", 32)
		case "max-per-src":
			k.MaxPerSrc, err = p.number("per-source limit", 32)
			if err == nil && isPunct(p.peek(), "/") {
				p.next()
				var bits uint32
				bits, err = p.number("prefix length", 8)
				if err == nil && bits > 128 {
					err = errorf(p.last, "prefix length %d out of range", bits)
				}
				k.MaxPerSrcBits = uint8(bits)
			}
		default:
			return expected("state option", t)
		}
		return err
	})
}

func (p *parser) parseTags(r *Rule, natOK bool) *Error {
	if err := p.expectPunct("("); err != nil {
		return err
	}
	return p.listUntil(")", func(t token) *Error {
		switch {
		case isWord(t, "log"):
			p.next()
			if err := p.expectPunct("="); err != nil {
				return err
			}
			n, err := p.number("log tag", 32)
			if err != nil {
				return err
			}
			r.Tag.HasLog, r.Tag.Log = true, n
		case isWord(t, "nat") && natOK:
			p.next()
			if err := p.expectPunct("="); err != nil {
				return err
			}
			w := p.next()
			if w.kind != tWord && w.kind != tString {
				return expected("NAT tag", w)
			}
			r.Tag.NAT = w.text
			if len(r.Tag.NAT) > natTagLen {
				r.Tag.NAT = r.Tag.NAT[:natTagLen]
			}
		case natOK:
			return expected("log= or nat=", t)
		default:
			return expected("log=", t)
		}
		return nil
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

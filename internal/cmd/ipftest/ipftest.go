// Package ipftest is the logic of the ipftest command: load ipf rules, NAT
// rules and pools as the options are parsed (-r, -N, -P), run packets from
// a text or hex file through the reference engine, print a verdict (or, in
// NAT mode, the translated packet) per packet, and optionally dump the
// tables (-D) and write the binary log (-l). See ipf-reference §6.6 and
// the conformance kit README §5 and §7.
package ipftest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"sluice/internal/engine"
	"sluice/internal/getopt"
	"sluice/internal/ipflog"
	"sluice/internal/nat"
	"sluice/internal/nat/enginehook"
	"sluice/internal/packet/ipftext"
	"sluice/internal/pool"
	"sluice/internal/rulefile"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ipnat"
	"sluice/internal/rules/ippool"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

const optstring = "6bCdDF:i:I:l:M:N:P:or:RS:T:vxX"

// Env is the process environment of one ipftest run.
type Env struct {
	Args   []string // without the program name
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Open opens input files; nil means os.Open.
	Open func(name string) (io.ReadCloser, error)
	// Create creates output files (-l); nil means os.Create.
	Create func(name string) (io.WriteCloser, error)
}

type run struct {
	env    Env
	out    *bufio.Writer
	eng    *engine.Engine
	set    *ruleset.Set
	loaded bool
	brief  bool
	dump   bool
	inet6  bool
	// rules6 is -6 as the ipf.conf parser sees it: IPFilter's ippool
	// parser clears that flag, so a -P before -r loads family-less
	// rules as in IPv4 mode (text input stays IPv6).
	rules6 bool
	// loadedRules holds the normalised text of every rule loaded, to
	// refuse duplicates.
	loadedRules map[string]bool
	// loadedNAT holds the NAT rules loaded so far, as printed, to
	// refuse a second identical one as the kernel does.
	loadedNAT map[string]bool
	// acctGroups are the groups of count rules, in creation order.
	acctGroups []groupInfo
	// groupSeen are the filter groups in the order rules made them.
	groupSeen []string
	// anonRefs counts the rules using each anonymous table; anonKeys
	// finds a line's table again for the other rules its LIST makes.
	anonRefs []int
	anonKeys map[string]int
	resolve  bool
	verbose  bool
	hexOut   bool
	cksum    bool
	natMode  bool
	format   string
	input    string
	iface    string
	logFile  string
	srcIn    netip.Addr
	tun      *engine.Tunables
	flushLog func(io.Writer) error
	pools    *pool.Set
	nat      *nat.NAT
	// anon holds the tables of inline pool=(...)/hash=(...) operands;
	// anonPools answers lookups in them.
	anon      []*ippool.Table
	anonPools *pool.Set
	poolFiles []*ippool.File
	ifAddrs   map[string]netip.Addr
}

// Usage is ipftest's complete usage text (ipftest -h).
const Usage = `usage: ipftest [-6bCdDoRvx] [-F text|hex] [-i file] [-I if] [-l logfile] [-N ipnat] [-P ippool] [-r ipf] [-S ip] [-T tunables]
  -r file   ipf.conf rules to test ("-": standard input)
  -N file   ipnat.conf rules;  -P file  ippool.conf tables
  -i file   packets to run through them (default standard input)
  -F fmt    the packets' format: text (default) or hex
  -I if     interface for packets that name none (default anon0)
  -S ip     packets from ip are inbound
  -T arg    tunables: list, or name=value[,...]
  -l file   write the log records (for ipmon -f)
  -6        IPv6 rules;  -R  do not resolve names;  -C  compute the checksums of hex input
  -b        one word per packet;  -v  verbose;  -x  hex dump of each packet
  -D        dump the state, NAT and pool tables at the end
  -d -o -X  accepted, no effect;  -M user (kern is not supported)
  -h        print this help
`

// usageError is a command-line error: exit 2 with the usage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

// Main runs ipftest and returns its exit status: 0 done, 1 an error, 2 a
// usage error.
func Main(env Env) int {
	if len(env.Args) == 1 && (env.Args[0] == "-h" || env.Args[0] == "--help") {
		fmt.Fprint(env.Stdout, Usage)
		return 0
	}
	if env.Open == nil {
		env.Open = func(n string) (io.ReadCloser, error) { return os.Open(n) }
	}
	if env.Create == nil {
		env.Create = func(n string) (io.WriteCloser, error) { return os.Create(n) }
	}
	r := &run{env: env, out: bufio.NewWriter(env.Stdout), format: "text", iface: "anon0", resolve: true}
	defer r.out.Flush()
	if err := r.main(); err != nil {
		r.out.Flush()
		fmt.Fprintf(env.Stderr, "ipftest: %v\n", err)
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprint(env.Stderr, Usage)
			return 2
		}
		return 1
	}
	return 0
}

func (r *run) main() error {
	p := getopt.New(r.env.Args, optstring)
	p.GNU = true
	opts, rest, err := p.Collect()
	if err != nil {
		return &usageError{err}
	}
	if len(rest) > 0 {
		return &usageError{fmt.Errorf("unexpected argument %q", rest[0])}
	}
	r.tun = engine.NewTunables()
	clock := &state.ManualClock{}
	r.eng = engine.New(engine.Config{Tunables: r.tun, Clock: clock})
	r.set = ruleset.NewSet()
	r.eng.SetRouter(r)
	r.eng.SetIfAddrs(r)
	for _, o := range opts {
		if err := r.option(o); err != nil {
			return err
		}
	}
	if !r.loaded {
		return errors.New("no rules loaded")
	}
	r.set.Link()
	r.eng.Sets().Store(0, r.set)
	if r.logFile != "" {
		sup, _ := r.tun.Get("log_suppress")
		all, _ := r.tun.Get("log_all")
		lg := &logger{log: ipflog.New(ipflog.Config{Suppress: sup != 0, LogAll: all != 0})}
		r.eng.SetLogger(lg)
		r.flushLog = func(w io.Writer) error { _, err := lg.log.WriteTo(w); return err }
	}
	if err := r.packets(); err != nil {
		return err
	}
	if r.dump {
		r.dumpTables()
	}
	if r.logFile != "" {
		if err := r.writeLog(); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) option(o getopt.Opt) error {
	switch o.Flag {
	case '6':
		r.inet6, r.rules6 = true, true
	case 'b':
		r.brief = true
	case 'C':
		r.cksum = true
	case 'd', 'o', 'X':
		// Debug output, -o packet files and -X are not implemented; they
		// change no verdict.
	case 'D':
		r.dump = true
	case 'F':
		if o.Arg != "text" && o.Arg != "hex" {
			return fmt.Errorf("-F: unknown input format %q (text or hex)", o.Arg)
		}
		r.format = o.Arg
	case 'i':
		r.input = o.Arg
	case 'I':
		r.iface = o.Arg
	case 'l':
		r.logFile = o.Arg
	case 'M':
		if o.Arg != "user" && o.Arg != "kern" {
			return fmt.Errorf("-M: unknown mode %q", o.Arg)
		}
		if o.Arg == "kern" {
			return fmt.Errorf("-M kern: kernel mode: %w", errors.ErrUnsupported)
		}
	case 'N':
		r.natMode = true
		r.loaded = true
		return r.loadNAT(o.Arg)
	case 'P':
		r.loaded = true
		r.rules6 = false
		return r.loadPools(o.Arg)
	case 'r':
		r.loaded = true
		return r.loadRules(o.Arg)
	case 'R':
		r.resolve = false
	case 'S':
		a, err := netip.ParseAddr(o.Arg)
		if err != nil {
			return fmt.Errorf("-S: bad address %q", o.Arg)
		}
		r.srcIn = a
	case 'T':
		r.tuning(o.Arg)
		r.eng.ApplyTunables()
		if r.nat != nil {
			r.nat.SetMaxSessions(r.natTableMax())
		}
	case 'v':
		r.verbose = true
	case 'x':
		r.hexOut = true
	}
	return nil
}

// tuning is IPFilter's ipf_dotuning as its ipftest runs it: each
// comma-separated word is "list", name=value (set) or a name (shown as
// -T list shows it). A value is read as sscanf's %lu reads it; a word
// that cannot be done is reported on stderr with IPFilter's error number
// and text, and ends the argument (the words after it are not done), but
// not ipftest: it goes on with the tunables as they are and exits 0.
// What may be set is engine.Tunables.SetChecked's.
func (r *run) tuning(arg string) {
	for _, w := range strings.FieldsFunc(arg, func(c rune) bool { return c == ',' }) {
		if w == "list" {
			for _, l := range r.tun.List() {
				fmt.Fprintln(r.out, l)
			}
			continue
		}
		name, val, set := strings.Cut(w, "=")
		if !set {
			l, ok := r.tun.Line(name)
			if !ok {
				fmt.Fprintf(r.env.Stderr, "%d:ioctl(SIOCIPFGET) %s\n", engine.TuneNotFound, engine.TuneErrorText[engine.TuneNotFound])
				return
			}
			fmt.Fprintln(r.out, l)
			continue
		}
		v, ok := scanUlong(val)
		if !ok {
			fmt.Fprintf(r.env.Stderr, "invalid value '%s'\n", name)
			return
		}
		if code := r.tun.SetChecked(name, v); code != 0 {
			fmt.Fprintf(r.env.Stderr, "%d:ioctl(SIOCIPFSET) %s\n", code, engine.TuneErrorText[code])
			return
		}
	}
}

// scanUlong reads s as sscanf's %lu does: white space, a sign, then
// decimal digits up to the first other byte (at least one); a negative
// value wraps, and one too large for 64 bits is the largest.
func scanUlong(s string) (uint64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	var v uint64
	n, over := 0, false
	for ; n < len(s) && s[n] >= '0' && s[n] <= '9'; n++ {
		d := uint64(s[n] - '0')
		if v > (math.MaxUint64-d)/10 {
			over = true
		}
		v = v*10 + d
	}
	switch {
	case n == 0:
		return 0, false
	case over:
		return math.MaxUint64, true
	case neg:
		return -v, true
	}
	return v, true
}

// maxFileSize bounds a rule file (-r, -N, -P), as ipf's own bound does:
// a FIFO or a device has no size, and one that never ends (`ipftest -r
// /dev/zero`) would grow ipftest until the host's memory was gone. A
// variable so that a test can bound an endless source cheaply.
var maxFileSize int64 = 256 << 20

func (r *run) readFile(name string) ([]byte, string, error) {
	var in io.Reader = r.env.Stdin
	shown := "(stdin)"
	if name != "-" {
		f, err := r.env.Open(name)
		if err != nil {
			return nil, name, err
		}
		defer f.Close()
		in, shown = f, name
	}
	b, err := rulefile.ReadFrom(in, shown, maxFileSize)
	return b, shown, err
}

func (r *run) loadRules(name string) error {
	src, fname, err := r.readFile(name)
	if err != nil {
		return fmt.Errorf("-r: %v", err)
	}
	cfg, err := ipf.ParseConfig(fname, src, ipf.ParseOptions{NoResolve: !r.resolve, Inet6: r.rules6})
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(r.env.Stderr, w)
	}
	rules := cfg.Rules
	for _, rule := range rules {
		if r.verbose {
			// ipftest echoes each rule as it parses it, before any
			// interface is known: every name is marked (!).
			fmt.Fprintln(r.out, ipf.Format(rule, ipf.PrintOptions{NoResolve: !r.resolve, Verbose: true, Unresolved: ipf.MarkAllUnresolved}))
		}
		if rule.Action == ipf.ActionCall && (r.pools == nil || r.pools.Hash(ippool.RoleIPF, strconv.FormatUint(uint64(rule.Call.Arg), 10)) == nil) {
			// The kernel refuses a call to a group-map that does not exist.
			fmt.Fprintf(r.env.Stderr, "ipftest: %s:%d: call %s/%d: group-map not found\n", rule.Pos.File, rule.Pos.Line, rule.Call.Func, rule.Call.Arg)
			continue
		}
		// ipf makes a rule's inline tables before the kernel sees it.
		if err := r.inlineTables(rule); err != nil {
			return err
		}
		if msg := r.missingTable(rule); msg != "" {
			// The kernel refuses a rule whose lookup table does not
			// exist (ipf_findlookup: an accounting rule looks for hash
			// tables of role count, inline ones too) and ipftest goes
			// on with the next.
			fmt.Fprintf(r.env.Stderr, "ipftest: %s:%d: %s\n", rule.Pos.File, rule.Pos.Line, msg)
			continue
		}
		// The kernel refuses a rule identical to one it holds (the
		// same normalised rule in the same list) and ipftest goes on.
		// A rule with max-srcs is never identical: ipf_frruleiocl
		// initialises the rule's source-tracking tree before comparing
		// the rules byte for byte, and that tree's head points into the
		// rule itself, so two such rules always differ.
		key := ipf.FormatRule(rule)
		if rule.HasICMPType {
			// the listing drops the ICMP test of a rule without a
			// protocol, which the rule still makes (faith17)
			key += fmt.Sprintf("\x00icmp %d %t %d", rule.ICMPType, rule.HasICMPCode, rule.ICMPCodeMatch)
		}
		if r.loadedRules[key] && !tracksSources(rule) {
			fmt.Fprintf(r.env.Stderr, "ipftest: %s:%d: rule already exists\n", rule.Pos.File, rule.Pos.Line)
			continue
		}
		if r.loadedRules == nil {
			r.loadedRules = map[string]bool{}
		}
		r.loadedRules[key] = true
		if _, err := r.set.Add(rule); err != nil {
			// IPFilter reports a rule the kernel refuses and goes on.
			fmt.Fprintf(r.env.Stderr, "ipftest: %v\n", err)
		} else {
			r.noteLoaded(rule)
		}
	}
	return nil
}

// tracksSources reports whether a rule keeps state with a max-srcs
// limit, the rules IPFilter never finds a duplicate of.
func tracksSources(rule *ipf.Rule) bool {
	return rule.KeepState != nil && rule.KeepState.MaxSrcs != 0
}

// natTableMissing reports whether a NAT rule names a pool or hash table
// that a NAT rule cannot find: tree pools of any role, hash tables (not
// group-maps) of role nat.
func (r *run) natTableMissing(nr *ipnat.Rule) bool {
	for _, a := range []*ipnat.Addr{&nr.Src, &nr.Dst, &nr.Orig, &nr.New, &nr.NewSrc, &nr.NewDst} {
		if a.Kind != ipnat.AddrLookup {
			continue
		}
		switch a.Table {
		case "pool":
			if r.pools == nil || r.pools.Tree(ippool.RoleNAT, a.Name) == nil {
				return true
			}
		case "hash":
			if r.pools == nil {
				return true
			}
			if h := r.pools.Hash(ippool.RoleNAT, a.Name); h == nil || h.Def.Type != ippool.Hash {
				return true
			}
		}
	}
	return false
}

// missingTable names the first lookup table a rule refers to that is not
// loaded, or returns "".
func (r *run) missingTable(rule *ipf.Rule) string {
	for i, ep := range []*ipf.Endpoint{&rule.From, &rule.To} {
		a := &ep.Addr
		if a.Kind != ipf.AddrPool && a.Kind != ipf.AddrHash {
			continue
		}
		role := ippool.RoleIPF
		if rule.Action == ipf.ActionCount {
			role = ippool.RoleCount
		}
		found := false
		for _, s := range []*pool.Set{r.pools, r.anonPools} {
			found = found || s != nil && (a.Kind == ipf.AddrPool && s.Tree(role, a.Table) != nil ||
				a.Kind == ipf.AddrHash && s.Hash(role, a.Table) != nil)
		}
		if !found {
			return [...]string{"cannot find source lookup pool", "cannot find destination lookup pool"}[i]
		}
	}
	return ""
}

func (r *run) packets() error {
	var in io.Reader
	switch r.input {
	case "":
		in = r.env.Stdin
	case "-":
		in = r.env.Stdin
	default:
		f, err := r.env.Open(r.input)
		if err != nil {
			return fmt.Errorf("-i: %v", err)
		}
		defer f.Close()
		in = f
	}
	rd, err := ipftext.NewReader(r.format, in)
	if err != nil {
		return err
	}
	if tr, ok := rd.(*ipftext.TextReader); ok {
		tr.Warn = func(line int, msg string) { fmt.Fprintf(r.env.Stderr, "line %d: %s\n", line, msg) }
	}
	buf := make([]byte, 65536+64)
	var p engine.Packet
	var line, orig []byte
	for {
		rec, err := rd.Next(buf)
		if err == io.EOF {
			return nil
		}
		var se *ipftext.SyntaxError
		if errors.As(err, &se) {
			fmt.Fprintf(r.env.Stderr, "ipftest: %v\n", err)
			continue
		}
		if err != nil {
			return err
		}
		if rec.Packet == nil {
			// "nic IF[=ADDR] ..." creates interfaces (get_unit), and
			// an =ADDR gives them their address like a packet line does.
			for _, n := range rec.NICs {
				if name, a, ok := strings.Cut(n, "="); ok {
					if ip, err := netip.ParseAddr(a); err == nil {
						r.setIfAddr(name, ip)
					}
				}
			}
			continue
		}
		data := rec.Packet
		if r.cksum {
			ipftext.FixChecksums(data)
		}
		if rec.IfaceAddr.IsValid() {
			r.setIfAddr(rec.Iface, rec.IfaceAddr)
		}
		ifn := rec.Iface
		if ifn == "" {
			ifn = r.iface
		}
		p.Load(data, ifn, rec.Out, rec.LinkFlags)
		if r.srcIn.IsValid() && p.Info.Src == r.srcIn {
			p.Out = false
		}
		// IPFilter restores an inbound packet it translated and then
		// blocked (the header printed, and any return-rst or
		// return-icmp built, are the packet as it came in).
		// So does one that a `to` rule routed, in either direction:
		// ipf_fastroute takes the mbuf, and the packet printed after
		// it is the one read, before NAT-in or NAT-out (checked
		// against its ipftest, map/map-block/portmap out, rdr in).
		// update_ipid's new IP id is in the routed copy and not in the
		// packet printed after it, likewise.
		orig = orig[:0]
		if r.nat != nil || r.updateIPID() {
			orig = append(orig, p.Data...)
		}
		res := r.eng.Check(&p)
		line = line[:0]
		switch {
		case r.natMode && r.brief:
			// ipftest -N -b prints the packet as it leaves, or the
			// block reason when it was dropped or taken by route-to
			// (the mbuf is gone either way).
			if res.Verdict.Passed() && !res.Forwarded {
				line = r.appendPacket(line, &p)
			} else {
				line = strconv.AppendInt(line, int64(res.Reason), 10)
				line = append(line, '\n')
			}
		case r.brief:
			line = append(line, res.Verdict.String()...)
			line = append(line, '\n')
		default:
			if !r.natMode {
				line = append(line, res.Verdict.String()...)
			}
			line = append(line, ' ')
			if (!res.Verdict.Passed() || res.Forwarded) && len(orig) > 0 {
				q := p
				q.Data = orig
				line = r.appendPacket(line, &q)
			} else {
				line = r.appendPacket(line, &p)
			}
			line = append(line, "--------------\n"...)
		}
		r.out.Write(line)
	}
}

// appendPacket appends printpacket's output: the summary line, or with -x
// the hex dump followed by an empty line.
func (r *run) appendPacket(line []byte, p *engine.Packet) []byte {
	if r.hexOut {
		return ipftext.AppendHex(line, p.Data)
	}
	line = ipftext.AppendSummary(line, p.Out, p.IfName, p.Data)
	return append(line, '\n')
}

func (r *run) dumpTables() {
	w := r.out
	if r.nat != nil {
		r.nat.Dump(w)
	} else {
		fmt.Fprintln(w, "List of active MAP/Redirect filters:")
		fmt.Fprintln(w, "\nList of active sessions:")
		fmt.Fprintln(w, "\nHostmap table:")
	}
	fmt.Fprintln(w, "List of active state sessions:")
	r.eng.States.Walk(func(e *state.Entry) { engine.PrintState(w, e, r.resolve) })
	fmt.Fprintln(w, "List of configured pools")
	if r.pools != nil {
		r.pools.DumpPools(w)
	}
	fmt.Fprintln(w, "List of configured hash tables")
	anon := func(w io.Writer) {
		for i := len(r.anon) - 1; i >= 0; i-- {
			// IPFilter counts the rules' references and the table
			// list's.
			fmt.Fprintf(w, "# 'anonymous' table refs %d\n", r.anonRefs[i]+1)
			var b strings.Builder
			r.anon[i].Format(&b)
			io.WriteString(w, b.String())
		}
	}
	if r.pools != nil {
		r.pools.DumpHashesWith(w, anon)
	} else {
		anon(w)
	}
	for s := 0; s < 2; s++ {
		fmt.Fprintf(w, "List of groups configured (set %d)\n", s)
		set := r.eng.Sets().Get(s)
		for _, gi := range r.groupList(set, s) {
			fmt.Fprintf(w, "Dev.0. Group %s Ref %d Flags %s\n", gi.name, gi.ref, cHex(gi.flags))
			if g := set.Groups[gi.name]; g != nil {
				for _, rule := range g.Rules {
					r.printDumpRule(rule)
				}
			}
		}
		if s != 0 {
			continue
		}
		// Groups of count rules live in the accounting unit (Dev.7).
		for _, gi := range r.acctGroups {
			fmt.Fprintf(w, "Dev.7. Group %s Ref %d Flags %s\n", gi.name, gi.ref, cHex(gi.flags))
			if g := set.AcctGroups[gi.name]; g != nil {
				for _, rule := range g.Rules {
					r.printDumpRule(rule)
				}
			}
		}
	}
	for s := 0; s < 2; s++ {
		set := r.eng.Sets().Get(s)
		fmt.Fprintf(w, "Rules configured (set %d, in)\n", s)
		r.printList(&set.In)
		fmt.Fprintf(w, "Rules configured (set %d, out)\n", s)
		r.printList(&set.Out)
	}
	for s := 0; s < 2; s++ {
		set := r.eng.Sets().Get(s)
		fmt.Fprintf(w, "Accounting rules configured (set %d, in)\n", s)
		r.printList(&set.AcctIn)
		fmt.Fprintf(w, "Accounting rules configured (set %d, out)\n", s)
		r.printList(&set.AcctOut)
	}
}

func (r *run) printList(l *ruleset.List) {
	for _, rule := range l.Rules {
		r.printDumpRule(rule)
	}
}

func (r *run) printDumpRule(rule *ruleset.Rule) {
	fmt.Fprintf(r.out, "%d %s\n", rule.Stats.Hits.Load(), printRule(rule.Src, r.resolve, false))
}

func (r *run) writeLog() error {
	f, err := r.env.Create(r.logFile)
	if err != nil {
		return fmt.Errorf("-l: %v", err)
	}
	if r.flushLog != nil {
		if err := r.flushLog(f); err != nil {
			f.Close()
			return fmt.Errorf("-l: %v", err)
		}
	}
	return f.Close()
}

func (r *run) loadPools(name string) error {
	src, fname, err := r.readFile(name)
	if err != nil {
		return fmt.Errorf("-P: %v", err)
	}
	f, err := ippool.Parse(fname, string(src))
	if err != nil {
		return err
	}
	for i, t := range f.Tables {
		// As loaded: the groups a refused node names are not counted.
		f.Tables[i] = pool.WithoutDuplicates(t)
	}
	r.poolFiles = append(r.poolFiles, f)
	if r.pools == nil {
		if r.pools, err = pool.NewSet(f, nil); err != nil {
			return err
		}
		r.eng.SetPools(poolMux{r})
		r.eng.SetDstLists(dstLists{r.pools})
		return nil
	}
	return r.pools.Add(f, nil)
}

type groupInfo struct {
	name  string
	ref   int
	flags uint32
}

// groupList lists the filter groups of set in creation order, as
// IPFilter's group table holds them: groups named by group-map entries
// (created when the pools were loaded) first, then those of the rules.
// A group's reference count has one reference per group-map entry, head
// rule and member rule.
func (r *run) groupList(set *ruleset.Set, idx int) []groupInfo {
	var out []groupInfo
	pos := map[string]int{}
	add := func(name string, flags uint32) *groupInfo {
		i, ok := pos[name]
		if !ok {
			i = len(out)
			pos[name] = i
			out = append(out, groupInfo{name: name, flags: flags})
		} else if out[i].flags == 0 {
			// A group first seen with no rule takes its head's
			// direction.
			out[i].flags = flags
		}
		return &out[i]
	}
	fromMap := map[string]bool{}
	if idx == 0 {
		for _, f := range r.poolFiles {
			for _, t := range f.Tables {
				if t.Type != ippool.GroupMap || t.Role != ippool.RoleIPF {
					continue
				}
				flags := uint32(ruleset.FRInQue)
				if t.Out {
					flags = ruleset.FROutQue
				}
				for _, e := range t.Entries {
					if e.Group != "" {
						add(e.Group, flags).ref++
						fromMap[e.Group] = true
					}
				}
			}
		}
	}
	dirFlags := func(rl *ruleset.Rule) uint32 {
		if rl.Out {
			return ruleset.FROutQue
		}
		return ruleset.FRInQue
	}
	lists := []*ruleset.List{&set.In, &set.Out}
	for _, name := range set.GroupOrder {
		lists = append(lists, set.Groups[name])
	}
	for _, name := range set.GroupOrder {
		g := set.Groups[name]
		var flags uint32
		if len(g.Rules) > 0 {
			flags = dirFlags(g.Rules[0])
		}
		add(name, flags)
	}
	for _, l := range lists {
		for _, rl := range l.Rules {
			if rl.Head != "" {
				gi := add(rl.Head, dirFlags(rl))
				gi.ref++
			}
			if rl.Group != "" {
				add(rl.Group, dirFlags(rl)).ref++
			}
			if rl.KeepState != nil && rl.KeepState.ICMPHead != "" {
				// keep state (icmp-head G) refers to G too; IPFilter
				// makes it without a direction when no rule has
				// (ipf_group_add with flags 0).
				add(rl.KeepState.ICMPHead, 0).ref++
			}
		}
	}
	// IPFilter lists groups in the order it made them: group-map
	// groups with the pools, then as rules first named them.
	rank := func(name string) int {
		if fromMap[name] {
			return -1
		}
		if i := slices.Index(r.groupSeen, name); i >= 0 {
			return i
		}
		return -1
	}
	slices.SortStableFunc(out, func(a, b groupInfo) int { return rank(a.name) - rank(b.name) })
	return out
}

// noteLoaded records, for -D, the references a loaded rule makes to
// anonymous tables and the groups it heads or belongs to, in the order
// IPFilter creates them.
func (r *run) noteLoaded(rule *ipf.Rule) {
	for _, ep := range []*ipf.Endpoint{&rule.From, &rule.To} {
		for i, t := range r.anon {
			if (ep.Addr.Kind == ipf.AddrPool || ep.Addr.Kind == ipf.AddrHash) && t.Name == ep.Addr.Table {
				r.anonRefs[i]++
			}
		}
	}
	if rule.Action != ipf.ActionCount {
		icmpHead := ""
		if rule.KeepState != nil {
			icmpHead = rule.KeepState.ICMPHead
		}
		for _, name := range []string{rule.Head, rule.Group, icmpHead} {
			if name != "" && !slices.Contains(r.groupSeen, name) {
				r.groupSeen = append(r.groupSeen, name)
			}
		}
		return
	}
	flags := uint32(ruleset.FRInQue)
	if rule.Dir == ipf.DirOut {
		flags = ruleset.FROutQue
	}
	for _, name := range []string{rule.Head, rule.Group} {
		if name == "" {
			continue
		}
		i := slices.IndexFunc(r.acctGroups, func(g groupInfo) bool { return g.name == name })
		if i < 0 {
			r.acctGroups = append(r.acctGroups, groupInfo{name: name, flags: flags})
			i = len(r.acctGroups) - 1
		}
		r.acctGroups[i].ref++
	}
}

// anonBase is the first number IPFilter gives anonymous tables.
const anonBase = 0x80000001

// inlineTables turns the inline pool=(...)/hash=(...) operands of rule
// into anonymous ippool tables and points the rule at them, as ipf does
// when it loads such a rule.
func (r *run) inlineTables(rule *ipf.Rule) error {
	for i, ep := range []*ipf.Endpoint{&rule.From, &rule.To} {
		a := &ep.Addr
		if a.Inline == nil || (a.Kind != ipf.AddrPool && a.Kind != ipf.AddrHash) {
			continue
		}
		// The rules a LIST expands one line into share its tables.
		key := fmt.Sprintf("%v/%d/%v", rule.Pos, i, a.Inline)
		if j, ok := r.anonKeys[key]; ok {
			a.Table, a.Inline = r.anon[j].Name, nil
			continue
		}
		t := &ippool.Table{Type: ippool.Tree, Role: ippool.RoleIPF,
			Name: strconv.FormatUint(uint64(anonBase+len(r.anon)), 10)}
		if a.Kind == ipf.AddrHash {
			t.Type = ippool.Hash
			t.Size = 2*len(a.Inline) - 1
		}
		for _, pe := range a.Inline {
			bits := ipf.MaskBits(pe.Mask)
			if bits < 0 {
				return fmt.Errorf("%s:%d: inline table entry %s: non-contiguous mask", rule.Pos.File, rule.Pos.Line, pe.IP)
			}
			e := ippool.Entry{Not: pe.Negate, Fam: 4, Bits: bits}
			if pe.IP.Is6() {
				e.Fam = 6
				e.Addr = pe.IP.As16()
			} else {
				b := pe.IP.As4()
				copy(e.Addr[:], b[:])
			}
			t.Entries = append(t.Entries, e)
		}
		f := &ippool.File{Tables: []*ippool.Table{t}}
		if r.anonPools == nil {
			var err error
			if r.anonPools, err = pool.NewSet(f, nil); err != nil {
				return err
			}
		} else if err := r.anonPools.Add(f, nil); err != nil {
			return err
		}
		if r.anonKeys == nil {
			r.anonKeys = map[string]int{}
		}
		r.anonKeys[key] = len(r.anon)
		r.anon = append(r.anon, t)
		r.anonRefs = append(r.anonRefs, 0)
		a.Table, a.Inline = t.Name, nil
		r.eng.SetPools(poolMux{r})
	}
	return nil
}

// poolMux answers pool lookups from the -P tables and the anonymous
// tables of inline operands.
type poolMux struct{ r *run }

func (m poolMux) ContainsRole(role ippool.Role, hash bool, table string, addr netip.Addr) bool {
	if m.r.pools != nil && m.r.pools.ContainsRole(role, hash, table, addr) {
		return true
	}
	return m.r.anonPools != nil && m.r.anonPools.ContainsRole(role, hash, table, addr)
}

func (m poolMux) GroupFor(table string, addr netip.Addr) (string, bool) {
	if m.r.pools == nil {
		return "", false
	}
	return m.r.pools.GroupFor(table, addr)
}

// dstLists adapts a pool set to the engine's dstlist hook.
type dstLists struct{ s *pool.Set }

func (d dstLists) SelectDst(name string, src, dst netip.Addr) (string, netip.Addr, bool) {
	l := d.s.DstList(ippool.RoleIPF, name)
	if l == nil {
		return "", netip.Addr{}, false
	}
	dest, _, ok := l.Select(src, dst)
	return dest.Iface, dest.Addr, ok
}

// Route implements engine.Router: userland ipftest "sends" a forwarded
// packet by printing it as leaving the chosen interface (printpacket:
// with -x, as a hex dump followed by an empty line).
func (r *run) Route(p *engine.Packet, iface string, nextHop netip.Addr, dup bool) {
	var line []byte
	if r.hexOut {
		d := p.Data
		if !dup && len(d) >= 20 && d[0]>>4 == 4 {
			// ipf_fastroute clears the IPv4 header checksum of a packet
			// it routes (to) for the interface to fill in; userland
			// prints it as 0. A dup-to copy leaves with the checksum it
			// arrived with, whatever the rule's action or direction.
			d = append([]byte(nil), d...)
			d[10], d[11] = 0, 0
		}
		line = ipftext.AppendHex(nil, d)
	} else {
		line = ipftext.AppendSummary(nil, true, iface, p.Data)
		line = append(line, '\n')
	}
	r.out.Write(line)
}

// logger feeds engine log records into an ipf log buffer (ipftest -l).
type logger struct {
	log *ipflog.Log
}

func (l *logger) LogPacket(rec *engine.LogRecord) error {
	p := rec.Pkt
	e := ipflog.Entry{
		Iface: p.IfName, Group: rec.Group, GroupUnset: rec.Rule < 0, Rule: int32(rec.Rule),
		Flags: rec.Pass, Out: p.Out, LogTag: rec.LogTag, Level: ipflog.NoLevel,
		Reason: uint8(rec.Reason), Info: &p.Info, Packet: p.Data,
	}
	if rec.RuleRef != nil && rec.RuleRef.Src.Log.HasLevel {
		lo := rec.RuleRef.Src.Log
		e.Level = uint16(lo.Facility)<<3 | uint16(lo.Priority)
	}
	if rec.RuleRef != nil {
		e.NatTag = rec.RuleRef.NATTag
	}
	if !l.log.Append(&e) {
		return errLogFull
	}
	return nil
}

var errLogFull = errors.New("log buffer full")

func (r *run) loadNAT(name string) error {
	src, fname, err := r.readFile(name)
	if err != nil {
		return fmt.Errorf("-N: %v", err)
	}
	f, err := ipnat.Parse(fname, string(src), r.env.Stderr)
	if err != nil {
		return err
	}
	if r.verbose {
		// ipftest -v echoes the NAT rules as ipnat -v prints them.
		f.Print(r.out)
	}
	kept := f.Rules[:0:0]
	for _, nr := range f.Rules {
		if r.natTableMissing(nr) {
			// The kernel refuses a NAT rule whose pool or hash table
			// it cannot find (ipf_nat_resolverule), and ipftest goes on.
			fmt.Fprintf(r.env.Stderr, "ipftest: %s:%d: nat rule: function not found for lookup\n", fname, nr.Pos.Line)
			continue
		}
		// The kernel refuses a NAT rule identical to one it holds
		// (ipf_nat_siocaddnat: "NAT rule already exists"); its
		// comparison sees round-robin, which the listing does not show.
		key := nr.String()
		if nr.RoundRobin {
			key += " round-robin"
		}
		if r.loadedNAT[key] {
			fmt.Fprintf(r.env.Stderr, "ipftest: %s:%d: NAT rule already exists\n", fname, nr.Pos.Line)
			continue
		}
		if r.loadedNAT == nil {
			r.loadedNAT = map[string]bool{}
		}
		r.loadedNAT[key] = true
		kept = append(kept, nr)
	}
	f.Rules = kept
	if r.nat == nil {
		r.nat, err = nat.New(f, nat.Config{Pools: r.pools, IfAddr: r.ifAddr,
			// a full table refuses the session (bad-nat), as
			// IPFilter's ipf_nat_add does at nat_table_max
			MaxSessions: r.natTableMax(),
			AddState:    enginehook.StateAdder(r.eng),
			// NAT sessions take state-sync numbers too (ipf_sync_new).
			OnSession:    func() { r.eng.States.NoteSync() },
			OnSyncUpdate: func() { r.eng.States.NoteSyncUpdate() },
			// ipftest prints proxy debugging on stdout, where it lands
			// between the packets (ipf_p_ftp's printf).
			Debug: func(msg string) { r.out.WriteString(msg) },
			Tunable: func(name string) (int, bool) {
				v, ok := r.tun.Get(name)
				return int(v), ok
			}})
		if err != nil {
			return err
		}
		r.eng.SetNAT(enginehook.Hook{NAT: r.nat})
		return nil
	}
	return r.nat.AddRules(f)
}

// natTableMax is the nat_table_max tunable (-T).
func (r *run) natTableMax() int {
	v, _ := r.tun.Get("nat_table_max")
	return int(min(v, 1<<31-1))
}

// setIfAddr gives an interface its address. As in ipf_setifpaddr, an
// interface keeps the first address it was given.
func (r *run) setIfAddr(name string, a netip.Addr) {
	if r.ifAddrs == nil {
		r.ifAddrs = map[string]netip.Addr{}
	}
	if _, seen := r.ifAddrs[name]; !seen {
		r.ifAddrs[name] = a
	}
}

// IfAddr implements engine.IfAddrs with the addresses of the input.
func (r *run) IfAddr(name string, v6 bool) (netip.Addr, bool) { return r.ifAddr(name, v6) }

// ifAddr answers interface addresses for NAT's 0/32 and (IF) rules;
// ipftest learns them from "IF=ADDR" in the packet input.
func (r *run) ifAddr(name string, v6 bool) (netip.Addr, bool) {
	a, ok := r.ifAddrs[name]
	if !ok || a.Is6() != v6 {
		return netip.Addr{}, false
	}
	return a, true
}

// updateIPID reports whether -T set update_ipid (the engine then rewrites
// the IP id of packets it passes).
func (r *run) updateIPID() bool {
	v, _ := r.tun.Get("update_ipid")
	return v != 0
}

// cHex is C's %#x: 0 is printed "0", not "0x0" (an icmp-head group no rule
// gave a direction: "Dev.0. Group 7 Ref 1 Flags 0").
func cHex(v uint32) string {
	if v == 0 {
		return "0"
	}
	return "0x" + strconv.FormatUint(uint64(v), 16)
}

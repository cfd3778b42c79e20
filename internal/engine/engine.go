// Package engine is Sluice's reference filter: IPFilter's ipf_check
// pipeline in Go (ipf-reference §2.2, §2.3). A packet, parsed once into a
// packet.Info, goes through NAT-in, accounting, the fragment cache or the
// state table, the rule scan (last match wins unless quick; groups; skip),
// state and fragment creation, NAT-out and logging, and comes back as a
// Verdict. Checking a packet does not allocate, except when a state or
// fragment entry is created.
package engine

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"

	"sluice/internal/frag"
	"sluice/internal/packet"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ippool"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// Packet is the caller-owned per-packet context. The caller sets Data,
// IfName and Out, and fills Info with Info.Parse (ParseErr holds Parse's
// error); Check fills the remaining fields. Reuse one Packet per worker.
type Packet struct {
	Data     []byte
	IfName   string
	Out      bool
	Info     packet.Info
	ParseErr error
	// LinkFlags are the link-layer flags given to Parse; Reparse reuses
	// them.
	LinkFlags packet.Flags
	// NATTag is the tag of the inbound NAT rule that translated the
	// packet; the NAT hook sets it. In rules with match-tag(nat=X) match
	// only packets whose tag is X.
	NATTag string

	sp state.Packet
	fk fragKeyT
	// stateRev is set when the packet matched a state entry in the
	// reply direction.
	stateRev bool
}

// Load points p at a new packet and parses it as ipftest does (checksums
// verified). It does not allocate.
func (p *Packet) Load(data []byte, ifname string, out bool, link packet.Flags) {
	p.Data, p.IfName, p.Out, p.LinkFlags = data, ifname, out, link
	p.ParseErr = p.Info.Parse(data, packet.ParseOptions{VerifyChecksums: true, LinkFlags: link})
}

// Reparse parses Data again after a hook (NAT) rewrote it, keeping the
// flags the engine itself set.
func (p *Packet) Reparse() {
	keep := p.Info.Flags & (packet.FlagLowTTL | packet.FlagBadSrc | packet.FlagNATed)
	p.ParseErr = p.Info.Parse(p.Data, packet.ParseOptions{VerifyChecksums: true, LinkFlags: p.LinkFlags})
	p.Info.Flags |= keep
}

// Rewritten is Reparse for a hook that rewrote the packet, oldLen bytes
// long before, keeping its transport checksum consistent by incremental
// updates (as NAT does). Summing the whole segment again is the costliest
// part of a parse, and it cannot change the outcome for a packet of the
// same length whose checksum already verified; so only packets that were
// bad or changed length (divert, decap, proxies that resize) are verified
// again.
func (p *Packet) Rewritten(oldLen int) {
	keep := p.Info.Flags & (packet.FlagLowTTL | packet.FlagBadSrc | packet.FlagNATed)
	verify := p.Info.Flags&packet.FlagBad != 0 || len(p.Data) != oldLen
	p.ParseErr = p.Info.Parse(p.Data, packet.ParseOptions{VerifyChecksums: verify, LinkFlags: p.LinkFlags})
	p.Info.Flags |= keep
}

// Result is what Check returns besides the verdict.
type Result struct {
	Verdict Verdict
	// Pass is the final FR_* flag word.
	Pass uint32
	// Rule is the rule that decided (nil if none); RuleNum its 0-based
	// index in its list, -1 if none; Group its group.
	Rule    *ruleset.Rule
	RuleNum int
	Group   string
	Reason  Reason
	// ICMPCode is the code for return-icmp replies.
	ICMPCode uint8
	// State is the state entry the packet matched or created, if any.
	State *state.Entry
	// Forwarded is set when a route-to rule took the packet: it was
	// handed to the Router and does not continue on its own path.
	Forwarded bool
}

// Config configures an Engine.
type Config struct {
	Tunables *Tunables // nil = defaults
	Clock    state.Clock
	NAT      NAT
	Pools    Pools
	Logger   Logger
	Router   Router
	DstLists DstLists
	Replier  Replier
}

// Engine is one filter instance: rule sets, state table, fragment cache.
type Engine struct {
	sets   *ruleset.Sets
	States *state.Table
	Frags  *frag.Cache
	clock  state.Clock
	nat    NAT
	pools  Pools
	logger Logger
	router Router
	dsts   DstLists
	gmaps  GroupMaps
	reply  Replier
	ifaddr IfAddrs
	ifnets IfNetworks
	limits connLimits

	mu          sync.Mutex // guards tun
	tun         *Tunables
	stateCfg    state.Config // tun's state tunables, for keep limit timeouts
	defaultPass uint32
	minTTL      uint8
	updateIPID  bool
	nextIPID    atomic.Uint32
	idMu        sync.Mutex          // guards fragIDs
	fragIDs     map[fragKeyT]fragID // ids given to first fragments (update_ipid)
	stats       counters
}

// Stats are global counters, per direction (0 in, 1 out).
type Stats struct {
	Pass, Block, NoMatch, Counted, Bad, Logged [2]uint64
}

// counters are the live, atomically updated form of Stats.
type counters struct {
	pass, block, nomatch, counted, bad, logged [2]atomic.Uint64
}

// New returns an engine with empty rule sets.
func New(c Config) *Engine {
	if c.Tunables == nil {
		c.Tunables = NewTunables()
	}
	if c.Clock == nil {
		c.Clock = &state.ManualClock{}
	}
	e := &Engine{
		sets: ruleset.NewSets(), clock: c.Clock, nat: c.NAT, pools: c.Pools, logger: c.Logger, router: c.Router, dsts: c.DstLists, reply: c.Replier,
		tun: c.Tunables,
	}
	e.gmaps, _ = c.Pools.(GroupMaps)
	e.States = state.New(c.Tunables.StateConfig(), c.Clock)
	fs, _ := c.Tunables.Get("frag_size")
	ft, _ := c.Tunables.Get("frag_ttl")
	e.Frags = frag.New(int(fs), uint32(ft), c.Clock)
	e.applyTunables()
	return e
}

// Expire removes timed-out state and fragment entries (IPFilter's slow
// timer); a long-running datapath calls it every tick or so. Lookups also
// drop expired entries they meet, so calling it is about memory, not
// correctness.
func (e *Engine) Expire() int {
	e.Frags.Expire()
	e.limits.expire(e.clock.Ticks())
	return e.States.Expire()
}

// Close releases the tables.
func (e *Engine) Close() { e.States.Close() }

// Sets returns the rule sets (active and inactive).
func (e *Engine) Sets() *ruleset.Sets { return e.sets }

// SetNAT installs the NAT hook.
func (e *Engine) SetNAT(n NAT) { e.nat = n }

// SetPools installs the pool lookup hook (and, if p implements
// GroupMaps, the group-map lookups of call rules).
func (e *Engine) SetPools(p Pools) {
	e.pools = p
	e.gmaps, _ = p.(GroupMaps)
}

// SetRouter installs the forwarding hook.
func (e *Engine) SetRouter(r Router) { e.router = r }

// SetReplier installs the hook that sends return-rst/return-icmp replies.
func (e *Engine) SetReplier(r Replier) { e.reply = r }

// SetIfAddrs installs the interface address lookup.
func (e *Engine) SetIfAddrs(a IfAddrs) {
	e.ifaddr = a
	e.ifnets, _ = a.(IfNetworks)
}

// SetDstLists installs the dstlist resolver.
func (e *Engine) SetDstLists(d DstLists) { e.dsts = d }

// SetLogger installs the logger.
func (e *Engine) SetLogger(l Logger) { e.logger = l }

// Tunables returns the live tunables; call ApplyTunables after changing
// them.
func (e *Engine) Tunables() *Tunables { return e.tun }

// ApplyTunables pushes tunable values into the tables.
func (e *Engine) ApplyTunables() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applyTunables()
}

func (e *Engine) applyTunables() {
	e.stateCfg = e.tun.StateConfig()
	e.States.SetConfig(e.stateCfg)
	fs, _ := e.tun.Get("frag_size")
	ft, _ := e.tun.Get("frag_ttl")
	e.Frags.SetLimits(int(fs), uint32(ft))
	dp, _ := e.tun.Get("default_pass")
	e.defaultPass = uint32(dp)
	mt, _ := e.tun.Get("min_ttl")
	e.minTTL = uint8(mt)
	ui, _ := e.tun.Get("update_ipid")
	e.updateIPID = ui != 0
}

// Stats returns a copy of the global counters.
func (e *Engine) Stats() Stats {
	var s Stats
	for i := 0; i < 2; i++ {
		c := &e.stats
		s.Pass[i], s.Block[i], s.NoMatch[i] = c.pass[i].Load(), c.block[i].Load(), c.nomatch[i].Load()
		s.Counted[i], s.Bad[i], s.Logged[i] = c.counted[i].Load(), c.bad[i].Load(), c.logged[i].Load()
	}
	return s
}

// scan holds the per-packet scan context.
type scan struct {
	e       *Engine
	p       *Packet
	rule    *ruleset.Rule
	ruleNum int
	group   string
	matched bool // a rule matched in the list being scanned
	// quickFail: rule is a quick keep-state rule whose entry could not
	// be added, so the scan went on from the verdict before it
	quickFail bool
	reason    Reason
	icode     uint8
	depth     int
	portcmp   bool
	// Packet addresses as ruleset.Words, computed once per packet.
	srcW, dstW [2]uint64
	alen       uint8
}

// Check runs one packet through the filter.
func (e *Engine) Check(p *Packet) Result {
	set := e.sets.Active()
	fi := &p.Info
	out := b2i(p.Out)
	sc := scan{e: e, p: p, ruleNum: -1}
	res := Result{RuleNum: -1}
	p.NATTag = ""
	p.stateRev = false

	if p.ParseErr != nil {
		res.Pass = ruleset.FRBlock | ruleset.FRNoMatch
		res.Verdict = VerdictBadPacket
		res.Reason = ReasonMakeFrip
		e.count(out, &res)
		return res
	}
	if !p.Out && fi.TTL < e.minTTL {
		fi.Flags |= packet.FlagLowTTL
	}
	pass := e.defaultPass
	if !p.Out && e.nat != nil && !e.nat.In(p) {
		fi.Flags |= packet.FlagBadNAT
		res.Pass = ruleset.FRBlock
		res.Reason = ReasonNATv4
		if fi.Version == 6 {
			res.Reason = ReasonNATv6
		}
		res.Verdict = VerdictBlock
		e.count(out, &res)
		return res
	}
	sc.portcmp = fi.Flags&packet.FlagTCPUDP != 0 && fi.DLen > 3 && fi.Off == 0

	if !p.Out {
		e.account(&sc, &set.AcctIn)
	}
	// fragKept: a fragment entry a keep-state flow made passed the
	// packet; IPFilter then neither dup-to's nor routes it by `to`
	// (checked against its ipftest)
	matched, badFrag, fragKept := false, false, false
	var statePass uint32 // the flags a pps-blocked packet's entry keeps
	if fi.Flags&packet.FlagFrag != 0 && fi.Flags&packet.FlagBad == 0 {
		e.fragKey(p)
		end, _ := firstFragEnd(p)
		fe, bad := e.Frags.Lookup(&p.fk, fi.Off, fi.DLen, fi.PLen, end)
		if bad {
			// A fragment overlapping the first one is an attack on
			// reassembly: it is marked bad (ipf_frag_lookup) and goes
			// on to the rules like any bad packet, which match
			// `with bad` and refuse it state.
			fi.Flags |= packet.FlagBad
			badFrag = true
		} else if fe != nil {
			// The rule is nil when the first fragment matched a state
			// entry no rule made (a NAT proxy's).
			if r, ok := fe.Rule.(*ruleset.Rule); ok {
				pass = fe.Pass
				if pass&ruleset.FRKeepState != 0 {
					fi.Flags |= packet.FlagState
					pass &^= ruleset.FRKeepState
					fragKept = true
				}
				if pass&ruleset.FRLogFirst != 0 {
					pass &^= ruleset.FRLogFirst | ruleset.FRLog
				}
				sc.rule, sc.ruleNum = r, fe.RuleNum
				if r != nil {
					sc.group = r.Group
				}
				matched = true
			}
		}
	}
	if !matched {
		if se, ok := e.stateCheck(p); ok {
			pass = se.Pass
			if pass&ruleset.FRLogFirst != 0 {
				pass &^= ruleset.FRLogFirst | ruleset.FRLog
			}
			fi.Flags |= packet.FlagState
			if r, ok := se.Cookie.(*ruleset.Rule); ok {
				sc.rule = r
			}
			sc.ruleNum, sc.group = se.RuleNum, se.Group
			res.State = se
			matched = true
			if fi.Flags&packet.FlagFrag != 0 && isPass(pass) {
				e.addFrag(p, pass, sc.rule, sc.ruleNum)
			}
		}
	}
	if !matched || pass&ruleset.FRNoMatch != 0 {
		list := &set.In
		if p.Out {
			list = &set.Out
		}
		pass = sc.scanList(list, pass)
		if pass&(ruleset.FRKeepState|ruleset.FRKeepFrag) == ruleset.FRKeepFrag && fi.Flags&packet.FlagFrag != 0 {
			// the entry gives the rest of the datagram the flags of the
			// rule matched last (ipf_frag_known reads fr_flags): see
			// ruleFlags
			e.addFrag(p, sc.ruleFlags(pass), sc.rule, sc.ruleNum)
		}
		if sc.rule != nil && pass&ruleset.FRNoMatch == 0 && pass&(ruleset.FRCmdMask|ruleset.FRCallNow) == ruleset.FRCall &&
			sc.rule.Call.Func != "" {
			// A deferred call runs after the scan (ipf_firewall).
			if gr := sc.callGroup(sc.rule, pass); gr != nil {
				pass = gr.Flags
			}
		}
		if sc.rule != nil && pass&ruleset.FRNoMatch == 0 && sc.rule.KeepLimit != 0 &&
			!e.limits.admit(sc.rule, fi, e.clock.Ticks(), &e.stateCfg) {
			// Over the DCA limit: the rule's return-* reply is kept.
			pass &^= ruleset.FRCmdMask
			pass |= ruleset.FRBlock | sc.rule.LimitReturn
			sc.icode = sc.rule.ICMPCode
		}
		if sc.rule != nil && pass&ruleset.FRNoMatch == 0 && sc.rule.PPS != 0 && e.ppsExceeded(sc.rule) {
			// The packet is blocked, but a keep-state rule still makes
			// its entry, with the rule's flags (ipf_state_add reads
			// fr_flags): it passes the flow's later packets, and an
			// auth rule's entry, made now that the packet is not
			// queued, authenticates them (checked against IPFilter's
			// ipftest: semantics pps-keep-state).
			statePass = sc.ruleFlags(pass)
			pass &^= ruleset.FRCmdMask | ruleset.FRRetMask
			pass |= ruleset.FRBlock
			sc.reason = ReasonPPSRate
		}
	}
	if badFrag && sc.reason == ReasonRule {
		// Set after the scan, so the log records of the rules it met
		// carry none (as in the kernel datapath).
		sc.reason = ReasonBadFrag
	}
	if pass&ruleset.FRKeepState != 0 && fi.Flags&(packet.FlagState|packet.FlagBadNAT) == 0 &&
		pass&ruleset.FRCmdMask != ruleset.FRAuth {
		// An auth packet is queued, not passed: it creates no state.
		// After a quick rule whose entry could not be added, the same
		// entry is refused again and the packet blocked (ruleFlags).
		if statePass == 0 {
			statePass = sc.ruleFlags(pass)
		}
		if se, ok := e.stateAdd(&sc, statePass); ok {
			res.State = se
		} else if isPass(pass) {
			pass &^= ruleset.FRCmdMask
			pass |= ruleset.FRBlock
			sc.reason = ReasonStateAdd
		}
	}
	if p.Out && isPass(pass) {
		e.account(&sc, &set.AcctOut)
		if e.nat != nil {
			tag := ""
			if sc.rule != nil {
				tag = sc.rule.NATTag
				if tag == "" {
					tag = NATTagNone
				}
			}
			// ipf_nat_checkout translates for the interface a `to IF`
			// rule sends the packet out of, not the one it came to:
			// fr_tifs[fin_rev], so a reply its state entry passed goes
			// by the rule's reply-to (and by its own interface when
			// the rule has none), not by its to.
			ifn := p.IfName
			if rt := routeIface(sc.rule, p.stateRev); rt != "" {
				p.IfName = rt
			}
			ok := e.nat.Out(p, tag)
			p.IfName = ifn
			if !ok {
				// A packet no rule matched is still blocked when NAT
				// fails: the no-match bit must go, or the verdict would
				// read as nomatch (which passes).
				fi.Flags |= packet.FlagBadNAT
				pass &^= ruleset.FRCmdMask | ruleset.FRNoMatch
				pass |= ruleset.FRBlock
				sc.reason = ReasonNATv4
				if fi.Version == 6 {
					sc.reason = ReasonNATv6
				}
			} else if e.updateIPID && fi.Version == 4 && !e.rewriteIPID(p) {
				pass = ipidFailed(pass, &sc)
			}
		} else if e.updateIPID && fi.Version == 4 && !e.rewriteIPID(p) {
			pass = ipidFailed(pass, &sc)
		}
	}
	if pass&ruleset.FRLog != 0 && e.logger != nil && !e.logSuppressed(sc.rule) {
		lm := pass & ruleset.FRLogMask
		if lm == ruleset.FRLog|ruleset.FRPass || lm == ruleset.FRLog|ruleset.FRBlock {
			if err := e.log(&sc, pass); err != nil && pass&ruleset.FRLogOrBlock != 0 {
				pass &^= ruleset.FRCmdMask
				pass |= ruleset.FRBlock
				sc.reason = ReasonLogFail2
			}
		}
	}
	if e.reply != nil && !p.Out && pass&ruleset.FRNoMatch == 0 && pass&ruleset.FRCmdMask == ruleset.FRBlock {
		switch pass & ruleset.FRRetMask {
		case ruleset.FRRetRST:
			if fi.Proto == packet.ProtoTCP && fi.Flags&(packet.FlagShort|packet.FlagOOW) == 0 && fi.TCPFlags&packet.TCPFlagRst == 0 {
				e.reply.SendRST(p)
			}
		case ruleset.FRRetICMP:
			e.reply.SendICMP(p, sc.icode, false)
		case ruleset.FRFakeICMP:
			e.reply.SendICMP(p, sc.icode, true)
		}
	}
	routedNoMatch := false
	if e.router != nil && sc.rule != nil && !fragKept && (isPass(pass) || pass&ruleset.FRCmdMask == ruleset.FRPreauth) {
		// ipf_check sends the packet where the last rule it matched
		// says: a preauth rule's, or a log rule's that a packet no
		// rule decided went on past (it passes as no-match).
		res.Forwarded = e.forward(p, sc.rule, res.State)
		routedNoMatch = res.Forwarded && pass&ruleset.FRNoMatch != 0
	} else if e.router != nil && sc.rule != nil && sc.rule.DupTo != nil &&
		(pass&ruleset.FRCmdMask == ruleset.FRBlock || pass&(ruleset.FRCmdMask|ruleset.FRNoMatch) == ruleset.FRNoMatch) {
		// IPFilter sends the dup-to copy of a blocked packet too (a
		// monitor sees what was dropped); a block rule's `to` is not
		// followed (see docs/ipfilter-differences.md).
		if ifn, nh, ok := e.target(p, sc.rule.DupTo); ok {
			// counted as leaving by ifn, as a passed packet's copy
			// (forward): a block rule's keep state entry counts it
			e.dupCopy(p, ifn, nh, sc.rule)
		}
	}
	res.Pass = pass
	res.Rule, res.RuleNum, res.Group = sc.rule, sc.ruleNum, sc.group
	res.Reason = sc.reason
	res.ICMPCode = sc.icode
	// A `nomatch` rule's flags have no pass bit: IPFilter drops the
	// packet it matched, and ipftest reports a no-match whose packet is
	// gone (bad-packet).
	// A no-match packet a log rule's `to` took away is gone: ipftest
	// reports bad-packet, as for a no-match it dropped.
	res.Verdict = verdictOf(pass, routedNoMatch || pass&ruleset.FRNoMatch != 0 && pass&ruleset.FRCmdMask == 0)
	if res.Verdict == VerdictAuth && res.Reason == ReasonRule {
		// The packet is taken for authentication (FRB_AUTHNEW).
		res.Reason = ReasonAuthNew
	}
	e.count(out, &res)
	return res
}

func (e *Engine) count(out int, r *Result) {
	switch r.Verdict {
	case VerdictPass:
		e.stats.pass[out].Add(1)
	case VerdictNoMatch:
		e.stats.nomatch[out].Add(1)
	case VerdictBadPacket:
		e.stats.bad[out].Add(1)
	default:
		e.stats.block[out].Add(1)
	}
}

// verdictOf maps result flags to a verdict in ipftest's order (§2.3).
func verdictOf(pass uint32, dropped bool) Verdict {
	if pass&ruleset.FRNoMatch != 0 {
		if dropped {
			return VerdictBadPacket
		}
		return VerdictNoMatch
	}
	switch pass & ruleset.FRRetMask {
	case ruleset.FRRetRST:
		return VerdictBlockReturnRST
	case ruleset.FRRetICMP:
		return VerdictBlockReturnICMP
	case ruleset.FRFakeICMP:
		return VerdictBlockReturnICMPAsDest
	}
	switch pass & ruleset.FRCmdMask {
	case ruleset.FRPass:
		return VerdictPass
	case ruleset.FRBlock:
		return VerdictBlock
	case ruleset.FRAuth:
		return VerdictAuth
	case ruleset.FRAccount:
		return VerdictAccount
	case ruleset.FRPreauth:
		return VerdictPreauth
	}
	return VerdictNoMatch
}

func isPass(pass uint32) bool { return pass&ruleset.FRCmdMask == ruleset.FRPass }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// account scans an accounting list; it only bumps rule counters.
func (e *Engine) account(sc *scan, l *ruleset.List) {
	if len(l.Rules) == 0 {
		return
	}
	a := scan{e: e, p: sc.p, ruleNum: -1, portcmp: sc.portcmp}
	a.scanList(l, ruleset.FRNoMatch)
	if a.matched {
		e.stats.counted[b2i(sc.p.Out)].Add(1)
	}
}

// scanList is ipf_scanlist (§2.3).
func (sc *scan) scanList(l *ruleset.List, pass uint32) uint32 {
	sc.matched = false
	skip := 0
	p := sc.p
	hot := l.Hot
	if len(hot) != len(l.Rules) {
		hot = nil
	}
	if hot != nil && sc.alen == 0 {
		sc.words()
	}
	for n, r := range l.Rules {
		if skip > 0 {
			skip--
			continue
		}
		if hot != nil && sc.reject(&hot[n]) {
			continue
		}
		if !sc.match(r) {
			continue
		}
		passo := pass
		passt := r.Flags
		if passt&ruleset.FRCallNow != 0 {
			r.Stats.Hits.Add(1)
			gr := sc.callGroup(r, passt)
			if gr == nil {
				continue
			}
			r = gr
			passt = r.Flags
		}
		if passt&ruleset.FRLogMask == ruleset.FRLog && !sc.e.logSuppressed(r) {
			if err := sc.e.log(sc, passt); err != nil && passt&ruleset.FRLogOrBlock != 0 {
				passt &^= ruleset.FRCmdMask
				passt |= ruleset.FRBlock | ruleset.FRQuick
				sc.reason = ReasonLogFail
			}
		}
		r.Stats.Hits.Add(1)
		r.Stats.Bytes.Add(uint64(p.Info.PLen))
		sc.rule, sc.ruleNum, sc.group = r, n, r.Group
		sc.matched = true
		sc.quickFail = false
		if passt&ruleset.FRCmdMask == ruleset.FRSkip && r.Skip > 0 {
			skip = r.Skip
		} else if lm := passt & ruleset.FRLogMask; lm != ruleset.FRLog && passt&ruleset.FRCmdMask != ruleset.FRDecap {
			pass = passt
		}
		if passt&ruleset.FRRetMask != 0 {
			sc.icode = r.ICMPCode
		}
		if passt&ruleset.FRCmdMask == ruleset.FRDecap {
			// decapsulate never decides by itself; its head group
			// judges the inner packet.
			if r.HeadList != nil && sc.depth < 16 {
				if inner, ok := sc.decapScan(r.HeadList, pass); ok {
					pass = inner
				}
			}
		} else if r.HeadList != nil && sc.depth < 16 {
			sc.depth++
			inner := pass
			saved := *sc
			inner = sc.scanList(r.HeadList, pass)
			sc.depth--
			if !sc.matched {
				sc.rule, sc.ruleNum, sc.group = saved.rule, saved.ruleNum, saved.group
				inner = pass
			}
			sc.matched = true
			pass = inner
		}
		if pass&ruleset.FRQuick != 0 {
			if pass&ruleset.FRKeepState != 0 && pass&ruleset.FRCmdMask != ruleset.FRAuth &&
				p.Info.Flags&packet.FlagState == 0 {
				// ipf_scanlist adds the entry for this list's rule
				// (fin_fr = fr): a head whose group left its quick
				// keep-state verdict after a group rule's own add
				// failed makes the entry by the head's limits, not
				// that full group rule's (which made a quick block
				// head a pass: faith17)
				sc.rule = r
				if _, ok := sc.e.stateAdd(sc, pass); !ok {
					pass = passo
					sc.quickFail = true
					continue
				}
			}
			break
		}
	}
	return pass
}

// decapScan scans group g against the packet carried inside the current
// one (IP-in-IP, IPv6-in-IP or GRE carrying IPv4/IPv6), as IPFilter 5.x's
// ipf_decaps does. ok is false when the packet carries nothing the
// engine can decapsulate, or when nothing in g matched: the verdict
// then stays. The inner packet lives only for this scan; decapsulating
// rules are rare, so its allocation is accepted off the common path.
func (sc *scan) decapScan(g *ruleset.List, pass uint32) (uint32, bool) {
	p := sc.p
	fi := &p.Info
	if fi.Off != 0 || fi.Flags&(packet.FlagShort|packet.FlagBad) != 0 || fi.L4Off <= 0 {
		return pass, false
	}
	end := min(fi.L4Off+fi.DLen, len(p.Data))
	if fi.L4Off >= end {
		return pass, false
	}
	payload := p.Data[fi.L4Off:end]
	switch fi.L4Proto {
	case 4, 41:
	case 47:
		payload = greInner(payload)
		if payload == nil {
			return pass, false
		}
	default:
		return pass, false
	}
	in := &Packet{}
	in.Load(payload, p.IfName, p.Out, p.LinkFlags)
	if in.ParseErr != nil {
		return pass, false
	}
	saved := *sc
	sub := scan{e: sc.e, p: in, ruleNum: -1, depth: sc.depth + 1}
	sub.portcmp = in.Info.Flags&packet.FlagTCPUDP != 0 && in.Info.DLen > 3 && in.Info.Off == 0
	res := sub.scanList(g, pass)
	*sc = saved
	if !sub.matched {
		return pass, false
	}
	sc.rule, sc.ruleNum, sc.group = sub.rule, sub.ruleNum, sub.group
	sc.icode = sub.icode
	return res, true
}

// greInner returns the IPv4 or IPv6 packet a GRE (RFC 2784/2890) header
// carries, or nil.
func greInner(b []byte) []byte {
	if len(b) < 4 || b[1]&0x07 != 0 {
		return nil
	}
	n := 4
	if b[0]&0x80 != 0 { // checksum present
		n += 4
	}
	if b[0]&0x20 != 0 { // key present
		n += 4
	}
	if b[0]&0x10 != 0 { // sequence number present
		n += 4
	}
	et := uint16(b[2])<<8 | uint16(b[3])
	if (et != 0x0800 && et != 0x86dd) || len(b) <= n {
		return nil
	}
	return b[n:]
}

// callGroup runs a srcgrpmap/dstgrpmap call: it scans the group the
// group-map names for the packet's address and returns the rule that
// matched there, or nil.
func (sc *scan) callGroup(r *ruleset.Rule, pass uint32) *ruleset.Rule {
	e := sc.e
	if e.gmaps == nil {
		return nil
	}
	a := sc.p.Info.Src
	if r.Call.Func == "dstgrpmap" {
		a = sc.p.Info.Dst
	}
	name, ok := e.gmaps.GroupFor(r.CallTable, a)
	if !ok {
		return nil
	}
	g := e.sets.Active().Groups[name]
	if g == nil || sc.depth >= 16 {
		return nil
	}
	saved := *sc
	sc.depth++
	sc.scanList(g, pass)
	matched, rule := sc.matched, sc.rule
	*sc = saved
	if !matched {
		return nil
	}
	return rule
}

// words computes the packet addresses in ruleset.Words form.
func (sc *scan) words() {
	fi := &sc.p.Info
	sc.srcW, sc.dstW = ruleset.Words(fi.Src), ruleset.Words(fi.Dst)
	sc.alen = uint8(fi.Src.BitLen() / 8)
}

// reject is the ruleset.Hot prefilter: true means the rule cannot match.
func (sc *scan) reject(h *ruleset.Hot) bool {
	fi := &sc.p.Info
	if h.Out != sc.p.Out || (h.Family != 0 && h.Family != fi.Version) || (h.HasProto && h.Proto != fi.Proto) {
		return true
	}
	if h.SrcLen != 0 {
		hit := h.SrcLen == sc.alen && sc.srcW[0]&h.SrcM[0] == h.SrcW[0] && sc.srcW[1]&h.SrcM[1] == h.SrcW[1]
		if hit == h.SrcNot {
			return true
		}
	}
	if h.DstLen != 0 {
		hit := h.DstLen == sc.alen && sc.dstW[0]&h.DstM[0] == h.DstW[0] && sc.dstW[1]&h.DstM[1] == h.DstW[1]
		if hit == h.DstNot {
			return true
		}
	}
	return false
}

// match is ipf_check_ipf plus the interface and tag checks.
func (sc *scan) match(r *ruleset.Rule) bool {
	p := sc.p
	fi := &p.Info
	if r.Out != p.Out {
		return false
	}
	if r.IfName != "" && r.IfName != p.IfName {
		return false
	}
	if r.Family != 0 && r.Family != fi.Version {
		return false
	}
	if r.NATTag != "" && !p.Out && r.NATTag != p.NATTag {
		return false
	}
	t := r.Tests
	if t == 0 {
		return true
	}
	if t&ruleset.TestExpr != 0 {
		return sc.exprMatch(r.Expr)
	}
	if t&ruleset.TestProto != 0 {
		if r.TCPUDP {
			if fi.Flags&packet.FlagTCPUDP == 0 {
				return false
			}
		} else if fi.Proto != r.Proto {
			return false
		}
	}
	if t&ruleset.TestTos != 0 && fi.TOS != r.Tos {
		return false
	}
	if t&ruleset.TestTTL != 0 && fi.TTL != r.TTL {
		return false
	}
	if t&ruleset.TestOpt != 0 {
		if fi.Version != 4 || fi.OptMask&r.OptMask != r.Opt || fi.SecMask&r.SecMask != r.Sec {
			return false
		}
	}
	if t&ruleset.TestV6Hdr != 0 {
		if fi.Version != 6 || fi.OptMask&r.V6Mask != r.V6 {
			return false
		}
	}
	if t&ruleset.TestSrc != 0 && !sc.addrMatch(&r.Src4, fi.Src, &sc.srcW) {
		return false
	}
	if t&ruleset.TestDst != 0 && !sc.addrMatch(&r.Dst4, fi.Dst, &sc.dstW) {
		return false
	}
	if t&ruleset.TestWith != 0 && uint32(fi.Flags)&r.WithMask != r.With {
		return false
	}
	if sc.portcmp {
		return tcpudpCheck(r, fi)
	}
	if t&(ruleset.TestSrcPort|ruleset.TestDstPort|ruleset.TestFlags) != 0 {
		return false
	}
	if t&ruleset.TestICMP != 0 {
		if (fi.Proto != packet.ProtoICMP && fi.Proto != packet.ProtoICMPv6) || fi.Off != 0 || fi.DLen < 2 || !fi.HasICMP {
			return false
		}
		if (uint16(fi.ICMPType)<<8|uint16(fi.ICMPCode))&r.ICMPMask != r.ICMPValue {
			return false
		}
	}
	return true
}

// exprMatch is ipf_fr_matcharray: clauses are ANDed, the values of one
// clause ORed. A clause whose implied protocol differs from the packet's
// ends the test with no match, even for `!=`.
func (sc *scan) exprMatch(x []ruleset.ExprTest) bool {
	fi := &sc.p.Info
	if sc.alen == 0 {
		sc.words()
	}
	for i := range x {
		c := &x[i]
		if c.Proto != 0 && c.Proto != fi.Proto {
			return false
		}
		rv := false
		for j := range c.Vals {
			v := &c.Vals[j]
			switch c.Op {
			case ruleset.ExprProto:
				rv = uint32(fi.Proto) == v.Num
			case ruleset.ExprAddr, ruleset.ExprSrc, ruleset.ExprDst, ruleset.ExprAddr6, ruleset.ExprSrc6, ruleset.ExprDst6:
				want := uint8(4)
				if c.Op >= ruleset.ExprAddr6 {
					want = 6
				}
				if fi.Version != want {
					break
				}
				src := sc.srcW[0]&v.M[0] == v.W[0] && sc.srcW[1]&v.M[1] == v.W[1]
				dst := sc.dstW[0]&v.M[0] == v.W[0] && sc.dstW[1]&v.M[1] == v.W[1]
				switch c.Op {
				case ruleset.ExprSrc, ruleset.ExprSrc6:
					rv = src
				case ruleset.ExprDst, ruleset.ExprDst6:
					rv = dst
				default:
					rv = src || dst
				}
			case ruleset.ExprPort:
				rv = uint32(fi.SrcPort) == v.Num || uint32(fi.DstPort) == v.Num
			case ruleset.ExprSport:
				rv = uint32(fi.SrcPort) == v.Num
			case ruleset.ExprDport:
				rv = uint32(fi.DstPort) == v.Num
			case ruleset.ExprFlags:
				rv = uint32(fi.TCPFlags)&v.Mask == v.Num
			}
			if rv {
				break
			}
		}
		if rv == c.Not {
			return false
		}
	}
	return true
}

func tcpudpCheck(r *ruleset.Rule, fi *packet.Info) bool {
	ok := true
	if r.Tests&ruleset.TestDstPort != 0 {
		ok = portCheck(&r.DstPort, fi.DstPort)
	}
	if ok && r.Tests&ruleset.TestSrcPort != 0 {
		ok = portCheck(&r.SrcPort, fi.SrcPort)
	}
	if ok && fi.Proto == packet.ProtoTCP {
		if fi.Flags&packet.FlagShort != 0 {
			return r.Tests&ruleset.TestFlags == 0
		}
		if r.Tests&ruleset.TestFlags != 0 && r.TCPFlags != fi.TCPFlags&r.TCPFlagsMask {
			return false
		}
	} else if ok && r.Tests&ruleset.TestFlags != 0 {
		// Flags on a non-TCP packet: IPFilter's rule would carry proto tcp.
		return false
	}
	// No ICMP test here: ipf_check_ipf compares ports or the ICMP type,
	// not both, so an icmp-type rule without a protocol (`pass in all
	// icmp-type echo`, which IPFilter's parser takes after `all`)
	// matches every TCP or UDP packet whose ports it compares (checked
	// against its ipftest: ipfdiff seed 1701 bucket 19, faith17).
	return ok
}

func portCheck(pt *ipf.Port, port uint16) bool {
	switch pt.Op {
	case ipf.PortEq:
		return port == pt.Lo
	case ipf.PortNe:
		return port != pt.Lo
	case ipf.PortLt:
		return port < pt.Lo
	case ipf.PortGt:
		return port > pt.Lo
	case ipf.PortLe:
		return port <= pt.Lo
	case ipf.PortGe:
		return port >= pt.Lo
	case ipf.PortOutRange:
		return port < pt.Lo || port > pt.Hi
	case ipf.PortInRange:
		return port > pt.Lo && port < pt.Hi
	case ipf.PortRange:
		return port >= pt.Lo && port <= pt.Hi
	}
	return true
}

func (sc *scan) addrMatch(m *ruleset.AddrMatch, a netip.Addr, w *[2]uint64) bool {
	var hit bool
	switch m.Kind {
	case ipf.AddrAny:
		hit = true
	case ipf.AddrHost:
		if sc.alen == 0 {
			sc.words()
		}
		hit = m.MatchWords(*w, sc.alen)
	case ipf.AddrPool, ipf.AddrHash:
		if sc.e.pools == nil {
			return false
		}
		role := ippool.RoleIPF
		if m.Count {
			role = ippool.RoleCount
		}
		hit = sc.e.pools.ContainsRole(role, m.Kind == ipf.AddrHash, m.Table, a)
	case ipf.AddrIface:
		hit = sc.e.ifaceAddrMatch(m, a)
	}
	return hit != m.Not
}

// ifaceAddrMatch tests a against an address taken from an interface
// (ipf_ifpaddr/ipf_ifpfillv4addr; ruleset.AddrMatch.IfaceTarget says what
// each form means). Without IfNetworks the interface's netmask is taken as
// all ones, as IPFilter's userland build does. An interface with no known
// address matches nothing.
func (e *Engine) ifaceAddrMatch(m *ruleset.AddrMatch, a netip.Addr) bool {
	if e.ifaddr == nil {
		return false
	}
	v6 := a.Is6()
	ia, ok := e.ifaddr.IfAddr(m.Iface, v6)
	if !ok {
		return false
	}
	n := ruleset.HostOnly(ia)
	if m.IfaceMode != ipf.IfaceDynamic && e.ifnets != nil {
		in, ok := e.ifnets.IfNetwork(m.Iface, v6)
		if !ok {
			return false
		}
		n = in
	}
	pfx, ok := m.IfaceTarget(n)
	return ok && pfx.Contains(a)
}

// logSuppressed applies HP's `log limit [freq N]` (ipf-reference §7): a
// rule with it writes at most N log records (1 without freq) per
// one-second window, counted like pps. A suppressed record is not a
// failed one, so `or-block` does not fire. [HP; the window is inferred.]
func (e *Engine) logSuppressed(r *ruleset.Rule) bool {
	if r == nil || !r.LogLimit || e.logger == nil {
		return false
	}
	n := r.LogLimitFreq
	if n == 0 {
		n = 1
	}
	now := e.clock.Ticks()
	st := r.Stats
	if st.LogCount.Load() == 0 || now-st.LogStart.Load() >= 2 {
		st.LogStart.Store(now)
		st.LogCount.Store(1)
		return false
	}
	return st.LogCount.Add(1) > n
}

func (e *Engine) ppsExceeded(r *ruleset.Rule) bool {
	now := e.clock.Ticks()
	st := r.Stats
	start := st.PPSStart.Load()
	if st.PPSCount.Load() == 0 || now-start >= 2 {
		st.PPSStart.Store(now)
		st.PPSCount.Store(1)
		return false
	}
	return st.PPSCount.Add(1) > r.PPS
}

func (e *Engine) log(sc *scan, pass uint32) error {
	if e.logger == nil {
		return nil
	}
	rec := LogRecord{Pkt: sc.p, Pass: pass, Rule: sc.ruleNum, Group: sc.group, Reason: sc.reason,
		Body: pass&ruleset.FRLogBody != 0}
	if sc.rule != nil {
		rec.LogTag = sc.rule.LogTag
		rec.RuleRef = sc.rule
	}
	err := e.logger.LogPacket(&rec)
	if err == nil {
		e.stats.logged[b2i(sc.p.Out)].Add(1)
	}
	return err
}

// forward handles dup-to, fastroute and to/route-to of the deciding rule.
func (e *Engine) forward(p *Packet, r *ruleset.Rule, st *state.Entry) bool {
	if r.DupTo != nil {
		if ifn, nh, ok := e.target(p, r.DupTo); ok {
			e.dupCopy(p, ifn, nh, r)
		}
	}
	if !p.Out && r.Flags&ruleset.FRFastroute != 0 {
		// ipf_check: an inbound fastroute packet goes to
		// ipf_fastroute with no destination, i.e. back out of the
		// interface it came in on, routed by destination; it takes
		// precedence over `to`.
		if e.leaveAs(p, p.IfName, r) {
			e.router.Route(p, p.IfName, netip.Addr{}, false)
		}
		return true
	}
	t := r.RouteTo
	if p.stateRev {
		// A state entry keeps the rule's destinations per direction
		// (is_tifs): replies follow reply-to, not to.
		t = r.ReplyTo
	}
	if t != nil {
		if ifn, nh, ok := e.flowTarget(p, t, st); ok {
			if p.Out || e.leaveAs(p, ifn, r) {
				e.router.Route(p, ifn, nh, false)
			}
			return true
		}
	}
	return false
}

// flowTarget is target for a packet of a state entry's flow: the
// creating packet's choice (a dstlist member picked once per flow, as
// ipf_state_add does) serves the later packets of its direction.
func (e *Engine) flowTarget(p *Packet, t *ipf.RouteTarget, st *state.Entry) (string, netip.Addr, bool) {
	if st == nil || p.stateRev || t.DstList == "" {
		return e.target(p, t)
	}
	if d, ok := e.States.Route(st).(flowDest); ok {
		return d.iface, d.addr, true
	}
	ifn, nh, ok := e.target(p, t)
	if ok {
		e.States.SetRoute(st, flowDest{ifn, nh})
	}
	return ifn, nh, ok
}

// flowDest is the destination a flow's state entry keeps.
type flowDest struct {
	iface string
	addr  netip.Addr
}

// dupCopy sends the dup-to copy of p out of ifn. The copy of an inbound
// packet goes through ipf_fastroute too: counted by the outbound
// accounting and by its flow's state entry as leaving by ifn, then
// NAT-out for ifn. IPFilter runs that NAT with the original packet's
// fr_info_t, so it translates the original's buffer, not the copy, which
// leaves as it came; the session it makes stays, and a failed translation
// (bad-nat) drops the copy (ipf_fastroute's `goto bad`). Sluice
// translates a clone instead and leaves the original alone (C20 in
// docs/ipfilter-differences.md): the session and the dropped copy are
// IPFilter's.
func (e *Engine) dupCopy(p *Packet, ifn string, nh netip.Addr, r *ruleset.Rule) {
	if !p.Out {
		e.leaveCounted(p, ifn, r)
		if e.nat != nil {
			c := *p
			c.Data = append(make([]byte, 0, len(p.Data)+28), p.Data...)
			c.Out, c.IfName = true, ifn
			if !e.nat.Out(&c, "") {
				return
			}
		}
	}
	e.router.Route(p, ifn, nh, true)
}

// leaveAs is the part of ipf_fastroute an inbound packet goes through
// before it is sent out of ifn: it is counted by the outbound accounting
// list and translated by NAT-out for ifn (with no rule tag, as fin_fr is
// cleared). False means NAT failed and the packet is dropped.
func (e *Engine) leaveAs(p *Packet, ifn string, r *ruleset.Rule) bool {
	e.leaveCounted(p, ifn, r)
	inIf := p.IfName
	p.Out, p.IfName = true, ifn
	ok := e.nat == nil || e.nat.Out(p, "")
	p.Out, p.IfName = false, inIf
	return ok
}

// leaveCounted is the accounting and state part of leaveAs.
func (e *Engine) leaveCounted(p *Packet, ifn string, r *ruleset.Rule) {
	inIf := p.IfName
	p.Out, p.IfName = true, ifn
	fi := &p.Info
	sc := scan{e: e, p: p, ruleNum: -1}
	sc.portcmp = fi.Flags&packet.FlagTCPUDP != 0 && fi.DLen > 3 && fi.Off == 0
	e.account(&sc, &e.sets.Active().AcctOut)
	if r == nil || r.Flags&ruleset.FRRetMask == 0 {
		// ipf_fastroute runs the state check on the way out too: the
		// flow's entry counts the packet as outbound and records the
		// interface it leaves by.
		flags := fi.Flags
		fi.Flags &^= packet.FlagState
		e.stateCheck(p)
		fi.Flags = flags
	}
	p.Out, p.IfName = false, inIf
}

// routeIface is the interface a rule's `to IF` (its `reply-to IF` for a
// reply, rev) sends packets out of, "" when it has none (or also
// duplicates them, in which case IPFilter NATs for the original
// interface).
func routeIface(r *ruleset.Rule, rev bool) string {
	if r == nil || r.DupTo != nil {
		return ""
	}
	t := r.RouteTo
	if rev {
		t = r.ReplyTo
	}
	if t == nil {
		return ""
	}
	if ifn := t.Iface; ifn != "-" {
		return ifn
	}
	return ""
}

func (e *Engine) target(p *Packet, t *ipf.RouteTarget) (string, netip.Addr, bool) {
	if t.DstList != "" {
		if e.dsts == nil {
			return "", netip.Addr{}, false
		}
		return e.dsts.SelectDst(t.DstList, p.Info.Src, p.Info.Dst)
	}
	return t.Iface, t.NextHop, t.Iface != ""
}

const maxFragIDs = 4096

// fragID is the IP id update_ipid gave a first fragment, and the offset
// (bytes) at which the first fragment ends: a later fragment that starts
// before it is an overlap IPFilter's fragment cache does not match.
type fragID struct {
	id  uint16
	end int
}

// ruleFlags is what the entry a packet's verdict pass makes (state,
// fragments) records: ipf_state_add and ipf_frag_known take the flags of
// the rule the scan matched last (fin_fr), which is pass's rule except
// after a quick keep-state rule whose entry could not be added: the scan
// went on from the verdict before it, and the entry gets that quick
// rule's flags. (A later log rule's flags are C8: Sluice keeps pass.)
func (sc *scan) ruleFlags(pass uint32) uint32 {
	if sc.quickFail && sc.rule != nil {
		return sc.rule.Flags
	}
	return pass
}

// addFrag makes the fragment cache's entry for p's datagram (ipf_frag_new),
// unless IPFilter makes none for such a fragment (firstFragEnd).
func (e *Engine) addFrag(p *Packet, pass uint32, rule *ruleset.Rule, ruleNum int) {
	fi := &p.Info
	end, ok := firstFragEnd(p)
	if fi.Off == 0 && !ok || fi.Flags&packet.FlagBad != 0 {
		return
	}
	e.fragKey(p)
	e.Frags.Add(&p.fk, pass, rule, ruleNum, fi.Off, fi.DLen, fi.PLen, end)
}

// firstFragEnd reports where the first fragment p ends for the fragments
// that follow, or false when ipfr_frag_new makes no entry for it (checked
// against IPFilter's ipftest, for keep frags and update_ipid alike: a
// first fragment cut inside its TCP header makes one ending at 24, one
// with SYN|FIN makes none). IPFilter keeps the end in 8-byte units (the length
// rounded down: a 12-byte first fragment lets a fragment at offset 8
// through). A TCP header counts as ending at 20 at least, even when cut
// inside its fixed bytes; a TCP header whose options are cut makes none.
// An ICMP error makes none, and neither does a first fragment too short for
// its L4 header, except ICMP (a 8-byte mask request, 12 bytes long, makes
// one) and ICMPv6 (an error quoting less than its 40-byte header: 8 to 47
// bytes, shorter ones are bad) and an IPv4 AH header cut short (any length), or one that is bad (a
// whole TCP header included). Behind IPv4 AH, the end is at least 12.
func firstFragEnd(p *Packet) (int, bool) {
	fi := &p.Info
	if fi.Version == 4 && fi.L4Proto == 6 && fi.L4Off > 0 {
		// Behind an IPv4 AH header, the end is AH's 12 at least, not
		// TCP's 20 (checked against IPFilter's ipftest).
		least := 20
		if fi.Proto == packet.ProtoAH {
			least = packet.AHMinimumSize
		}
		if fi.DLen < 20 {
			return max(fi.DLen&^7, least), true
		}
		if fi.Flags&packet.FlagBad != 0 {
			// A whole TCP header IPFilter calls bad (no flags, a data
			// offset below 20, ...) makes none.
			return fi.DLen &^ 7, false
		}
		if fi.L4Off+12 < len(p.Data) && int(p.Data[fi.L4Off+12]>>4)*4 > fi.DLen {
			return fi.DLen &^ 7, false
		}
		return max(fi.DLen&^7, least), true
	}
	if fi.Flags&packet.FlagBad != 0 {
		return fi.DLen &^ 7, false
	}
	if fi.Flags&packet.FlagShort != 0 && fi.L4Proto != packet.ProtoICMP && fi.L4Proto != packet.ProtoICMPv6 &&
		(fi.Proto != packet.ProtoAH || fi.L4Proto != packet.ProtoNone) {
		// A short AH header (IPv4 AH shorter than 12 bytes, or whatever
		// follows it cut) still makes one: ipf_pr_ah lets the packet on.
		return fi.DLen &^ 7, false
	}
	if fi.Version == 4 && fi.Proto == packet.ProtoAH {
		// Behind an IPv4 AH header the end counts as 12 bytes at least,
		// as TCP's counts as 20: a fragment at offset 8 overlaps.
		return max(fi.DLen&^7, packet.AHMinimumSize), true
	}
	return fi.DLen &^ 7, true
}

// rewriteIPID is ipf_updateipid: outbound IPv4 packets get ids from a
// counter (0, 1, 2, ... as in ipftest); the fragments of one datagram
// share the id its first fragment got.
func (e *Engine) rewriteIPID(p *Packet) bool {
	fi := &p.Info
	if len(p.Data) < 20 {
		return true
	}
	var id uint16
	if fi.Flags&packet.FlagFrag != 0 {
		e.fragKey(p)
		e.idMu.Lock()
		if fi.Off == 0 {
			id = uint16(e.nextIPID.Add(1) - 1)
			if e.fragIDs == nil || len(e.fragIDs) >= maxFragIDs {
				// Bounded like the fragment cache: old datagrams are
				// long gone when this many newer ones were seen.
				e.fragIDs = make(map[fragKeyT]fragID)
			}
			// A second first fragment of a datagram the table holds
			// gets an id of its own but leaves the entry as it was
			// (ipfr_frag_new finds it already there), so the later
			// fragments keep the first one's id.
			if _, dup := e.fragIDs[p.fk]; !dup {
				if end, ok := firstFragEnd(p); ok {
					e.fragIDs[p.fk] = fragID{id: id, end: end}
				}
			}
		} else if v, ok := e.fragIDs[p.fk]; ok && fi.Off >= v.end && fi.Flags&packet.FlagBad == 0 {
			id = v.id
		} else {
			// ipf_updateipid fails for a fragment whose first one it
			// has not seen, that starts inside the first one
			// (ipf_frag_lookup's firstend), or that is bad (a fragment
			// with more to follow whose length is not a multiple of 8:
			// ipf_frag_lookup looks up no FI_BAD packet), and the packet
			// is dropped.
			e.idMu.Unlock()
			return false
		}
		e.idMu.Unlock()
	} else {
		id = uint16(e.nextIPID.Add(1) - 1)
	}
	old := binary.BigEndian.Uint16(p.Data[4:])
	sum := binary.BigEndian.Uint16(p.Data[10:])
	binary.BigEndian.PutUint16(p.Data[4:], id)
	binary.BigEndian.PutUint16(p.Data[10:], packet.ChecksumUpdate16(sum, old, id))
	fi.ID = uint32(id)
	return true
}

// ipidFailed turns pass into a block for a packet whose IP id could not
// be rewritten (reason updateipid-fail). A packet no rule matched is
// dropped as it stands (ipftest reports bad-packet, not block).
func ipidFailed(pass uint32, sc *scan) uint32 {
	sc.reason = ReasonUpdateIPID
	if pass&ruleset.FRNoMatch != 0 {
		return pass &^ ruleset.FRCmdMask
	}
	return pass&^ruleset.FRCmdMask | ruleset.FRBlock
}

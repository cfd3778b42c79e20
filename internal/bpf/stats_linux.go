package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"sluice/internal/ruleset"
)

// DirStats are the per-direction counters (IPFilter's filterstats_t).
type DirStats struct {
	Pass, Block, Nomatch, Acct, Short, Bad uint64
	LogPass, LogBlock, Logged, LogFail     uint64
	StateKept, StateLost, IPv6, Pkts, Frag uint64
	NotIP                                  uint64
}

// Stats are the datapath's global counters.
type Stats struct {
	In, Out DirStats
	// Generated replies.
	RSTSent, ICMPSent, ReplyFail uint64
	// State table.
	StateAdded           [4]uint64 // TCP, UDP, ICMP, other
	StateHits, StateMiss uint64
	StateMaxRefused      uint64
	StateExpired         uint64
	StateClosed          uint64
	StateActive          int64
	OOW                  uint64
	DCABlocked           uint64
	PPSBlocked           uint64
	// Routing: packets sent out by to/fastroute, copies sent by dup-to,
	// and failures of either (the packet then goes on as usual).
	Routed, Duplicated, RouteFail uint64
	// ScanCut counts scans that did not end within their steps (the
	// packet was blocked); the loader's check keeps it at zero.
	ScanCut uint64
	// Swept counts the expired entries the sweeper removed, Flushed the
	// entries the watermark flush removed; DCAFull the connections
	// refused because the keep-limit table was full, SrcFull the state
	// entries of a max-srcs rule refused because the source table was
	// full (or a source's count was being deleted: fail closed).
	Swept, Flushed, DCAFull, SrcFull uint64
	// SweepRuns counts the sweeper's runs: it runs every 0.5 s.
	SweepRuns uint64
	// Drops by reason (ipmon's reason numbers).
	Drops [numReasons]uint64
}

// Stats sums the per-CPU counters.
func (d *Datapath) Stats() (Stats, error) {
	var s Stats
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return s, err
	}
	raw, drops, err := d.statBlock(ncpu)
	if err != nil {
		return s, err
	}
	s.Drops = drops
	dir := func(b int) DirStats {
		return DirStats{
			Pass: raw[b+stPass], Block: raw[b+stBlock], Nomatch: raw[b+stNomatch], Acct: raw[b+stAcct],
			Short: raw[b+stShort], Bad: raw[b+stBad], LogPass: raw[b+stLogPass], LogBlock: raw[b+stLogBlock],
			Logged: raw[b+stLogged], LogFail: raw[b+stLogFail], StateKept: raw[b+stStKept],
			StateLost: raw[b+stStLost], IPv6: raw[b+stIPv6], Pkts: raw[b+stPkts], Frag: raw[b+stFrag],
			NotIP: raw[b+stNotIP],
		}
	}
	s.In, s.Out = dir(0), dir(stDir)
	s.RSTSent, s.ICMPSent, s.ReplyFail = raw[stRST], raw[stICMPRep], raw[stRetFail]
	s.StateAdded = [4]uint64{raw[stAddTCP], raw[stAddUDP], raw[stAddICMP], raw[stAddOther]}
	// the table's hits and misses are counted by direction, in the
	// line each packet counts in anyway
	s.StateHits = raw[stStKept] + raw[stDir+stStKept]
	s.StateMiss = raw[stMiss] + raw[stDir+stMiss]
	s.StateMaxRefused, s.StateExpired, s.StateClosed = raw[stMaxRef], raw[stExpired], raw[stClosed]
	s.OOW, s.DCABlocked, s.PPSBlocked = raw[stOOW], raw[stDCA], raw[stPPS]
	s.Routed, s.Duplicated, s.RouteFail = raw[stRouted], raw[stDupped], raw[stRouteErr]
	s.ScanCut = raw[stScanCut]
	s.DCAFull = raw[stDCAFull]
	s.SrcFull = raw[stSrcFull]
	var sw filterSweeper
	if err := d.objs.Sweeper.Lookup(uint32(0), &sw); err == nil {
		s.Swept, s.Flushed, s.SweepRuns = sw.Swept, sw.Flushed, sw.Runs
		s.StateExpired += sw.Swept
	}
	var active int64
	if err := d.objs.StateCount.Lookup(uint32(0), &active); err == nil {
		s.StateActive = active
	}
	return s, nil
}

// statBlock sums the per-CPU counter blocks, with the counts of clean
// passes (stClean: one increment for pass, pkts, miss and maybe nomatch
// and IPv6) added to each counter they stand for: every reader sees the
// counters the pipeline would have made.
func (d *Datapath) statBlock(ncpu int) (raw [numStats]uint64, drops [numReasons]uint64, err error) {
	add := func(v *[numStats]uint64, dr *[numReasons]uint64) {
		for i := range raw {
			raw[i] += v[i]
		}
		for i := range drops {
			drops[i] += dr[i]
		}
	}
	switch statsLayoutOf(d.objs.Stats) {
	case layoutPerCPU:
		// an older Sluice's layout, opened before a reload moved it
		old := make([]oldStatblock, ncpu)
		if err := d.objs.Stats.Lookup(uint32(0), &old); err != nil {
			return raw, drops, fmt.Errorf("reading stats: %w", err)
		}
		for _, b := range old {
			add(&b.V, &b.Drop)
		}
	case layoutAt2:
		for cpu := 0; cpu < ncpu; cpu++ {
			var b at2Statblock
			if err := d.objs.Stats.Lookup(uint32(cpu), &b); err != nil {
				return raw, drops, fmt.Errorf("reading stats: %w", err)
			}
			add(&b.V, &b.Drop)
		}
	default:
		per, err := d.statBlocks(ncpu)
		if err != nil {
			return raw, drops, err
		}
		for i := range per {
			add(&per[i].V, &per[i].Drop)
		}
	}
	for _, b := range []int{0, stDir} {
		for k := 0; k < 4; k++ {
			c := raw[b+stClean+k]
			raw[b+stClean+k] = 0
			raw[b+stPass] += c
			raw[b+stPkts] += c
			raw[b+stMiss] += c
			if k&stCleanNomatch != 0 {
				raw[b+stNomatch] += c
			}
			if k&stCleanIPv6 != 0 {
				raw[b+stIPv6] += c
			}
		}
	}
	return raw, drops, nil
}

// statBlocks reads each CPU's counter block (this layout's).
func (d *Datapath) statBlocks(ncpu int) ([]filterStatblock, error) {
	per := make([]filterStatblock, ncpu)
	for cpu := range per {
		if err := d.objs.Stats.Lookup(uint32(cpu), &per[cpu]); err != nil {
			return nil, fmt.Errorf("reading stats: %w", err)
		}
	}
	return per, nil
}

// ZeroStats clears the global counters (ipf -Z), not the constant lists'
// rule counters that share their blocks (statblock.fast): those are
// written back as read, so a rule loses the matches its CPU counts
// between the read and the write of the block (microseconds), as the
// statistics always have.
func (d *Datapath) ZeroStats() error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	switch statsLayoutOf(d.objs.Stats) {
	case layoutPerCPU:
		// an older Sluice's layout, opened before a reload moved it
		if err := d.objs.Stats.Put(uint32(0), make([]oldStatblock, ncpu)); err != nil {
			return fmt.Errorf("zeroing stats: %w", err)
		}
		return nil
	case layoutAt2:
		var zero at2Statblock
		for cpu := 0; cpu < ncpu; cpu++ {
			if err := d.objs.Stats.Put(uint32(cpu), &zero); err != nil {
				return fmt.Errorf("zeroing stats: %w", err)
			}
		}
		return nil
	}
	for cpu := 0; cpu < ncpu; cpu++ {
		var b filterStatblock
		if err := d.objs.Stats.Lookup(uint32(cpu), &b); err != nil {
			return fmt.Errorf("zeroing stats: %w", err)
		}
		b.V, b.Drop = [numStats]uint64{}, [numReasons]uint64{}
		if err := d.objs.Stats.Put(uint32(cpu), &b); err != nil {
			return fmt.Errorf("zeroing stats: %w", err)
		}
	}
	return nil
}

// State is one state table entry.
type State struct {
	Proto            uint8
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16 // ICMP: id and type
	TCPState         [2]uint8
	TTL              time.Duration // remaining lifetime
	Idle             time.Duration // since the last packet
	Pass             uint32
	RuleNo           uint32
	Group            uint32
	Tag              uint32
	Pkts, Bytes      [4]uint64 // [rev*2+out]
	Ifindex          [4]uint32
	// TCP window data per side: end:maxend and maxwin<<scale.
	End, MaxEnd, MaxWin [2]uint32
	WScale              [2]uint8
	// Wild: a wildcard entry (its destination or a port not yet known).
	Wild bool
}

func keyAddr(w [4]uint32, fam uint8) netip.Addr {
	b := wordsBytes(w)
	if fam == 4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

// States lists the live (not expired) state entries.
func (d *Datapath) States() ([]State, error) {
	now, err := d.now()
	if err != nil {
		return nil, err
	}
	var (
		k   filterStateKey
		v   filterStateEntry
		out []State
	)
	it := d.objs.States.Iterate()
	for it.Next(&k, &v) {
		if err := d.withSlot(k, &v); err != nil {
			return nil, err
		}
		if v.Expire < now {
			continue
		}
		src, dst, sport, dport := k.Src, k.Dst, k.Sport, k.Dport
		if v.Flags&sfSwap != 0 {
			// a canonical key: the entry goes from its dst end
			src, dst = dst, src
			if k.Proto != 1 && k.Proto != 58 {
				sport, dport = dport, sport
			}
		}
		s := State{
			Proto: k.Proto, Src: keyAddr(src, k.Family), Dst: keyAddr(dst, k.Family),
			SrcPort: sport, DstPort: dport, TTL: time.Duration(v.Expire - now), Idle: time.Duration(now - v.Last),
			Pass: v.Pass, RuleNo: v.RuleNo, Group: v.GroupNo, Tag: v.Logtag,
			Ifindex: v.Ifindex, Wild: k.Wild != 0,
		}
		if k.Wild != 0 && v.Flags&sfGFill != 0 {
			// filled in under its group key (wild_place): a
			// concrete entry to the group
			s.Wild = false
		}
		s.Pkts, s.Bytes = v.counts()
		for i := 0; i < 2; i++ {
			s.TCPState[i] = v.Tcp[i].State
			s.End[i], s.MaxEnd[i], s.MaxWin[i], s.WScale[i] = v.Tcp[i].End, v.Tcp[i].Maxend, v.Tcp[i].Maxwin, v.Tcp[i].Wscale
		}
		out = append(out, s)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading states: %w", err)
	}
	return out, nil
}

// counts adds the entry's counter stripes (each CPU counts in the stripe
// cpu % STATE_STRIPES, a cache line of its own).
func (v *filterStateEntry) counts() (pkts, bytes [4]uint64) {
	for i := range v.Cnt {
		for j := range pkts {
			pkts[j] += v.Cnt[i].Pkts[j]
			bytes[j] += v.Cnt[i].Bytes[j]
		}
	}
	return pkts, bytes
}

// now reads the datapath's clock: CLOCK_MONOTONIC plus the test offset.
func (d *Datapath) now() (uint64, error) {
	ns, err := monotonicNow()
	if err != nil {
		return 0, err
	}
	return ns + d.cfg(cfgClock), nil
}

// FlushStates removes state entries: all of them when match is nil, else
// those for which match returns true. It returns how many were removed.
// The entries are removed by the kernel's own code (sluice_control), so the
// state count and the per-rule counts stay equal to the table.
func (d *Datapath) FlushStates(match func(State) bool) (int, error) {
	unlock, err := d.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	now, err := d.now()
	if err != nil {
		return 0, err
	}
	var (
		k    filterStateKey
		v    filterStateEntry
		keys []filterStateKey
	)
	it := d.objs.States.Iterate()
	for it.Next(&k, &v) {
		if match != nil {
			if err := d.withSlot(k, &v); err != nil {
				return 0, err
			}
			s := State{Proto: k.Proto, TCPState: [2]uint8{v.Tcp[0].State, v.Tcp[1].State}}
			if now > v.Last {
				s.Idle = time.Duration(now - v.Last)
			}
			if v.Expire > now {
				s.TTL = time.Duration(v.Expire - now)
			}
			if !match(s) {
				continue
			}
		}
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("reading states: %w", err)
	}
	// twins first: removing a key's own entry moves its twin there, and
	// the twin's key would then name nothing
	slices.SortStableFunc(keys, func(a, b filterStateKey) int { return int(b.Twin) - int(a.Twin) })
	n := 0
	for len(keys) > 0 {
		batch := keys[:min(len(keys), ctlKeys)]
		keys = keys[len(batch):]
		idx := make([]uint32, len(batch))
		for i := range idx {
			idx[i] = uint32(i)
		}
		if _, err := d.objs.CtlKeys.BatchUpdate(idx, batch, nil); err != nil {
			return n, fmt.Errorf("flushing states: %w", err)
		}
		removed, err := d.control(ctlKill, uint32(len(batch)))
		if err != nil {
			return n, fmt.Errorf("flushing states: %w", err)
		}
		n += removed
	}
	// with the table empty the programs may drop the state lookup (a
	// failure leaves them with it: more than needed, never less)
	_ = d.Specialise()
	return n, nil
}

// FlushFrags empties the fragment cache and returns how many entries it
// held.
func (d *Datapath) FlushFrags() (int, error) {
	var (
		k    filterFragKey
		v    filterFragEntry
		keys []filterFragKey
	)
	it := d.objs.Frags.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("reading fragment cache: %w", err)
	}
	n := 0
	for i := range keys {
		if err := d.objs.Frags.Delete(&keys[i]); err == nil {
			n++
		} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, fmt.Errorf("flushing fragment cache: %w", err)
		}
	}
	// the count of what is left (the sweeper's next pass counts afresh
	// an entry a packet added meanwhile); none in a datapath an older
	// Sluice loaded (optionalMaps)
	if d.objs.FragCount == nil {
		_ = d.Specialise()
		return n, nil
	}
	if err := d.objs.FragCount.Put(uint32(0), int64(0)); err != nil {
		return n, fmt.Errorf("flushing fragment cache: %w", err)
	}
	_ = d.Specialise() // as FlushStates
	return n, nil
}

// Sweep runs the sweeper once now instead of at its next tick: tests that
// move the clock use it.
func (d *Datapath) Sweep() error {
	_, err := d.control(ctlSweep, 0)
	return err
}

// StateCount returns the kernel's count of state entries (what state_max
// is compared with); it always equals the number of entries in the table.
func (d *Datapath) StateCount() (int64, error) {
	var c int64
	if err := d.objs.StateCount.Lookup(uint32(0), &c); err != nil {
		return 0, fmt.Errorf("reading state count: %w", err)
	}
	return c, nil
}

// StateEntries counts the entries in the state table, expired or not
// (StateCount should equal it). Each key counts once: a walk of a hash
// map that entries leave meanwhile restarts at its first bucket
// (BPF_MAP_GET_NEXT_KEY of a deleted key), so keys seen before come
// again and a plain count would overstate the table.
func (d *Datapath) StateEntries() (int, error) {
	var (
		k filterStateKey
		v filterStateEntry
	)
	seen := make(map[filterStateKey]struct{}, 1024)
	it := d.objs.States.Iterate()
	for it.Next(&k, &v) {
		seen[k] = struct{}{}
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("reading states: %w", err)
	}
	return len(seen), nil
}

// LogRecord is one record of the datapath's log ring (ipmon reads these).
type LogRecord struct {
	Time    time.Duration // CLOCK_MONOTONIC at logging
	State   bool          // a state record rather than a packet record
	Ifindex uint32
	Out     bool
	Family  uint8
	RuleNo  int32  // 1-based rule number, -1 when no rule matched
	List    uint32 // list id of the rule (0 in, 1 out, 2/3 accounting, 4+ groups)
	Pass    uint32 // verdict flags (FR_*)
	Reason  uint32 // block reason (ipmon's numbering)
	Flags   uint32 // packet flags (FI_*)
	Len     uint32 // IP length
	Tag     uint32 // set-tag(log=N)
	Data    []byte // the packet from its IP header, up to 128 bytes
}

// Blocked reports whether the logged verdict was block.
func (r *LogRecord) Blocked() bool {
	c := r.Pass & ruleset.FRCmdMask
	return c == ruleset.FRBlock || c == ruleset.FRAuth || c == ruleset.FRPreauth
}

// LogReader reads log records from the ring.
type LogReader struct {
	rd *ringbuf.Reader
}

// OpenLog starts reading the log ring.
func (d *Datapath) OpenLog() (*LogReader, error) {
	rd, err := ringbuf.NewReader(d.objs.LogRing)
	if err != nil {
		return nil, fmt.Errorf("opening log ring: %w", err)
	}
	return &LogReader{rd: rd}, nil
}

// SetDeadline makes Read return os.ErrDeadlineExceeded after t.
func (l *LogReader) SetDeadline(t time.Time) { l.rd.SetDeadline(t) }

// Read blocks for the next record.
func (l *LogReader) Read() (LogRecord, error) {
	rec, err := l.rd.Read()
	if err != nil {
		return LogRecord{}, err
	}
	return decodeLog(rec.RawSample)
}

// Close stops reading.
func (l *LogReader) Close() error { return l.rd.Close() }

func decodeLog(b []byte) (LogRecord, error) {
	var k filterLogRec
	hdr, size := binary.Size(k)-logSnap, len(b)
	if size < hdr {
		return LogRecord{}, fmt.Errorf("log record of %d bytes", len(b))
	}
	if len(b) < binary.Size(k) {
		// the ring holds whole records; a short one only in tests
		b = append(append([]byte(nil), b...), make([]byte, binary.Size(k)-len(b))...)
	}
	if _, err := binary.Decode(b, binary.NativeEndian, &k); err != nil {
		return LogRecord{}, fmt.Errorf("log record: %w", err)
	}
	r := LogRecord{
		Time:    time.Duration(k.Ts),
		State:   k.Kind == logState,
		Ifindex: k.Ifindex,
		RuleNo:  int32(k.RuleNo),
		List:    k.GroupNo,
		Pass:    k.Pass,
		Reason:  k.Reason,
		Flags:   k.Pflags,
		Len:     k.Plen,
		Tag:     k.Logtag,
		Out:     k.Dir != 0,
		Family:  k.Family,
	}
	n := int(k.Caplen)
	if n > logSnap || hdr+n > size {
		return r, fmt.Errorf("log record caplen %d", n)
	}
	r.Data = append([]byte(nil), k.Data[:n]...)
	return r, nil
}

// filterSpec is the filter's collection spec with the counters' array
// sized to the possible CPUs (one statblock each, keyed by CPU number):
// every load of the filter (the datapath, its specialised variants) must
// see the same size, or the pinned map would not fit.
func filterSpec() (*ebpf.CollectionSpec, error) {
	spec, err := loadFilter()
	if err != nil {
		return nil, err
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	spec.Maps["stats"].MaxEntries = uint32(ncpu)
	return spec, nil
}

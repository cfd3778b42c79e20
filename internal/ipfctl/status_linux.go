package ipfctl

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"sluice/internal/bpf"
	"sluice/internal/bpf/qosmark"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// ReadStatus takes a snapshot of the filter pinned in filterDir and of
// IPQoS pinned in qosDir ("" = their defaults). A datapath that is not
// loaded gives a nil part, not an error.
func ReadStatus(filterDir, qosDir string) (*Status, error) {
	if filterDir == "" {
		filterDir = bpf.DefaultPinDir
	}
	if qosDir == "" {
		qosDir = qosmark.DefaultPinDir
	}
	var st Status
	f, err := readFilter(filterDir)
	if err != nil {
		return nil, err
	}
	st.Filter = f
	q, err := readQoS(qosDir)
	if err != nil {
		return nil, err
	}
	st.QoS = q
	return &st, nil
}

func readFilter(dir string) (*FilterStatus, error) {
	d, err := bpf.OpenPinned(dir)
	if errors.Is(err, bpf.ErrNotLoaded) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	fs := &FilterStatus{Enabled: d.Enabled(), ActiveSet: d.ActiveSetNumber()}
	cov, err := coverage(d)
	if err != nil {
		return nil, err
	}
	fs.Interfaces, fs.AllInterfaces, fs.Unfiltered, fs.Ahead = cov.Attached, cov.All, cov.Unfiltered, cov.Ahead
	rules, err := d.Rules(bpf.Active)
	if err != nil {
		return nil, fmt.Errorf("reading the active rules: %w", err)
	}
	for _, r := range rules {
		dir := "in"
		if r.Dir == ipf.DirOut {
			dir = "out"
		}
		fs.Rules = append(fs.Rules, RuleCounters{
			Direction: dir, Accounting: r.Acct, Group: r.Group, Number: r.Number, Text: r.Text,
			Packets: r.Hits, Bytes: r.Bytes, States: r.States, KeepState: r.Flags&ruleset.FRKeepState != 0,
		})
	}
	s, err := d.Stats()
	if err != nil {
		return nil, err
	}
	dirc := func(x bpf.DirStats) DirCounters {
		return DirCounters{
			Packets: x.Pkts, Pass: x.Pass, Block: x.Block, Nomatch: x.Nomatch, Accounted: x.Acct,
			Short: x.Short, Bad: x.Bad, Frag: x.Frag, IPv6: x.IPv6, NotIP: x.NotIP,
			Logged: x.Logged, LogFail: x.LogFail, LogPass: x.LogPass, LogBlock: x.LogBlock,
			StateKept: x.StateKept, StateLost: x.StateLost,
		}
	}
	fs.In, fs.Out = dirc(s.In), dirc(s.Out)
	fs.State = StateCounters{
		Active: s.StateActive, Max: d.StateMax(),
		Added: map[string]uint64{"tcp": s.StateAdded[0], "udp": s.StateAdded[1], "icmp": s.StateAdded[2], "other": s.StateAdded[3]},
		Hits:  s.StateHits, Misses: s.StateMiss, Expired: s.StateExpired, Closed: s.StateClosed,
		MaxRefused: s.StateMaxRefused, OutOfWin: s.OOW, SrcsFull: s.SrcFull, DCAFull: s.DCAFull,
	}
	fs.Replies = ReplyCounters{RST: s.RSTSent, ICMP: s.ICMPSent, Failed: s.ReplyFail}
	fs.Route = RouteCounters{Routed: s.Routed, Duplicated: s.Duplicated, Failed: s.RouteFail}
	fs.DCABlock, fs.PPSBlock = s.DCABlocked, s.PPSBlocked
	fs.Drops = map[string]uint64{}
	for r, n := range s.Drops {
		if n != 0 {
			fs.Drops[bpf.ReasonName(uint32(r))] += n
		}
	}
	if fs.Frag.Entries, fs.Frag.Max, err = d.FragCache(); err != nil {
		return nil, err
	}
	fs.Programs = readPrograms(dir)
	return fs, nil
}

// coverage reads which interfaces the filter is on. In all-interfaces
// mode (recorded by the load that entered it, or implied by unmatched
// packets being blocked) the non-loopback interfaces that are up without
// the filter are the unfiltered ones.
func coverage(d *bpf.Datapath) (Coverage, error) {
	if err := d.CheckNetNS(); errors.Is(err, bpf.ErrOtherNetNS) {
		// this namespace's interface of an ifindex is not the one the
		// filter is on: name none
		c := Coverage{All: d.AllInterfaces() || defaultBlocks(d), OlderMaps: d.MissingMaps(), OtherNetNS: true}
		for _, idx := range d.Attached() {
			c.Attached = append(c.Attached, fmt.Sprintf("if%d", idx))
		}
		sort.Strings(c.Attached)
		return c, nil
	}
	hooked, err := d.Hooked()
	if err != nil {
		return Coverage{}, fmt.Errorf("reading the interfaces the filter is on: %w", err)
	}
	c := Coverage{All: d.AllInterfaces() || defaultBlocks(d), OlderMaps: d.MissingMaps()}
	for idx := range hooked {
		name := fmt.Sprintf("if%d", idx)
		if ifc, err := net.InterfaceByIndex(idx); err == nil {
			name = ifc.Name
		}
		c.Attached = append(c.Attached, name)
	}
	sort.Strings(c.Attached)
	ahead, err := d.Ahead()
	if err != nil {
		return Coverage{}, fmt.Errorf("reading the programs ahead of the filter: %w", err)
	}
	c.Ahead = AheadPrograms(ahead)
	if !c.All {
		return c, nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return c, fmt.Errorf("listing interfaces: %w", err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback == 0 && ifc.Flags&net.FlagUp != 0 && !hooked[ifc.Index] {
			c.Unfiltered = append(c.Unfiltered, ifc.Name)
		}
	}
	sort.Strings(c.Unfiltered)
	return c, nil
}

// AheadPrograms names the interfaces of bpf.Datapath.Ahead's programs.
func AheadPrograms(ahead []bpf.AheadProg) []AheadProgram {
	var out []AheadProgram
	for _, a := range ahead {
		name := fmt.Sprintf("if%d", a.Ifindex)
		if ifc, err := net.InterfaceByIndex(a.Ifindex); err == nil {
			name = ifc.Name
		}
		out = append(out, AheadProgram{Interface: name, Hook: a.Hook, Name: a.Name, ID: uint32(a.ID)})
	}
	return out
}

// ProgramRuns is the in-kernel run statistics of the filter pinned in dir
// ("" = default), by hook: what ipfstat turns into ns/packet.
func ProgramRuns(dir string) []ProgramRun { return readPrograms(orDefault(dir)) }

// readPrograms sums the run statistics of the programs the pinned links
// run, per hook. Links are followed rather than the prog_* pins because
// an interface attached before a reload keeps running the program it got
// then. With the clsact fallback there are no link pins; the pinned
// programs stand in.
func readPrograms(dir string) []ProgramRun {
	ids := map[string]map[ebpf.ProgramID]bool{"ingress": {}, "egress": {}}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "link_") {
			continue
		}
		hook := name[strings.LastIndexByte(name, '_')+1:]
		if ids[hook] == nil {
			continue
		}
		l, err := link.LoadPinnedLink(filepath.Join(dir, name), nil)
		if err != nil {
			continue
		}
		if info, err := l.Info(); err == nil {
			ids[hook][info.Program] = true
		}
		l.Close()
	}
	var out []ProgramRun
	for _, hook := range []string{"ingress", "egress"} {
		pr := ProgramRun{Hook: hook}
		var progs []*ebpf.Program
		for id := range ids[hook] {
			if p, err := ebpf.NewProgramFromID(id); err == nil {
				progs = append(progs, p)
			}
		}
		if len(progs) == 0 {
			if p, err := ebpf.LoadPinnedProgram(filepath.Join(dir, "prog_"+hook), nil); err == nil {
				progs = append(progs, p)
			}
		}
		for _, p := range progs {
			if s, err := p.Stats(); err == nil {
				pr.Programs++
				pr.RunCount += s.RunCount
				pr.RunTime += s.Runtime
			}
			p.Close()
		}
		out = append(out, pr)
	}
	return out
}

func readQoS(dir string) (*QoSStatus, error) {
	si, err := qosmark.GetState(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the IPQoS state: %w", err)
	}
	if si.State == qosmark.Disabled {
		return nil, nil
	}
	q := &QoSStatus{State: si.State.String(), StateNo: int(si.State)}
	stats, err := qosmark.ReadStats(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the IPQoS counters: %w", err)
	}
	for _, a := range stats {
		qa := QoSAdapter{Name: a.Adapter}
		for _, p := range a.Policies {
			qp := QoSPolicy{Name: p.Name, Packets: p.Packets, Bytes: p.Bytes, Dropped: p.DroppedPackets}
			for _, f := range p.Filters {
				qp.Filters = append(qp.Filters, QoSFilter{Name: f.Name, Packets: f.Packets, Bytes: f.Bytes})
			}
			qa.Policies = append(qa.Policies, qp)
		}
		q.Adapters = append(q.Adapters, qa)
	}
	return q, nil
}

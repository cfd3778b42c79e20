package datapath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"sluice/internal/bench/config"
	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

// Stats turns the kernel's BPF run-time statistics on for as long as the
// returned closer is open and reads those of the programs attached with
// TCX to the host's link. It holds a statistics fd
// (ebpf.EnableStats(BPF_STATS_RUN_TIME)) rather than flipping the
// kernel.bpf_stats_enabled sysctl: the kernel counts while any holder
// is open, so the bench neither turns off statistics that someone else
// measures with nor leaves them on after it.
func Stats(h *topo.Host) (func() ([]result.ProgStat, error), io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, nil, fmt.Errorf("enabling BPF run-time statistics: %w", err)
	}
	probe := func() ([]result.ProgStat, error) { return ReadStats(h) }
	return probe, c, nil
}

// ReadStats returns the cumulative run time and run count of every
// program attached with TCX to the host's link (both hooks) and, on the
// gateway of the NAT suite, to its client-facing link too (rdr's
// programs sit there, map's on the server side).
func ReadStats(h *topo.Host) ([]result.ProgStat, error) {
	var out []result.ProgStat
	err := h.Do(func() error {
		links := []struct {
			name  string
			index int
		}{{h.Link, h.Index}}
		if h.Inside != "" {
			ifi, err := net.InterfaceByName(h.Inside)
			if err != nil {
				return fmt.Errorf("finding %s: %w", h.Inside, err)
			}
			links = append(links, struct {
				name  string
				index int
			}{h.Inside, ifi.Index})
		}
		for _, l := range links {
			if err := readLinkStats(l.name, l.index, &out); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// readLinkStats appends the statistics of the programs attached with
// TCX to one link (the caller is in its namespace).
func readLinkStats(name string, index int, out *[]result.ProgStat) error {
	for _, at := range []struct {
		hook string
		t    ebpf.AttachType
	}{{"ingress", ebpf.AttachTCXIngress}, {"egress", ebpf.AttachTCXEgress}} {
		res, err := link.QueryPrograms(link.QueryOptions{Target: index, Attach: at.t})
		if err != nil {
			return fmt.Errorf("querying %s %s: %w", name, at.hook, err)
		}
		for _, ap := range res.Programs {
			p, err := ebpf.NewProgramFromID(ap.ID)
			if err != nil {
				continue // detached meanwhile
			}
			st, serr := p.Stats()
			info, ierr := p.Info()
			p.Close()
			if serr != nil {
				return serr
			}
			ps := result.ProgStat{Hook: at.hook, Link: name, ID: uint32(ap.ID), RunNs: uint64(st.Runtime), RunCnt: st.RunCount}
			if ierr == nil {
				ps.Name = info.Name
			}
			*out = append(*out, ps)
		}
	}
	return nil
}

// floorInsns is the trivial TCX program: return TCX_NEXT (-1).
var floorInsns = asm.Instructions{
	asm.Mov.Imm(asm.R0, -1),
	asm.Return(),
}

// NewFloor returns the Applier of the tcx-floor configurations: the
// trivial program attached with TCX to the SUT's link on ingress and
// egress, and on the gateway of the NAT suite to its client-facing link
// too (tcx-floor-gw). Its run time is the floor of what any attached
// program costs, the kernel's statistics included.
func NewFloor() (config.Applier, error) { return &floor{insns: floorInsns}, nil }

// NewFloorKind returns the Applier of the opt-in tcx-floor-KIND
// configurations (config.FloorKinds, at14): the trivial program made to
// execute code ("code-N": N straight-line moves of an immediate before
// its return, 5 bytes of x86 each, no data reached) or to do the attached
// program's work written compactly ("compact": an IPv4 TCP packet's
// ethertype, length, version and protocol tested, then one counter of a
// statblock-sized value chosen by CPU incremented, as the idle path's
// clean pass does). Beside tcx-floor and sluice-attach-at-N they say
// whether the attached program's live cost is its code or its data.
func NewFloorKind(kind string) (config.Applier, error) {
	var n int
	if _, err := fmt.Sscanf(kind, "code-%d", &n); err == nil && n > 0 && n <= 1<<16 {
		insns := make(asm.Instructions, 0, n+2)
		for i := 0; i < n; i++ {
			insns = append(insns, asm.Mov.Imm(asm.R2, int32(i+1)))
		}
		return &floor{insns: append(insns, floorInsns...)}, nil
	}
	if kind == "compact" {
		return &floor{compact: true}, nil
	}
	return nil, fmt.Errorf("datapath: unknown trivial program variant %q", kind)
}

// compactInsns is "compact" over the array m of statblock-sized values,
// one per possible CPU.
func compactInsns(m *ebpf.Map) asm.Instructions {
	const data, dataEnd, protocol = 76, 80, 16 // struct __sk_buff
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, data, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, dataEnd, asm.Word),
		asm.LoadMem(asm.R4, asm.R6, protocol, asm.Word),
		asm.JNE.Imm(asm.R4, 0x0008, "out"), // htons(ETH_P_IP)
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 14+20+20),
		asm.JGT.Reg(asm.R4, asm.R3, "out"),
		asm.LoadMem(asm.R5, asm.R2, 14, asm.Byte),
		asm.JNE.Imm(asm.R5, 0x45, "out"),
		asm.LoadMem(asm.R5, asm.R2, 14+9, asm.Byte),
		asm.JNE.Imm(asm.R5, 6, "out"),
		asm.FnGetSmpProcessorId.Call(),
		asm.StoreMem(asm.RFP, -4, asm.R0, asm.Word),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 17*8, asm.DWord), // ST_CLEAN's place
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 17*8, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, -1).WithSymbol("out"),
		asm.Return(),
	}
}

type floor struct {
	insns   asm.Instructions
	compact bool      // compactInsns over a map of its own (made by Apply)
	m       *ebpf.Map // compact's
	host    *topo.Host
	progs   []*ebpf.Program // one per hook, so each hook's statistics are its own
	links   []link.Link
}

func (f *floor) Apply(ctx context.Context, h *topo.Host) error {
	if f.progs != nil {
		return errors.New("datapath: floor applied twice")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var progs []*ebpf.Program
	var links []link.Link
	insns := f.insns
	if f.compact {
		ncpu, err := ebpf.PossibleCPU()
		if err != nil {
			return err
		}
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "floor_stats", Type: ebpf.Array, KeySize: 4, ValueSize: 2880, MaxEntries: uint32(ncpu)})
		if err != nil {
			return fmt.Errorf("making the compact program's counters: %w", err)
		}
		f.m, insns = m, compactInsns(m)
	}
	undo := func() {
		for _, l := range links {
			l.Close()
		}
		for _, p := range progs {
			p.Close()
		}
		if f.m != nil {
			f.m.Close()
			f.m = nil
		}
	}
	err := h.Do(func() error {
		type dev struct {
			name  string
			index int
		}
		devs := []dev{{h.Link, h.Index}}
		if h.Inside != "" {
			ifi, err := net.InterfaceByName(h.Inside)
			if err != nil {
				return fmt.Errorf("finding %s: %w", h.Inside, err)
			}
			devs = append(devs, dev{h.Inside, ifi.Index})
		}
		for _, d := range devs {
			for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
				// one program per hook and link, so that each has
				// statistics of its own
				name := "floor_ingress"
				if at == ebpf.AttachTCXEgress {
					name = "floor_egress"
				}
				p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SchedCLS, License: "GPL", Instructions: insns})
				if err != nil {
					return fmt.Errorf("loading the trivial program: %w", err)
				}
				progs = append(progs, p)
				l, err := link.AttachTCX(link.TCXOptions{Interface: d.index, Program: p, Attach: at})
				if err != nil {
					return fmt.Errorf("attaching the trivial program to %s: %w", d.name, err)
				}
				links = append(links, l)
			}
		}
		return nil
	})
	if err != nil {
		undo()
		return err
	}
	f.host, f.progs, f.links = h, progs, links
	return nil
}

func (f *floor) Remove() error {
	if f.progs == nil {
		return nil
	}
	var errs []error
	for _, l := range f.links {
		errs = append(errs, l.Close())
	}
	for _, p := range f.progs {
		errs = append(errs, p.Close())
	}
	if f.m != nil {
		errs = append(errs, f.m.Close())
		f.m = nil
	}
	f.progs, f.links = nil, nil
	return errors.Join(errs...)
}

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
func NewFloor() (config.Applier, error) { return &floor{}, nil }

type floor struct {
	host  *topo.Host
	progs []*ebpf.Program // one per hook, so each hook's statistics are its own
	links []link.Link
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
	undo := func() {
		for _, l := range links {
			l.Close()
		}
		for _, p := range progs {
			p.Close()
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
				p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SchedCLS, License: "GPL", Instructions: floorInsns})
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
	f.progs, f.links = nil, nil
	return errors.Join(errs...)
}

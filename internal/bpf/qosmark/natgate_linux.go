//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// NATEgressProgName is the kernel name of the filter's egress program
// with NAT's established path inside it (bpf.NATEgressProgName; a test
// in internal/cmd/ipnat keeps the two equal). That program returns TC_ACT_OK for the
// packets it translates, which ends the TCX chain: a marker attached
// after it would never see them.
const NATEgressProgName = "sluice_egr_nat"

// ErrNATInline is the error of an attach behind the filter's egress
// program while NAT's path is inside it.
var ErrNATInline = errors.New("the filter's egress program translates NAT'd packets and ends the chain there, " +
	"so IPQoS would not mark them: turn NAT inside the filter off first (ipf -T nat_inline=0)")

// natInlineAhead reports whether the egress chain of ifindex holds the
// filter's egress program with NAT's path inside it.
func natInlineAhead(ifindex int) (bool, error) {
	q, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return false, err
	}
	for _, p := range q.Programs {
		prog, err := ebpf.NewProgramFromID(p.ID)
		if err != nil {
			continue
		}
		info, err := prog.Info()
		prog.Close()
		if err == nil && info.Name == NATEgressProgName {
			return true, nil
		}
	}
	return false, nil
}

// attachEgress attaches prog at the tail of ifindex's egress chain,
// unless the filter's egress program with NAT's path is on it: checked
// before, and again after (the filter checks for a program behind its
// own after it placed the path: of two such changes at once, one sees
// the other), the new link detached then.
func attachEgress(name string, ifindex int, prog *ebpf.Program) (link.Link, error) {
	if ahead, err := natInlineAhead(ifindex); err != nil {
		return nil, fmt.Errorf("adapter %s: querying the egress chain: %w", name, err)
	} else if ahead {
		return nil, fmt.Errorf("adapter %s: %w", name, ErrNATInline)
	}
	lk, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return nil, err
	}
	if ahead, _ := natInlineAhead(ifindex); ahead {
		_ = lk.Detach()
		lk.Close()
		return nil, fmt.Errorf("adapter %s: %w", name, ErrNATInline)
	}
	return lk, nil
}

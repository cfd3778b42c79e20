package datapath

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// AttachedPrograms lists the programs attached with TCX, on ingress or
// egress, to the interfaces of the network namespace at nsPath ("" for
// the caller's). The bench's tests use it to check that Remove detached
// everything and, with LivePrograms, that nothing was leaked.
func AttachedPrograms(nsPath string) ([]ebpf.ProgramID, error) {
	var ids []ebpf.ProgramID
	err := inNS(nsPath, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return fmt.Errorf("listing links: %w", err)
		}
		for _, l := range links {
			for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
				res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
				if err != nil {
					return fmt.Errorf("querying %s: %w", l.Attrs().Name, err)
				}
				for _, p := range res.Programs {
					ids = append(ids, p.ID)
				}
			}
		}
		return nil
	})
	return ids, err
}

// LivePrograms returns those of ids that still exist in the kernel. The
// kernel frees a program shortly after its last reference goes, so a
// caller checking for leaks should retry for a moment.
func LivePrograms(ids []ebpf.ProgramID) []ebpf.ProgramID {
	var live []ebpf.ProgramID
	for _, id := range ids {
		p, err := ebpf.NewProgramFromID(id)
		if err == nil {
			p.Close()
			live = append(live, id)
		}
	}
	return live
}

// inNS runs fn on a locked OS thread inside the namespace at path.
func inNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is not unlocked: should switching back fail, the
		// runtime then discards it instead of reusing it elsewhere.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("entering %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
